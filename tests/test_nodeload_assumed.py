"""Where kube-scheduler will bind a pod after prioritize (extender.verbs.assumed), served: the answer breaks a tie at
the top and sets a few runners-up a point further back, so that the pod counts where it goes from the answer on,
without waiting for its binding; the decision entry says where; a binding elsewhere moves it; without the Kubernetes
API nothing changes. A real Prometheus, the API stand-in, node-name requests."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from extender.decision_log import TOP_N
from extender.verbs.assumed import MAX_TIED
from testkit.fake_apiserver import node
from testkit.scheduling import guaranteed_pod
from tests.prometheus import METRIC
from tests.test_nodeload_herding import policy

TIED = {"node-0": 0.3, "node-1": 0.3, "node-2": 0.3, "node-3": 0.5}


def measuring(prometheus: Any, exporter: Any, loads: dict[str, float]) -> None:
    exporter.set(loads)
    prometheus.wait_until(METRIC, lambda values: values == loads)


def prioritize(client: Any, caplog: pytest.LogCaptureFixture, name: str, nodes: list[str]) -> tuple[dict, dict]:
    """Prioritize one 400m pod (a tenth of a node); its answer by node, and its decision entry."""
    body = {"Pod": guaranteed_pod(name), "Nodes": None, "NodeNames": nodes}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/prioritize", json=body)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    entries = [getattr(record, "json_fields", {}) for record in caplog.records]
    (entry,) = [entry for entry in entries if entry.get("event") == "extender.decision"]
    return {item["Host"]: item["Score"] for item in answer.get_json()}, entry


def test_a_tie_at_the_top_is_broken_and_the_pod_counts_where_the_answer_sends_it(
    prometheus, exporter, apiserver, client_factory, tmp_path, caplog
):
    measuring(prometheus, exporter, TIED)
    apiserver.set_nodes([node(name) for name in TIED])
    client = client_factory(policy(tmp_path, prometheus.url, True), **apiserver.environment())
    names = list(TIED)
    # Predicted 0.4 on the three tied nodes (measured plus the pod's own tenth): 6 each; node-3 0.6: 4.
    first, entry = prioritize(client, caplog, "first", names)
    assert first == {"node-0": 6, "node-1": 5, "node-2": 5, "node-3": 4}
    assert entry["assumedOn"] == "node-0"
    assert MAX_TIED <= TOP_N  # every node of a broken tie is among the entry's scores, as answered
    assert [(score["node"], score["score"]) for score in entry["scores"][:3]] == [
        ("node-0", 6),
        ("node-1", 5),
        ("node-2", 5),
    ]
    # The next pod, at once: the first counts on node-0 (0.5), so node-1 and node-2 tie, and node-1 takes it;
    # node-0, a runner-up now (5), gets a point less.
    second, entry = prioritize(client, caplog, "second", names)
    assert second == {"node-0": 4, "node-1": 6, "node-2": 5, "node-3": 4} and entry["assumedOn"] == "node-1"
    # The scheduler bound the first elsewhere after all: once the watch shows it, it counts there, not on node-0.
    apiserver.add_pod(guaranteed_pod("first"))
    apiserver.bind("default", "first", "node-2")
    # The watch shows it once its events arrive: waited for up to 20 s (a loaded machine), not for a count of
    # requests, whose time depends on how fast the instance answers.
    deadline = time.monotonic() + 20
    while True:
        third, entry = prioritize(client, caplog, "third", names)
        if third["node-0"] == 6 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    # node-1 (the second) and node-2 (the first) are runners-up at 5: a point less.
    assert third == {"node-0": 6, "node-1": 4, "node-2": 4, "node-3": 4} and entry["assumedOn"] == "node-0"


def test_a_few_runners_up_trail_the_best_node_by_two_points(
    prometheus, exporter, apiserver, client_factory, tmp_path, caplog
):
    """One point parts the best node from the runners-up, and kube-scheduler's own scores (which favour the node with
    fewer pods) can make that up: a few runners-up get a point less, so the pod goes where it counts."""
    loads = {"node-0": 0.2, "node-1": 0.3, "node-2": 0.3, "node-3": 0.5}
    measuring(prometheus, exporter, loads)
    apiserver.set_nodes([node(name) for name in loads])
    client = client_factory(policy(tmp_path, prometheus.url, True), **apiserver.environment())
    # Predicted with the pod's own tenth: node-0 0.3 (7), node-1 and node-2 0.4 (6), node-3 0.6 (4).
    answer, entry = prioritize(client, caplog, "ahead", list(loads))
    assert answer == {"node-0": 7, "node-1": 5, "node-2": 5, "node-3": 4} and entry["assumedOn"] == "node-0"
    assert [(score["node"], score["score"]) for score in entry["scores"][:3]] == [
        ("node-0", 7),
        ("node-1", 5),
        ("node-2", 5),
    ]


def test_many_runners_up_are_left_as_they_are(prometheus, exporter, apiserver, client_factory, tmp_path, caplog):
    """More than ``MAX_TIED`` runners-up are a large cluster's equals, of which no one takes a burst: as scored."""
    loads = {"node-0": 0.2, **{f"node-{index}": 0.3 for index in range(1, MAX_TIED + 2)}}
    measuring(prometheus, exporter, loads)
    apiserver.set_nodes([node(name) for name in loads])
    client = client_factory(policy(tmp_path, prometheus.url, True), **apiserver.environment())
    answer, entry = prioritize(client, caplog, "ahead-of-many", list(loads))
    assert answer == {"node-0": 7, **dict.fromkeys(list(loads)[1:], 6)} and entry["assumedOn"] == "node-0"


def test_a_pod_with_one_feasible_node_counts_there_from_the_filter_on(
    prometheus, exporter, apiserver, client_factory, tmp_path, caplog
):
    """kube-scheduler skips prioritize when one node is left: the filter answer is where the pod goes (NodeLoad
    filters too, and so knows what the pod asks)."""
    measuring(prometheus, exporter, TIED)
    apiserver.set_nodes([node(name) for name in TIED])
    path = policy(tmp_path, prometheus.url, True)
    document = json.loads(path.read_text())
    profile = document["profiles"][0]
    profile["plugins"]["filter"] = {"enabled": [{"name": "NodeLoad"}]}
    profile["pluginConfig"][0]["args"]["filter"] = [{"metric": "cpu", "above": 0.95}]
    path.write_text(json.dumps(document))
    client = client_factory(path, **apiserver.environment())
    body = {"Pod": guaranteed_pod("alone"), "Nodes": None, "NodeNames": ["node-1"]}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        assert client.post("/filter", json=body).get_json()["NodeNames"] == ["node-1"]
    (entry,) = [getattr(r, "json_fields", {}) for r in caplog.records if r.name == "extender.decision"]
    assert entry["assumedOn"] == "node-1"
    answer, entry = prioritize(client, caplog, "next", list(TIED))
    assert answer == {"node-0": 6, "node-1": 4, "node-2": 5, "node-3": 4} and entry["assumedOn"] == "node-0"
    # node-1 lost a point to the pod on it (LeastLoaded 50) and one as a runner-up, node-2 one to the broken tie (60).
    least_loaded = {score["node"]: score["plugins"]["NodeLoad"] for score in entry["scores"]}
    assert least_loaded == {"node-0": 60, "node-1": 50, "node-2": 60, "node-3": 40}


def test_a_tie_of_many_nodes_stands(prometheus, exporter, apiserver, client_factory, tmp_path, caplog):
    """Among so many equals no node takes a burst: the answer keeps the tie, the pod counts on the first least busy."""
    many = {f"node-{index}": 0.3 for index in range(MAX_TIED + 1)}
    measuring(prometheus, exporter, many)
    apiserver.set_nodes([node(name) for name in many])
    client = client_factory(policy(tmp_path, prometheus.url, True), **apiserver.environment())
    answer, entry = prioritize(client, caplog, "one", list(many))
    assert set(answer.values()) == {6} and entry["assumedOn"] == "node-0"
    answer, entry = prioritize(client, caplog, "two", list(many))
    # Eight tie now (node-0 holds the first): broken, and node-0, a runner-up, a point further back.
    assert answer["node-0"] == 4 and set(answer.values()) == {4, 5, 6} and entry["assumedOn"] == "node-1"


def test_without_the_kubernetes_api_the_answer_is_the_profile_s(prometheus, exporter, client_factory, tmp_path, caplog):
    measuring(prometheus, exporter, TIED)
    client = client_factory(policy(tmp_path, prometheus.url, True))
    for name in ("without-api-1", "without-api-2"):  # pods no watch of another test judged
        answer, entry = prioritize(client, caplog, name, list(TIED))
        # No allocatable without the API: judged as measured, 0.3 and 0.5.
        assert answer == {"node-0": 7, "node-1": 7, "node-2": 7, "node-3": 5} and "assumedOn" not in entry


def test_with_the_api_hung_from_the_start_the_answered_pods_still_count(
    prometheus, exporter, apiserver, client_factory, tmp_path, caplog
):
    """Never worse than measured load, the pod's own share and the pods this instance answered for: a cold instance
    whose API never answers waits once, then counts what it answered (full-node requests bring the allocatable)."""
    measuring(prometheus, exporter, TIED)
    environment = apiserver.environment()
    apiserver.hang = True
    client = client_factory(policy(tmp_path, prometheus.url, False), **environment)
    items = [node(name) for name in TIED]
    answers = []
    for name in ("hung-1", "hung-2"):
        body = {"Pod": guaranteed_pod(name), "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="extender.decision"):
            answer = client.post("/prioritize", json=body)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        (entry,) = [getattr(r, "json_fields", {}) for r in caplog.records if r.name == "extender.decision"]
        assert "NodeLoad" in entry["incomplete"]
        plugin_scores = {score["node"]: score["plugins"]["NodeLoad"] for score in entry["scores"]}
        answers.append(({item["Host"]: item["Score"] for item in answer.get_json()}, entry["assumedOn"], plugin_scores))
    # As with a healthy API: the first counts on node-0 (0.5 with the second's own tenth: LeastLoaded 50, where the
    # others score 60), so node-1 takes the next.
    least_loaded = {**dict.fromkeys(TIED, 60), "node-3": 40}
    assert answers == [
        ({"node-0": 6, "node-1": 5, "node-2": 5, "node-3": 4}, "node-0", least_loaded),
        ({"node-0": 4, "node-1": 6, "node-2": 5, "node-3": 4}, "node-1", {**least_loaded, "node-0": 50}),
    ]
