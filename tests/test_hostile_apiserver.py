"""A hostile Kubernetes API server against a real served function: bind, preempt and node lists stay bounded.

The API server (testkit.fake_apiserver with testkit.hostile_answers) drips
its status line, headers, ``100 Continue`` heads, bodies and chunks, stalls,
answers what is not HTTP or not JSON, redirects, lists tens of MB or items of
every wrong shape, and echoes the bearer token. The function runs as Cloud
Functions runs it (functions-framework under gunicorn) with the kubernetes
node source and ProtectedVictims. Whatever the API server does: bind and
preempt answer 200 within the scheduler's timeout, the worker's threads come
back to what they were, its memory stays bounded, a failed node list leaves
the previous one in service, and the log holds neither a traceback nor the
bearer token (whole, in 16-character pieces, base64 or percent-encoded).

The random rounds use a fixed seed by default, so CI is repeatable; to run longer with a new seed:

    EXTENDER_HOSTILE_SEED=random EXTENDER_HOSTILE_API_ROUNDS=500 \\
        /work/venv/bin/python -m pytest -q -p no:cacheprovider tests/test_hostile_apiserver.py
"""

from __future__ import annotations

import base64
import os
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
import requests

from testkit import hostile_answers
from testkit.fake_apiserver import TOKEN, FakeApiServer, node, pod
from tests.conftest import served_process
from tests.tally import Tally

# The scheduler's httpTimeout: every answer must come within it. Calls to the API get half of it each.
HTTP_TIMEOUT = 2.0
# gunicorn's threads serving requests in the worker.
SERVING_THREADS = 4
SEED = os.environ.get("EXTENDER_HOSTILE_SEED", "17")
ROUNDS = int(os.environ.get("EXTENDER_HOSTILE_API_ROUNDS", "45"))
NODES = [node(f"node-{index}", {"zone": "a" if index % 2 == 0 else "b"}) for index in range(8)]
VICTIMS = [pod(f"victim-{index}", f"u-victim-{index}", f"node-{index}") for index in range(8)]
PREEMPTOR = {"metadata": {"name": "high", "namespace": "default", "uid": "u-high"}, "spec": {"priority": 1000}}
POLICY = """
failurePolicy: Fail
nodeSource:
  kubernetes: {cacheTTL: 1s, maxWait: 300ms, listTimeout: 1s, minRefreshInterval: 1s}
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
    preempt: {enabled: [{name: ProtectedVictims}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args: {rules: [{name: zone-a, nodeSelector: {matchLabels: {zone: a}}}]}
  - name: ProtectedVictims
    args: {protect: [{name: system, pods: {namespaces: [kube-system]}}]}
"""
JSON = {"Content-Type": "application/json"}
# Which verb reads which resource.
VERBS = {"nodes": "filter", "pods": "preempt", "binding": "bind"}

TALLY = Tally("hostile Kubernetes API server")


class Function:
    """The served function, its worker process and a session to call it with."""

    def __init__(self, url: str, worker: int, log: Path) -> None:
        self.url = url
        self.worker = worker
        self.log = log
        self.session = requests.Session()
        self.bound = 0

    def status(self, field: str) -> int:
        """A field of the worker's /proc status: Threads, or VmRSS and VmHWM in kB."""
        for line in Path(f"/proc/{self.worker}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise KeyError(field)

    def call(self, verb: str, body: dict[str, Any]) -> tuple[int, Any, float]:
        started = time.monotonic()
        response = self.session.post(
            f"{self.url}/{verb}", data=orjson.dumps(body), headers=JSON, timeout=HTTP_TIMEOUT * 5
        )
        seconds = time.monotonic() - started
        return response.status_code, response.json(), seconds

    def threads(self, at_most: int = 0, within: float = 0.3) -> int:
        """The worker's thread count once it is ``at_most`` or ``within`` seconds have passed."""
        deadline = time.monotonic() + within
        while (count := self.status("Threads")) > at_most and time.monotonic() < deadline:
            time.sleep(0.05)
        return count


def bind_args(apiserver: FakeApiServer, function: Function) -> dict[str, Any]:
    function.bound += 1
    name = f"bind-{function.bound}"
    apiserver.add_pod(pod(name, f"u-{name}", ""))
    return {"PodName": name, "PodNamespace": "default", "PodUID": f"u-{name}", "Node": "node-0"}


def preempt_args() -> dict[str, Any]:
    candidates = {
        f"node-{index}": {"Pods": [{"UID": f"u-victim-{index}"}], "NumPDBViolations": 0} for index in range(8)
    }
    return {"Pod": PREEMPTOR, "NodeNameToVictims": None, "NodeNameToMetaVictims": candidates}


def filter_args(*extra: str) -> dict[str, Any]:
    return {"Pod": PREEMPTOR, "Nodes": None, "NodeNames": [f"node-{index}" for index in range(8)] + list(extra)}


def args_for(verb: str, apiserver: FakeApiServer, function: Function) -> dict[str, Any]:
    if verb == "bind":
        return bind_args(apiserver, function)
    return preempt_args() if verb == "preempt" else filter_args()


def check_answer(verb: str, status: int, answer: Any) -> None:
    """HTTP 200 with the verb's shape: an Error names the problem, never an internal error."""
    assert status == 200, answer
    error = answer.get("Error") or ""
    assert not error.startswith("internal error"), error
    assert "\n" not in error
    if verb == "bind":
        assert set(answer) == {"Error"}
    elif verb == "preempt":
        assert isinstance(answer["NodeNameToMetaVictims"], dict)
        assert set(answer["NodeNameToMetaVictims"]) <= {f"node-{index}" for index in range(8)}
    else:
        assert set(answer["NodeNames"] or []) <= {"node-0", "node-2", "node-4", "node-6"}


def secrets_in(text: str) -> list[str]:
    """The bearer token in every form a log line could carry it: whole, in 16-character pieces, encoded."""
    forms = [TOKEN, quote(TOKEN, safe=""), base64.b64encode(TOKEN.encode()).decode()]
    pieces = {form[at : at + 16] for form in forms for at in range(len(form) - 15)}
    return sorted(piece for piece in pieces if piece in text)


@pytest.fixture(scope="module")
def apiserver(test_ca: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeApiServer]:
    with FakeApiServer.serving(test_ca, tmp_path_factory.mktemp("apiserver")) as server:
        server.set_nodes(NODES)
        server.set_pods(VICTIMS)
        yield server


@pytest.fixture(scope="module")
def function(
    apiserver: FakeApiServer, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Function]:
    directory = tmp_path_factory.mktemp("function")
    (directory / "policy.yaml").write_text(POLICY)
    log = directory / "function.log"
    env = apiserver.environment() | {
        "EXTENDER_POLICY": str(directory / "policy.yaml"),
        "EXTENDER_HTTP_TIMEOUT": f"{int(HTTP_TIMEOUT * 1000)}ms",
        "GUNICORN_LOG_LEVEL": "info",
        "THREADS": str(SERVING_THREADS),
    }
    hostile_answers.prepare()  # the large bodies, built before any answer is timed
    with served_process(log, **env) as (url, process):
        worker = int(Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()[0])
        called = Function(url, worker, log)
        for verb in ("filter", "preempt", "bind"):  # every path warm: imports, the first list, the read deadlines
            status, answer, _ = called.call(verb, args_for(verb, apiserver, called))
            check_answer(verb, status, answer)
        # gunicorn starts its serving threads as requests overlap, up to THREADS: all of them now, so that the
        # worker's thread count changes only by threads the function itself starts.
        apiserver.hostile = {"pods": "stall before head"}
        body = orjson.dumps(preempt_args())

        def post(_: int) -> int:
            return requests.post(f"{url}/preempt", data=body, headers=JSON, timeout=HTTP_TIMEOUT * 5).status_code

        with ThreadPoolExecutor(SERVING_THREADS * 2) as overlapping:
            assert set(overlapping.map(post, range(SERVING_THREADS * 2))) == {200}
        apiserver.hostile = {}
        yield called
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "unexpected failure" not in text and "Exception on" not in text
    assert secrets_in(text) == []
    TALLY.print_report(request)


def against(apiserver: FakeApiServer, function: Function, verb: str, shape: str) -> dict[str, Any]:
    """``verb``'s answer while the resource it reads answers in ``shape``: 200, in the verb's form, in time."""
    resource = next(resource for resource, reader in VERBS.items() if reader == verb)
    apiserver.hostile = {resource: shape}
    try:
        status, answer, seconds = function.call(verb, args_for(verb, apiserver, function))
    finally:
        apiserver.hostile = {}
    TALLY.add(f"{verb}, {shape}", status)
    check_answer(verb, status, answer)
    assert seconds < HTTP_TIMEOUT, (shape, seconds)
    return answer


def test_bind_against_a_dripping_head_answers_within_the_schedulers_timeout(apiserver, function):
    """Each byte of the status line, of the headers or of endless 100 Continue heads comes inside a read timeout."""
    for shape in ("drip status line", "drip headers", "drip 100 continue", "stall before head"):
        answer = against(apiserver, function, "bind", shape)
        assert f"did not answer POST /api/v1/namespaces/default/pods/bind-{function.bound}/binding" in answer["Error"]


def test_preempts_against_dripping_pod_lists_leave_no_threads_behind(apiserver, function):
    baseline = function.threads()
    for shape in ("drip status line", "drip headers", "drip 100 continue", "drip body", "drip chunks"):
        # failurePolicy Fail: no candidate whose victims are unknown
        assert against(apiserver, function, "preempt", shape)["NodeNameToMetaVictims"] == {}
    # Each call's socket is shut down at its deadline: the threads that listed are gone right after.
    assert function.threads(at_most=baseline, within=3.0) <= baseline


def test_a_server_that_echoes_the_bearer_token_never_gets_it_answered_or_logged(apiserver, function):
    for verb in sorted(VERBS.values()):
        for shape in ("token echoed in a Status", "token echoed as text"):
            answer = against(apiserver, function, verb, shape)
            assert secrets_in(orjson.dumps(answer).decode()) == []
    log = function.log.read_text(errors="replace")
    assert secrets_in(log) == [] and "Bearer <redacted>" in log


def test_huge_pod_lists_leave_memory_bounded(apiserver, function):
    """31 MiB per candidate, eight candidates: refused unread; 15 MiB ones read up to the request's budget."""
    before = function.status("VmRSS")
    for shape in ("31 MiB list", "31 MiB list, chunked", "15 MiB list", "15 MiB of tiny items", "15 MiB of labels"):
        against(apiserver, function, "preempt", shape)
    grown = (function.status("VmHWM") - before) / 1024
    assert grown < 300, f"the worker's peak memory grew by {grown:.0f} MB"


def test_a_wedged_node_list_keeps_the_previous_one_and_new_nodes_come_soon_after(apiserver, function):
    time.sleep(1.1)  # past cacheTTL: the next request starts a refresh
    apiserver.hostile = {"nodes": "drip status line"}
    apiserver.add_node(node("node-new", {"zone": "a"}))
    try:
        status, answer, seconds = function.call("filter", filter_args("node-new"))
        check_answer("filter", status, answer)
        assert answer["NodeNames"] == ["node-0", "node-2", "node-4", "node-6"]  # the known nodes, from the last list
        assert "node-new" in answer["FailedNodes"] and seconds < HTTP_TIMEOUT
        health = function.session.get(f"{function.url}/healthz", timeout=5).json()
        assert health["nodeSource"]["healthy"] and health["nodeSource"]["nodes"] == len(NODES)
    finally:
        apiserver.hostile = {}
    # The wedged list ends at its deadline; the next one starts at most minRefreshInterval after it began.
    began = time.monotonic()
    while time.monotonic() - began < 5:
        status, answer, _ = function.call("filter", filter_args("node-new"))
        if "node-new" in (answer["NodeNames"] or []):
            break
        time.sleep(0.1)
    assert "node-new" in (answer["NodeNames"] or []), answer
    assert time.monotonic() - began < 3.0
    apiserver.set_nodes(NODES)


def test_randomly_drawn_hostile_answers(apiserver, function):
    seed = random.randrange(1 << 32) if SEED == "random" else int(SEED)
    TALLY.title = f"hostile Kubernetes API server (seed {seed}, {ROUNDS} random rounds)"
    rng = random.Random(seed)
    shapes = sorted(hostile_answers.SHAPES)
    threads = function.threads()
    rss = function.status("VmRSS")
    slowest = 0.0
    for _ in range(ROUNDS):
        resources = rng.sample(sorted(VERBS), rng.choice([1, 1, 2]))
        apiserver.hostile = {resource: rng.choice(shapes) for resource in resources}
        apiserver.stall_handshake = rng.random() < 0.05
        verb = VERBS[rng.choice(resources)] if rng.random() < 0.8 else rng.choice(sorted(VERBS.values()))
        status, answer, seconds = function.call(verb, args_for(verb, apiserver, function))
        TALLY.add(f"{verb}, {' + '.join(apiserver.hostile.values())}", status)
        check_answer(verb, status, answer)
        assert seconds < HTTP_TIMEOUT, (apiserver.hostile, verb, seconds)
        slowest = max(slowest, seconds)
    apiserver.hostile, apiserver.stall_handshake = {}, False
    after = function.threads(at_most=threads, within=3.0)
    grown = (function.status("VmHWM") - rss) / 1024
    TALLY.title += f"; slowest answer {slowest:.2f} s, worker threads {threads} -> {after}, peak RSS +{grown:.0f} MB"
    assert after <= threads
    assert grown < 300, f"the worker's peak memory grew by {grown:.0f} MB"
    # And the API back to normal: answers as before.
    for verb in ("filter", "preempt", "bind"):
        status, answer, _ = function.call(verb, args_for(verb, apiserver, function))
        check_answer(verb, status, answer)
        assert not answer.get("Error"), answer
