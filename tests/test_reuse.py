"""Plugin results and verdicts reused across requests for a node source's nodes: the same answers, only sooner."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.framework import status
from extender.framework.profile import Profile
from extender.framework.reuse import KeptVerdicts, PerGeneration, ReusedResults
from extender.framework.types import Node
from extender.nodesource.base import unknowable
from extender.plugins.nodenamefilter import NodeNameFilter
from extender.policy.loader import parse_policy
from tests.plugin_helpers import ListedNodes, build, node, pod

POLICY = """
nodeCacheCapable: false  # the tests hand the profile its nodes, or a node source of their own
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}, {name: NodeLabelPolicy}]}
    score: {enabled: [{name: InstanceCost, weight: 2}, {name: TopologyPreference, weight: 1}]}
  pluginConfig:
  - name: NodeNameFilter
    args: {deny: ["*-9"]}
  - name: NodeLabelPolicy
    args:
      rules:
      - name: off-gpu
        pods: {excludeNamespaces: [ml]}
        nodeSelector: {matchExpressions: [{key: pool, operator: NotIn, values: [gpu]}]}
  - name: InstanceCost
    args: {prices: {small: 1.0, large: 4.0}, spotDiscount: 0.5}
  - name: TopologyPreference
    args:
      preferences:
      - {label: zone, weights: {a: 100, b: 40}}
      - {label: pool, weights: {gpu: 100}, pods: {namespaces: [ml]}}
"""

POOLS = st.sampled_from(["gpu", "web", None])
ZONES = st.sampled_from(["a", "b", "c", None])
TYPES = st.sampled_from(["small", "large", "huge", None])
SPOT = st.sampled_from(["true", "false", None])
LABELS = st.fixed_dictionaries(
    {},
    optional={
        "pool": POOLS.filter(bool),
        "zone": ZONES.filter(bool),
        "node.kubernetes.io/instance-type": TYPES.filter(bool),
        "cloud.google.com/gke-spot": SPOT.filter(bool),
    },
)
CLUSTERS = st.lists(LABELS, min_size=1, max_size=40)
NAMESPACES = st.lists(st.sampled_from(["ml", "web", "default"]), min_size=1, max_size=4)


def profile() -> Profile:
    return parse_policy(POLICY, "test").profiles["default"]


def cluster(labels: list[dict[str, str]]) -> list[Node]:
    """A node source's list: fresh Node objects, as after each refresh (the same names, maybe other labels)."""
    return [Node(f"node-{index}", dict(values)) for index, values in enumerate(labels)]


def answers(profile: Profile, namespace: str, nodes: list[Node], source: ListedNodes | None = None) -> tuple:
    """Filter, then prioritize what passed: by name from ``source`` when given, else on the nodes themselves."""
    the_pod = pod(namespace=namespace)
    if source is None:
        filtered = profile.filter(the_pod, nodes)
        by_name = {node.name: node for node in nodes}
        scored = profile.prioritize(the_pod, [by_name[name] for name in filtered.feasible])
    else:
        filtered = profile.filter_names(the_pod, [node.name for node in nodes], source)
        scored = profile.prioritize_names(the_pod, filtered.feasible, source)
    return filtered.feasible, filtered.rejected, filtered.error, scored.scores, scored.by_plugin


@settings(max_examples=60, deadline=None)
@given(CLUSTERS, CLUSTERS, NAMESPACES)
def test_reused_results_equal_fresh_ones_across_pods_and_refreshes(first, second, namespaces):
    reusing, fresh = profile(), profile()
    source = ListedNodes([])
    for labels in [first, second]:
        nodes = cluster(labels)
        source.list(nodes)
        for namespace in namespaces * 2:  # the second round of each pod answers from what the first kept
            assert answers(reusing, namespace, nodes, source) == answers(fresh, namespace, nodes)


def test_a_refresh_with_new_labels_changes_the_answer():
    reusing = profile()
    before = [node("n-1", pool="web"), node("n-2", pool="web")]
    assert reusing.filter(pod(), before, reusable=True).feasible == ["n-1", "n-2"]
    # The node source refreshed: n-2 is now in the gpu pool (a new Node object under the same name).
    after = [before[0], node("n-2", pool="gpu")]
    result = reusing.filter(pod(), after, reusable=True)
    assert result.feasible == ["n-1"]
    assert "off-gpu" in result.rejected["n-2"].reason


def test_a_maintenance_window_opening_is_seen_by_the_next_request():
    now = [dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)]
    args = {
        "maintenance": [
            {
                "name": "m",
                "nodes": ["n-*"],
                "windows": [{"start": "2026-03-01T13:00:00Z", "end": "2026-03-01T14:00:00Z"}],
            }
        ]
    }
    reusing = Profile("p", filters=[build(NodeNameFilter, args, clock=lambda: now[0])])
    source = ListedNodes([node("n-1"), node("other")])
    assert reusing.filter_names(pod(name="a"), ["n-1", "other"], source).feasible == ["n-1", "other"]
    now[0] = dt.datetime(2026, 3, 1, 13, 30, tzinfo=dt.UTC)
    result = reusing.filter_names(pod(name="b"), ["n-1", "other"], source)
    assert result.feasible == ["other"]
    assert "maintenance 'm'" in result.rejected["n-1"].reason


def counting(calls: list[int]):
    def compute(nodes):
        calls.append(len(nodes))
        return [n.name.upper() for n in nodes]

    return compute


def test_only_nodes_not_seen_before_are_computed():
    reused: ReusedResults[str] = ReusedResults()
    calls: list[int] = []
    nodes = [Node(f"n{i}") for i in range(10)]
    assert reused.results("k", nodes, counting(calls)) == [n.name.upper() for n in nodes]
    assert reused.results("k", nodes[:4], counting(calls)) == ["N0", "N1", "N2", "N3"]
    newcomer = Node("late")
    assert reused.results("k", [*nodes, newcomer], counting(calls))[-1] == "LATE"
    assert reused.results("other key", nodes[:2], counting(calls)) == ["N0", "N1"]
    assert calls == [10, 1, 2]


def test_nodes_their_source_could_not_describe_are_not_kept():
    reused: ReusedResults[str] = ReusedResults()
    calls: list[int] = []
    nodes = [Node("n1"), unknowable("gone", "not listed")]
    for _ in range(2):
        assert reused.results("k", nodes, counting(calls)) == ["N1", "GONE"]
    assert calls == [2, 1]
    assert [kept.name for kept in reused._entries["k"].nodes] == ["n1"]


def test_results_not_kept_are_computed_again():
    reused: ReusedResults[str] = ReusedResults()
    calls: list[int] = []
    nodes = [Node("n1")]
    for _ in range(2):
        assert reused.results("k", nodes, counting(calls), keep=lambda computed: False) == ["N1"]
    assert calls == [1, 1]


def test_a_refresh_lets_the_old_nodes_go_and_memory_stays_bounded():
    reused: ReusedResults[str] = ReusedResults()
    old = [Node(f"n{i}") for i in range(10)]
    reused.results("k", old, counting([]))
    new = [Node(f"n{i}") for i in range(10)]  # same names, new objects: most miss, so the entry starts afresh
    calls: list[int] = []
    assert reused.results("k", new, counting(calls)) == [n.name.upper() for n in new]
    assert calls == [10]
    entry = reused._entries["k"]
    assert len(entry.results) == 10 and all(kept is fresh for kept, fresh in zip(entry.nodes, new))
    for key in range(ReusedResults.MAX_KEYS + 5):
        reused.results(key, new, counting([]))
    assert len(reused._entries) <= ReusedResults.MAX_KEYS


def test_full_node_requests_keep_nothing():
    reusing = profile()
    reusing.filter(pod(), [node("n-1", pool="web")])
    reusing.prioritize(pod(), [node("n-1", pool="web")])
    kept = (*reusing._reused_statuses, *reusing._reused_scores, reusing._verdicts, reusing._scored)
    assert all(not memory._entries for memory in kept)


def test_each_names_whole_verdict_is_kept_and_only_new_names_are_looked_up():
    reusing = profile()
    pools = {"n-1": "web", "n-2": "gpu", "n-9": "web", "n-4": "web"}
    source = ListedNodes([node(name, pool=pool) for name, pool in pools.items()])
    names = ["n-1", "n-2", "n-9", "n-4"]
    first = reusing.filter_names(pod(), names, source)
    again = reusing.filter_names(pod(name="another-replica"), names, source)
    assert again.feasible == first.feasible == ["n-1", "n-4"]
    assert again.rejected == first.rejected and set(again.rejected) == {"n-2", "n-9"}
    assert again.seconds_by_plugin == {"NodeNameFilter": 0.0, "NodeLabelPolicy": 0.0}  # no plugin ran
    assert source.looked_up == [4]  # the second request looked nothing up
    again.feasible.clear()
    again.rejected.clear()  # what a caller does with its result is not kept
    assert reusing.filter_names(pod(), names, source).feasible == ["n-1", "n-4"]
    assert reusing.filter_names(pod(), names[::-1], source).feasible == ["n-4", "n-1"]
    source.list([*source.lookup(names), node("n-5", pool="web")])
    source.looked_up.clear()
    assert reusing.filter_names(pod(), ["n-5", *names], source).feasible == ["n-5", "n-1", "n-4"]
    other_pod = reusing.filter_names(pod(namespace="ml"), names, source)  # another key: the gpu rule is not his
    assert other_pod.feasible == ["n-1", "n-2", "n-4"]
    assert source.looked_up == [5, 4]  # a new list is a new generation: its names are looked up once


def test_a_profile_without_filters_passes_every_name_without_looking_any_up():
    source = ListedNodes([node("n-1")])
    result = Profile("p").filter_names(pod(), ["n-1", "unlisted"], source)
    assert result.feasible == ["n-1", "unlisted"] and not result.rejected and result.error is None
    assert source.looked_up == []


def test_a_new_generation_is_seen_by_the_next_request():
    reusing = profile()
    source = ListedNodes([node("n-1", pool="web"), node("n-2", pool="web")])
    assert reusing.filter_names(pod(), ["n-1", "n-2"], source).feasible == ["n-1", "n-2"]
    source.list([node("n-1", pool="web"), node("n-2", pool="gpu")])
    result = reusing.filter_names(pod(), ["n-1", "n-2"], source)
    assert result.feasible == ["n-1"] and "off-gpu" in result.rejected["n-2"].reason


def test_nothing_is_kept_when_the_generation_changes_during_the_request():
    class Refreshing(ListedNodes):
        def lookup(self, names):
            self.list(list(self._nodes.values()))  # a refresh lands while the request looks its names up
            return super().lookup(names)

    reusing = profile()
    source = Refreshing([node("n-1", pool="web")])
    for _ in range(2):
        assert reusing.filter_names(pod(), ["n-1"], source).feasible == ["n-1"]
        assert reusing.prioritize_names(pod(), ["n-1"], source).error is None
    assert source.looked_up == [1, 1, 1, 1]
    assert not reusing._verdicts._entries and not reusing._scored._entries


def test_the_verdict_on_an_undescribed_node_or_an_error_is_not_kept():
    reusing = profile()
    source = ListedNodes([node("n-1", pool="web")])
    for _ in range(2):
        result = reusing.filter_names(pod(), ["n-1", "gone"], source)
        assert result.feasible == ["n-1"] and "gone" in result.rejected
    assert source.looked_up == [2, 1]  # the undescribed node is made anew by each request: nothing to keep
    (_, kept), = reusing._verdicts._entries.values()
    assert kept.decided == {"n-1"} and not kept.rejected
    failing = ListedNodes([node("n-1", pool="web"), Node("n-2", why_unknown=status.error("API down"))])
    for _ in range(2):
        assert reusing.filter_names(pod(), ["n-1", "n-2"], failing).error is not None
    assert failing.looked_up == [2, 2]


def test_kept_values_need_their_generation_and_stay_bounded():
    kept: PerGeneration[str] = PerGeneration()
    generation = object()
    kept.put("k", generation, "value")
    assert kept.get("k", generation) == "value"
    assert kept.get("k", object()) is None and kept.get("other", generation) is None
    for key in range(PerGeneration.MAX_KEYS + 5):
        kept.put(key, generation, "value")
    assert len(kept._entries) <= PerGeneration.MAX_KEYS
    full = KeptVerdicts(frozenset(f"n{i}" for i in range(ReusedResults.MAX_NODES)))
    assert full.adding([Node("one-more")], {}) == KeptVerdicts()  # full: the next request starts afresh
