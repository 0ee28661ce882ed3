"""The root module's variable validations with real Terraform: terraform/variables.tf needs no provider on its own,
so it is copied into an empty module (with the policy files its plans read) and planned against
root_variables.tftest.hcl."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from extender.policy.loader import load_policy
from tests.terraform.support import (
    REPO,
    ROOT_MODULE,
    assert_run_passed,
    load_module,
    named,
    run_terraform,
    terraform_test,
    tftest_runs,
    thin_validation_coverage,
    variables_module,
)

TEST_FILE = Path(__file__).with_name("root_variables.tftest.hcl")
RUNS = [name for name, _ in tftest_runs(TEST_FILE)]


@pytest.fixture(scope="module")
def results(
    terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Any]:
    module = variables_module(tmp_path_factory.mktemp("root-variables") / "module", [TEST_FILE])
    return terraform_test(terraform, module, {**terraform_env, "TF_DATA_DIR": str(module / ".terraform")})


@pytest.mark.parametrize("run", RUNS)
def test_terraform_run_passes(results: dict[tuple[str, str], Any], run: str) -> None:
    assert_run_passed(results, f"tests/{TEST_FILE.name}", run)


def test_every_root_validation_rule_has_a_failing_case() -> None:
    variables = named(load_module(ROOT_MODULE)["variable"])
    assert thin_validation_coverage(variables, [TEST_FILE]) == {}, "{variable: (rules, failing runs)}"


README_EXAMPLES = [REPO / "README.md", ROOT_MODULE / "README.md"]


@pytest.mark.parametrize("readme", README_EXAMPLES, ids=["README", "terraform-README"])
def test_readme_terraform_example_plans(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path, readme: Path
) -> None:
    """The tfvars a README tells users to write, with its own policy as my-policy.yaml, pass the plan's checks."""
    text = readme.read_text()
    [tfvars] = re.findall(r"cat > terraform\.tfvars <<'TFVARS'\n(.*?\n)TFVARS\n", text, re.DOTALL)
    module = variables_module(tmp_path / "terraform", [])
    (module / "terraform.tfvars").write_text(tfvars)
    from tests.test_readme import readme_files

    (tmp_path / "my-policy.yaml").write_text(readme_files()["my-policy.yaml"])
    load_policy(tmp_path / "my-policy.yaml")
    env = {**terraform_env, "TF_DATA_DIR": str(module / ".terraform")}
    result = run_terraform(terraform, "plan", "-input=false", cwd=module, env=env, check=False)
    assert result.returncode == 0, f"{readme.name}'s example:\n{tfvars}\n{result.stdout}{result.stderr}"


def test_an_api_url_without_a_token_is_refused_naming_the_fix(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path
) -> None:
    module = variables_module(tmp_path / "terraform", [])
    (module / "terraform.tfvars").write_text(
        'project_id = "acme"\nfunction_location = "us-central1"\ninvocation = "public"\n'
        'kubernetes_version = "1.31.4"\nkubernetes_api_url = "https://34.118.0.10"\n'
    )
    env = {**terraform_env, "TF_DATA_DIR": str(module / ".terraform")}
    result = run_terraform(terraform, "plan", "-input=false", "-no-color", cwd=module, env=env, check=False)
    message = " ".join(re.sub(r"[│╷╵]", " ", result.stderr).split())
    assert result.returncode != 0
    assert "kubernetes_api_url needs kubernetes_token_secret (and kubernetes_token_secret_version)" in message
    assert "calls the API server anonymously" in message and "or leave kubernetes_api_url null" in message
