"""Security scan with checkov: every failed check must be justified in terraform/README.md, and every justified one
must still fail (no stale excuses).

checkov pins dependencies that clash with python-hcl2, so it gets a virtual environment of its own, created once
under .cache/ (about 30 s and 300 MB); without the package index the test is skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.terraform.scenarios import SECOND_SCHEDULERS
from tests.terraform.support import CACHE, REPO, ROOT_MODULE

CHECKOV = "checkov==3.3.30"
VENV = CACHE / "checkov-venv"
JUSTIFIED_SECTION = re.compile(r"^## Security scan\n(.*?)(?=^## )", re.DOTALL | re.MULTILINE)
CHECK_ID = re.compile(r"\bCKV2?_[A-Z0-9]+_\d+\b")


def _version(executable: Path) -> str | None:
    try:
        result = subprocess.run(
            [str(executable), "--version"], capture_output=True, text=True, timeout=120, check=False
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


@pytest.fixture(scope="module")
def checkov() -> Path:
    executable = VENV / "bin" / "checkov"
    wanted = CHECKOV.split("==")[1]
    if _version(executable) != wanted:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True, timeout=120)
        install = subprocess.run(
            [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", CHECKOV],
            capture_output=True, text=True, timeout=900, check=False,
        )
        if install.returncode != 0:
            pytest.skip(f"cannot install {CHECKOV} from the package index: {install.stderr.strip().splitlines()[-1:]}")
        assert _version(executable) == wanted, f"{CHECKOV} installed into {VENV} but does not run"
    return executable


def _failed(checkov: Path, directory: Path, framework: str) -> dict[str, list[str]]:
    """{check id: [resources]} of the failed checks."""
    result = subprocess.run(
        [
            str(checkov),
            "--directory",
            str(directory),
            "--framework",
            framework,
            "--output",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    # checkov exits 1 when a check fails; anything else, or no report, means it did not scan.
    assert result.returncode in (0, 1) and result.stdout.strip(), f"checkov did not run:\n{result.stderr}"
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert reports, f"checkov reported nothing for {directory}"
    failed: dict[str, list[str]] = {}
    for report in reports:
        assert report["summary"]["parsing_errors"] == 0, report["summary"]
        assert report["summary"]["passed"] > 0, f"checkov checked nothing in {directory}"
        for check in report["results"]["failed_checks"]:
            failed.setdefault(check["check_id"], []).append(check["resource"])
    return failed


def _justified() -> set[str]:
    section = JUSTIFIED_SECTION.search((ROOT_MODULE / "README.md").read_text())
    assert section, "terraform/README.md needs a '## Security scan' section"
    return set(CHECK_ID.findall(section.group(1)))


@pytest.fixture(scope="module")
def findings(
    checkov: Path, rendered: dict[str, dict[str, Path]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, list[str]]]:
    """Failed checks of the Terraform tree and of the rendered manifests of every deployment shape that has them."""
    manifests = tmp_path_factory.mktemp("manifests")
    for scenario in SECOND_SCHEDULERS:
        (manifests / f"{scenario}.yaml").write_text(rendered[scenario]["kubernetes_manifests"].read_text())
    return {
        "terraform": _failed(checkov, ROOT_MODULE, "terraform"),
        "kubernetes": _failed(checkov, manifests, "kubernetes"),
    }


@pytest.mark.parametrize("framework", ["terraform", "kubernetes"])
def test_findings_are_justified(findings: dict[str, dict[str, list[str]]], framework: str) -> None:
    unjustified = {check: resources for check, resources in findings[framework].items() if check not in _justified()}
    assert unjustified == {}


def test_no_stale_justification(findings: dict[str, dict[str, list[str]]]) -> None:
    failing = {check for failed in findings.values() for check in failed}
    assert _justified() - failing == set(), "README justifies checks that no longer fail"
