"""The README runs as written, in order, on a checkout: every command of its ``sh`` blocks is run (the function
started for the ones that call it) and prints what the README shows after it, or is one of ``EXCEPTED``, each with
the test that covers it instead. Every file a command reads is in the repository or written by an earlier command.

A command's shown output is the ``# `` lines right after it: what it prints, line for line, where a ``# ...`` line
stands for lines left out (a header, more rows, timings), so that a trimmed sample says it is trimmed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from extender.settings import ALLOCATOR_ENVIRONMENT
from tests.conftest import ROOT, served_process
from tests.policy_doc import fenced_blocks

README = ROOT / "README.md"
# Where the README's local function answers; the test serves it on a free port instead.
LOCAL_FUNCTION = "localhost:8080"
# Commands not run here (by how they begin), and what covers them.
EXCEPTED = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt && ": (
        "the run command: a server (tests/conftest.py serves main.py so, with the same allocator environment: "
        "test_the_run_command_serves_as_the_tests_do), which this test starts to run the commands that call it"
    ),
    "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements-test.txt && ": "the suite itself",
    "cd terraform": "the Terraform block: it deploys to Google Cloud",
    "cat > terraform.tfvars": (
        "the Terraform block: tests/terraform plans this tfvars (test_readme_terraform_example_plans) and pre-flights "
        "it (test_terraform_preflight.py)"
    ),
    "terraform ": "the Terraform block: it deploys to Google Cloud",
}
_HEREDOC = re.compile(r"<<'(\w+)'")


class Command(NamedTuple):
    text: str
    # The lines the README shows it printing.
    shown: list[str]
    # The directory it runs in, relative to the repository (after the block's ``cd``).
    cwd: str


def readme_commands() -> list[Command]:
    """Every command of the README's sh blocks, in order: a line (with its continuation lines and heredoc body)."""
    commands: list[Command] = []
    for fence, block in fenced_blocks(README.read_text()):
        if fence != "sh":
            continue
        lines, cwd = block.splitlines(), "."
        while lines:
            line = lines.pop(0)
            if not line.strip():
                continue
            if line.startswith("#"):
                assert commands, f"README: output shown before any command: {line}"
                commands[-1].shown.append(line.removeprefix("#").removeprefix(" "))
                continue
            text = line
            while text.endswith("\\"):
                text += "\n" + lines.pop(0)
            heredoc = _HEREDOC.search(text)
            if heredoc:
                end = lines.index(heredoc.group(1))
                text += "\n" + "\n".join(lines[: end + 1])
                del lines[: end + 1]
            commands.append(Command(text, [], cwd))
            if text.startswith("cd "):
                cwd = str(Path(cwd) / text.split()[1])
    return commands


def readme_files() -> dict[str, str]:
    """The files the README's commands write with a heredoc (``cat > NAME <<'EOF'``), by path in the repository."""
    files = {}
    for command in readme_commands():
        written = re.match(r"cat > (\S+) <<'(\w+)'\n(.*)\n\2$", command.text, re.DOTALL)
        if written:
            files[str(Path(command.cwd) / written.group(1))] = written.group(3) + "\n"
    return files


def excepted(command: Command) -> str | None:
    return next((why for start, why in EXCEPTED.items() if command.text.startswith(start)), None)


def test_every_exception_names_a_command_of_the_readme():
    commands = readme_commands()
    assert all(any(command.text.startswith(start) for command in commands) for start in EXCEPTED)
    assert sum(excepted(command) is None for command in commands) >= 5, "the README's examples are run"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The repository's files as a fresh clone has them (links), in a directory the commands may write to."""
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".") and entry.name != "__pycache__":
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def run(command: Command, checkout: Path, function_url: str | None) -> subprocess.CompletedProcess[str]:
    text = command.text
    if LOCAL_FUNCTION in text:
        assert function_url is not None, "the function is not served"
        text = text.replace(LOCAL_FUNCTION, function_url.removeprefix("http://"))
    # A newcomer's shell: `python` is this interpreter, no setting of the function's.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("EXTENDER_", "KUBERNETES_"))}
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", text],
        cwd=checkout / command.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_runs_as_written_in_order(checkout: Path) -> None:
    commands = [command for command in readme_commands() if excepted(command) is None]
    calling = [command for command in commands if LOCAL_FUNCTION in command.text]
    if calling and shutil.which("curl") is None:
        pytest.skip("curl is not on PATH (the README's requests to the local function use it)")
    with served_process() if calling else contextlib.nullcontext() as served:
        url = served[0] if served else None
        for command in commands:
            result = run(command, checkout, url)
            printed = (result.stdout + result.stderr).splitlines()
            told = f"README: {command.text}\n" + "\n".join(printed)
            assert result.returncode == 0, f"exited {result.returncode}: {told}"
            if command.shown:
                problem = _not_shown_as_printed(command.shown, printed)
                assert problem is None, f"{problem}: {told}"


LEFT_OUT = "..."


def _not_shown_as_printed(shown: list[str], printed: list[str]) -> str | None:
    """What is wrong with ``shown`` as the printed lines: a line not printed where it is shown (right after the line
    shown before it, unless ``...`` is between them), or lines printed before or after all those shown without a
    ``...`` there. None when the sample is the output, trimmed only where it says so."""
    lines = [line.rstrip() for line in printed]
    at, skipping = 0, False  # where the next shown line must be (or, skipping, may be from)
    for line in shown:
        if line == LEFT_OUT:
            skipping = True
            continue
        found = next((index for index in range(at, len(lines)) if lines[index] == line), None)
        if found is None:
            return f"shows {line!r}, which it does not print after the lines shown before it"
        if found != at and not skipping:
            left = "before it" if at == 0 else "between it and the line shown before it"
            return f"leaves out {found - at} printed line(s) {left} without a '# {LEFT_OUT}' line: {line!r}"
        at, skipping = found + 1, False
    if at < len(lines) and not skipping:
        return f"leaves out the {len(lines) - at} printed line(s) after {shown[-1]!r} without a '# {LEFT_OUT}' line"
    return None


@pytest.mark.parametrize(
    ("shown", "problem"),
    [
        (["a", "b", "c"], None),
        (["a", "...", "c"], None),
        (["...", "b", "..."], None),
        (
            ["a", "c"],
            "leaves out 1 printed line(s) between it and the line shown before it without a '# ...' line: 'c'",
        ),
        (["b", "c"], "leaves out 1 printed line(s) before it without a '# ...' line: 'b'"),
        (["a", "b"], "leaves out the 1 printed line(s) after 'b' without a '# ...' line"),
        (["a", "...", "d"], "shows 'd', which it does not print after the lines shown before it"),
        (["b", "...", "a"], "leaves out 1 printed line(s) before it without a '# ...' line: 'b'"),
    ],
)
def test_a_sample_is_the_output_trimmed_only_where_it_says_so(shown, problem):
    assert _not_shown_as_printed(shown, ["a", "b  ", "c"]) == problem


def test_every_policy_the_readme_writes_is_valid() -> None:
    from extender.policy.loader import parse_policy

    policies = {name: text for name, text in readme_files().items() if name.endswith((".yaml", ".json"))}
    assert policies, "the README writes a policy"
    for name, text in policies.items():
        assert parse_policy(text, name).profiles, name


def test_the_run_command_serves_as_the_tests_do() -> None:
    """The README's run command sets the allocator the tests, the bench and Terraform serve with."""
    [run_command] = [text for text, _, _ in readme_commands() if "functions-framework --target extender" in text]
    assigned = dict(re.findall(r"(?:^|\s)([A-Z_]+)=(\S+)", run_command.split("&&")[-1]))
    assert assigned == dict(ALLOCATOR_ENVIRONMENT)
