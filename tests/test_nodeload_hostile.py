"""NodeLoad against a Prometheus endpoint that misbehaves: answers that are not usable, too large, too slow.

A stand-in server on loopback answers what no real Prometheus would (the real
one is in tests/test_nodeload_prometheus.py). Whatever it does, no node is
judged on it: each node lacks facts and the failurePolicy decides, one WARNING
per refresh says why, and the request is answered within the deadline. A
bearer token it echoes is quoted nowhere; a forked worker does not ask on its
parent's connections.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Any

import pytest

from extender.framework.args import loading_for
from extender.framework.profile import Profile, ScorePluginEntry
from extender.framework.status import Code
from extender.plugins import NodeLoad
from extender.plugins.nodeload import answers, prometheus
from extender.plugins.nodeload.auth import BEARER, Credentials, PrometheusAuth
from extender.settings import Settings
from testkit.loopback import Loopback, QuietHandler
from tests.plugin_helpers import node, pod
from tests.prometheus import refreshes_landed

NODES = [node("a"), node("b")]


def vector(*samples: tuple[str, Any], time_: float | None = None) -> dict[str, Any]:
    at = time.time() if time_ is None else time_
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {"node": name}, "value": [at, value]} for name, value in samples],
        },
    }


# How long a stand-in drips a head: far past a refresh's deadline, so that only a client bounded per read waits it out.
DRIP_SECONDS = 3.0


class Endpoint:
    """Answers each query with what ``answer`` returns: (status, headers, body chunks, seconds between chunks); or,
    with ``raw`` set, writes what it makes of the query's Authorization header (``start``, then ``unit`` every 0.05 s
    for DRIP_SECONDS) and hangs up. Keeps connections alive, and counts them."""

    def __init__(self) -> None:
        self.answer: Callable[[], tuple[int, dict[str, str], list[bytes], float]] = lambda: (200, {}, [b""], 0.0)
        self.raw: Callable[[str], tuple[bytes, bytes]] | None = None
        self.asked = 0
        self.connections: set[int] = set()
        endpoint = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                endpoint.asked += 1
                endpoint.connections.add(self.client_address[1])
                if endpoint.raw is not None:
                    return self.write_raw(*endpoint.raw(self.headers.get("Authorization", "")))
                status, headers, chunks, pause = endpoint.answer()
                self.send_response(status)
                for name, value in {"Content-Length": str(sum(map(len, chunks))), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        time.sleep(pause)
                except OSError:
                    pass  # the client hung up: what a deadline does

            def write_raw(self, start: bytes, unit: bytes) -> None:
                self.close_connection = True
                ends = time.monotonic() + DRIP_SECONDS
                try:
                    self.wfile.write(start)
                    while unit and time.monotonic() < ends:
                        time.sleep(0.05)
                        self.wfile.write(unit)
                except OSError:
                    pass

        self.served = Loopback(Handler)
        self.url = self.served.url

    def answers(self, document: Any, status: int = 200) -> None:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.answer = lambda: (status, {"Content-Type": "application/json"}, [body], 0.0)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    served = Endpoint()
    yield served
    served.served.close()


def plugin_profile(url: str, clock: list[float], failure_open: bool = False, http_timeout: float = 5.0) -> Profile:
    args = {
        "prometheus": {"url": url},
        "metrics": [{"name": "cpu", "query": "node_load", "nodeLabel": "node"}],
        "refreshInterval": "10s",
        "filter": [{"metric": "cpu", "above": 0.9}],
    }
    with loading_for(Settings(http_timeout=http_timeout)):
        plugin = NodeLoad(NodeLoad.args_schema().load(args), clock=lambda: clock[0])
    return Profile("default", filters=[plugin], scores=[ScorePluginEntry(plugin, 1)], fail_open=failure_open)


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "extender.nodeload"]


@pytest.mark.parametrize(
    ("document", "status", "problem"),
    [
        (b"<html>busy</html>", 200, "the answer is not JSON: <html>busy</html>"),
        ([1, 2], 200, "the answer is not a JSON object"),
        (
            {"status": "error", "errorType": "execution", "error": "query timed out in expression evaluation"},
            422,
            # The reason phrase as this Python's http.server writes it (3.13 says Unprocessable Content).
            f"answered 422 {HTTPStatus(422).phrase}: execution: query timed out in expression evaluation",
        ),
        (
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            200,
            "the query failed: bad_data: parse error",
        ),
        (
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            200,
            "returns a matrix, not an instant vector",
        ),
        ({"status": "success", "data": {"resultType": "vector"}}, 200, "the answer has no data.result list"),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "0.5"]}]}},
            200,
            "a series has no metric labels",
        ),
        (vector(("a", 0.5)), 200, "a sample's value is not a string as Prometheus writes them: 0.5"),
        (vector(("a", "half")), 200, "a sample's value is not a number: half"),
        (
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {"node": "a"}, "value": ["now", "0.5"]}]},
            },
            200,
            "a sample's time is not a number: now",
        ),
        (
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {"node": "a"}, "value": [1]}]},
            },
            200,
            "a series has no [time, value] sample",
        ),
        (b"", 503, "answered 503 Service Unavailable: (no body)"),
    ],
)
def test_an_answer_that_cannot_be_used_leaves_every_node_without_facts_and_says_why_once(
    endpoint, caplog, document, status, problem
):
    endpoint.answers(document, status)
    clock = [1000.0]
    profile = plugin_profile(endpoint.url, clock)
    result = profile.filter(pod(), NODES)
    # Not one node can be judged: the answer is the Error saying why (failurePolicy Fail).
    assert result.feasible == [] and result.error is not None and problem in result.error.reason
    assert result.error.reason.startswith("NodeLoad: no cpu answer from Prometheus yet (its last refresh failed: ")
    [warning] = warnings(caplog)
    assert problem in warning.json_fields["problem"] and warning.levelno == logging.WARNING
    clock[0] += 5  # within refreshInterval: the same snapshot, no new query and no new warning
    profile.filter(pod(), NODES)
    assert endpoint.asked == 1 and len(warnings(caplog)) == 1
    clock[0] += 6  # a refresh, on a thread of its own: asked again, one warning again
    profile.filter(pod(), NODES)
    refreshes_landed()
    assert endpoint.asked == 2 and len(warnings(caplog)) == 2


def test_an_answer_over_the_size_cap_is_not_read(endpoint, caplog, monkeypatch):
    monkeypatch.setattr(prometheus, "MAX_ANSWER_BYTES", 1000)
    endpoint.answers(vector(*((f"node-{index}", "0.5") for index in range(100))))
    result = plugin_profile(endpoint.url, [1000.0], failure_open=True).filter(pod(), NODES)
    assert result.feasible == ["a", "b"] and set(result.skipped) == {"a", "b"}  # Ignore: passed, noted
    assert "the answer is larger than 1000 bytes: not read" in warnings(caplog)[0].json_fields["problem"]


def test_an_answer_with_more_series_than_the_cap_is_not_used(endpoint, caplog, monkeypatch):
    monkeypatch.setattr(answers, "MAX_SERIES", 3)
    endpoint.answers(vector(("a", "0.1"), ("b", "0.2"), ("c", "0.3"), ("d", "0.4")))
    plugin_profile(endpoint.url, [1000.0], failure_open=True).filter(pod(), NODES)
    assert "the answer has 4 series, more than 3" in warnings(caplog)[0].json_fields["problem"]


@pytest.mark.parametrize("how", ["stalls before answering", "drips its answer"])
def test_a_slow_endpoint_costs_the_request_at_most_its_deadline(endpoint, caplog, how):
    body = json.dumps(vector(("a", "0.5"))).encode()
    if how == "stalls before answering":
        endpoint.answer = lambda: (time.sleep(3), (200, {}, [body], 0.0))[1]
    else:  # a byte at a time, each well inside any socket timeout
        endpoint.answer = lambda: (200, {}, [body[index : index + 1] for index in range(len(body))], 0.05)
    profile = plugin_profile(endpoint.url, [1000.0], http_timeout=1.0)  # a refresh may take 0.4 s
    started = time.monotonic()
    result = profile.filter(pod(), NODES)
    assert time.monotonic() - started < 0.9
    assert result.error is not None and "no answer within 0.4 s" in result.error.reason


def test_a_warm_refresh_never_holds_a_request_and_one_after_max_age_idle_refreshes_first(endpoint):
    gate = threading.Event()
    endpoint.answers(vector(("a", "0.95"), ("b", "0.5"), time_=1000.0))
    clock = [1000.0]
    profile = plugin_profile(endpoint.url, clock, http_timeout=20.0)  # a refresh may take 8 s
    [plugin] = profile.filters
    assert profile.filter(pod(), NODES).feasible == ["b"]  # cold: it waited for the first answer
    newer = json.dumps(vector(("a", "0.5"), ("b", "0.95"), time_=1011.0)).encode()
    endpoint.answer = lambda: (gate.wait(30), (200, {}, [newer], 0.0))[1]
    clock[0] += 11  # past refreshInterval: the refresh starts, and hangs until the gate opens
    assert profile.filter(pod(), NODES).feasible == ["b"]  # judged on the answer at hand, at once
    assert plugin.loads._refreshing.locked()  # the refresh still in flight, on a thread of its own
    gate.set()
    refreshes_landed()
    assert endpoint.asked == 2 and profile.filter(pod(), NODES).feasible == ["a"]  # what it brought
    # An instance idle for maxAge (180 s) has nothing to judge on: the request refreshes first, and waits for it.
    endpoint.answers(vector(("a", "0.95"), ("b", "0.5"), time_=1200.0))
    clock[0] = 1200.0
    assert profile.filter(pod(), NODES).feasible == ["b"]
    assert not plugin.loads._refreshing.locked() and endpoint.asked == 3


@pytest.mark.parametrize(
    ("start", "unit"),
    [
        (b"HTTP/1.1 200 ", b"O"),
        (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Drip: ", b"x"),
        (b"", b"HTTP/1.1 100 Continue\r\n\r\n"),
    ],
    ids=["status line", "headers", "100 Continue heads"],
)
def test_an_endpoint_dripping_its_head_is_cut_off_at_the_refresh_s_deadline(endpoint, start, unit):
    endpoint.raw = lambda authorization: (start, unit)  # each piece well inside any socket timeout
    profile = plugin_profile(endpoint.url, [1000.0], http_timeout=1.0)  # a refresh may take 0.4 s
    started = time.monotonic()
    result = profile.filter(pod(), NODES)
    assert time.monotonic() - started < 0.9
    assert result.error is not None and "no answer within 0.4 s" in result.error.reason


TOKEN = "ya29.a0AfB_byStandInAccessToken-0123456789abcdefghijklmnopqrstuvwxyz"


def static_token() -> Credentials:
    """A bearer token from a variable: the header it gives is what the endpoint echoes."""
    return Credentials(PrometheusAuth(BEARER, token_env="PROMETHEUS_TOKEN"), {"PROMETHEUS_TOKEN": TOKEN})


def secrets_in(text: str) -> list[str]:
    """The token in every form a message could carry it: whole, in 16-character pieces, base64-encoded (alone, or
    within the whole header)."""
    forms = [TOKEN, base64.b64encode(TOKEN.encode()).decode(), base64.b64encode(f"Bearer {TOKEN}".encode()).decode()]
    pieces = {form[at : at + 16] for form in forms for at in range(len(form) - 15)}
    return sorted(piece for piece in pieces if piece in text)


def _answer(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


@pytest.mark.parametrize(
    ("echo", "problem"),
    [
        (
            lambda said: _answer(
                f"401 Unauthorized {said}",
                json.dumps({"status": "error", "errorType": "unauthenticated", "error": f"bad {said}"}).encode(),
            ),
            "answered 401 Unauthorized Bearer <redacted>: unauthenticated: bad Bearer <redacted>",
        ),
        (
            lambda said: _answer(
                "403 Forbidden",
                f"{said} {said[-20:]} {base64.b64encode(said.encode()).decode()}".encode(),
                "text/plain",
            ),
            "answered 403 Forbidden: Bearer <redacted> <redacted> <redacted>",
        ),
        (
            lambda said: _answer("200 OK", f"<html>{said}</html>".encode(), "text/html"),
            "with the request's bearer token",
        ),
        (
            lambda said: _answer("200 OK", json.dumps(vector((said, "0.5"))).encode()),
            "with the request's bearer token",
        ),
        (
            lambda said: f"HTTP/{said.removeprefix('Bearer ')} 200 OK\r\n\r\n".encode(),
            "gave a broken HTTP answer: <redacted>",
        ),
        (lambda said: f"{said} 200 OK\r\n\r\n".encode(), "gave a broken HTTP answer"),
    ],
    ids=["401 reason and error", "403 text, piece, base64", "200 HTML", "200 JSON", "HTTP version", "status line"],
)
def test_a_bearer_token_the_endpoint_echoes_is_in_no_message(endpoint, caplog, echo, problem):
    endpoint.raw = lambda authorization: (echo(authorization), b"")
    client = prometheus.Prometheus(endpoint.url, static_token())
    with pytest.raises(prometheus.QueryError) as raised:
        client.query("node_load", 2.0)
    message = str(raised.value)
    assert message.startswith(endpoint.url) and problem in message
    assert secrets_in(message) == [] and secrets_in(caplog.text) == []


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_worker_asks_on_connections_of_its_own(endpoint):
    """functions-framework builds the function in gunicorn's master, then forks the worker: connections the master
    kept are the master's, never read by both."""
    endpoint.answers(vector(("a", "0.5")))
    client = prometheus.Prometheus(endpoint.url)
    client.query("node_load", 2.0)  # before the fork: one connection, kept
    assert endpoint.asked == 1 and len(endpoint.connections) == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker
        try:
            os.write(write, client.query("node_load", 2.0))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answered:
        assert json.loads(answered.read())["data"]["result"][0]["metric"] == {"node": "a"}
    assert os.waitpid(pid, 0)[1] == 0
    assert endpoint.asked == 2 and len(endpoint.connections) == 2  # the worker's own
    client.query("node_load", 2.0)
    assert endpoint.asked == 3 and len(endpoint.connections) == 2  # the master's, kept


# Forking while a thread runs is the case under test (Python 3.12 warns of it).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_worker_refreshes_though_a_refresh_was_in_flight_at_the_fork(endpoint):
    gate = threading.Event()
    endpoint.answers(vector(("a", "0.95"), ("b", "0.5"), time_=1000.0))
    clock = [1000.0]
    profile = plugin_profile(endpoint.url, clock, http_timeout=20.0)
    [plugin] = profile.filters
    assert profile.filter(pod(), NODES).feasible == ["b"]
    newer = json.dumps(vector(("a", "0.5"), ("b", "0.95"), time_=1011.0)).encode()
    endpoint.answer = lambda: (gate.wait(30), (200, {}, [newer], 0.0))[1]
    clock[0] += 11
    profile.filter(pod(), NODES)  # a refresh starts, and hangs: its thread holds the lock
    assert plugin.loads._refreshing.locked()
    endpoint.answers(newer)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: no refresh thread here, so its own refresh starts and lands
        try:
            if plugin.loads._refreshing.locked():
                os._exit(3)  # held by a thread the worker does not have: it would never refresh
            clock[0] += 11
            profile.filter(pod(), NODES)
            refreshes_landed()
            os.write(write, json.dumps(profile.filter(pod(), NODES).feasible).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answered:
        told = answered.read()
    assert os.waitpid(pid, 0)[1] == 0
    assert json.loads(told) == ["a"]
    gate.set()
    refreshes_landed()


def test_an_unreadable_ca_bundle_fails_the_query_naming_it(monkeypatch, tmp_path):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    missing = "the CA bundle .*missing.pem \\(REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE\\) cannot be loaded: "
    with pytest.raises(prometheus.QueryError, match=missing):
        prometheus.Prometheus("https://127.0.0.1:9").query("node_load", 1.0)


def test_a_redirect_is_not_followed(endpoint, caplog):
    endpoint.answer = lambda: (302, {"Location": "http://attacker.example/steal"}, [b""], 0.0)
    result = plugin_profile(endpoint.url, [1000.0]).filter(pod(), NODES)
    assert "answered 302 Found" in result.error.reason and endpoint.asked == 1


def test_nothing_listening_is_named(caplog):
    result = plugin_profile("http://127.0.0.1:9", [1000.0]).filter(pod(), NODES)
    assert "cannot reach http://127.0.0.1:9: " in result.error.reason and "Connection refused" in result.error.reason


def test_a_sample_from_the_future_counts_as_fresh(endpoint):
    """Clocks differ: a sample stamped after the request's instant is not older than maxAge."""
    endpoint.answers(vector(("a", "0.5"), ("b", "0.95"), time_=2000.0))
    result = plugin_profile(endpoint.url, [1000.0]).filter(pod(), NODES)
    assert result.feasible == ["a"] and result.rejected["b"].code is Code.UNSCHEDULABLE
    facts = result.observed["NodeLoad"]("a")["cpu"]
    assert (facts["value"], facts["ageSeconds"], facts["predicted"]) == (0.5, 0.0, 0.5)
