"""enforcement: Audit: an audited plugin decides as usual, but only the decision log hears of it.

Through real HTTP (functions-framework's test client), and ``explain`` on the same policy.
"""

from __future__ import annotations

import json
import logging

from extender.__main__ import main
from extender.framework.profile import EntryPolicy, Profile, ScorePluginEntry
from extender.framework.types import Node, Pod, Victims
from tests.test_decision_log import FULL_PREEMPT
from tests.test_framework import FixedScore, RejectByName, VetoNamespace

GPU, GENERAL = "gke-prod-gpu-1a2b3c4d-x1y2", "gke-prod-general-1a2b3c4d-x1y2"
POLICY = """
nodeCacheCapable: false
preemptTrustsSchedulerFilter: true
profiles:
- name: default
  plugins:
    filter:
      enabled:
      - name: NodeLabelPolicy
        enforcement: Audit
    score:
      enabled:
      - name: TopologyPreference
        weight: 1
        enforcement: Audit
    preempt:
      enabled:
      - name: ProtectedVictims
        enforcement: Audit
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: others-off-gpu-pool
        pods: {excludeNamespaces: [ml]}
        nodeSelector:
          matchExpressions:
          - {key: cloud.google.com/gke-nodepool, operator: NotIn, values: [gpu]}
  - name: TopologyPreference
    args: {preferences: [{label: cloud.google.com/gke-nodepool, weights: {gpu: 100}}]}
  - name: ProtectedVictims
    args: {protect: [{name: everyone}]}
"""
POD = {"metadata": {"name": "web", "namespace": "shop", "uid": "u-web"}, "spec": {}}


def node(name: str, pool: str) -> dict:
    return {"metadata": {"name": name, "labels": {"cloud.google.com/gke-nodepool": pool}}}


NODES = {"metadata": {}, "items": [node(GPU, "gpu"), node(GENERAL, "general")]}


def client_and_policy(client_factory, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return client_factory(policy), policy


def logged(caplog, event: str) -> list[dict]:
    return [record.json_fields for record in caplog.records if getattr(record, "json_fields", {}).get("event") == event]


def test_an_audited_filter_lets_the_node_pass_and_logs_what_it_would_reject(client_factory, tmp_path, caplog):
    client, _ = client_and_policy(client_factory, tmp_path)
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/filter", json={"Pod": POD, "Nodes": NODES, "NodeNames": None}).get_json()
    assert [item["metadata"]["name"] for item in answer["Nodes"]["items"]] == [GPU, GENERAL]
    assert answer["FailedAndUnresolvableNodes"] == {} and answer["FailedNodes"] == {}
    [entry] = logged(caplog, "extender.decision")
    assert entry["rejected"]["count"] == 0
    [reason] = entry["wouldReject"]["reasons"]
    assert (reason["plugin"], reason["rule"], reason["count"], reason["nodes"]) == (
        "NodeLabelPolicy", "others-off-gpu-pool", 1, [GPU]
    )
    [audit] = logged(caplog, "extender.audit")
    assert (audit["verdict"], audit["plugin"], audit["rule"], audit["count"]) == (
        "wouldReject", "NodeLabelPolicy", "others-off-gpu-pool", 1
    )


def test_an_audited_score_plugin_is_computed_and_logged_but_counts_for_nothing(client_factory, tmp_path, caplog):
    client, _ = client_and_policy(client_factory, tmp_path)
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        scores = client.post("/prioritize", json={"Pod": POD, "Nodes": NODES, "NodeNames": None}).get_json()
    assert scores == [{"Host": GPU, "Score": 0}, {"Host": GENERAL, "Score": 0}]
    [entry] = logged(caplog, "extender.decision")
    assert entry["audited"] == ["TopologyPreference"]
    assert {top["node"]: top["plugins"]["TopologyPreference"] for top in entry["scores"]} == {GPU: 100, GENERAL: 0}


def test_an_audited_preempt_plugin_accepts_and_logs_what_it_would_veto(client_factory, tmp_path, caplog):
    client, _ = client_and_policy(client_factory, tmp_path)
    victims = next(iter(FULL_PREEMPT.request["NodeNameToVictims"].values()))
    payload = {"Pod": POD, "NodeNameToVictims": {GENERAL: victims}, "NodeNameToMetaVictims": None}
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post("/preempt", json=payload).get_json()
    assert list(answer["NodeNameToMetaVictims"]) == [GENERAL]
    [entry] = logged(caplog, "extender.decision")
    [reason] = entry["wouldVeto"]["reasons"]
    assert (reason["plugin"], reason["rule"], reason["nodes"]) == ("ProtectedVictims", "everyone", [GENERAL])
    assert [audit["verdict"] for audit in logged(caplog, "extender.audit")] == ["wouldVeto"]


def test_explain_shows_audited_verdicts_as_such(client_factory, tmp_path, capsys):
    _, policy = client_and_policy(client_factory, tmp_path)
    pod, nodes = tmp_path / "pod.json", tmp_path / "nodes.json"
    pod.write_text(json.dumps(POD))
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": NODES["items"]}))
    assert main(["explain", str(pod), "--nodes", str(nodes), "--policy", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "TopologyPreference ×1 (audit: not counted)" in out
    gpu_row = next(line for line in out.splitlines() if line.startswith(GPU))
    assert "audit: would be unresolvable" in gpu_row and gpu_row.rstrip().endswith("kept")


def test_audit_holds_back_every_verdict_of_the_entry_and_nothing_else():
    pod = Pod(uid="u", namespace="kube-system")
    nodes = [Node("a", {}), Node("b", {})]
    audited = {("filter", "RejectByName"): EntryPolicy(audit=True), ("preempt", "VetoNamespace"): EntryPolicy(audit=True)}
    profile = Profile("p", filters=[RejectByName({"a": "unresolvable"})], preempts=[VetoNamespace({})], entries=audited)
    result = profile.filter(pod, nodes)
    assert result.feasible == ["a", "b"] and not result.rejected
    assert result.would_reject["a"][0].plugin == "RejectByName" and "b" not in result.would_reject
    preempted = profile.preempt(pod, {"b": Victims((pod,))}, {})
    assert list(preempted.accepted) == ["b"] and preempted.would_veto["b"][0].plugin == "VetoNamespace"
    near = FixedScore({"a": 100, "b": 0})
    scored = Profile(
        "p", scores=[ScorePluginEntry(near, 1)], entries={("score", "FixedScore"): EntryPolicy(audit=True)}
    ).prioritize(pod, nodes)
    assert scored.scores == {"a": 0, "b": 0} and scored.by_plugin == {"FixedScore": {"a": 100, "b": 0}}
    assert scored.audited == ["FixedScore"]
