"""The herding burst: 8 nodes of 4 CPU whose measured loads do not move, 32 Guaranteed pods of 400m placed one after
another by a faithful stand-in for kube-scheduler (testkit.scheduling) with NodeLoad LeastLoaded as the extender's
only score (weight 5), the in-tree resource scores beside it, a real Prometheus, and the API stand-in binding.

Each pod adds 0.1 to its node's load once it runs; the metric shows none of them during the burst. Without the
pods bound since the sample NodeLoad sends the pods to the nodes that look least loaded until they are far over
full; with them (predicted load) it fills the nodes as live metrics would. Checked for node names and full nodes,
bound by the scheduler (the API's binding subresource, a little after the next pod's cycle began) or by the
function (bindVerb), and for a burst at the issue's pace (two pods a second).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from testkit.fake_apiserver import FakeApiServer, node
from testkit.scheduling import Scheduler, guaranteed_pod
from tests.prometheus import METRIC

MEASURED = {f"node-{index}": load for index, load in enumerate([0.05, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60])}
PODS = 32
SHARE = 0.1  # 400m of 4 CPU


def policy(directory: Path, url: str, node_names: bool) -> Path:
    args = {
        "prometheus": {"url": url, "auth": "none"},
        "metrics": [{"name": "cpu", "query": METRIC, "nodeLabel": "node"}],
        "refreshInterval": "1s",
        "maxAge": "1m",
        "score": {"metric": "cpu", "strategy": "LeastLoaded"},
    }
    document = {
        "nodeCacheCapable": node_names,
        "profiles": [
            {
                "name": "default",
                "plugins": {"score": {"enabled": [{"name": "NodeLoad", "weight": 1}]}},
                "pluginConfig": [{"name": "NodeLoad", "args": args}],
            }
        ],
    }
    path = directory / "policy.json"
    path.write_text(json.dumps(document))
    return path


def burst(
    client: Any | None,
    apiserver: FakeApiServer,
    *,
    node_names: bool,
    bind_verb: bool,
    pace: float = 0.0,
    in_tree: bool = True,
) -> dict[str, int]:
    """Pods per node after the burst, scheduled through ``client`` (None: no extender)."""
    nodes = [node(name) for name in MEASURED]
    apiserver.set_nodes(nodes)

    def call(verb: str, payload: dict[str, Any]) -> Any:
        if client is None:  # no extender: every node passes, every score is equal
            names = payload["NodeNames"] or [item["metadata"]["name"] for item in payload["Nodes"]["items"]]
            if verb == "filter":
                return {"NodeNames": names, "Nodes": payload["Nodes"], "Error": ""}
            return [{"Host": name, "Score": 0} for name in names]
        answer = client.post(f"/{verb}", json=payload)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        return answer.get_json()

    def bind(pod: dict[str, Any], node_name: str) -> None:
        meta = pod["metadata"]
        if bind_verb and client is not None:
            args = {
                "PodName": meta["name"],
                "PodNamespace": meta["namespace"],
                "PodUID": meta["uid"],
                "Node": node_name,
            }
            assert client.post("/bind", json=args).get_json()["Error"] == ""
        else:
            apiserver.bind(meta["namespace"], meta["name"], node_name)

    scheduler = Scheduler(nodes, call, weight=5, node_names=node_names, in_tree=in_tree, bind=bind)
    for index in range(PODS):
        pod = guaranteed_pod(f"burst-{index}")
        apiserver.add_pod(pod)
        assert scheduler.schedule(pod) is not None
        time.sleep(pace)
    scheduler.wait_for_bindings()
    return {state.name: len(state.pods) for state in scheduler.nodes}


def predicted(placed: dict[str, int]) -> dict[str, float]:
    return {name: round(MEASURED[name] + SHARE * count, 2) for name, count in placed.items()}


@pytest.fixture
def loads(prometheus, exporter):
    exporter.set(MEASURED)
    prometheus.wait_until(METRIC, lambda values: values == MEASURED)
    return prometheus


def test_without_an_extender_every_node_gets_four(apiserver):
    placed = burst(None, apiserver, node_names=True, bind_verb=False)
    assert list(placed.values()) == [4] * 8
    assert max(predicted(placed).values()) == 1.0


@pytest.mark.parametrize("bind_verb", [False, True], ids=["scheduler binds", "bindVerb"])
@pytest.mark.parametrize("node_names", [True, False], ids=["node names", "full nodes"])
def test_predicted_load_holds_through_the_burst(loads, apiserver, client_factory, tmp_path, node_names, bind_verb):
    client = client_factory(policy(tmp_path, loads.url, node_names), **apiserver.environment())
    placed = burst(client, apiserver, node_names=node_names, bind_verb=bind_verb)
    after = predicted(placed)
    print(f"pods per node {list(placed.values())}, predicted {list(after.values())}")
    assert sum(placed.values()) == PODS
    assert max(after.values()) <= 0.85, (placed, after)
    # Water-filling: the least loaded nodes take the most pods, and no node is left far below the others.
    assert placed["node-0"] >= placed["node-7"] + 3
    assert max(after.values()) - min(after.values()) <= 0.25, after


def test_at_the_issue_s_pace_two_pods_a_second(loads, apiserver, client_factory, tmp_path):
    client = client_factory(policy(tmp_path, loads.url, True), **apiserver.environment())
    placed = burst(client, apiserver, node_names=True, bind_verb=False, pace=0.5)
    assert max(predicted(placed).values()) <= 0.85, placed


def test_without_in_tree_scores_too(loads, apiserver, client_factory, tmp_path):
    client = client_factory(policy(tmp_path, loads.url, True), **apiserver.environment())
    placed = burst(client, apiserver, node_names=True, bind_verb=False, in_tree=False)
    assert max(predicted(placed).values()) <= 0.85, placed


def test_without_the_api_the_burst_herds_as_the_issue_shows(loads, apiserver, client_factory, tmp_path):
    """The control: NodeLoad without the pods bound since the sample (no KUBERNETES_API_URL) is worse than no
    extender, so the checks above measure what the in-flight pods change."""
    client = client_factory(policy(tmp_path, loads.url, True))
    placed = burst(client, apiserver, node_names=True, bind_verb=False)
    assert max(predicted(placed).values()) > 1.0, placed
