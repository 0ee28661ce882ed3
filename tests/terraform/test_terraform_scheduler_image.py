"""One version, one image: kubernetes_version as the control plane prints it tags the second scheduler's image, in the
forms check-scheduler-config takes; a private cluster left on registry.k8s.io is warned about at plan."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from extender.cli.scheduler_config.versions import parse_kubernetes_version
from tests.terraform.support import (
    REPO,
    ROOT_MODULE,
    SCHEDULER_CONFIG,
    assert_run_passed,
    plan,
    terraform_test,
)

# What a control plane, a user or a typo gives; judged by check-scheduler-config's own parser.
VERSIONS = [
    "1.33.5",
    "v1.33.5",
    "1.33.5-gke.1200",
    "v1.31.4-gke.1256000",
    "1.30.2+k3s1",
    "1.33",
    "1.31-gke.1",
    "1.33.5-",
    "latest",
    "V1.33.5",
]
REPOSITORY = "europe-docker.pkg.dev/acme/registry-k8s-io/kube-scheduler"


def image_tag(version: str) -> str | None:
    """The tag Terraform must give for ``version``: vX.Y.Z where check-scheduler-config takes the version (any minor
    Terraform renders) and it has a patch number (an image tag needs one); None where the plan must refuse it."""
    try:
        parse_kubernetes_version(version, oldest=(1, 25), newest=(1, 99))
    except ValueError:
        return None
    patch = re.match(r"v?(\d+\.\d+\.\d+)", version)
    return None if patch is None else f"v{patch[1]}"


def run_name(index: int) -> str:
    return f"version_{index}"


@pytest.fixture(scope="module")
def version_results(
    terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Any]:
    module = tmp_path_factory.mktemp("versions") / "scheduler-config"
    shutil.copytree(SCHEDULER_CONFIG, module, ignore=shutil.ignore_patterns(".terraform*", "tests"))
    url = "https://extender-abc123-uc.a.run.app"
    runs = [f'variables {{\n  url = "{url}"\n  scheduler_image_repository = "{REPOSITORY}"\n}}\n']
    for index, version in enumerate(VERSIONS):
        tag = image_tag(version)
        body = f'  command = plan\n  variables {{ kubernetes_version = "{version}" }}\n'
        if tag is None:
            body += "  expect_failures = [var.kubernetes_version]\n"
        else:
            image = f'\\"image\\": \\"{REPOSITORY}:{tag}\\"'
            body += (
                "  assert {\n"
                f'    condition     = strcontains(output.kubernetes_manifests, "{image}")\n'
                f'    error_message = "{version} must tag the image {tag}."\n'
                "  }\n"
            )
        runs.append(f'run "{run_name(index)}" {{\n{body}}}\n')
    (module / "tests").mkdir()
    (module / "tests" / "versions.tftest.hcl").write_text("\n".join(runs))
    return terraform_test(terraform, module, {**terraform_env, "TF_DATA_DIR": str(module / ".terraform")})


@pytest.mark.parametrize("index", range(len(VERSIONS)), ids=VERSIONS)
def test_kubernetes_version_forms_agree_with_check_scheduler_config(
    version_results: dict[tuple[str, str], Any], index: int
) -> None:
    assert_run_passed(version_results, "tests/versions.tftest.hcl", run_name(index))


def test_the_forms_cover_acceptance_and_refusal() -> None:
    tags = [image_tag(version) for version in VERSIONS]
    assert "v1.33.5" in tags and "v1.31.4" in tags and None in tags


# --- The private-cluster warning, as the pre-flight (and so the root module's plan) prints it ------------------------

PRIVATE_CLUSTER = """
project_id         = "my-project"
function_location  = "us-central1"
invocation         = "public"
kubernetes_version = "1.33.5-gke.1200"
direct_vpc_network = "projects/my-project/global/networks/prod"
"""
API_TOKEN = """
kubernetes_token_secret         = "extender-kubernetes-token"
kubernetes_token_secret_version = "1"
"""


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        ('kubernetes_api_url = "https://172.16.0.2"', True),
        ('kubernetes_api_url = "https://[fd00::2]"', True),
        (f'kubernetes_api_url = "https://172.16.0.2"\nscheduler_image_repository = "{REPOSITORY}"', False),
        (f'kubernetes_api_url = "https://172.16.0.2"\nscheduler_image = "{REPOSITORY}:v1.33.5"', False),
        ('kubernetes_api_url = "https://34.118.0.10"', False),
        ("", False),
    ],
    ids=["private", "private-ipv6", "mirror", "own-image", "public-endpoint", "no-api"],
)
def test_a_private_api_address_with_the_default_registry_warns_naming_the_mirror_setting(
    terraform: str, terraform_env: dict[str, str], preflight: Path, settings: str, warned: bool
) -> None:
    # The function reads the API with a token (the plan refuses a URL without one).
    token = API_TOKEN if "kubernetes_api_url" in settings else ""
    output = plan(terraform, terraform_env, preflight, PRIVATE_CLUSTER + token + settings + "\n")
    warning = "Warning: Check block assertion failed"
    assert (warning in output) == warned, output
    assert ("Set scheduler_image_repository to a mirror" in output) == warned, output


def test_an_own_image_of_another_version_warns(
    terraform: str, terraform_env: dict[str, str], preflight: Path
) -> None:
    output = plan(terraform, terraform_env, preflight, PRIVATE_CLUSTER + f'scheduler_image = "{REPOSITORY}:v1.32.9"\n')
    assert "is tagged v1.32.9, but kubernetes_version is 1.33.5-gke.1200 (v1.33.5)" in output, output


def test_the_root_module_passes_the_repository_on() -> None:
    text = (ROOT_MODULE / "scheduler_config.tf").read_text()
    assert re.search(r"^\s*scheduler_image_repository\s*=\s*var\.scheduler_image_repository$", text, re.MULTILINE)


def test_the_proxy_image_is_named_alike_where_it_is_built_and_deployed() -> None:
    dockerfile = (REPO / "deploy" / "proxy" / "Dockerfile").read_text()
    [built] = re.findall(r"docker build -f deploy/proxy/Dockerfile -t (\S+) \.", dockerfile)
    readme = (ROOT_MODULE / "README.md").read_text()
    assert re.findall(r'proxy_image = "(\S+)"', readme) == [built]
    assert re.findall(r"docker build -f deploy/proxy/Dockerfile -t (\S+) \.", readme) == [built]
    assert re.findall(r"docker push (\S+)", readme) == [built]
