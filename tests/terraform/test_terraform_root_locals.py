"""The root module's provider-free logic, run with real Terraform: the caller-token slots walked through the documented
rotation (and through the steps a person may forget), the policy as the plan reads it, and the Cloud Monitoring grant
NodeLoad needs.

The root module needs the google provider, which cannot be downloaded here. So a module is put together from
terraform/variables.tf, main.tf's own expressions (copied as written) and built-in `terraform_data` stand-ins for the
two resources the token logic goes through: `random_password.caller_token` (its `id`, new on every create, stands for
the generated token) and `google_secret_manager_secret_version.caller_token` (its `output` is the token the version
holds). Each stand-in has its resource's `for_each` and data, read from main.tf.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from extender.kube.variables import API_URL_ENV
from extender.policy.loader import load_policy
from tests.terraform.support import (
    POLICIES,
    ROOT_MODULE,
    assert_run_passed,
    load_module,
    local_source,
    resources,
    terraform_test,
    tftest_runs,
    variables_module,
)

HERE = Path(__file__).parent
TEST_FILES = [
    HERE / "rotation.tftest.hcl",
    HERE / "rotation_shortcuts.tftest.hcl",
    HERE / "node_load_grants.tftest.hcl",
]
POLICY_READING = "policy_reading.tftest.hcl"
MAIN = ROOT_MODULE / "main.tf"
RESOURCES = resources(load_module(ROOT_MODULE))
# Policy files the function loads and a plan accepts (with matching variables); the others are there to be refused,
# and NodeLoad's are read by node_load_grants.tftest.hcl.
LOADABLE = sorted(
    path for path in POLICIES.iterdir() if not path.name.startswith(("unreadable", "node-load", "profile-extender"))
)

# main.tf's references to the two resources, and what stands for them.
STAND_INS = {
    r"random_password\.caller_token(\[\w+\])\.result": r"terraform_data.caller_token\1.id",
    r"google_secret_manager_secret_version\.caller_token(\[\w+\])\.version": (
        r"terraform_data.caller_token_version\1.output"
    ),
}
LOCALS = [
    "caller_tokens",
    "caller_token",
    "caller_token_secret_id",
    "secret_environment_variables",
    "node_load_google_auth_urls",
    "monitoring_viewer_projects",
]


def _attribute(resource: tuple[str, str], name: str) -> str:
    value = RESOURCES[resource][name]
    assert value.startswith("${") and value.endswith("}"), value
    return value[2:-1]


def _main_locals() -> str:
    """main.tf's locals as written, with the stand-ins in place of the two resources."""
    lines = []
    for name in LOCALS:
        expression = local_source(MAIN, name)
        for pattern, replacement in STAND_INS.items():
            expression = re.sub(pattern, replacement, expression)
        assert not re.search(r"(?<![.\w])(random_password|google_\w+)\.\w", expression), (
            f"{name} refers to a resource with no stand-in"
        )
        lines.append(f"  {name} = {expression}\n")
    return "locals {\n" + "".join(lines) + "}\n"


def _stand_ins() -> str:
    version = ("google_secret_manager_secret_version", "caller_token")
    return f"""
resource "terraform_data" "caller_token" {{
  for_each = {_attribute(("random_password", "caller_token"), "for_each")}
}}

resource "terraform_data" "caller_token_version" {{
  for_each = {_attribute(version, "for_each")}
  input    = {_attribute(version, "secret_data")}
}}

output "tokens" {{
  value     = local.caller_tokens
  sensitive = true
}}

output "rendered" {{
  value     = local.caller_token
  sensitive = true
}}

output "accepted" {{
  value = toset([
    for name, secret in local.secret_environment_variables : secret.version
    if startswith(name, "EXTENDER_CALLER_TOKEN")
  ])
  sensitive = true
}}
"""


# What the plan needs beside a policy whose node source lists nodes from the Kubernetes API.
KUBERNETES_API = (
    '\n    kubernetes_api_url              = "https://203.0.113.10"'
    '\n    kubernetes_token_secret         = "scheduler-extender-kube-token"'
    '\n    kubernetes_token_secret_version = "1"'
)


def _policy_reading_runs() -> str:
    """One run per loadable policy file: the plan reads its profiles and nodeCacheCapable as the function does, and
    demands the Kubernetes API variables exactly when the function needs the API to start (``Policy.needs``)."""
    runs = []
    for path in LOADABLE:
        policy = load_policy(path)
        declared = "null" if policy.node_cache_capable is None else json.dumps(policy.node_cache_capable)
        profile = "null" if "default" in policy.profiles else json.dumps(min(policy.profiles))
        run = f"{path.stem.replace('-', '_')}_{path.suffix[1:]}"
        needs_api = any(API_URL_ENV in need.names for need in policy.needs())
        variables = f"""
  variables {{
    policy_file        = "policies/{path.name}"
    node_cache_capable = {json.dumps(policy.node_cache_capable is not False)}
    profile            = {profile}"""
        if needs_api:
            runs.append(f"""
run "{run}_without_the_kubernetes_api" {{
  command = plan{variables}
  }}
  expect_failures = [var.policy_file]
}}
""")
        runs.append(f"""
run "{run}" {{
  command = plan{variables}{KUBERNETES_API if needs_api else ""}
  }}
  assert {{
    condition     = local.policy_node_cache_capable == {declared}
    error_message = "nodeCacheCapable read as ${{jsonencode(local.policy_node_cache_capable)}}"
  }}
  assert {{
    condition     = toset(local.policy_profiles) == toset({json.dumps(sorted(policy.profiles))})
    error_message = "profiles read as ${{jsonencode(local.policy_profiles)}}"
  }}
}}
""")
    # A function_name no fixture names a profile after.
    variables = (
        'variables {\n  project_id = "acme-scheduling"\n  function_location = "us-central1"\n  invocation = "public"\n'
        '  kubernetes_version = "1.31.4"\n  function_name = "policy-reading"\n}\n'
    )
    return variables + "".join(runs)


@pytest.fixture(scope="module")
def results(
    terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Any]:
    module = variables_module(
        tmp_path_factory.mktemp("root-locals") / "module",
        TEST_FILES,
        {"main_locals.tf": _main_locals(), "stand_ins.tf": _stand_ins()},
    )
    (module / "tests" / POLICY_READING).write_text(_policy_reading_runs())
    return terraform_test(terraform, module, {**terraform_env, "TF_DATA_DIR": str(module / ".terraform")})


RUNS = [(path.name, name) for path in TEST_FILES for name, _ in tftest_runs(path)]


@pytest.mark.parametrize(("test_file", "run"), RUNS, ids=[f"{file.split('.')[0]}::{run}" for file, run in RUNS])
def test_terraform_run_passes(results: dict[tuple[str, str], Any], test_file: str, run: str) -> None:
    assert_run_passed(results, f"tests/{test_file}", run)


@pytest.mark.parametrize("policy", LOADABLE, ids=[path.name for path in LOADABLE])
def test_plan_reads_the_policy_as_the_function_does(results: dict[tuple[str, str], Any], policy: Path) -> None:
    run = f"{policy.stem.replace('-', '_')}_{policy.suffix[1:]}"
    assert_run_passed(results, f"tests/{POLICY_READING}", run)
    if any(API_URL_ENV in need.names for need in load_policy(policy).needs()):
        assert_run_passed(results, f"tests/{POLICY_READING}", f"{run}_without_the_kubernetes_api")
