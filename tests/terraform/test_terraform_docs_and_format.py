"""The Terraform tree is formatted; each module's README documents every input (with its real default) and output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.terraform.support import ROOT_MODULE, SCHEDULER_CONFIG, load_module, named, run_terraform

MODULES = [ROOT_MODULE, SCHEDULER_CONFIG]
_ROW = re.compile(r"^\| `(\w+)` \| (.+?) \| `(.+?)` \| (.+?) \| (yes|no) \|$", re.MULTILINE)
_OUTPUT_ROW = re.compile(r"^\| `(\w+)` \| (.+?) \| (yes|no) \|$", re.MULTILINE)


@pytest.mark.parametrize("tree", [ROOT_MODULE, Path(__file__).parent], ids=["terraform", "tests-terraform"])
def test_terraform_fmt(terraform: str, terraform_env: dict[str, str], tree: Path) -> None:
    result = run_terraform(
        terraform, "fmt", "-check", "-recursive", "-diff", str(tree), cwd=tree, env=terraform_env, check=False
    )
    assert result.returncode == 0, f"run `terraform fmt -recursive {tree}`:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("module", MODULES, ids=["root", "scheduler-config"])
def test_readme_documents_every_input_with_its_default(module: Path) -> None:
    variables = named(load_module(module)["variable"])
    section = (module / "README.md").read_text().split("\n## Inputs\n", 1)[1].split("\n## Outputs\n", 1)[0]
    rows = {name: (description, default, required) for name, description, _, default, required in _ROW.findall(section)}
    assert set(rows) == set(variables)
    for name, body in variables.items():
        description, default, required = rows[name]
        assert description.strip(), name
        if "default" in body:
            assert (required, json.loads(default.strip("`"))) == ("no", body["default"]), name
        else:
            assert (required, default) == ("yes", "n/a"), name


@pytest.mark.parametrize("module", MODULES, ids=["root", "scheduler-config"])
def test_readme_documents_every_output(module: Path) -> None:
    outputs = named(load_module(module)["output"])
    section = (module / "README.md").read_text().split("\n## Outputs\n", 1)[1]
    rows = {name: sensitive for name, _, sensitive in _OUTPUT_ROW.findall(section)}
    assert rows == {name: "yes" if body.get("sensitive") else "no" for name, body in outputs.items()}
