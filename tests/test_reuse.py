"""Plugin results and verdicts reused across requests for a node source's nodes: the same answers, only sooner."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.framework import status
from extender.framework.kept import KeptProfile, ServedProfile
from extender.framework.plugin import FilterPlugin
from extender.framework.profile import Profile
from extender.framework.status import Status
from extender.framework.types import Node, Pod
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


def profile() -> ServedProfile:
    """The policy's profile as served: with kept results (the default)."""
    served = parse_policy(POLICY, "test").profiles["default"]
    assert isinstance(served, KeptProfile)
    return served


def cluster(labels: list[dict[str, str]]) -> list[Node]:
    """A node source's list: fresh Node objects, as after each refresh (the same names, maybe other labels)."""
    return [Node(f"node-{index}", dict(values)) for index, values in enumerate(labels)]


def answers(profile: ServedProfile, namespace: str, nodes: list[Node], source: ListedNodes | None = None) -> tuple:
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
    source = ListedNodes(before)
    assert reusing.filter_names(pod(), ["n-1", "n-2"], source).feasible == ["n-1", "n-2"]
    # The node source refreshed: n-2 is now in the gpu pool (a new Node object under the same name).
    source.list([before[0], node("n-2", pool="gpu")])
    result = reusing.filter_names(pod(), ["n-1", "n-2"], source)
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
    reusing = KeptProfile(Profile("p", filters=[build(NodeNameFilter, args, clock=lambda: now[0])]))
    source = ListedNodes([node("n-1"), node("other")])
    assert reusing.filter_names(pod(name="a"), ["n-1", "other"], source).feasible == ["n-1", "other"]
    now[0] = dt.datetime(2026, 3, 1, 13, 30, tzinfo=dt.UTC)
    result = reusing.filter_names(pod(name="b"), ["n-1", "other"], source)
    assert result.feasible == ["other"]
    assert "maintenance 'm'" in result.rejected["n-1"].reason


class Counting(FilterPlugin):
    """Rejects names ending in "x"; records each node it judges."""

    name = "Counting"

    def __init__(self, key: object = ()) -> None:
        super().__init__({})
        self.key = key
        self.judged: list[str] = []

    def reuse_key(self, pod: Pod) -> object:
        return self.key

    def filter(self, pod: Pod, node: Node) -> Status:
        self.judged.append(node.name)
        return status.unschedulable("ends in x") if node.name.endswith("x") else status.SUCCESS


def test_only_nodes_not_judged_before_in_this_generation_are_judged():
    plugin = Counting()
    kept = KeptProfile(Profile("p", filters=[plugin]))
    nodes = [Node(f"n{i}") for i in range(10)]
    source = ListedNodes([*nodes, Node("late"), Node("n-x")])
    names = [node.name for node in nodes]
    assert kept.filter_names(pod(), names, source).feasible == names
    assert kept.filter_names(pod(), names[:4], source).feasible == names[:4]
    result = kept.filter_names(pod(), [*names, "late", "n-x"], source)
    assert result.feasible == [*names, "late"] and set(result.rejected) == {"n-x"}
    assert kept.filter_names(pod(), ["n-x", "n0"], source).feasible == ["n0"]
    assert plugin.judged == [*names, "late", "n-x"]


def test_a_refresh_judges_only_the_nodes_whose_objects_changed():
    plugin = Counting()
    kept = KeptProfile(Profile("p", filters=[plugin]))
    nodes = [Node(f"n{i}") for i in range(5)]
    source = ListedNodes(nodes)
    names = [node.name for node in nodes]
    kept.filter_names(pod(), names, source)
    source.list([*nodes[:4], Node("n4")])  # a new generation: n4 changed, the others kept their objects
    assert kept.filter_names(pod(), names, source).feasible == names
    assert plugin.judged == [*names, "n4"]


def test_nodes_their_source_could_not_describe_are_judged_by_each_request():
    plugin = Counting()
    kept = KeptProfile(Profile("p", filters=[plugin]))
    source = ListedNodes([Node("n1")])
    for _ in range(2):
        assert kept.filter_names(pod(), ["n1", "gone"], source).feasible == ["n1", "gone"]
    assert plugin.judged == ["n1", "gone", "gone"]


def test_full_node_requests_and_plugins_without_a_key_keep_nothing():
    keyed, keyless = Counting(), Counting(key=None)
    nodes = [Node("n1")]
    for _ in range(2):
        KeptProfile(Profile("p", filters=[keyed])).filter(pod(), nodes)
        KeptProfile(Profile("q", filters=[keyless])).filter_names(pod(), ["n1"], ListedNodes(nodes))
    assert keyed.judged == keyless.judged == ["n1", "n1"]


def test_the_plain_profile_keeps_nothing():
    plugin = Counting()
    plain = Profile("p", filters=[plugin])
    source = ListedNodes([Node("n1")])
    for _ in range(2):
        assert plain.filter_names(pod(), ["n1"], source).feasible == ["n1"]
    assert plugin.judged == ["n1", "n1"]


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


def test_requests_rejecting_the_kept_rejections_share_what_is_derived_from_them():
    """Their answers' failure maps and decision-entry groups are worked out once per kept rejections (and are the same
    whatever the order of the names); a request rejecting another set works its own out."""
    from extender.decision_log import _rejection_groups
    from extender.verbs.filtering import _failure_maps

    reusing = profile()
    pools = {"n-1": "web", "n-2": "gpu", "n-9": "web", "n-4": "web"}
    source = ListedNodes([node(name, pool=pool) for name, pool in pools.items()])
    names = ["n-1", "n-2", "n-9", "n-4"]
    first = reusing.filter_names(pod(), names, source)
    again = reusing.filter_names(pod(name="another-replica"), names[::-1], source)
    assert first.rejected_kept is not None and again.rejected_kept is first.rejected_kept
    assert again.rejected is not again.rejected_kept  # the request's own copy, which its caller may change
    assert _failure_maps(again) is _failure_maps(first) and _rejection_groups(again) is _rejection_groups(first)
    # By name, whatever order the names came in: the plain profile's answer to the reversed names is the same.
    plain = reusing.plain.filter(pod(), source.lookup(names[::-1]))
    assert list(_failure_maps(plain)[1]) == list(_failure_maps(first)[1]) == ["n-2", "n-9"]
    fewer = reusing.filter_names(pod(), ["n-1", "n-2", "n-4"], source)  # n-9 not asked about: not the kept set
    assert fewer.rejected_kept is None and set(fewer.rejected) == {"n-2"}
    assert _failure_maps(fewer)[1] == {"n-2": first.rejected["n-2"].reason}


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


def test_the_verdict_on_an_undescribed_node_or_an_error_is_not_kept():
    reusing = profile()
    source = ListedNodes([node("n-1", pool="web")])
    for _ in range(2):
        result = reusing.filter_names(pod(), ["n-1", "gone"], source)
        assert result.feasible == ["n-1"] and "gone" in result.rejected
    assert source.looked_up == [2, 1]  # the undescribed node is made anew by each request: nothing to keep
    # A node whose facts are unavailable is rejected alone (failurePolicy Fail), and its verdict is never kept.
    failing = ListedNodes([node("n-1", pool="web"), Node("n-2", why_unknown=status.error("API down"))])
    for _ in range(2):
        result = reusing.filter_names(pod(), ["n-1", "n-2"], failing)
        assert result.feasible == ["n-1"] and "API down" in result.rejected["n-2"].reason and result.error is None
    assert failing.looked_up == [2, 1]
    # Not one node judged: an Error, never kept either.
    down = ListedNodes([Node("n-3", why_unknown=status.error("API down"))])
    for _ in range(2):
        assert reusing.filter_names(pod(), ["n-3"], down).error.reason == "API down"
    assert down.looked_up == [1, 1]


def test_more_keys_than_are_kept_start_afresh_and_the_newest_is_kept():
    plugin = Counting()
    kept = KeptProfile(Profile("p", filters=[plugin]))
    source = ListedNodes([Node("n1")])
    for key in range(20):  # pods with ever new keys
        plugin.key = key
        kept.filter_names(pod(), ["n1"], source)
    assert plugin.judged == ["n1"] * 20
    kept.filter_names(pod(), ["n1"], source)
    assert plugin.judged == ["n1"] * 20  # the newest key's verdict was kept
