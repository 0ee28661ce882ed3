"""Plugin results reused across requests for a node source's Node objects: the same answers, only sooner."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.framework.profile import Profile
from extender.framework.reuse import ReusedResults
from extender.framework.types import Node
from extender.nodesource.base import unknowable
from extender.plugins.nodenamefilter import NodeNameFilter
from extender.policy.loader import parse_policy
from tests.plugin_helpers import build, node, pod

POLICY = """
nodeCacheCapable: false  # full nodes in the policy's eyes: the tests hand the profile its nodes
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


def cluster(labels: list[dict[str, str]], generation: int = 0) -> list[Node]:
    """A node source's list: fresh Node objects, as after each refresh."""
    return [Node(f"node-{generation}-{index}", dict(values)) for index, values in enumerate(labels)]


def answers(profile: Profile, namespace: str, nodes: list[Node], reusable: bool) -> tuple:
    the_pod = pod(namespace=namespace)
    filtered = profile.filter(the_pod, nodes, reusable=reusable)
    scored = profile.prioritize(the_pod, filtered.feasible, reusable=reusable)
    return [n.name for n in filtered.feasible], filtered.rejected, filtered.error, scored.scores, scored.by_plugin


@settings(max_examples=60, deadline=None)
@given(CLUSTERS, CLUSTERS, NAMESPACES)
def test_reused_results_equal_fresh_ones_across_pods_and_refreshes(first, second, namespaces):
    reusing, fresh = profile(), profile()
    for generation, labels in enumerate([first, second]):
        nodes = cluster(labels, generation)
        for namespace in namespaces * 2:  # the second round of each pod answers from what the first kept
            assert answers(reusing, namespace, nodes, True) == answers(fresh, namespace, nodes, False)


def test_a_refresh_with_new_labels_changes_the_answer():
    reusing = profile()
    before = [node("n-1", pool="web"), node("n-2", pool="web")]
    assert [n.name for n in reusing.filter(pod(), before, reusable=True).feasible] == ["n-1", "n-2"]
    # The node source refreshed: n-2 is now in the gpu pool (a new Node object under the same name).
    after = [before[0], node("n-2", pool="gpu")]
    result = reusing.filter(pod(), after, reusable=True)
    assert [n.name for n in result.feasible] == ["n-1"]
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
    nodes = [node("n-1"), node("other")]
    assert [n.name for n in reusing.filter(pod(name="a"), nodes, reusable=True).feasible] == ["n-1", "other"]
    now[0] = dt.datetime(2026, 3, 1, 13, 30, tzinfo=dt.UTC)
    result = reusing.filter(pod(name="b"), nodes, reusable=True)
    assert [n.name for n in result.feasible] == ["other"]
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


def test_each_nodes_whole_verdict_is_kept_and_a_changed_list_gets_its_own():
    reusing = profile()
    nodes = [node("n-1", pool="web"), node("n-2", pool="gpu"), node("n-9", pool="web"), node("n-4", pool="web")]
    first = reusing.filter(pod(), nodes, reusable=True)
    again = reusing.filter(pod(name="another-replica"), nodes, reusable=True)
    assert [n.name for n in again.feasible] == [n.name for n in first.feasible] == ["n-1", "n-4"]
    assert again.rejected == first.rejected and set(again.rejected) == {"n-2", "n-9"}
    assert again.seconds_by_plugin == {"NodeNameFilter": 0.0, "NodeLabelPolicy": 0.0}  # no plugin ran
    again.feasible.clear()
    again.rejected.clear()  # what a caller does with its result is not kept
    assert [n.name for n in reusing.filter(pod(), nodes, reusable=True).feasible] == ["n-1", "n-4"]
    reordered = reusing.filter(pod(), nodes[::-1], reusable=True)
    assert [n.name for n in reordered.feasible] == ["n-4", "n-1"]
    other_pod = reusing.filter(pod(namespace="ml"), nodes, reusable=True)  # another key: the gpu rule is not his
    assert [n.name for n in other_pod.feasible] == ["n-1", "n-2", "n-4"]


def test_the_verdict_on_an_undescribed_node_is_not_kept():
    reusing = profile()
    nodes = [node("n-1", pool="web"), unknowable("gone", "not in the node list")]
    for _ in range(2):
        result = reusing.filter(pod(), nodes, reusable=True)
        assert [n.name for n in result.feasible] == ["n-1"] and "gone" in result.rejected
    kept = [n.name for entry in reusing._verdicts._entries.values() for n in entry.nodes]
    assert kept == ["n-1"]  # the undescribed node is made anew by each request: nothing to keep
