"""Cloud Logging's handler comes after the first answer: held entries are written once, in order, in their trace."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
import time

import flask
import pytest

import extender.logs
from extender.logs import deferred
from extender.logs.deferred import DeferredCloudHandler
from tests.conftest import ROOT
from tests.test_logging import CLOUD_RUN, PROJECT, TRACE_ID, restore_logging  # noqa: F401 — restore_logging: autouse here too


def lines_of(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


class Recorded(logging.Handler):
    """A stand-in for Cloud Logging's handler: records each entry's message and the request trace header it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str | None]] = []

    def emit(self, record: logging.LogRecord) -> None:
        trace = flask.request.headers.get("traceparent") if flask.has_request_context() else None
        self.seen.append((record.getMessage(), trace))


def held_by(make_target, ready=None) -> DeferredCloudHandler:
    return DeferredCloudHandler(make_target, ready or (lambda target: None))


def log(handler: logging.Handler, message: str, *args: object) -> None:
    handler.handle(logging.makeLogRecord({"name": "extender", "levelno": logging.INFO, "msg": message, "args": args}))


def wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_entries_wait_for_the_answer_of_the_first_request_that_logs_then_go_in_order_within_their_trace(monkeypatch):
    monkeypatch.setattr(deferred, "HOLD_SECONDS", 60.0)  # only the answer can start the import here
    target, ready = Recorded(), []
    handler = held_by(lambda: target, ready.append)
    log(handler, "listed %d nodes", 5)
    labels = {"zone": "a"}
    log(handler, "labels %s", labels)
    labels["zone"] = "changed later"  # a held entry keeps the message it had when logged
    app = flask.Flask(__name__)

    @app.post("/filter")
    def decide() -> str:
        log(handler, "decision")
        return "answer"

    traceparent = f"00-{TRACE_ID}-b7ad6b7169203331-01"
    response = app.test_client().post("/filter", headers={"traceparent": traceparent})
    time.sleep(0.05)
    # Answered, not yet sent: the import would compete with writing it.
    assert response.data == b"answer" and target.seen == [] and ready == []
    response.close()  # what the server does once the answer is written
    wait_for(lambda: ready == [target])
    assert target.seen == [("listed 5 nodes", None), ("labels {'zone': 'a'}", None), ("decision", traceparent)]
    log(handler, "after")  # straight through once handed over
    assert target.seen[-1] == ("after", None)


def test_without_a_request_entries_are_written_after_the_hold(monkeypatch):
    monkeypatch.setattr(deferred, "HOLD_SECONDS", 0.05)
    target = Recorded()
    handler = held_by(lambda: target)
    log(handler, "listing the nodes failed")
    wait_for(lambda: target.seen == [("listing the nodes failed", None)])


def test_flush_writes_the_held_entries_at_once_and_nothing_is_imported_without_entries():
    made: list[Recorded] = []

    def make() -> Recorded:
        made.append(Recorded())
        return made[-1]

    handler = held_by(make)
    handler.flush()
    assert made == []
    log(handler, "shutting down")
    handler.flush()
    assert [target.seen for target in made] == [[("shutting down", None)]]


def test_a_library_that_fails_to_import_leaves_the_entries_on_stderr(capfd):
    def broken() -> logging.Handler:
        raise ImportError("No module named 'grpc'")

    handler = held_by(broken)
    log(handler, "listed 5 nodes")
    handler.flush()
    err = capfd.readouterr().err
    assert "google-cloud-logging unavailable: ImportError" in err and "listed 5 nodes" in err


def test_setup_on_google_cloud_hands_over_to_the_structured_handler_with_the_trace(monkeypatch):
    for name, value in {**CLOUD_RUN, "GOOGLE_CLOUD_PROJECT": PROJECT}.items():
        monkeypatch.setenv(name, value)
    stream = io.StringIO()
    extender.logs.setup_logging(stream)
    logger = logging.getLogger("extender")
    logger.warning("the Kubernetes API did not list the nodes within %g s of start-up", 10)
    with flask.Flask(__name__).test_request_context(headers={"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"}):
        logger.info("decision", extra={"json_fields": {"verb": "filter"}})

    def logged():
        return [entry for entry in map(json.loads, lines_of(stream)) if "message" in entry]

    wait_for(lambda: len(logged()) == 2)  # (the library adds an entry of its own, on its instrumentation)
    startup, decision = logged()
    assert startup["severity"] == "WARNING" and "within 10 s" in startup["message"]
    assert not startup.get("logging.googleapis.com/trace")
    assert decision["verb"] == "filter"
    assert decision["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{TRACE_ID}"
    wait_for(lambda: [type(h).__name__ for h in logging.getLogger().handlers] == ["ExtenderLogHandler"])


FORK_PROBE = """
import logging, os, sys, time
from extender.logs.deferred import DeferredCloudHandler

class Slow(logging.StreamHandler):
    def __init__(self):
        time.sleep({import_seconds})  # an import under way
        super().__init__(sys.stdout)

    def format(self, record):  # who writes the entry
        return f"{{record.getMessage()}} by {{os.getpid()}}"

handler = DeferredCloudHandler(Slow, lambda target: None)
record = lambda message: logging.makeLogRecord({{"msg": message, "levelno": logging.INFO}})
handler.handle(record("held before the fork"))
{before_fork}
child = os.fork()
if child == 0:
    print(f"child {{os.getpid()}} has its handler: {{handler.target is not None}}", flush=True)
    handler.handle(record("from the child"))
    handler.flush()
    os._exit(0)
os.waitpid(child, 0)
print(f"parent {{os.getpid()}}", flush=True)
handler.flush()
handler.handle(record("from the parent"))
handler.flush()
"""


def run_fork_probe(import_seconds: float, before_fork: str) -> tuple[list[str], dict[str, str]]:
    code = textwrap.dedent(FORK_PROBE.format(import_seconds=import_seconds, before_fork=before_fork))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    lines = done.stdout.splitlines()
    pids = {line.split()[0]: line.split()[1] for line in lines if line.startswith(("child ", "parent "))}
    return lines, pids


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_entries_held_at_a_fork_are_written_once_by_the_child():
    lines, pids = run_fork_probe(0.0, "")
    child, parent = pids["child"], pids["parent"]
    assert f"child {child} has its handler: False" in lines
    assert [line for line in lines if " by " in line] == [
        f"held before the fork by {child}",
        f"from the child by {child}",
        f"from the parent by {parent}",
    ]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_fork_waits_for_an_import_under_way():
    # The import starts (a flush from another thread) and takes 0.3 s; the fork comes in the middle of it.
    start = "import threading; threading.Thread(target=handler.flush).start(); time.sleep(0.1)"
    lines, pids = run_fork_probe(0.3, start)
    parent, child = pids["parent"], pids["child"]
    assert f"child {child} has its handler: True" in lines
    assert [line for line in lines if " by " in line] == [
        f"held before the fork by {parent}",
        f"from the child by {child}",
        f"from the parent by {parent}",
    ]


def test_a_served_instance_writes_start_up_and_request_entries_once_each_request_in_its_trace(apiserver, tmp_path):
    """gunicorn's master lists the nodes and logs it; its forked worker serves and writes each entry once."""
    import requests

    from tests.conftest import serving
    from tests.test_nodesource_policy import node, node_name_filter, policy

    apiserver.set_nodes([node("node-a", {"zone": "a"}), node("node-b", {"zone": "b"})])
    path = tmp_path / "policy.yaml"
    path.write_text(policy("  kubernetes: {}\n"))
    log = tmp_path / "stderr.log"
    traceparent = f"00-{TRACE_ID}-b7ad6b7169203331-01"
    env = {**CLOUD_RUN, "GOOGLE_CLOUD_PROJECT": PROJECT, "EXTENDER_POLICY": str(path), **apiserver.environment()}
    with serving(log_path=log, **env) as url:
        answer = requests.post(
            f"{url}/filter",
            data=node_name_filter(["node-a", "node-b"]),
            headers={"Content-Type": "application/json", "traceparent": traceparent},
            timeout=10,
        )
        assert answer.json()["NodeNames"] == ["node-a"]

        def logged() -> list[dict]:
            return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]

        wait_for(lambda: any(entry.get("verb") == "filter" for entry in logged()))
    listed = [entry for entry in logged() if entry.get("message", "").startswith("listed 2 nodes")]
    [decision] = [entry for entry in logged() if entry.get("verb") == "filter"]
    assert len(listed) == 1 and not listed[0].get("logging.googleapis.com/trace")
    assert decision["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{TRACE_ID}"
    assert decision["nodesOut"] == 1
