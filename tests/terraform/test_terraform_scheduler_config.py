"""The scheduler-config submodule's own `terraform test` files, run from pytest: one pytest test per run block.

Terraform's test framework needs no provider for this module, so it runs the real thing offline.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.terraform.support import (
    SCHEDULER_CONFIG,
    assert_run_passed,
    load_module,
    named,
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
