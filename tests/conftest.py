"""Shared fixtures: the function through functions-framework, in-process and as a real served process."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import functions_framework
import pytest
import requests
from flask.testing import FlaskClient

from extender.settings import ALLOCATOR_ENVIRONMENT
from testkit.ports import free_port
from tests.token_leaks import TOKEN_VARIABLES, WATCHED, RecordKeeper, assert_no_leak, watch_environment

if TYPE_CHECKING:  # imported by the fixtures themselves: cryptography costs every other test run time
    from testkit.certs import CertificateAuthority
    from testkit.fake_apiserver import FakeApiServer
    from tests.prometheus import Exporter, PrometheusServer

ROOT = Path(__file__).resolve().parents[1]


def make_client(monkeypatch: pytest.MonkeyPatch, policy: str | Path | None = None, **env: str) -> FlaskClient:
    """A Flask test client of the real functions-framework app, started with this environment."""
    if policy is None:
        monkeypatch.delenv("EXTENDER_POLICY", raising=False)
    else:
        monkeypatch.setenv("EXTENDER_POLICY", str(policy))
    # The process-wide start-up tuning (extender.startup) stays out of the test process unless a test asks for it.
    monkeypatch.setenv("EXTENDER_PROCESS_TUNING", "off")
    watch_environment(env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(ROOT)
    return functions_framework.create_app(target="extender", source=str(ROOT / "main.py")).test_client()


@pytest.fixture
def client_factory(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FlaskClient]:
    return lambda policy=None, **env: make_client(monkeypatch, policy, **env)


@pytest.fixture
def client(client_factory: Callable[..., FlaskClient]) -> FlaskClient:
    return client_factory()


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stderr = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"the function exited with {process.returncode}: {stderr}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.ConnectionError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


@pytest.fixture(autouse=True)
def no_token_in_log_records() -> Iterator[None]:
    """Every record logged while a test runs, as a handler would write it, holds no caller token the test configured,
    in any form."""
    WATCHED.clear()
    keeper = RecordKeeper()
    root = logging.getLogger()
    root.addHandler(keeper)
    try:
        yield
    finally:
        root.removeHandler(keeper)
    assert_no_leak("\n".join(keeper.texts), "a log record")


@contextlib.contextmanager
def serving(log_path: Path | None = None, **env: str) -> Iterator[str]:
    """A real ``functions-framework --target extender`` process on a free loopback port, with extra ``env``: its URL.

    Its stdout and stderr, where it logs, go to ``log_path`` when given; they must hold no caller token of its
    environment, in any form (``tests.token_leaks``).
    """
    with served_process(log_path, **env) as (url, _):
        yield url


def function_command(port: int) -> list[str]:
    """The command Cloud Functions runs the function with, on a loopback ``port``."""
    return [
        *(sys.executable, "-m", "functions_framework", "--target", "extender", "--source", "main.py"),
        *("--host", "127.0.0.1", "--port", str(port)),
    ]


@contextlib.contextmanager
def served_process(log_path: Path | None = None, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``serving``, with the process (gunicorn's master, whose one child is the worker that answers)."""
    port = free_port()
    # Served as the README's command and Terraform serve it: the allocator set up as deployed.
    environment = {key: value for key, value in os.environ.items() if key != "EXTENDER_POLICY"}
    environment |= dict(ALLOCATOR_ENVIRONMENT) | env
    with logged_process(function_command(port), environment, log_path) as (process, log):
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_until_up(f"{url}/healthz", process)
            except RuntimeError as exc:
                log.seek(0)
                raise RuntimeError(f"{exc}{log.read().decode(errors='replace')}") from None
            yield url, process
        finally:
            process.terminate()
            process.wait(timeout=10)


@contextlib.contextmanager
def logged_process(
    command: list[str], environment: dict[str, str], log_path: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], IO[bytes]]]:
    """``command`` with its stdout and stderr in ``log_path`` (a temporary file if None), which must hold none of
    the caller tokens in ``environment`` once the process has ended (the caller ends it)."""
    watch_environment(environment)
    # A file, not a pipe: the function logs every request, and a full pipe nobody reads would stall it.
    with open(log_path, "w+b") if log_path else tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=log)
        try:
            yield process, log
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        log.seek(0)
        tokens = [environment[name] for name in TOKEN_VARIABLES if environment.get(name)]
        assert_no_leak(log.read().decode(errors="replace"), f"the output of {' '.join(command[1:4])}", tokens)


@pytest.fixture
def broken_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tests.broken_plugins' Broken, registered by the policies of one test (``pluginModules``) and gone afterwards: no
    other test's list of known plugins shows it."""
    import extender.plugins  # noqa: F401  (the built-in plugins are registered before the registry is copied)
    from extender.framework import registry

    monkeypatch.setattr(registry, "_PLUGINS", dict(registry._PLUGINS))
    monkeypatch.delitem(sys.modules, "tests.broken_plugins", raising=False)
    yield
    sys.modules.pop("tests.broken_plugins", None)


@pytest.fixture(scope="session")
def served_url() -> Iterator[str]:
    with serving() as url:
        yield url


@pytest.fixture(scope="session")
def test_ca() -> CertificateAuthority:
    """One certificate authority per session (testkit.certs), for every TLS test."""
    from testkit.certs import CertificateAuthority

    return CertificateAuthority()


@pytest.fixture
def apiserver(test_ca: CertificateAuthority, tmp_path: Path) -> Iterator[FakeApiServer]:
    """A Kubernetes API server (testkit.fake_apiserver) over HTTPS with a certificate from ``test_ca``."""
    from testkit.fake_apiserver import FakeApiServer

    with FakeApiServer.serving(test_ca, tmp_path) as server:
        yield server


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    """Per-node values for a real Prometheus to scrape (tests/prometheus.py); each test sets the values it needs."""
    from tests.prometheus import Exporter

    served = Exporter()
    yield served
    served.close()


@pytest.fixture(scope="module")
def prometheus(exporter: Exporter, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """Debian's prometheus scraping ``exporter``, one per module: it starts scraping some seconds after it starts.
    Skipped where it is not installed, failed under CI=true."""
    from tests.prometheus import running

    with running(tmp_path_factory.mktemp("prometheus"), exporter) as server:
        yield server
