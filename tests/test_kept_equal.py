"""Kept results answer exactly as the plain profile: the same generated requests to an extender with the result
cache and one without (EXTENDER_RESULT_CACHE=off), as node sets and labels change and time crosses window
boundaries."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder

from extender.decision_log import decision_fields
from extender.framework import clock, status
from extender.framework.kept import KeptProfile
from extender.framework.profile import Profile
from extender.framework.types import Node
from extender.http.handler import Extender
from extender.policy.loader import parse_policy
from tests.plugin_helpers import ListedNodes

POLICY = """
nodeCacheCapable: false  # the tests hand the extender a node source of their own
pluginModules: [tests.broken_plugins]
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}, {name: NodeLabelPolicy}]}
    score: {enabled: [{name: InstanceCost, weight: 2}, {name: TopologyPreference, weight: 1}]}
  pluginConfig: &config
  - name: NodeNameFilter
    args:
      deny: ["*-9"]
      maintenance: &maintenance
      - name: pool-1
        nodes: ["node-1*"]
        windows: [{start: "2026-03-01T13:00:00Z", end: "2026-03-01T14:00:00Z"}]
      - name: nightly
        nodes: ["node-2*", "node-3"]
        windows: [{from: "13:30", to: "14:30"}]
      - name: ml-patching  # closed to ml's pods only: kept verdicts must tell them from the others'
        nodes: ["node-4*", "node-5"]
        pods: {namespaces: [ml]}
        windows: [{from: "13:00", to: "14:00"}]
  - name: NodeLabelPolicy
    args:
      rules:
      - name: off-gpu
        pods: {excludeNamespaces: [ml]}
        nodeSelector: {matchExpressions: [{key: pool, operator: NotIn, values: [gpu]}]}
      - name: ml-on-gpu
        pods: {namespaces: [ml]}
        nodeSelector: {matchExpressions: [{key: pool, operator: In, values: [gpu]}]}
  - name: InstanceCost
    args: {prices: {small: 1.0, large: 4.0}, spotDiscount: 0.5}
  - name: TopologyPreference
    args:
      preferences:
      - {label: zone, weights: {a: 100, b: 40}}
      - {label: pool, weights: {gpu: 100}, pods: {namespaces: [ml]}}
# The same plugins audited and failing open: held-back rejections are kept with the verdicts, skipped nodes never.
- name: audit
  plugins:
    filter: {enabled: [{name: NodeNameFilter}, {name: NodeLabelPolicy, enforcement: Audit, failurePolicy: Ignore}]}
    score:
      enabled:
      - {name: InstanceCost, weight: 2, failurePolicy: Ignore}
      - {name: TopologyPreference, weight: 1, enforcement: Audit}
  pluginConfig: *config
# Maintenance windows without a list: outside them NodeNameFilter skips the request, alone or beside another filter.
- name: windows
  plugins:
    filter: {enabled: [{name: NodeNameFilter}]}
  pluginConfig:
  - &windows_filter {name: NodeNameFilter, args: {maintenance: *maintenance}}
# An audited plugin that fails on some nodes: what it failed on is never kept, and the answer is the others'.
- name: audit-broken
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}, {name: Broken, enforcement: Audit}]}
    score: {enabled: [{name: TopologyPreference, weight: 1}, {name: Broken, weight: 1, enforcement: Audit}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args: {rules: [{name: off-gpu, nodeSelector: {matchExpressions: [{key: pool, operator: NotIn, values: [gpu]}]}}]}
  - {name: TopologyPreference, args: {preferences: [{label: zone, weights: {a: 100, b: 40}}]}}
  - {name: Broken, args: {nodes: ["node-1?"]}}
- name: windows-and-labels
  plugins:
    filter: {enabled: [{name: NodeNameFilter}, {name: NodeLabelPolicy}]}
  pluginConfig:
  - *windows_filter
  - name: NodeLabelPolicy
    args:
      rules:
      - name: off-gpu
        nodeSelector: {matchExpressions: [{key: pool, operator: NotIn, values: [gpu]}]}
"""

NODES = [f"node-{index}" for index in range(25)]
LABELS = st.fixed_dictionaries(
    {},
    optional={
        "pool": st.sampled_from(["gpu", "web"]),
        "zone": st.sampled_from(["a", "b", "c"]),
        "node.kubernetes.io/instance-type": st.sampled_from(["small", "large", "huge"]),
        "cloud.google.com/gke-spot": st.sampled_from(["true", "false"]),
    },
)
# Around the windows: 13:00-14:00 one-off, 13:30-14:30 every day.
INSTANTS = st.sampled_from(["12:59:59", "13:00", "13:29:59", "13:30", "13:59:59", "14:00", "14:30", "15:00"])
# Each profile's verbs that keep results.
VERBS = [
    "filter",
    "prioritize",
    "audit/filter",
    "audit/prioritize",
    "audit-broken/filter",
    "audit-broken/prioritize",
    "windows/filter",
    "windows-and-labels/filter",
]
REQUESTS = st.fixed_dictionaries(
    {
        "verb": st.sampled_from(VERBS),
        "namespace": st.sampled_from(["default", "ml", "web"]),
        "priority": st.sampled_from([None, 0, 1000]),
        "names": st.lists(st.sampled_from(NODES), unique=True, max_size=len(NODES)),
    }
)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("refresh"), st.dictionaries(st.sampled_from(NODES), LABELS, max_size=8)),
        st.tuples(st.just("drop"), st.lists(st.sampled_from(NODES), max_size=3)),
        # The source cannot describe these nodes for now (the API is slow): each plugin's failurePolicy decides.
        st.tuples(st.just("unavailable"), st.lists(st.sampled_from(NODES), max_size=3)),
        st.tuples(st.just("time"), INSTANTS),
        st.tuples(st.just("request"), REQUESTS),
    ),
    min_size=1,
    max_size=30,
)


def extender(cached: bool, source: ListedNodes, monkeypatch: pytest.MonkeyPatch) -> Extender:
    monkeypatch.setenv("EXTENDER_RESULT_CACHE", "on" if cached else "off")
    policy = parse_policy(POLICY, "test")
    assert isinstance(policy.profiles["default"], KeptProfile if cached else Profile)
    return Extender(policy=policy, source=source)


def body(request: dict[str, Any]) -> bytes:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": request["namespace"], "uid": "u"}, "spec": {}}
    if request["priority"] is not None:
        pod["spec"]["priority"] = request["priority"]
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": request["names"]})


def answer(served: Extender, verb: str, data: bytes) -> tuple[int, bytes, list[Any]]:
    """The status, the answer, and what the decision entry says beyond it (rejections with their plugins, plugins
    that did not judge a node, audited plugins' held-back verdicts, failures and scores)."""
    environ = EnvironBuilder(path=f"/{verb}", method="POST", data=data, content_type="application/json")
    where, decided = served.decide(environ.get_request())
    fields = decision_fields(where, decided, 0.0, 5.0, method="POST", path=f"/{verb}")
    told = [fields.get(key) for key in ("rejected", "skipped", "wouldReject", "auditFailed", "audited", "scores")]
    return decided.status, orjson.dumps(decided.body), told


@pytest.mark.usefixtures("broken_plugin")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS, st.dictionaries(st.sampled_from(NODES), LABELS))
def test_cached_and_uncached_answer_alike(monkeypatch, steps, labels):
    now = [dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)]
    monkeypatch.setattr(clock, "now", lambda: now[0].timestamp())
    listed = {name: Node(name, labels.get(name, {})) for name in NODES}
    source = ListedNodes(list(listed.values()))
    cached, plain = extender(True, source, monkeypatch), extender(False, source, monkeypatch)
    for kind, step in steps:
        if kind == "refresh":  # a new generation: changed nodes are new objects, the others are kept
            listed.update({name: Node(name, values) for name, values in step.items()})
            source.list(list(listed.values()))
        elif kind == "drop":  # nodes leave the cluster (a name the source lacks is then unknowable)
            for name in step:
                listed.pop(name, None)
            source.list(list(listed.values()))
        elif kind == "unavailable":
            listed.update({name: Node(name, why_unknown=status.error("API down")) for name in step})
            source.list(list(listed.values()))
        elif kind == "time":
            hours, minutes, *seconds = map(int, step.split(":"))
            now[0] = dt.datetime(2026, 3, 1, hours, minutes, *seconds, tzinfo=dt.UTC)
        else:
            data = body(step)
            for _ in range(2):  # the second answers from what the first kept
                assert answer(cached, step["verb"], data) == answer(plain, step["verb"], data)
