"""A real Prometheus server for the NodeLoad tests, scraping an exporter the test serves and changes.

Debian's ``prometheus`` (``.ci/run`` installs it where it is missing) runs in a
temporary directory on a free loopback port, scraping ``Exporter`` every
``SCRAPE_INTERVAL``. The exporter answers in the Prometheus text format with
the per-node values the test sets. A test that needs the server and cannot
find it fails under ``CI=true`` and is skipped, saying why, elsewhere: never a
stand-in in its place.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import requests

from testkit.loopback import Loopback, QuietHandler
from testkit.ports import free_port

SCRAPE_INTERVAL = 0.5
# What the NodeLoad policies of the tests query: one gauge per node, labelled with the node's name.
METRIC = "node_load"


def prometheus_binary(name: str = "prometheus") -> str:
    """The prometheus executable (or ``promtool``, beside it); fails the test under CI=true when there is none, else
    skips it saying why."""
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if found is None:
        why = f"no {name} executable on PATH (Debian: apt-get install prometheus; .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    return found


def promtool_test_rules(directory: Path, tests: Mapping[str, Any], rules: Mapping[str, Any] | None = None) -> str:
    """``promtool test rules`` on ``tests`` (and ``rules`` as the rules.yaml they name), written into ``directory``:
    what it printed when a case failed, "" when every case passed."""
    if rules is not None:
        (directory / "rules.yaml").write_text(json.dumps(rules))
    (directory / "tests.yaml").write_text(json.dumps(tests))
    command = [prometheus_binary("promtool"), "test", "rules", "tests.yaml"]
    ran = subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=120, check=False)
    return "" if ran.returncode == 0 else ran.stdout + ran.stderr


class Exporter:
    """Serves ``/metrics``: for each metric, samples with their labels; ``set`` replaces a metric's samples."""

    def __init__(self) -> None:
        self._samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        self._lock = threading.Lock()
        self.scrapes = 0
        exporter = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                exporter.scrapes += 1
                self.answer(200, exporter.text().encode(), "text/plain; version=0.0.4")

        self._served = Loopback(Handler)
        self.target = f"127.0.0.1:{self._served.port}"

    def set(self, loads: Mapping[str, float], metric: str = METRIC, **labels: str) -> None:
        """One sample per node (label ``node``), with ``labels`` on each."""
        self.set_samples(metric, [({"node": node, **labels}, value) for node, value in loads.items()])

    def set_samples(self, metric: str, samples: list[tuple[dict[str, str], float]]) -> None:
        with self._lock:
            self._samples[metric] = list(samples)

    def text(self) -> str:
        with self._lock:
            lines = []
            for metric, samples in self._samples.items():
                lines.append(f"# TYPE {metric} gauge")
                for labels, value in samples:
                    shown = ",".join(f'{key}="{item}"' for key, item in labels.items())
                    lines.append(f"{metric}{{{shown}}} {_number(value)}")
            return "\n".join(lines) + "\n"

    def close(self) -> None:
        self._served.close()


class PrometheusServer:
    """``prometheus`` scraping ``targets``, in ``directory``, on a free loopback port; ``start`` and ``stop`` it."""

    def __init__(self, directory: Path, targets: list[str], port: int | None = None) -> None:
        self.binary = prometheus_binary()
        self.directory = directory
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)
        listed = ", ".join(f'"{target}"' for target in targets)
        interval = f"{round(SCRAPE_INTERVAL * 1000)}ms"
        (directory / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
            f"scrape_configs:\n- job_name: nodes\n  static_configs:\n  - targets: [{listed}]\n"
        )

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.directory / "prometheus.log").open("ab"),
        )
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.directory / "prometheus.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"prometheus did not become ready: {log}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None

    def query(self, promql: str) -> dict[str, Any]:
        return requests.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5).json()

    def wait_until(
        self, promql: str, holds: Callable[[dict[str, float]], bool], timeout: float = 20
    ) -> dict[str, float]:
        """Query until the answer's values by ``node`` label satisfy ``holds``; those values."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.query(promql)
            result = answer.get("data", {}).get("result", [])
            values = {item["metric"].get("node", ""): float(item["value"][1]) for item in result}
            if holds(values):
                return values
            assert time.monotonic() < deadline, f"{promql}: {answer}"
            time.sleep(0.1)


@contextlib.contextmanager
def running(directory: Path, exporter: Exporter) -> Iterator[PrometheusServer]:
    server = PrometheusServer(directory, [exporter.target])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def write_nodeload_policy(directory: Path, args: dict[str, Any]) -> Path:
    """A policy whose one profile filters with NodeLoad on ``args``, as a file in ``directory``."""
    document = {
        "profiles": [
            {
                "name": "default",
                "plugins": {"filter": {"enabled": [{"name": "NodeLoad"}]}},
                "pluginConfig": [{"name": "NodeLoad", "args": args}],
            }
        ],
    }
    path = directory / "policy.yaml"
    path.write_text(json.dumps(document))
    return path


def refreshes_landed() -> None:
    """Wait for every NodeLoad refresh in flight in this process: a warm instance refreshes on a thread of its own
    while the request that found the refresh due judges on the answers at hand (``loads.Loads.snapshot``)."""
    from extender.plugins.nodeload import loads

    for live in list(loads._LIVE):
        with live._refreshing:  # held while its refresh is in flight
            pass
