"""Paths and helpers shared by the Terraform tests: running terraform offline, parsing HCL, cached downloads."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import hcl2
from hcl2 import SerializationOptions

REPO = Path(__file__).resolve().parents[2]
ROOT_MODULE = REPO / "terraform"
SCHEDULER_CONFIG = ROOT_MODULE / "modules" / "scheduler-config"
# Ignored by git: downloads and tool environments reused across runs.
CACHE = REPO / ".cache" / "terraform-tests"
# Policy files the root module's plans read (policy_file), copied into each test module as policies/.
POLICIES = Path(__file__).with_name("policies")

_HCL_OPTIONS = SerializationOptions(with_comments=False, strip_string_quotes=True, preserve_heredocs=False)


def run_terraform(
    terraform: str, *args: str, cwd: Path, env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [terraform, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"terraform {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


BLOCK_MARKER = "__is_block__"


def checkout(parent: Path) -> Path:
    """The repository as a CI runner has it at ``parent``: the Terraform tree (links kept), the package beside it."""
    parent.mkdir(parents=True)
    ignore = shutil.ignore_patterns(".terraform*", "*.tfstate*", "terraform.tfvars", "tfplan")
    shutil.copytree(ROOT_MODULE, parent / "terraform", symlinks=True, ignore=ignore)
    (parent / "extender").symlink_to(REPO / "extender")
    return parent


def tf(terraform: str, env: dict[str, str], directory: Path, *args: str, check: bool = True) -> str:
    # Each checkout keeps its own .terraform, as a runner does.
    env = {**env, "TF_DATA_DIR": str(directory / ".terraform")}
    result = run_terraform(terraform, *args, cwd=directory, env=env, check=check)
    return result.stdout + result.stderr


def plan(terraform: str, env: dict[str, str], module: Path, tfvars: str) -> str:
    """``terraform plan`` of ``tfvars`` (written as case.tfvars) in an initialised ``module``: its output on one line,
    the box drawing of warnings and errors taken out, so that a message is found whatever its wrapping."""
    (module / "case.tfvars").write_text(tfvars)
    output = tf(terraform, env, module, "plan", "-input=false", "-no-color", "-var-file=case.tfvars")
    return " ".join(re.sub(r"[│╷╵]", " ", output).split())


def load_hcl(path: Path, block_markers: bool = False) -> dict[str, Any]:
    """A file as python-hcl2 reads it; with ``block_markers`` nested blocks keep the key telling them from objects."""
    with path.open() as file:
        loaded = hcl2.load(file, serialization_options=_HCL_OPTIONS)
    return loaded if block_markers else _without_markers(loaded)


def _without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_markers(item) for key, item in value.items() if key != BLOCK_MARKER}
    if isinstance(value, list):
        return [_without_markers(item) for item in value]
    return value


def load_module(directory: Path, block_markers: bool = False) -> dict[str, list[Any]]:
    """Every top-level block of a module's *.tf files, by block type (resource, variable, output, ...)."""
    blocks: dict[str, list[Any]] = {}
    for path in sorted(directory.glob("*.tf")):
        for block_type, entries in load_hcl(path, block_markers).items():
            blocks.setdefault(block_type, []).extend(entries)
    return blocks


def named(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{name: body} of single-label blocks (variable, output, module)."""
    return {name: body for block in blocks for name, body in block.items()}


def resources(module: dict[str, list[Any]], kind: str = "resource") -> dict[tuple[str, str], dict[str, Any]]:
    """{(type, name): body} of a module's resource (or data) blocks."""
    return {
        (rtype, name): body
        for block in module.get(kind, [])
        for rtype, bodies in block.items()
        for name, body in bodies.items()
    }


def pip_download(requirement: str, dest: Path) -> Path:
    """The wheel of ``requirement`` (no dependencies), downloaded once into ``dest`` through the configured index."""
    dest.mkdir(parents=True, exist_ok=True)
    name, _, version = requirement.partition("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(dest.glob(pattern))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                str(dest),
                requirement,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
        found = sorted(dest.glob(pattern))
    if not found:
        raise FileNotFoundError(f"pip download {requirement} left no {pattern} in {dest}")
    return found[0]


def tftest_runs(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, body) of the run blocks of a .tftest.hcl file."""
    return [(name, body) for block in load_hcl(path).get("run", []) for name, body in block.items()]


def terraform_test(terraform: str, module: Path, env: dict[str, str]) -> dict[tuple[str, str], dict[str, Any]]:
    """Runs `terraform test -json` in ``module``: {(test file, run): completion event}, and ("error", message)."""
    result = run_terraform(terraform, "test", "-json", cwd=module, env=env, check=False)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for line in result.stdout.splitlines():
        event = json.loads(line)
        if event.get("type") == "test_run" and event["test_run"].get("progress") == "complete":
            results[(event["@testfile"], event["@testrun"])] = event
        elif event.get("@level") == "error":
            results.setdefault(("error", event["@message"]), event)
    assert results, f"terraform test reported nothing:\n{result.stdout}\n{result.stderr}"
    return results


def assert_run_passed(results: dict[tuple[str, str], dict[str, Any]], test_file: str, run: str) -> None:
    event = results.get((test_file, run))
    problems = [message for (kind, message) in results if kind == "error"]
    assert event is not None, f"run {run} did not complete: {problems}"
    assert event["test_run"]["status"] == "pass", f"{event['@message']}: {problems}"


def thin_validation_coverage(
    variables: dict[str, dict[str, Any]], test_files: list[Path]
) -> dict[str, tuple[int, int]]:
    """{variable: (validation blocks, expect_failures runs)} where a variable has fewer failing runs than rules."""
    expected = Counter(
        failure.removeprefix("${").removesuffix("}").removeprefix("var.")
        for path in test_files
        for _, body in tftest_runs(path)
        for failure in body.get("expect_failures", [])
    )
    rules = {name: len(body.get("validation", [])) for name, body in variables.items() if body.get("validation")}
    return {name: (count, expected[name]) for name, count in rules.items() if expected[name] < count}


def local_source(path: Path, name: str) -> str:
    """A local's expression as written in ``path``: up to the line end where its brackets close (regexes in it balance),
    or a heredoc up to its closing marker."""
    text = path.read_text()
    match = re.search(rf"^  {name}\s*=\s*", text, re.MULTILINE)
    assert match, f"no local {name} in {path}"
    heredoc = re.match(r"<<-?(\w+)\n", text[match.end():])
    if heredoc:
        closing = re.compile(rf"^\s*{heredoc.group(1)}$", re.MULTILINE).search(text, match.end() + heredoc.end())
        assert closing, f"heredoc of local {name} does not close"
        return text[match.end():closing.end()]
    depth, end = 0, match.end()
    while end < len(text) and not (text[end] == "\n" and depth == 0):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(text[end], 0)
        end += 1
    return text[match.end():end]


def variables_module(directory: Path, test_files: list[Path], extra: dict[str, str] | None = None) -> Path:
    """A module of the root module's variables.tf with main.tf's policy_directory (and ``extra`` files: {name: text}),
    the policy fixtures under policies/ and ``test_files`` under tests/: what `terraform test` plans without any
    provider."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT_MODULE / "variables.tf", directory / "variables.tf")
    # variables.tf reads a relative policy_file from policy_directory, which main.tf defines: the same here.
    policy_directory = local_source(ROOT_MODULE / "main.tf", "policy_directory")
    (directory / "policy_directory.tf").write_text(f"locals {{\n  policy_directory = {policy_directory}\n}}\n")
    for name, text in (extra or {}).items():
        (directory / name).write_text(text)
    shutil.copytree(POLICIES, directory / "policies")
    (directory / "tests").mkdir()
    for path in test_files:
        shutil.copy(path, directory / "tests" / path.name)
    return directory


def monitoring_locals(
    terraform: str, env: dict[str, str], directory: Path, names: list[str], prelude: str = ""
) -> dict[str, str]:
    """monitoring.tf's locals ``names`` as Terraform renders them for a public deployment (with ``prelude``, locals
    they read that other files define), applied in a provider-free module of the root module's variables."""
    expressions = "".join(f"  {name} = {local_source(ROOT_MODULE / 'monitoring.tf', name)}\n" for name in names)
    probe = f"locals {{\n{prelude}{expressions}}}\n" + "".join(
        f'output "{name}" {{\n  value = local.{name}\n}}\n' for name in names
    )
    module = variables_module(directory, [], {"probe.tf": probe})
    env = {**env, "TF_DATA_DIR": str(module / ".terraform")}
    variables = [
        "-var=project_id=acme",
        "-var=function_location=us-central1",
        "-var=invocation=public",
        "-var=kubernetes_version=1.31.4",
    ]
    run_terraform(terraform, "apply", "-auto-approve", "-input=false", *variables, cwd=module, env=env)
    outputs = json.loads(run_terraform(terraform, "output", "-json", cwd=module, env=env).stdout)
    return {name: outputs[name]["value"] for name in names}
