"""The root module's variable validations with real Terraform: terraform/variables.tf needs no provider on its own,
so it is copied into an empty module and planned against root_variables.tftest.hcl."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.support import (
    ROOT_MODULE,
    assert_run_passed,
    load_module,
    named,
    terraform_test,
    tftest_runs,
    thin_validation_coverage,
)

TEST_FILE = Path(__file__).with_name("root_variables.tftest.hcl")
RUNS = [name for name, _ in tftest_runs(TEST_FILE)]


@pytest.fixture(scope="module")
def results(terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    module = tmp_path_factory.mktemp("root-variables")
    shutil.copy(ROOT_MODULE / "variables.tf", module / "variables.tf")
    (module / "tests").mkdir()
    shutil.copy(TEST_FILE, module / "tests" / TEST_FILE.name)
    return terraform_test(terraform, module, {**terraform_env, "TF_DATA_DIR": str(module / ".terraform")})


@pytest.mark.parametrize("run", RUNS)
def test_terraform_run_passes(results: dict[tuple[str, str], Any], run: str) -> None:
    assert_run_passed(results, f"tests/{TEST_FILE.name}", run)


def test_every_root_validation_rule_has_a_failing_case() -> None:
    variables = named(load_module(ROOT_MODULE)["variable"])
    assert thin_validation_coverage(variables, [TEST_FILE]) == {}, "{variable: (rules, failing runs)}"
