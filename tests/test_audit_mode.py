"""enforcement: Audit: an audited plugin decides as usual, but only the decision log hears of it.

Through real HTTP (functions-framework's test client), and ``explain`` on the same policy.
"""

from __future__ import annotations

import json
import logging

import pytest

from extender.__main__ import main
from extender.decision_log import NODES_PER_REASON, TOP_N
from extender.framework.profile import EntryPolicy, Profile, ScorePluginEntry
from extender.framework.types import Node, Pod, Victims
from tests.test_decision_log import FULL_PREEMPT
from tests.test_framework import FixedScore, RejectByName, VetoNamespace

pytestmark = pytest.mark.usefixtures("broken_plugin")

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
    audited = {
        ("filter", "RejectByName"): EntryPolicy(audit=True),
        ("preempt", "VetoNamespace"): EntryPolicy(audit=True),
    }
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


# --- An audited plugin's failure changes nothing ---------------------------------------------------------------

ENFORCED_ONLY = """
nodeCacheCapable: false
pluginModules: [tests.broken_plugins]
profiles:
- name: default
  plugins:
    filter: {{enabled: [{{name: NodeLabelPolicy}}{filter}]}}
    score: {{enabled: [{{name: TopologyPreference, weight: 1}}{score}]}}
    preempt: {{enabled: [{{name: ProtectedVictims}}{preempt}]}}
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: others-off-gpu-pool
        pods: {{excludeNamespaces: [ml]}}
        nodeSelector: {{matchExpressions: [{{key: cloud.google.com/gke-nodepool, operator: NotIn, values: [gpu]}}]}}
  - name: TopologyPreference
    args: {{preferences: [{{label: cloud.google.com/gke-nodepool, weights: {{general: 100, other: 30}}}}]}}
  - name: ProtectedVictims
    args: {{protect: [{{name: system, pods: {{namespaces: [kube-system]}}}}]}}
{broken}"""
OTHER = "gke-prod-other-1a2b3c4d-x1y2"
THREE = {"metadata": {}, "items": [node(GPU, "gpu"), node(GENERAL, "general"), node(OTHER, "other")]}


def audited_broken(client_factory, tmp_path, point: str, fail: str, nodes: str = "['*']"):
    """Two functions: one with an audited Broken plugin at ``point`` that fails as ``fail`` says, one without it."""
    entry = {"filter": "", "score": "", "preempt": ""}
    without = tmp_path / "without.yaml"
    without.write_text("preemptTrustsSchedulerFilter: true\n" + ENFORCED_ONLY.format(**entry, broken=""))
    weight = ", weight: 5" if point == "score" else ""
    entry[point] = f", {{name: Broken{weight}, enforcement: Audit}}"
    broken = f"  - {{name: Broken, args: {{fail: {fail}, nodes: {nodes}}}}}\n"
    with_broken = tmp_path / "with.yaml"
    with_broken.write_text("preemptTrustsSchedulerFilter: true\n" + ENFORCED_ONLY.format(**entry, broken=broken))
    return client_factory(with_broken), client_factory(without)


def exchange(client, verb: str, payload: dict, caplog) -> tuple[object, dict, dict, int]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        response = client.post(f"/{verb}", json=payload)
    [record] = [r for r in caplog.records if getattr(r, "json_fields", {}).get("event") == "extender.decision"]
    return response.get_json(), dict(response.headers), record.json_fields, record.levelno


FILTER_ARGS = {"Pod": POD, "Nodes": THREE, "NodeNames": None}


def preempt_args() -> dict:
    victims = next(iter(FULL_PREEMPT.request["NodeNameToVictims"].values()))
    return {"Pod": POD, "NodeNameToVictims": {GENERAL: victims, OTHER: victims}, "NodeNameToMetaVictims": None}


@pytest.mark.parametrize("fail", ["raise", "range"])
def test_an_audited_score_plugin_that_fails_changes_no_score(client_factory, tmp_path, caplog, fail):
    """It used to turn the whole answer into zeros with X-Extender-Error."""
    broken, plain = audited_broken(client_factory, tmp_path, "score", fail, nodes=f"['{OTHER}']")
    got, headers, entry, level = exchange(broken, "prioritize", FILTER_ARGS, caplog)
    expected, _, _, _ = exchange(plain, "prioritize", FILTER_ARGS, caplog)
    assert got == expected == [{"Host": GPU, "Score": 0}, {"Host": GENERAL, "Score": 10}, {"Host": OTHER, "Score": 3}]
    assert "X-Extender-Error" not in headers and "error" not in entry
    [failure] = entry["auditFailed"]
    assert failure["plugin"] == "Broken"
    assert ("broken on " + OTHER if fail == "raise" else f"scored node {OTHER} 500") in failure["reason"]
    assert level == logging.WARNING


@pytest.mark.parametrize("fail", ["raise", "error"])
def test_an_audited_filter_that_fails_rejects_nothing_and_fails_no_request(client_factory, tmp_path, caplog, fail):
    """Its failure used to be held back as if it were a rejection (wouldReject), named as neither."""
    broken, plain = audited_broken(client_factory, tmp_path, "filter", fail)
    got, _, entry, level = exchange(broken, "filter", FILTER_ARGS, caplog)
    expected, _, _, _ = exchange(plain, "filter", FILTER_ARGS, caplog)
    assert got == expected and got["Error"] == ""
    assert [item["metadata"]["name"] for item in got["Nodes"]["items"]] == [GENERAL, OTHER]
    assert "wouldReject" not in entry
    [failure] = entry["auditFailed"]
    assert failure["plugin"] == "Broken" and ("broken on" if fail == "raise" else "cannot decide") in failure["reason"]
    assert failure["count"] == 2  # the nodes it was asked about: NodeLabelPolicy rejected the gpu node
    assert level == logging.WARNING
    assert not [e for e in logged(caplog, "extender.audit") if e["plugin"] == "Broken"]
    # During preempt too, where the audited filter runs on every candidate.
    got, _, entry, level = exchange(broken, "preempt", preempt_args(), caplog)
    expected, _, _, _ = exchange(plain, "preempt", preempt_args(), caplog)
    assert got == expected and sorted(got["NodeNameToMetaVictims"]) == sorted([GENERAL, OTHER])
    assert "wouldVeto" not in entry and [failure["plugin"] for failure in entry["auditFailed"]] == ["Broken"]


@pytest.mark.parametrize("fail", ["raise", "error"])
def test_an_audited_preempt_plugin_that_fails_vetoes_nothing(client_factory, tmp_path, caplog, fail):
    broken, plain = audited_broken(client_factory, tmp_path, "preempt", fail)
    got, _, entry, level = exchange(broken, "preempt", preempt_args(), caplog)
    expected, _, _, _ = exchange(plain, "preempt", preempt_args(), caplog)
    assert got == expected and sorted(got["NodeNameToMetaVictims"]) == sorted([GENERAL, OTHER]) and "Error" not in got
    assert "wouldVeto" not in entry and [failure["plugin"] for failure in entry["auditFailed"]] == ["Broken"]
    assert level == logging.WARNING


def test_an_audited_filter_that_fails_in_prepare_rejects_nothing():
    from tests.test_framework import RejectByName

    class FailsToPrepare(RejectByName):
        name = "FailsToPrepare"

        def prepare(self, pod):
            raise RuntimeError("no rules today")

    pod = Pod(uid="u")
    audited = {("filter", "FailsToPrepare"): EntryPolicy(audit=True)}
    result = Profile("p", filters=[FailsToPrepare({})], entries=audited).filter(pod, [Node("a", {}), Node("b", {})])
    assert result.feasible == ["a", "b"] and result.error is None and not result.would_reject
    assert "no rules today" in result.audit_failed["a"][0].reason


# --- One extender.audit entry per (plugin, rule), rules named exactly -----------------------------------------------

def many_rules_policy(names: list[str]) -> str:
    rules = "".join(
        f"      - name: {json.dumps(name)}\n"
        f"        nodeSelector: {{matchExpressions: [{{key: cloud.google.com/gke-nodepool, operator: NotIn, values: "
        f"[pool-{index}]}}]}}\n"
        for index, name in enumerate(names)
    )
    return (
        "nodeCacheCapable: false\nprofiles:\n- name: default\n  plugins:\n"
        "    filter: {enabled: [{name: NodeLabelPolicy, enforcement: Audit}]}\n"
        "    preempt: {enabled: [{name: ProtectedVictims, enforcement: Audit}]}\n"
        "  pluginConfig:\n  - name: NodeLabelPolicy\n    args:\n      rules:\n"
        + rules
        + "  - name: ProtectedVictims\n"
        "    args: {protect: [{name: \"it's-system\", pods: {namespaces: [kube-system]}}]}\n"
    )


def test_every_audited_rule_gets_its_entry_however_many_there_are(client_factory, tmp_path, caplog):
    """Only the 10 largest (plugin, reason) groups used to be kept: rule-10 and rule-11 never reached the metric."""
    names = [f"rule-{index}" for index in range(12)]
    policy = tmp_path / "policy.yaml"
    policy.write_text("preemptTrustsSchedulerFilter: true\n" + many_rules_policy(names))
    # Each rule keeps the pod off one pool; 30 nodes over 12 pools: pools 0..5 hold 3 nodes, pools 6..11 two.
    nodes = {"metadata": {}, "items": [node(f"node-{index}", f"pool-{index % 12}") for index in range(30)]}
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        client_factory(policy).post("/filter", json={"Pod": POD, "Nodes": nodes, "NodeNames": None})
    audits = logged(caplog, "extender.audit")
    assert sorted(entry["rule"] for entry in audits) == sorted(names)
    counts = {entry["rule"]: entry["count"] for entry in audits}
    assert counts == {f"rule-{index}": 3 if index < 6 else 2 for index in range(12)}
    assert {node for entry in audits for node in entry["nodes"]} == {f"node-{index}" for index in range(30)}
    [decision] = logged(caplog, "extender.decision")
    assert len(decision["wouldReject"]["reasons"]) == TOP_N and decision["wouldReject"]["count"] == 30  # bounded


def test_victim_names_never_split_a_rule_into_entries(client_factory, tmp_path, caplog):
    """Each victim's name is in its reason: grouped by reason, 12 protected victims were 12 groups (10 kept)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("preemptTrustsSchedulerFilter: true\n" + many_rules_policy(["r"]))
    victim = next(iter(FULL_PREEMPT.request["NodeNameToVictims"].values()))["Pods"][0]
    candidates = {
        f"node-{index}": {
            "Pods": [
                {
                    **victim,
                    "metadata": {
                        **victim["metadata"],
                        "namespace": "kube-system",
                        "name": f"dns-{index}",
                        "uid": f"u-{index}",
                    },
                }
            ],
            "NumPDBViolations": 0,
        }
        for index in range(12)
    }
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        client_factory(policy).post(
            "/preempt", json={"Pod": POD, "NodeNameToVictims": candidates, "NodeNameToMetaVictims": None}
        )
    [veto] = [entry for entry in logged(caplog, "extender.audit") if entry["plugin"] == "ProtectedVictims"]
    assert (veto["rule"], veto["count"], veto["verdict"]) == ("it's-system", 12, "wouldVeto")
    assert len(veto["nodes"]) == NODES_PER_REASON and len(veto["reasons"]) == NODES_PER_REASON
    assert "kube-system/dns-0" in veto["reasons"][0]


@pytest.mark.parametrize("name", ["it's-gpu", 'say "it\'s" twice', "naïve\\rule"])
def test_a_rule_name_comes_out_exactly(client_factory, tmp_path, caplog, name):
    """A name with a quote came out as "" (its message quotes it with double quotes)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("preemptTrustsSchedulerFilter: true\n" + many_rules_policy([name]))
    nodes = {"metadata": {}, "items": [node("node-1", "pool-0")]}
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        client_factory(policy).post("/filter", json={"Pod": POD, "Nodes": nodes, "NodeNames": None})
    [audit] = logged(caplog, "extender.audit")
    assert audit["rule"] == name
    [entry] = logged(caplog, "extender.decision")
    assert entry["wouldReject"]["reasons"][0]["rule"] == name


def test_explain_shows_an_audited_failure_as_such(client_factory, tmp_path, capsys):
    audited_broken(client_factory, tmp_path, "filter", "raise")
    pod, nodes = tmp_path / "pod.json", tmp_path / "nodes.json"
    pod.write_text(json.dumps(POD))
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": THREE["items"]}))
    assert main(["explain", str(pod), "--nodes", str(nodes), "--policy", str(tmp_path / "with.yaml")]) == 0
    general_row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(GENERAL))
    assert "audit: failed" in general_row and general_row.rstrip().endswith("kept")
