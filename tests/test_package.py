"""The package installs with pip and its console script runs from any directory: what a policy repository's CI
does (docs/policy.md). Built from a copy of the checkout's packaging inputs (a build writes build/ and *.egg-info
beside them) into a throwaway virtual environment that reads this one's packages, offline: no index, no isolation,
no dependency resolution (the dependencies are this environment's, which requirements-test.txt installs)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT

# What `pip install .` reads: the build configuration, the requirements it names and the package.
INPUTS = ("pyproject.toml", "requirements.txt", "README.md", "extender")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ directory of a virtual environment the package was installed into."""
    scratch = tmp_path_factory.mktemp("package")
    source = scratch / "source"
    source.mkdir()
    for name in INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    # This environment's packages (the dependencies, setuptools for the build), after the venv's own.
    inherited = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    (Path(purelib) / "test-environment.pth").write_text("\n".join(inherited) + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--disable-pip-version-check", str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return venv / "bin"


def run(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "EXTENDER_POLICY")}
    command = [str(installed / "gcf-extender"), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_only_the_extender_package_is_installed_with_its_data(installed: Path) -> None:
    python = installed / "python"
    found = subprocess.run(
        [str(python), "-c", "import extender, pathlib; print(pathlib.Path(extender.__file__).parent)"],
        cwd=installed, capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()
    package = Path(found)
    assert package.parent != ROOT, "imported from the checkout, not the installation"
    assert (package / "policy" / "default.yaml").is_file() and (package / "policy" / "default.json").is_file()
    assert not any((package.parent / name).exists() for name in ("tests", "bench", "testkit", "main.py"))


def test_the_console_script_checks_and_explains_from_any_directory(installed: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text((ROOT / "extender" / "policy" / "default.yaml").read_text())
    checked = run(installed, "check-policy", "policy.yaml", cwd=tmp_path)
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    assert checked.stdout.startswith("policy.yaml: ok\n")
    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web-1}\nspec: {}\n")
    (tmp_path / "nodes.yaml").write_text("- {metadata: {name: node-a}}\n- {metadata: {name: node-b}}\n")
    # The embedded default policy: the package data is installed.
    explained = run(installed, "explain", "pod.yaml", "--nodes", "nodes.yaml", cwd=tmp_path)
    assert explained.returncode == 0, explained.stderr
    assert "policy embedded default" in explained.stdout and "filter: kept 2 of 2 nodes" in explained.stdout
    usage = run(installed, "check-policy", cwd=tmp_path)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: gcf-extender check-policy")


def test_custom_plugin_modules_import_from_the_working_directory(installed: Path, tmp_path: Path) -> None:
    """As in a policy repository with its own plugin beside its policy (docs/policy.md, "Writing your own plugin")."""
    from tests.policy_doc import code_blocks

    (module,) = code_blocks("python", "Writing your own plugin")
    policy = next(block for block in code_blocks("yaml", "Writing your own plugin") if "pluginModules" in block)
    (tmp_path / "lucky.py").write_text(module)
    (tmp_path / "policy.yaml").write_text(policy)
    checked = run(installed, "check-policy", "policy.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == "policy.yaml: ok\n  profile default: score LuckyNumber (weight 1)\n"


def test_serve_says_it_runs_in_a_checkout(installed: Path, tmp_path: Path) -> None:
    served = run(installed, "serve", "--cert", "cert.pem", "--key", "key.pem", cwd=tmp_path)
    assert served.returncode == 2 and "serve runs the function of a checkout" in served.stderr
