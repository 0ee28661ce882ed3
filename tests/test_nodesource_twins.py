"""Node-name requests decide exactly like their full-node twins when the API server serves the same cluster.

The recordings of each kube-scheduler version hold the same scenarios in both nodeCacheCapable modes (a/b, c1, g),
each pair recorded by the same scheduler. The API server here
serves the nodes the full-node twin sent (and, for preemption, its victim pods under the node-name
recording's UIDs). One policy whose plugins read node labels and victim pods judges both; every
answer must be the same decision.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from testkit.scheduler_checks import check_answer
from tests.recordings import Exchange, exchanges, scenario, schedulers

TWINS = [
    ("a-nodecache-false", "b-nodecache-true"),
    ("c1-partial-reject-nodecache-false", "c1-partial-reject-nodecache-true"),
    ("g-preempt-nodecache-false-echo", "g-preempt-nodecache-true-echo"),
]

POLICY = """
failurePolicy: Fail
nodeSource:
  kubernetes: {maxWait: 3s}
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
    score: {enabled: [{name: TopologyPreference, weight: 1}]}
    preempt: {enabled: [{name: ProtectedVictims}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: demo-off-node-1
        pods: {labelSelector: {matchLabels: {app: demo}}}
        nodeSelector: {matchExpressions: [{key: harness/idx, operator: NotIn, values: ["1"]}]}
      - name: web-off-node-2
        pods: {labelSelector: {matchLabels: {tier: web}}}
        nodeSelector: {matchExpressions: [{key: harness/idx, operator: NotIn, values: ["2"]}]}
      - name: high-priority-in-zone-1
        pods: {priority: {min: 1000}}
        nodeSelector: {matchLabels: {topology.kubernetes.io/zone: zone-1}}
  - name: TopologyPreference
    args: {preferences: [{label: topology.kubernetes.io/zone, weights: {zone-0: 30, zone-1: 100}}]}
  - name: ProtectedVictims
    args: {protect: [{name: system, pods: {namespaces: [kube-system]}}]}
"""


# (scheduler, full-node scenario, its node-name twin) for every pair the recordings hold.
RECORDED_TWINS = [
    (scheduler, full, names)
    for scheduler in schedulers()
    for full, names in TWINS
    if scenario(scheduler, full) and scenario(scheduler, names)
]


def recorded(scheduler: str, name: str) -> list[Exchange]:
    return [exchange for exchange in exchanges() if (exchange.scheduler, exchange.scenario) == (scheduler, name)]


def served_pods(full: list[Exchange], names: list[Exchange]) -> list[dict[str, Any]]:
    """The full twin's victim pods, under the UIDs the node-name recording (another run) gave them."""
    full_preempt = next((e.request for e in full if e.verb == "preempt"), None)
    names_preempt = next((e.request for e in names if e.verb == "preempt"), None)
    if full_preempt is None or names_preempt is None:
        return []
    pods = []
    for node, victims in full_preempt["NodeNameToVictims"].items():
        uids = [victim["UID"] for victim in names_preempt["NodeNameToMetaVictims"][node]["Pods"]]
        for victim, uid in zip(victims["Pods"], uids, strict=True):
            served = copy.deepcopy(victim)
            served["metadata"]["uid"] = uid
            pods.append(served)
    return pods


def offered(exchange: Exchange) -> tuple[Any, ...]:
    """What the scheduler asked about: the pod, and the nodes (with their victims' count, for preempt)."""
    request = exchange.request
    if exchange.verb == "preempt":
        victims = request["NodeNameToVictims"] or request["NodeNameToMetaVictims"]
        return request["Pod"]["metadata"]["name"], {node: len(entry["Pods"]) for node, entry in victims.items()}
    if exchange.verb in ("filter", "prioritize"):
        names = request["NodeNames"] or [node["metadata"]["name"] for node in request["Nodes"]["items"]]
        return request["Pod"]["metadata"]["name"], names
    return (request,)


def victim_names(request: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, str]:
    if request.get("NodeNameToVictims"):
        pods = [pod for victims in request["NodeNameToVictims"].values() for pod in victims["Pods"]]
    return {pod["metadata"]["uid"]: pod["metadata"]["name"] for pod in pods}


def decision(exchange: Exchange, answer: Any, pods: list[dict[str, Any]]) -> Any:
    """What was decided, free of the mode's wire form (node objects vs names, victim UIDs of one run)."""
    if exchange.verb == "filter":
        kept = (
            [node["metadata"]["name"] for node in answer["Nodes"]["items"]]
            if "Nodes" in answer
            else answer["NodeNames"]
        )
        return kept, answer["FailedNodes"], answer["FailedAndUnresolvableNodes"], answer["Error"]
    if exchange.verb == "preempt":
        names = victim_names(exchange.request, pods)
        accepted = {
            node: (sorted(names[pod["UID"]] for pod in victims["Pods"]), victims["NumPDBViolations"])
            for node, victims in answer["NodeNameToMetaVictims"].items()
        }
        return accepted, answer.get("Error", "")
    return answer


@pytest.mark.parametrize(
    ("scheduler", "full_name", "names_name"), RECORDED_TWINS, ids=[f"{twin[0]}/{twin[2]}" for twin in RECORDED_TWINS]
)
def test_node_name_requests_decide_like_their_full_node_twins(
    client_factory, apiserver, tmp_path, scheduler, full_name, names_name
):
    full, names = recorded(scheduler, full_name), recorded(scheduler, names_name)
    assert [(e.seq, e.verb) for e in full] == [(e.seq, e.verb) for e in names]
    cluster = next(e.request for e in full if e.verb == "filter")["Nodes"]["items"]
    apiserver.set_nodes(cluster)
    pods = served_pods(full, names)
    apiserver.set_pods(pods)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    client = client_factory(policy, **apiserver.environment())

    decisions = []
    for full_exchange, names_exchange in zip(full, names, strict=True):
        if offered(full_exchange) != offered(names_exchange):
            # The two runs placed an earlier pod differently, a tie the scheduler broke its own way in each (v1.35.4
            # put low-1 on node-a in one run and on node-b in the other): from here on they are not twins.
            break
        answers = []
        for exchange in (full_exchange, names_exchange):
            response = client.post(f"/{exchange.verb}", data=exchange.body, content_type="application/json")
            assert response.status_code == 200, response.data
            check_answer(exchange.verb, exchange.request, response.get_json())
            answers.append(decision(exchange, response.get_json(), pods))
        assert answers[0] == answers[1], f"{names_exchange.id} decided differently from {full_exchange.id}"
        decisions.append((full_exchange.verb, answers[0]))

    assert decisions, "the first requests of a scenario are twins in both modes"
    assert apiserver.count("GET", "/api/v1/nodes") >= 1
    first_filter = decisions[0][1]
    assert first_filter[3] == "", "no Error: the node source served every node"
    if names_name == "b-nodecache-true":
        assert first_filter[0] == ["node-a"]  # node-b (idx 1) and node-c (idx 2) are off limits for demo web pods
        assert json.dumps(decisions[1][1]) == json.dumps(
            [{"Host": "node-a", "Score": 3}, {"Host": "node-b", "Score": 10}, {"Host": "node-c", "Score": 3}]
        )
    if names_name == "g-preempt-nodecache-true-echo" and len(decisions) == len(full):
        preempt = next(answer for verb, answer in decisions if verb == "preempt")
        # node-a is in zone-0, off limits for the high-priority preemptor; low-2 on node-b is not protected.
        assert preempt == ({"node-b": (["low-2"], 0)}, "")
        assert apiserver.count("GET", "/api/v1/pods") >= 1  # victims looked up, not guessed
