"""NodeLoad against a Prometheus endpoint that misbehaves: answers that are not usable, too large, too slow.

A stand-in server on loopback answers what no real Prometheus would (the real
one is in tests/test_nodeload_prometheus.py). Whatever it does, no node is
judged on it: each node lacks facts and the failurePolicy decides, one WARNING
per refresh says why, and the request is answered within the deadline.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.framework.args import loading_for
from extender.framework.profile import Profile, ScorePluginEntry
from extender.framework.status import Code
from extender.plugins import NodeLoad
from extender.plugins.nodeload import answers, prometheus
from extender.settings import Settings
from testkit.loopback import Loopback, QuietHandler
from tests.plugin_helpers import node, pod

NODES = [node("a"), node("b")]


def vector(*samples: tuple[str, Any], time_: float | None = None) -> dict[str, Any]:
    at = time.time() if time_ is None else time_
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {"node": name}, "value": [at, value]} for name, value in samples]},
    }


class Endpoint:
    """Answers each query with what ``answer`` returns: (status, headers, body chunks, seconds between chunks)."""

    def __init__(self) -> None:
        self.answer: Callable[[], tuple[int, dict[str, str], list[bytes], float]] = lambda: (200, {}, [b""], 0.0)
        self.asked = 0
        endpoint = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                endpoint.asked += 1
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
            "answered 422 Unprocessable Entity: execution: query timed out in expression evaluation",
        ),
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, 200, "the query failed: bad_data: parse error"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, 200, "returns a matrix, not an instant vector"),
        ({"status": "success", "data": {"resultType": "vector"}}, 200, "the answer has no data.result list"),
        ({"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "0.5"]}]}}, 200, "a series has no metric labels"),
        (vector(("a", 0.5)), 200, "a sample's value is not a string as Prometheus writes them: 0.5"),
        (vector(("a", "half")), 200, "a sample's value is not a number: half"),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"node": "a"}, "value": ["now", "0.5"]}]}},
            200,
            "a sample's time is not a number: now",
        ),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"node": "a"}, "value": [1]}]}},
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
    clock[0] += 6  # a refresh: asked again, one warning again
    profile.filter(pod(), NODES)
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
    assert result.observed["NodeLoad"]("a") == {"cpu": {"value": 0.5, "ageSeconds": 0.0}}
