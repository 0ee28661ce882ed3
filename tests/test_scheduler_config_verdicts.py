"""check-scheduler-config against what real kube-schedulers did (tests/fixtures/kube-scheduler-config-verdicts):
for each of the 128 files and each of v1.28.4, v1.31.8, v1.35.4, the same verdict, and where kube-scheduler refused,
its error among the tool's lines. A file kube-scheduler runs is refused only by a stricter rule, each one documented
in docs/policy.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from extender.cli.scheduler_config.check import check
from extender.cli.scheduler_config.extra_rules import STRICTER_RULES
from extender.cli.scheduler_config.findings import Finding, Severity
from tests.policy_doc import policy_section

VERDICTS = Path(__file__).resolve().parent / "fixtures" / "kube-scheduler-config-verdicts"
CASES: dict[str, Any] = json.loads((VERDICTS / "verdicts.json").read_text())
RUNS = [(name, kube_version) for name in sorted(CASES) for kube_version in sorted(CASES[name]["verdicts"])]


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _normal(text: str) -> str:
    """An error line as both print it: the fixture's " / " for line breaks, the scheme's source location (it names
    kube-scheduler's build) left out, runs of spaces as one."""
    text = re.sub(r' in scheme "[^"]*"', "", text.replace(" / ", " "))
    return re.sub(r"\s+", " ", text).strip()


def _says(findings: list[Finding], error: str) -> bool:
    """Whether one of the tool's lines carries kube-scheduler's error. kube-scheduler quotes the whole file after
    "Object 'Kind' is missing in"; the tool quotes its start."""
    lines = [_normal(finding.line) for finding in findings]
    expected = _normal(error)
    if expected.startswith("Object '"):
        expected = expected.split(" in '")[0] + " in '"
    return any(expected in line for line in lines)


@pytest.mark.parametrize(("name", "kube_version"), RUNS, ids=[f"{name}@{version}" for name, version in RUNS])
def test_the_verdict_is_kube_schedulers(name: str, kube_version: str) -> None:
    case = CASES[name]
    kube = case["verdicts"][kube_version]
    verdict = check((VERDICTS / case["file"]).read_text(encoding="utf-8"), _version(kube_version))
    own = [finding for finding in verdict.findings if finding.severity is Severity.REFUSED]
    if kube["accepted"]:
        assert own == [], f"kube-scheduler {kube_version} started with {case['file']}"
        for finding in verdict.refused:
            assert finding.severity is Severity.STRICTER
            assert any(words in finding.message for words in STRICTER_RULES.values()), finding.line
    else:
        assert own, f"kube-scheduler {kube_version} refused {case['file']}: {kube['error']}"
        assert _says(own, kube["error"]), (kube["error"], [finding.line for finding in own])


def test_kube_scheduler_runs_no_file_the_tool_refuses_but_by_a_documented_stricter_rule() -> None:
    refused_only_by_stricter_rules = sorted(
        (name, kube_version)
        for name, kube_version in RUNS
        if CASES[name]["verdicts"][kube_version]["accepted"]
        and check((VERDICTS / CASES[name]["file"]).read_text(encoding="utf-8"), _version(kube_version)).refused
    )
    # A file kube-scheduler starts with, refused here, is one an extender cannot work with: said on the line, and in
    # the documentation (tested below). The list is kept explicit so that a new stricter verdict is a decision.
    assert refused_only_by_stricter_rules == [
        ("ext/filter-only-no-node-cache", "1.35"),  # blind resource scoring, kubernetes#141781
        ("ext/urlPrefix-fragment", "1.28"),
        ("ext/urlPrefix-fragment", "1.31"),
        ("ext/urlPrefix-fragment", "1.35"),
        ("ext/urlPrefix-missing", "1.28"),
        ("ext/urlPrefix-missing", "1.31"),
        ("ext/urlPrefix-missing", "1.35"),
        ("timeout/zero-bare", "1.28"),
        ("timeout/zero-bare", "1.31"),
        ("timeout/zero-bare", "1.35"),
        ("tls/enableHTTPS-no-ca", "1.28"),
        ("tls/enableHTTPS-no-ca", "1.31"),
        ("tls/enableHTTPS-no-ca", "1.35"),
    ]


@pytest.mark.parametrize("rule", sorted(STRICTER_RULES))
def test_each_stricter_rule_is_documented_with_its_reason(rule: str) -> None:
    section = policy_section().split("## Checking files in CI: check-policy and check-scheduler-config")[1]
    assert STRICTER_RULES[rule] in section.replace("\n", " ")
