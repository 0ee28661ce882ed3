"""No plugin is skipped silently, and each enabled entry has its own failurePolicy, judged node by node.

Through real HTTP (functions-framework's test client): preempt in full-node mode, where requests carry victims but
never Node objects; a node-name request where the API server cannot answer for one new node.
"""

from __future__ import annotations

import logging
import time

import pytest

from testkit.fake_apiserver import node as api_node
from tests.test_decision_log import FULL_PREEMPT

GPU, GENERAL = "gke-prod-gpu-1a2b3c4d-x1y2", "gke-prod-general-1a2b3c4d-x1y2"

# The tenancy rule of the documented example, in full-node mode without a node source and without preempt plugins
# (so the preempt-blind check at start-up does not apply): preempt requests still run the filter.
SHOP_OFF_GPU = """
nodeCacheCapable: false
{extra}
profiles:
- name: default
  plugins:
    filter:
      enabled:
      - name: NodeLabelPolicy{entry}
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: others-off-gpu-pool
        pods: {{excludeNamespaces: [ml]}}
        nodeSelector:
          matchExpressions:
          - {{key: cloud.google.com/gke-nodepool, operator: NotIn, values: [gpu]}}
"""


def shop_preempt() -> dict:
    request = FULL_PREEMPT.request
    victims = next(iter(request["NodeNameToVictims"].values()))
    return {
        "Pod": {**request["Pod"], "metadata": {**request["Pod"]["metadata"], "namespace": "shop"}},
        "NodeNameToVictims": {GPU: victims, GENERAL: victims},
        "NodeNameToMetaVictims": None,
    }


def decision(caplog) -> logging.LogRecord:
    [record] = [record for record in caplog.records if record.name == "extender.decision"]
    return record


def preempt(client_factory, tmp_path, caplog, extra: str = "", entry: str = "") -> tuple[dict, logging.LogRecord]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(SHOP_OFF_GPU.format(extra=extra, entry=entry))
    client = client_factory(policy)
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/preempt", json=shop_preempt()).get_json()
    return answer, decision(caplog)


def test_preempt_without_labels_under_fail_vetoes_the_candidates_it_cannot_judge(client_factory, tmp_path, caplog):
    """The victim on the gpu node used to be accepted silently, though filter rejects that node for the pod."""
    answer, record = preempt(client_factory, tmp_path, caplog)
    assert answer["NodeNameToMetaVictims"] == {}
    assert "plugin NodeLabelPolicy needs node labels" in answer["Error"]  # not one candidate could be judged
    skipped = record.json_fields["skipped"]
    assert skipped["count"] == 2 and skipped["reasons"][0]["plugin"] == "NodeLabelPolicy"
    assert "failurePolicy Fail" in skipped["reasons"][0]["reason"]
    assert record.levelno >= logging.WARNING


def test_preempt_without_labels_under_ignore_passes_and_says_so_at_warning(client_factory, tmp_path, caplog):
    answer, record = preempt(client_factory, tmp_path, caplog, entry="\n        failurePolicy: Ignore")
    assert sorted(answer["NodeNameToMetaVictims"]) == sorted([GPU, GENERAL]) and "Error" not in answer
    assert record.levelno == logging.WARNING
    skipped = record.json_fields["skipped"]
    assert skipped["count"] == 2
    assert all(r["plugin"] == "NodeLabelPolicy" and "failurePolicy Ignore" in r["reason"] for r in skipped["reasons"])
    assert "NodeLabelPolicy" not in record.json_fields["pluginMs"]  # it did not run
    # And on its own, per plugin, rule and code, for the skipped metric and its alert: what passed unjudged.
    [entry] = [each for each in caplog.records if each.name == "extender.skipped"]
    assert entry.levelno == logging.WARNING and entry.getMessage() == "extender skipped"
    assert entry.json_fields == {
        "event": "extender.skipped", "verb": "preempt", "profile": "default", "pod": record.json_fields["pod"],
        "plugin": "NodeLabelPolicy", "rule": "", "code": "Success", "count": 2,
    }  # fmt: skip


def test_preempt_trusting_the_scheduler_filter_passes_and_says_so(client_factory, tmp_path, caplog):
    answer, record = preempt(client_factory, tmp_path, caplog, extra="preemptTrustsSchedulerFilter: true")
    assert sorted(answer["NodeNameToMetaVictims"]) == sorted([GPU, GENERAL])
    assert record.levelno == logging.WARNING
    [reason] = record.json_fields["skipped"]["reasons"]
    assert "preemptTrustsSchedulerFilter" in reason["reason"] and sorted(reason["nodes"]) == sorted([GPU, GENERAL])


# A kubernetes source that lists node-a and node-b at start-up; a node that joins later cannot be listed in time.
LISTED = """
failurePolicy: {default}
nodeSource:
  kubernetes: {{maxWait: 200ms, minRefreshInterval: 1s}}
profiles:
- name: default
  plugins:
    filter: {{enabled: [{{name: NodeLabelPolicy}}]}}
    score: {{enabled: [{{name: TopologyPreference, weight: 1}}]}}
  pluginConfig:
  - name: NodeLabelPolicy
    args: {{rules: [{{name: zone-a-only, nodeSelector: {{matchLabels: {{topology.kubernetes.io/zone: a}}}}}}]}}
  - name: TopologyPreference
    args: {{preferences: [{{label: topology.kubernetes.io/zone, weights: {{a: 100}}}}]}}
"""
POD = {"metadata": {"name": "web", "namespace": "shop", "uid": "u-web"}, "spec": {}}


@pytest.fixture
def slow_for_new_nodes(client_factory, apiserver, tmp_path):
    """A client whose node source knows node-a (zone a) and node-b (zone b), and whose API server then becomes slower
    than maxWait: a name it has not listed cannot be described."""

    def make(default: str = "Fail"):
        apiserver.set_nodes([api_node("node-a", {"topology.kubernetes.io/zone": "a"}),
                             api_node("node-b", {"topology.kubernetes.io/zone": "b"})])
        policy = tmp_path / "policy.yaml"
        policy.write_text(LISTED.format(default=default))
        client = client_factory(policy, **apiserver.environment())
        time.sleep(1.1)  # past minRefreshInterval: the unknown name triggers a list, which is too slow
        apiserver.delay = 1.0
        return client

    yield make
    apiserver.delay = 0.0


def names(verb_nodes: list[str]) -> dict:
    return {"Pod": POD, "Nodes": None, "NodeNames": verb_nodes}


def test_filter_rejects_only_the_node_whose_facts_are_missing(slow_for_new_nodes, caplog):
    """One unknown node used to fail the whole filter with Error (every pod failed while the API was slow)."""
    client = slow_for_new_nodes()
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/filter", json=names(["node-a", "node-b", "node-new"])).get_json()
    assert answer["NodeNames"] == ["node-a"] and answer["Error"] == ""
    assert list(answer["FailedAndUnresolvableNodes"]) == ["node-b"]
    reason = answer["FailedNodes"]["node-new"]  # Unschedulable: the node itself may well fit
    assert "NodeLabelPolicy" in reason and "failurePolicy Fail" in reason and "maxWait" in reason
    entry = decision(caplog).json_fields
    assert entry["skipped"]["reasons"][0]["nodes"] == ["node-new"]


def test_filter_answers_error_only_when_no_node_could_be_judged(slow_for_new_nodes):
    client = slow_for_new_nodes()
    answer = client.post("/filter", json=names(["node-new", "node-newer"])).get_json()
    assert answer["NodeNames"] == [] and "maxWait" in answer["Error"]


def test_one_unknown_node_does_not_zero_every_score(slow_for_new_nodes, caplog):
    client = slow_for_new_nodes()
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        response = client.post("/prioritize", json=names(["node-a", "node-new"]))
    assert response.get_json() == [{"Host": "node-a", "Score": 10}, {"Host": "node-new", "Score": 0}]
    assert "X-Extender-Error" not in response.headers
    record = decision(caplog)
    assert record.levelno == logging.WARNING
    assert record.json_fields["skipped"]["reasons"][0]["plugin"] == "TopologyPreference"


def test_ignore_lets_the_unknown_node_pass_at_warning(slow_for_new_nodes, caplog):
    client = slow_for_new_nodes("Ignore")
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/filter", json=names(["node-a", "node-b", "node-new"])).get_json()
    assert answer["NodeNames"] == ["node-a", "node-new"] and answer["Error"] == ""
    record = decision(caplog)
    assert record.levelno == logging.WARNING
    [reason] = record.json_fields["skipped"]["reasons"]
    assert reason["plugin"] == "NodeLabelPolicy" and "failurePolicy Ignore" in reason["reason"]
    [entry] = [each.json_fields for each in caplog.records if each.name == "extender.skipped"]
    assert (entry["verb"], entry["plugin"], entry["code"]) == ("filter", "NodeLabelPolicy", "Success")
    assert entry["count"] == 1


def test_the_decision_entry_shows_no_score_for_a_plugin_left_out_of_a_node():
    from extender.decision_log import decision_fields, severity
    from extender.framework.profile import Profile, ScorePluginEntry
    from extender.framework.types import Node, Pod
    from extender.protocol import Route
    from extender.verbs import Answer
    from tests.test_framework import FixedScore, LabelScore

    nodes = [Node("a", {"fast": "true"}), Node("b")]
    scores = [ScorePluginEntry(LabelScore({}), 1), ScorePluginEntry(FixedScore({"a": 0, "b": 100}), 1)]
    result = Profile("p", scores=scores, fail_open=True).prioritize(Pod(uid="u"), nodes)
    answer = Answer(body=None, result=result)
    fields = decision_fields(Route("prioritize", "default"), answer, 0.001, 5.0, method="POST", path="/prioritize")
    assert {top["node"]: top["plugins"] for top in fields["scores"]} == {
        "a": {"LabelScore": 100, "FixedScore": 0},
        "b": {"FixedScore": 100},
    }
    assert fields["skipped"]["reasons"][0]["nodes"] == ["b"] and severity(answer, 0.001, 5.0) == logging.WARNING


UNJUDGED = [
    # (nodeSource, a node it describes, a node it cannot describe, why)
    ("static: {nodes: [{names: ['zone-*'], labels: {zone: a}}]}", "zone-1", "elsewhere",
     "node elsewhere matches no entry of the static nodeSource inventory"),
    ("names: {cluster: prod}", "gke-prod-a-1a2b3c4d-x1y2", "elsewhere",
     "node elsewhere is not named like a GKE node (gke-<cluster>-<pool>-<hash>-<suffix>)"),
]


@pytest.mark.parametrize(("node_source", "known", "unknown", "why"), UNJUDGED, ids=["static", "names"])
def test_filter_names_nodes_its_source_cannot_describe_under_skipped_at_warning(
    client_factory, tmp_path, caplog, node_source, known, unknown, why
):
    """Prioritize named them under skipped; filter rejected them at INFO with no word of the plugin not judging."""
    rule = "{zone: a}" if node_source.startswith("static") else "{cloud.google.com/gke-nodepool: a}"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"nodeSource: {{{node_source}}}\nprofiles:\n- name: default\n"
        "  plugins: {filter: {enabled: [{name: NodeLabelPolicy}]}}\n"
        "  pluginConfig: [{name: NodeLabelPolicy, args: {rules: "
        f"[{{name: r, nodeSelector: {{matchLabels: {rule}}}}}]}}}}]\n"
    )
    client = client_factory(policy)
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/filter", json=names([known, unknown])).get_json()
    assert answer["NodeNames"] == [known] and answer["FailedAndUnresolvableNodes"] == {unknown: why}
    record = decision(caplog)
    assert record.levelno == logging.WARNING
    [reason] = record.json_fields["skipped"]["reasons"]
    assert (reason["plugin"], reason["reason"], reason["nodes"]) == ("NodeLabelPolicy", why, [unknown])


def test_filter_names_a_node_the_api_does_not_list_under_skipped_and_rejects_it_as_failed(
    client_factory, apiserver, tmp_path, caplog
):
    """A node that joined after the start-up list: FailedNodes under Fail (the scheduler retries), not unresolvable."""
    apiserver.set_nodes([api_node("node-a", {"topology.kubernetes.io/zone": "a"})])
    policy = tmp_path / "policy.yaml"
    policy.write_text(LISTED.format(default="Fail"))
    client = client_factory(policy, **apiserver.environment())
    apiserver.add_node(api_node("node-d", {"topology.kubernetes.io/zone": "a"}))
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/filter", json=names(["node-a", "node-d"])).get_json()
    assert answer["NodeNames"] == ["node-a"] and answer["FailedAndUnresolvableNodes"] == {}
    assert "not in the node list fetched" in answer["FailedNodes"]["node-d"]
    record = decision(caplog)
    assert record.levelno == logging.WARNING and record.json_fields["skipped"]["reasons"][0]["nodes"] == ["node-d"]
