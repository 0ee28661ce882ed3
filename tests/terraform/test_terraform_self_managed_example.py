"""examples/self-managed-control-plane both ways, applied for real offline.

The example's own *.tf call a copy of the pre-flight in place of the root module (the root module's variables and
scheduler configuration, with stand-ins for what only the google provider makes), so its wiring is what is planned.
The files its README tells users to write are judged as kube-scheduler and the Kubernetes API will.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from extender.cli.scheduler_config.check import check
from extender.cli.scheduler_config.findings import Severity
from extender.cli.scheduler_config.versions import parse_kubernetes_version
from tests.terraform.support import POLICIES, ROOT_MODULE, run_terraform

EXAMPLE = ROOT_MODULE / "examples" / "self-managed-control-plane"
KUBERNETES_VERSION = "1.31.4"
# What the example reads from the root module beyond the pre-flight's own outputs.
STAND_IN_OUTPUTS = """
output "function_uri" {
  value = local.function_uri
}

output "scheduler_name" {
  value = module.scheduler_config.scheduler_name
}
"""


def _root_stand_in(directory: Path) -> Path:
    """The pre-flight's files (links resolved) and the outputs the example reads, as the module at ``../..``."""
    directory.mkdir(parents=True)
    for path in (ROOT_MODULE / "preflight").iterdir():
        if path.is_dir():
            shutil.copytree(path, directory / path.name, ignore=shutil.ignore_patterns(".terraform*", "tests"))
        elif path.suffix == ".tf":
            shutil.copy(path, directory / path.name)
    (directory / "example_outputs.tf").write_text(STAND_IN_OUTPUTS)
    return directory


def _applied(root: Path, name: str, terraform: str, env: dict[str, str], *variables: str) -> dict[str, Any]:
    """The example copied under ``root``/examples/``name`` and applied: its outputs (null ones are absent)."""
    example = root / "examples" / name
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("*.md"))
    env = {**env, "TF_DATA_DIR": str(example / ".terraform")}
    run_terraform(terraform, "init", "-input=false", cwd=example, env=env)
    run_terraform(terraform, "apply", "-auto-approve", "-input=false", *variables, cwd=example, env=env)
    outputs = json.loads(run_terraform(terraform, "output", "-json", cwd=example, env=env).stdout)
    return {output: body["value"] for output, body in outputs.items()}


@pytest.fixture(scope="module")
def both_ways(
    terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    base = tmp_path_factory.mktemp("self-managed")
    root = _root_stand_in(base / "terraform")
    policy = POLICIES / "node-names.yaml"
    common = ["-var=project_id=acme", f"-var=kubernetes_version={KUBERNETES_VERSION}", f"-var=policy_file={policy}"]
    second = "-var=scheduler_deployment=second-scheduler"
    return {
        "existing": _applied(root, "existing", terraform, terraform_env, *common),
        "second": _applied(root, "second", terraform, terraform_env, *common, second),
    }


def _judged(text: str) -> list[tuple[Severity, str]]:
    verdict = check(text, parse_kubernetes_version(KUBERNETES_VERSION))
    return [(finding.severity, finding.line) for finding in verdict.findings if finding.severity is not Severity.NOTE]


def test_the_existing_scheduler_gets_its_kubeconfig_and_no_manifests(both_ways: dict[str, dict[str, Any]]) -> None:
    outputs = both_ways["existing"]
    configuration = yaml.safe_load(outputs["kube_scheduler_configuration"])
    assert configuration["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    assert configuration["leaderElection"]["resourceName"] == "kube-scheduler"
    assert configuration["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert configuration["extenders"][0]["managedResources"] == [
        {"name": "example.com/gpu", "ignoredByScheduler": False}
    ]
    assert configuration["extenders"][0]["ignorable"] is True
    assert _judged(outputs["kube_scheduler_configuration"]) == []
    assert "kubernetes_manifests" not in outputs and outputs["scheduler_name"] == "default-scheduler"


def test_the_second_scheduler_runs_with_in_cluster_credentials(both_ways: dict[str, dict[str, Any]]) -> None:
    outputs = both_ways["second"]
    version = ".".join(KUBERNETES_VERSION.split(".")[:2]) + ".0"
    documents = [document for document in yaml.safe_load_all(outputs["kubernetes_manifests"]) if document]
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
    [holder] = [document for document in documents if document["kind"] in ("ConfigMap", "Secret")]
    text = (holder.get("data") or holder.get("stringData"))["config.yaml"]
    configuration = yaml.safe_load(text)
    assert "clientConnection" not in configuration
    assert configuration["profiles"] == [{"schedulerName": "extender-scheduler", "percentageOfNodesToScore": 100}]
    [extender] = configuration["extenders"]
    assert "managedResources" not in extender and extender["ignorable"] is False
    assert _judged(text) == [] and text == outputs["kube_scheduler_configuration"]
    assert outputs["scheduler_name"] == "extender-scheduler"


def test_the_example_needs_a_policy(terraform: str, terraform_env: dict[str, str], tmp_path: Path) -> None:
    root = _root_stand_in(tmp_path / "terraform")
    example = root / "examples" / "no-policy"
    shutil.copytree(EXAMPLE, example)
    env = {**terraform_env, "TF_DATA_DIR": str(example / ".terraform")}
    run_terraform(terraform, "init", "-input=false", cwd=example, env=env)
    variables = ["-var=project_id=acme", f"-var=kubernetes_version={KUBERNETES_VERSION}"]
    result = run_terraform(terraform, "plan", "-input=false", *variables, cwd=example, env=env, check=False)
    assert result.returncode != 0 and "No value for required variable" in result.stderr
    assert 'variable "policy_file"' in result.stderr
