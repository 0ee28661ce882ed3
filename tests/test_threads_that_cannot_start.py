"""A thread that cannot start (a process out of threads) never fails a request nor wedges what started it: each
starter gives back what it set aside for the thread, goes on with what it knows, says so once a minute, and the work
happens when it is next due once threads start again (``extender.background``)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from extender import background, read_deadline
from extender.kube import allocatable as allocatable_module
from extender.kube import client_from_settings
from extender.kube.allocatable import NodeAllocatable
from extender.kube.bound_pods import PodWatch
from extender.logs.deferred import DeferredCloudHandler
from extender.plugins.nodeload import NodeLoad
from extender.plugins.nodeload.auth import SecretFile
from extender.plugins.nodeload.prometheus import GoogleAuth, QueryError
from extender.settings import Settings
from testkit.fake_apiserver import node
from tests.prometheus import refreshes_landed
from tests.test_nodeload_hostile import NODES, Endpoint, endpoint, plugin_profile, pod, vector  # noqa: F401 (endpoint: the fixture prometheus is)
from tests.test_nodesource_kubernetes import Clock, source

_start = threading.Thread.start


@pytest.fixture
def refused(monkeypatch) -> set[str]:
    """Names of the threads that cannot start while the test says so, as a process out of threads refuses them."""
    names: set[str] = set()

    def start(thread: threading.Thread) -> None:
        if thread.name in names:
            raise RuntimeError("can't start new thread")
        _start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    monkeypatch.setattr(background, "_warned_at", {})
    return names


@pytest.fixture
def prometheus(request: pytest.FixtureRequest) -> Endpoint:
    """A Prometheus stand-in: test_nodeload_hostile's ``endpoint``."""
    served: Endpoint = request.getfixturevalue("endpoint")
    return served


def eventually(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_thread_that_cannot_start_is_said_once_a_minute_per_name(refused, caplog):
    caplog.set_level(logging.WARNING, "extender.background")
    refused.update({"one", "two"})
    assert not background.started(threading.Thread(target=lambda: None, name="one"))
    assert not background.started(threading.Thread(target=lambda: None, name="one"))
    assert not background.started(threading.Thread(target=lambda: None, name="two"))
    background._warned_at["one"] -= background.WARN_SECONDS  # a minute on (the clock itself is every thread's)
    assert not background.started(threading.Thread(target=lambda: None, name="one"))
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 3 and [message.split()[4] for message in said] == ["one", "two", "one"]
    assert all("can't start new thread" in message for message in said)
    refused.clear()
    ran = threading.Event()
    thread = threading.Thread(target=ran.set, name="one")
    assert background.started(thread)
    thread.join(5)
    assert ran.is_set()


def test_a_warm_refresh_without_a_thread_frees_its_lock_and_the_next_request_refreshes(refused, prometheus):
    prometheus.answers(vector(("a", "0.95"), ("b", "0.5"), time_=1000.0))
    clock = [1000.0]
    profile = plugin_profile(prometheus.url, clock)
    [plugin] = profile.filters
    assert profile.filter(pod(), NODES).feasible == ["b"]
    prometheus.answers(vector(("a", "0.5"), ("b", "0.95"), time_=1011.0))
    refused.add("extender-nodeload-refresh")
    clock[0] += 11  # past refreshInterval: the refresh is due, and its thread cannot start
    result = profile.filter(pod(), NODES)
    assert result.error is None and result.feasible == ["b"]  # judged on the answer at hand
    assert not plugin.loads._refreshing.locked() and prometheus.asked == 1
    refused.clear()
    gate = threading.Event()
    newer = prometheus.answer
    prometheus.answer = lambda: (gate.wait(30), newer())[1]  # the refresh held until the request has judged
    assert profile.filter(pod(), NODES).feasible == ["b"]  # this request starts the refresh, judging on the one at hand
    assert plugin.loads._refreshing.locked()  # the refresh in flight, on a thread of its own
    gate.set()
    refreshes_landed()
    assert prometheus.asked == 2 and profile.filter(pod(), NODES).feasible == ["a"]


def test_metrics_whose_threads_cannot_start_are_asked_on_the_refreshing_thread(refused, prometheus):
    prometheus.answers(vector(("a", "0.5"), time_=1000.0))
    args = {
        "prometheus": {"url": prometheus.url},
        "metrics": [
            {"name": name, "query": f"node_{name}", "nodeLabel": "node"} for name in ("cpu", "memory", "disk")
        ],
        "filter": [{"metric": name, "above": 0.9} for name in ("cpu", "memory", "disk")],
    }
    plugin = NodeLoad(NodeLoad.args_schema().load(args), clock=lambda: 1000.0)
    refused.add("extender-nodeload-query")
    snapshot = plugin.loads.snapshot(1000.0)
    assert not snapshot.failures and sorted(snapshot.answers) == ["cpu", "disk", "memory"]
    assert prometheus.asked == 3


def test_an_allocatable_list_without_a_thread_is_listed_when_next_due(refused, apiserver, monkeypatch):
    monkeypatch.setattr(allocatable_module, "RETRY_SECONDS", 0.0)
    apiserver.set_nodes([node("node-a")])
    client = client_from_settings(Settings(kubernetes=apiserver.environment()))
    assert client is not None
    lister = NodeAllocatable(client)
    refused.add("extender-allocatable")
    assert lister.current(time.monotonic() + 0.05)[0] is None
    lister.node_unknown()
    assert lister._listing is None  # none in flight: nothing waits for a thread that never ran
    refused.clear()
    eventually(lambda: (lister.current(time.monotonic() + 1)[0] or {}).get("node-a") is not None)


def test_a_pod_watch_without_a_thread_answers_and_opens_when_next_asked(refused, apiserver):
    client = client_from_settings(Settings(kubernetes=apiserver.environment()))
    assert client is not None
    watch = PodWatch(client, 600.0)
    refused.add("extender-bound-pods")
    bindings, _ = watch.bindings(time.time(), time.monotonic() + 0.05)
    assert not bindings.known
    refused.clear()

    def listed() -> bool:
        return watch.bindings(time.time(), time.monotonic() + 0.5)[0].known

    eventually(listed)


def test_a_node_list_without_a_thread_is_not_in_flight_and_the_next_allowed_one_lists(refused, apiserver):
    apiserver.set_nodes([node("node-a")])
    clock = Clock()
    nodes = source(apiserver.environment(), clock=clock)
    refused.add("extender-node-list")
    assert nodes.start() is None and nodes._refreshing is None
    refused.clear()
    clock.now += 3600  # past any rate limit
    first = nodes.start()
    assert first is not None and [node.name for node in first.result(timeout=5).nodes.values()] == ["node-a"]


def test_a_secret_file_without_a_thread_fails_this_query_and_is_read_at_the_next(refused, tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret")
    secret = SecretFile(str(path), "prometheus.tokenFile")
    refused.add("nodeload-secret-file")
    with pytest.raises(QueryError, match=r"prometheus\.tokenFile"):
        secret.value(0.05)
    refused.clear()
    assert secret.value(5.0) == b"s3cret"


def test_google_credentials_without_a_thread_fail_this_query_saying_so(refused):
    auth = GoogleAuth()
    refused.add("nodeload-credentials")
    with pytest.raises(QueryError, match="no thread could be started"):
        auth.authorization(1.0)
    assert auth._finding is None and not auth._lock.locked()


def test_an_alarm_armed_while_the_watchdog_cannot_start_goes_off_once_it_starts(refused, monkeypatch):
    monkeypatch.setattr(read_deadline, "_watchdog_pid", None)  # as in a worker whose watchdog has not started yet
    went_off = threading.Event()
    refused.add("read-deadline")
    first = read_deadline.arm_action(went_off.set, 0.01)
    refused.clear()
    second = read_deadline.arm_action(lambda: None, 60.0)
    assert went_off.wait(5) and read_deadline.disarm(first)
    read_deadline.disarm(second)


def test_held_log_entries_wait_for_an_importer_thread_that_cannot_start(refused):
    written: list[str] = []

    class Target(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            written.append(record.getMessage())

    handler = DeferredCloudHandler(Target, lambda target: None)
    refused.add("extender-cloud-logging")
    handler.handle(logging.makeLogRecord({"name": "extender", "levelno": logging.INFO, "msg": "first"}))
    handler.flush()  # no importer to wait for, and no error
    assert written == [] and handler._importer is None
    refused.clear()
    handler.handle(logging.makeLogRecord({"name": "extender", "levelno": logging.INFO, "msg": "second"}))
    handler.flush()
    eventually(lambda: written == ["first", "second"])
