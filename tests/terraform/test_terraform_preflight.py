"""terraform/README.md's "Check before you apply", run as written: the README's own tfvars and policy pass, and a
tfvars that would deploy a function unable to start is refused, offline."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.policy_doc import fenced_blocks
from tests.terraform.support import REPO, ROOT_MODULE

KUBERNETES_POLICY = REPO / "tests" / "terraform" / "policies" / "kubernetes-source.yaml"


def preflight_commands() -> list[str]:
    section = (ROOT_MODULE / "README.md").read_text().split("\n## Check before you apply\n", 1)[1].split("\n## ", 1)[0]
    [block] = [text for fence, text in fenced_blocks(section) if fence == "sh"]
    return block.splitlines()


def readme_example() -> tuple[str, str]:
    """The tfvars and the policy the README tells a newcomer to write (terraform.tfvars, my-policy.yaml)."""
    from tests.test_readme import readme_files

    files = readme_files()
    return files["terraform/terraform.tfvars"], files["my-policy.yaml"]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The repository as a newcomer has it: the Terraform tree copied (its links kept), the package beside it."""
    ignore = shutil.ignore_patterns(".terraform*", "*.tfstate*")
    shutil.copytree(ROOT_MODULE, tmp_path / "terraform", symlinks=True, ignore=ignore)
    (tmp_path / "extender").symlink_to(REPO / "extender")
    return tmp_path


def run(checkout: Path, terraform_env: dict[str, str], command: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in terraform_env.items() if key != "TF_DATA_DIR"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        ["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_three_commands_pass_the_readme_s_example(
    terraform: str, terraform_env: dict[str, str], checkout: Path
) -> None:
    tfvars, policy = readme_example()
    (checkout / "terraform" / "terraform.tfvars").write_text(tfvars)
    (checkout / "my-policy.yaml").write_text(policy)
    commands = preflight_commands()
    assert len(commands) == 3
    outputs = []
    for command in commands:
        result = run(checkout, terraform_env, command)
        assert result.returncode == 0, f"{command}\n{result.stdout}{result.stderr}"
        outputs.append(result.stdout)
    ok = r"^scheduler-config\.yaml: ok for kube-scheduler 1\.\d+ with policy my-policy\.yaml$"
    assert re.search(ok, outputs[2], re.MULTILINE), outputs[2]
    rendered = (checkout / "scheduler-config.yaml").read_text()
    assert "kind" in rendered and "https://scheduler-extender-preflight.a.run.app/" in rendered


def test_a_function_that_could_not_start_is_refused_naming_what_it_needs(
    terraform: str, terraform_env: dict[str, str], checkout: Path
) -> None:
    tfvars, _ = readme_example()
    (checkout / "terraform" / "terraform.tfvars").write_text(tfvars)
    shutil.copy(KUBERNETES_POLICY, checkout / "my-policy.yaml")
    init, apply, _ = preflight_commands()
    assert run(checkout, terraform_env, init).returncode == 0
    # A render of an earlier run that passed: after the refusal, nothing is left to judge by mistake.
    (checkout / "scheduler-config.yaml").write_text("kind: KubeSchedulerConfiguration\n")
    refused = run(checkout, terraform_env, apply)
    assert refused.returncode != 0
    assert not (checkout / "scheduler-config.yaml").exists()
    message = " ".join(re.sub(r"\x1b\[[0-9;]*m|[│╷╵]", " ", refused.stderr).split())
    assert "policy_file's nodeSource is kubernetes" in message
    assert "without kubernetes_api_url and kubernetes_token_secret" in message
