"""Terraform runs offline here: no provider can be downloaded, so nothing may ask for one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from testkit.certs import CertificateAuthority
from tests.terraform.scenarios import OUTPUTS, module_arguments
from tests.terraform.support import checkout, run_terraform, tf


@pytest.fixture(scope="session")
def terraform() -> str:
    found = shutil.which("terraform")
    if found is None:
        pytest.skip("terraform is not on PATH (the Terraform tests need Terraform >= 1.9)")
    return found


@pytest.fixture(scope="session")
def terraform_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment for terraform, with a CLI configuration of its own (the machine's may point nowhere)."""
    home = tmp_path_factory.mktemp("terraform")
    cli_config = home / "terraform.rc"
    cli_config.write_text('disable_checkpoint = true\n')
    return {
        **os.environ,
        "TF_CLI_CONFIG_FILE": str(cli_config),
        "TF_IN_AUTOMATION": "1",
        "TF_INPUT": "0",
        "CHECKPOINT_DISABLE": "1",
        "TF_DATA_DIR": str(home / "data"),
        "NO_COLOR": "1",
    }


# --- modules/scheduler-config applied for each deployment shape ------------------------------------------------------

@pytest.fixture(scope="session")
def pki() -> dict[str, Any]:
    ca = CertificateAuthority("extender CA")
    return {
        "ca": ca,
        "server": ca.issue_server("localhost", "127.0.0.1"),
        "client": ca.issue_client("kube-scheduler", organization="system:kube-scheduler"),
    }


@pytest.fixture(scope="session")
def rendered(
    terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Any]
) -> dict[str, dict[str, Path]]:
    """{scenario: {output: file}}, each file written by `terraform output -raw <output>` as a user would; a null
    output has no file."""
    root = tmp_path_factory.mktemp("rendered")
    scenarios = module_arguments(pki)
    config = {
        "module": scenarios,
        "output": {
            f"{scenario}_{output}": {"value": f"${{module.{scenario}.{output}}}", "sensitive": True}
            for scenario in scenarios for output in OUTPUTS
        },
    }
    (root / "main.tf.json").write_text(json.dumps(config, indent=2))
    env = {**terraform_env, "TF_DATA_DIR": str(root / ".terraform")}
    run_terraform(terraform, "init", "-input=false", cwd=root, env=env)
    run_terraform(terraform, "apply", "-auto-approve", "-input=false", cwd=root, env=env)
    # A null output is left out of the state, and `terraform output -raw` refuses it: such an output gets no file.
    present = json.loads(run_terraform(terraform, "output", "-json", cwd=root, env=env).stdout)
    files: dict[str, dict[str, Path]] = {}
    for scenario in scenarios:
        for output in OUTPUTS:
            if f"{scenario}_{output}" not in present:
                continue
            path = root / f"{scenario}-{output}.yaml"
            with path.open("w") as file:
                result = run_terraform(terraform, "output", "-raw", f"{scenario}_{output}", cwd=root, env=env)
                file.write(result.stdout)
            files.setdefault(scenario, {})[output] = path
    return files


@pytest.fixture(scope="module")
def preflight(terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """terraform/preflight in a checkout of its own, initialised: planned with a case.tfvars written in it."""
    root = checkout(tmp_path_factory.mktemp("preflight") / "checkout")
    module = root / "terraform" / "preflight"
    tf(terraform, terraform_env, module, "init", "-input=false")
    return module
