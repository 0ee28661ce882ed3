"""Preempt never accepts a candidate that filter would reject: every profile runs its filters there, on the node
source's facts, in both modes; a filter whose label keys the source lacks is refused at start-up; whatever preempt
cannot judge is named under ``skipped`` at WARNING.

Through real HTTP (functions-framework's test client), a fake Kubernetes API server for the kubernetes source.
"""

from __future__ import annotations

import logging

import pytest

from extender.__main__ import main
from extender.policy.loader import PolicyError, parse_policy
from testkit.fake_apiserver import node as api_node
from tests.policy_doc import code_blocks

SPOT = "cloud.google.com/gke-spot"
POOL = "cloud.google.com/gke-nodepool"
PAYMENTS_OFF_SPOT = f"""
profiles:
- name: default
  plugins:
    filter: {{enabled: [{{name: NodeLabelPolicy}}]}}
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: no-spot-for-payments
        pods: {{namespaces: [payments]}}
        nodeSelector: {{matchExpressions: [{{key: {SPOT}, operator: DoesNotExist}}]}}
"""
STATIC_WITHOUT_SPOT = (
    "nodeSource: {static: {nodes: [{names: ['*'], labels: {cloud.google.com/gke-nodepool: general}}]}}\n"
)
NAMES = "nodeSource: {names: {cluster: prod}}\n"
SPOT_NODE, OTHER_NODE = "gke-prod-general-1a2b3c4d-spt1", "gke-prod-general-1a2b3c4d-x1y2"
PAYMENTS_POD = {"metadata": {"name": "pay", "namespace": "payments", "uid": "u-pay"}, "spec": {"priority": 1000}}
VICTIM = {"metadata": {"name": "batch", "namespace": "batch", "uid": "u-batch"}, "spec": {"priority": 0}}


def full_node(name: str, labels: dict[str, str]) -> dict:
    return {"metadata": {"name": name, "labels": labels}}


NODES = [full_node(SPOT_NODE, {POOL: "general", SPOT: "true"}), full_node(OTHER_NODE, {POOL: "general"})]


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as error:
        parse_policy(text, "test.yaml")
    return error.value.problems


@pytest.mark.parametrize("source", [STATIC_WITHOUT_SPOT, NAMES], ids=["static", "names"])
def test_a_filter_reading_a_key_the_source_lacks_is_refused_in_a_profile_without_preempt_plugins(source):
    """With full nodes and no preempt plugin, the check was skipped: filter rejected the spot node from its labels,
    and preempt, which reads the source, accepted it (and evicted its victim) at INFO."""
    (line,) = problems("nodeCacheCapable: false\n" + source + PAYMENTS_OFF_SPOT)
    assert line.startswith(
        "profiles[0].pluginConfig[0].args.rules[0].nodeSelector.matchExpressions[0].key: plugin NodeLabelPolicy reads "
        f"node label {SPOT}: preempt requests (which carry no Node objects) take labels from the nodeSource, and the "
    )
    assert line.endswith(
        "or set preemptTrustsSchedulerFilter: true to rely on the scheduler's own filter there (see docs/policy.md)"
    )


def test_check_policy_refuses_it_too(tmp_path, capsys):
    policy = tmp_path / "policy.yaml"
    policy.write_text("nodeCacheCapable: false\n" + STATIC_WITHOUT_SPOT + PAYMENTS_OFF_SPOT)
    assert main(["check-policy", str(policy)]) == 1
    assert "reads node label cloud.google.com/gke-spot" in capsys.readouterr().err


def decide(client, verb: str, payload: dict, caplog) -> tuple[dict, logging.LogRecord]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="extender.decision"):
        answer = client.post(f"/{verb}", json=payload).get_json()
    [record] = [record for record in caplog.records if record.name == "extender.decision"]
    return answer, record


def test_trusting_the_scheduler_preempt_does_not_judge_the_filter_and_says_so(client_factory, tmp_path, caplog):
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "nodeCacheCapable: false\npreemptTrustsSchedulerFilter: true\n" + STATIC_WITHOUT_SPOT + PAYMENTS_OFF_SPOT
    )
    client = client_factory(policy)
    filtered, _ = decide(client, "filter", {"Pod": PAYMENTS_POD, "Nodes": {"items": NODES}, "NodeNames": None}, caplog)
    assert list(filtered["FailedAndUnresolvableNodes"]) == [SPOT_NODE]
    candidates = {name: {"Pods": [VICTIM], "NumPDBViolations": 0} for name in (SPOT_NODE, OTHER_NODE)}
    preempted, record = decide(client, "preempt", {"Pod": PAYMENTS_POD, "NodeNameToVictims": candidates}, caplog)
    assert sorted(preempted["NodeNameToMetaVictims"]) == sorted([SPOT_NODE, OTHER_NODE])  # the opt-in's risk
    assert record.levelno == logging.WARNING
    [skipped] = record.json_fields["skipped"]["reasons"]
    assert skipped["plugin"] == "NodeLabelPolicy" and skipped["count"] == 2
    assert "the static nodeSource does not supply cloud.google.com/gke-spot" in skipped["reason"]
    assert "preemptTrustsSchedulerFilter" in skipped["reason"]


def test_the_docs_names_spot_example_passes_check_policy(tmp_path, capsys):
    [example] = [block for block in code_blocks("yaml") if block.startswith("# names-spot.yaml\n")]
    policy = tmp_path / "names-spot.yaml"
    policy.write_text(example)
    assert main(["check-policy", str(policy)]) == 0, capsys.readouterr().err


# --- Preempt keeps only what filter keeps, for every node source, in both modes ---------------------------------

ZONE = "topology.kubernetes.io/zone"
CLUSTER = [  # (name, labels): the source's view and the full Node objects agree
    ("gke-prod-gpu-1a2b3c4d-aaaa", {POOL: "gpu", ZONE: "a"}),
    ("gke-prod-general-1a2b3c4d-bbbb", {POOL: "general", ZONE: "a"}),
    ("gke-prod-general-1a2b3c4d-cccc", {POOL: "general", ZONE: "b"}),
    ("gke-prod-spot-1a2b3c4d-dddd", {POOL: "spot", ZONE: "b"}),
]
UNKNOWN = "gke-prod-new-1a2b3c4d-eeee"  # a node no source can describe: not listed, not in the inventory
SOURCES = {
    "names": "nodeSource: {names: {cluster: prod, nodePools: [gpu, general, spot]}}\n",
    "static": "nodeSource:\n  static:\n    nodes:\n"
    + "".join(f"    - {{names: ['{name}'], labels: {{{POOL}: {labels[POOL]}}}}}\n" for name, labels in CLUSTER),
    "kubernetes": "nodeSource: {kubernetes: {minRefreshInterval: 1m}}\n",
    "none": "",
}
POOL_RULES = f"""
profiles:
- name: default
  plugins:
    filter: {{enabled: [{{name: NodeNameFilter}}, {{name: NodeLabelPolicy}}]}}
  pluginConfig:
  - {{name: NodeNameFilter, args: {{deny: ["*-cccc"]}}}}
  - name: NodeLabelPolicy
    args:
      rules:
      - name: shop-off-gpu
        pods: {{namespaces: [shop]}}
        nodeSelector: {{matchExpressions: [{{key: {POOL}, operator: NotIn, values: [gpu]}}]}}
      - name: shop-off-spot
        pods: {{namespaces: [shop]}}
        nodeSelector: {{matchExpressions: [{{key: {POOL}, operator: NotIn, values: [spot]}}]}}
"""
SHOP_POD = {"metadata": {"name": "web", "namespace": "shop", "uid": "u-web"}, "spec": {"priority": 1000}}


# Every node source in both modes, but none in node-name mode: a label filter needs a source there (start-up says so).
MODES = [(kind, full) for kind in SOURCES for full in (True, False) if kind != "none" or full]


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
@pytest.mark.parametrize(("kind", "full"), MODES, ids=[f"{k}-{'full' if f else 'names'}" for k, f in MODES])
def test_preempt_accepts_no_candidate_filter_rejects(
    client_factory, apiserver, tmp_path, caplog, kind, full, failure_policy
):
    apiserver.set_nodes([api_node(name, labels) for name, labels in CLUSTER])
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"nodeCacheCapable: {str(not full).lower()}\nfailurePolicy: {failure_policy}\n" + SOURCES[kind] + POOL_RULES
    )
    client = client_factory(policy, **apiserver.environment())
    names = [name for name, _ in CLUSTER] + ([UNKNOWN] if not full else [])
    if full:
        request = {
            "Pod": SHOP_POD,
            "Nodes": {"items": [full_node(name, labels) for name, labels in CLUSTER]},
            "NodeNames": None,
        }
    else:
        request = {"Pod": SHOP_POD, "Nodes": None, "NodeNames": names}
    filtered, _ = decide(client, "filter", request, caplog)
    kept = [item["metadata"]["name"] for item in filtered["Nodes"]["items"]] if full else filtered["NodeNames"]
    assert kept == ["gke-prod-general-1a2b3c4d-bbbb"] + (
        [UNKNOWN] if not full and failure_policy == "Ignore" and kind == "kubernetes" else []
    )
    candidates = {name: {"Pods": [VICTIM], "NumPDBViolations": 0} for name in names}
    preempted, record = decide(client, "preempt", {"Pod": SHOP_POD, "NodeNameToVictims": candidates}, caplog)
    accepted = sorted(preempted["NodeNameToMetaVictims"])
    if kind == "none":  # no labels in preempt: each candidate NodeNameFilter passes follows the failurePolicy
        unjudged = [name for name in names if not name.endswith("-cccc")]
        assert accepted == (sorted(unjudged) if failure_policy == "Ignore" else [])
        assert record.levelno == logging.WARNING and record.json_fields["skipped"]["count"] == len(unjudged)
    else:
        assert accepted == sorted(kept)
        # A node the source cannot describe is named under skipped (at WARNING), in preempt as in filter.
        assert record.levelno == (logging.INFO if full else logging.WARNING)
