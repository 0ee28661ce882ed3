"""Serve the extender and the references the way Cloud Functions does, and read what their workers use.

functions-framework (not in debug) runs gunicorn: the master loads the
function, then forks one worker with ``THREADS`` threads, which serves. CPU
and peak memory are read from that worker's /proc entries.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from extender.settings import ALLOCATOR_ENVIRONMENT
from testkit.loopback import Loopback, QuietHandler
from testkit.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
THREADS = os.environ.get("THREADS") or str((os.cpu_count() or 1) * 4)  # functions-framework's own default
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ServerSpec:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # The tree the server runs from (imports resolve there first): this checkout, or an exported commit.
    root: Path = ROOT


# What Cloud Run sets in every instance (Terraform names the project): the extender then logs as it does there,
# through Cloud Logging's handler.
ON_CLOUD_RUN = {"K_SERVICE": "extender", "K_REVISION": "extender-00001-ben", "GOOGLE_CLOUD_PROJECT": "bench"}
# What Terraform sets beside them for the function (and the README's command): the allocator as deployed.
AS_DEPLOYED = dict(ALLOCATOR_ENVIRONMENT)


def function_spec(name: str, source: str, root: Path = ROOT, **env: str) -> ServerSpec:
    """``functions-framework --target extender --source SOURCE``, as Cloud Functions starts it, from ``root``."""
    return ServerSpec(
        name,
        [sys.executable, "-m", "functions_framework", "--target", "extender", "--source", source],
        {**ON_CLOUD_RUN, **env},
        root,
    )


def compile_like_cloud_functions(root: Path) -> None:
    """Write the bytecode of the Python files ``root`` serves, as Cloud Functions' build does (``compileall``).

    A deployed instance reads its modules' bytecode; compiling them from source at every launch would add a
    cost no deployed instance pays (and PYTHONDONTWRITEBYTECODE, often set on development machines, keeps a
    launch from writing it). The installed packages were compiled by pip.
    """
    served = [str(root / name) for name in ("main.py", "extender", "bench")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *served], check=True, stdout=subprocess.DEVNULL)


def wsgi_spec(name: str, app: str) -> ServerSpec:
    """A bare WSGI app under gunicorn with functions-framework's settings."""
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "--workers",
        "1",
        "--threads",
        THREADS,
        "--timeout",
        "0",
        "--log-level",
        "error",
        app,
    ]
    return ServerSpec(name, argv)


class Server:
    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.port = free_port()
        argv = [*spec.argv]
        if "functions_framework" in argv:
            argv += ["--host", "127.0.0.1", "--port", str(self.port)]
        else:
            argv += ["--bind", f"127.0.0.1:{self.port}"]
        # Only the spec's settings: none of the caller's EXTENDER_* or KUBERNETES_* may leak into a server.
        inherited = {
            name: value for name, value in os.environ.items() if not name.startswith(("EXTENDER_", "KUBERNETES_"))
        }
        env = {**inherited, "THREADS": THREADS, "PYTHONPATH": str(spec.root), **spec.env}
        # The function logs every decision: to a file, as a pipe nobody drains would block it once full.
        self.log = tempfile.TemporaryFile()  # lives as long as the server; closed by stop()
        self.launched = time.perf_counter()
        # In a session of its own: stop() can then take down a worker its master left behind.
        self.process = subprocess.Popen(
            argv, cwd=spec.root, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._worker: int | None = None

    def wait_listening(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.002)
        raise TimeoutError(f"{self.spec.name} did not listen within {timeout} s")

    @property
    def worker(self) -> int:
        """The pid of gunicorn's (only) worker, the process that serves."""
        deadline = time.monotonic() + 30
        while self._worker is None:
            self.check_alive()
            children = _children(self.process.pid)
            if children:
                self._worker = children[0]
            elif time.monotonic() > deadline:
                raise TimeoutError(f"{self.spec.name}: no gunicorn worker appeared")
            else:
                time.sleep(0.01)
        return self._worker

    def cpu_seconds(self) -> float:
        """User + system CPU time of the worker, all threads."""
        fields = Path(f"/proc/{self.worker}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK

    def on_cpu_seconds(self) -> tuple[float, float]:
        """Time on a CPU so far of gunicorn's master (loading the function: start-up) and of its worker (serving),
        all threads each, to the nanosecond (the scheduler's accounting; ``cpu_seconds`` counts clock ticks)."""
        return _on_cpu_seconds(self.process.pid), _on_cpu_seconds(self.worker)

    def peak_rss_mb(self) -> float:
        """The worker's peak resident set (VmHWM)."""
        for line in Path(f"/proc/{self.worker}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # gunicorn's quick shutdown (TERM waits for idle connections)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # A worker still starting when the master quits outlives it, and would load the runs that follow.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            self.log.seek(0)
            output = self.log.read().decode(errors="replace")
            raise RuntimeError(f"{self.spec.name} exited with {self.process.returncode}:\n{output[-3000:]}")


def _on_cpu_seconds(pid: int) -> float:
    nanoseconds = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            nanoseconds += int((task / "schedstat").read_text().split()[0])
    return nanoseconds / 1e9


def _children(pid: int) -> list[int]:
    listed = Path(f"/proc/{pid}/task/{pid}/children")
    if listed.exists():
        return [int(child) for child in listed.read_text().split()]
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


class NodeListAPI:
    """A loopback stand-in for the Kubernetes API the extender reads: ``GET /api/v1/nodes`` (paged; metadata only
    when asked, else whole nodes with their allocatable), and for NodeLoad's in-flight pods an empty list of bound
    pods and a watch of them that sends nothing until the server's own timeout (no pod is bound during the bench)."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        metadata_items = [{"metadata": node["metadata"]} for node in nodes]
        full_items = [
            {"metadata": node["metadata"], "status": {"allocatable": node["status"]["allocatable"]}} for node in nodes
        ]

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                if url.path == "/api/v1/pods":
                    self._pods(query)
                    return
                if url.path != "/api/v1/nodes":
                    self.send_error(404)
                    return
                limit = int(query.get("limit", ["500"])[0])
                start = int(query.get("continue", ["0"])[0])
                metadata_only = "PartialObjectMetadataList" in (self.headers.get("Accept") or "")
                items = metadata_items if metadata_only else full_items
                page = items[start : start + limit]
                more = str(start + limit) if start + limit < len(items) else ""
                kind = "PartialObjectMetadataList" if metadata_only else "NodeList"
                body = orjson.dumps({"kind": kind, "apiVersion": "v1", "metadata": {"continue": more}, "items": page})
                self.answer(200, body)

            def _pods(self, query: dict[str, list[str]]) -> None:
                if query.get("watch") != ["1"]:
                    empty = {"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": []}
                    self.answer(200, orjson.dumps(empty))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.close_connection = True
                time.sleep(min(float(query.get("timeoutSeconds", ["60"])[0]), 60.0))
                with contextlib.suppress(OSError):
                    self.wfile.write(b"0\r\n\r\n")

        self._served = Loopback(Handler)
        self.url = self._served.url

    def close(self) -> None:
        self._served.close()


class PrometheusAPI:
    """A loopback stand-in for the Prometheus HTTP API's ``GET /api/v1/query``, for the bench only (the tests use a
    real Prometheus): whatever the query, one sample per node name, stamped with the time of the answer. Loads are
    spread over 0..1 by name, a tenth of the nodes above 0.9, unless ``loads`` gives them."""

    def __init__(self, names: list[str], loads: dict[str, float] | None = None) -> None:
        loads = loads or {name: (int(_sha1(name), 16) % 1000) / 1000 for name in names}

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if urlsplit(self.path).path != "/api/v1/query":
                    self.send_error(404)
                    return
                now = time.time()
                result = [{"metric": {"node": name}, "value": [now, repr(load)]} for name, load in loads.items()]
                data = {"resultType": "vector", "result": result}
                self.answer(200, orjson.dumps({"status": "success", "data": data}))

        self._served = Loopback(Handler)
        self.url = self._served.url

    def close(self) -> None:
        self._served.close()


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()
