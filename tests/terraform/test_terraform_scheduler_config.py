"""The scheduler-config submodule's own `terraform test` files, run from pytest: one pytest test per run block.

Terraform's test framework needs no provider for this module, so it runs the real thing offline.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.support import (
    SCHEDULER_CONFIG,
    assert_run_passed,
    load_module,
    named,
    run_terraform,
    terraform_test,
    tftest_runs,
    thin_validation_coverage,
)

TEST_FILES = sorted((SCHEDULER_CONFIG / "tests").glob("*.tftest.hcl"))
RUNS = [(f"tests/{path.name}", name) for path in TEST_FILES for name, _ in tftest_runs(path)]


@pytest.fixture(scope="module")
def results(
    terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Any]:
    env = {**terraform_env, "TF_DATA_DIR": str(tmp_path_factory.mktemp("scheduler-config") / ".terraform")}
    return terraform_test(terraform, SCHEDULER_CONFIG, env)


@pytest.mark.parametrize(
    ("test_file", "run"), RUNS, ids=[f"{file.split('/')[-1].split('.')[0]}::{run}" for file, run in RUNS]
)
def test_terraform_run_passes(results: dict[tuple[str, str], Any], test_file: str, run: str) -> None:
    assert_run_passed(results, test_file, run)


def test_every_output_is_asserted() -> None:
    outputs = set(named(load_module(SCHEDULER_CONFIG)["output"]))
    asserted = set(re.findall(r"\boutput\.([a-z_]+)", "".join(path.read_text() for path in TEST_FILES)))
    assert outputs - asserted == set(), "outputs no test asserts on"
    assert asserted - outputs == set(), "tests assert on outputs that do not exist"


def test_every_validation_rule_has_a_failing_case() -> None:
    variables = named(load_module(SCHEDULER_CONFIG)["variable"])
    assert thin_validation_coverage(variables, TEST_FILES) == {}, "{variable: (rules, failing runs)}"


def test_a_host_kubeconfig_for_the_second_scheduler_is_refused_naming_the_fix(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path
) -> None:
    """The kubeadm newcomer's settings: a second scheduler given the control plane's kubeconfig."""
    arguments = [
        "-var=url=https://extender-abc123-uc.a.run.app",
        "-var=kubernetes_version=1.31.4",
        "-var=scheduler_name=load-aware",
        "-var=kubeconfig=/etc/kubernetes/scheduler.conf",
    ]
    env = {**terraform_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    plan = ["plan", "-input=false", "-no-color", *arguments]
    result = run_terraform(terraform, *plan, cwd=SCHEDULER_CONFIG, env=env, check=False)
    message = " ".join(re.sub(r"[│╷╵]", " ", result.stderr).split())
    assert result.returncode != 0
    assert 'kubeconfig = "/etc/kubernetes/scheduler.conf" is a file on a control-plane host' in message
    assert "set kubeconfig = null" in message and 'set scheduler_deployment = "existing-scheduler"' in message
