"""Normalized scores and their weighted sum kept for a node source's candidate set: the same answers, sooner."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.framework.plugin import ScorePlugin
from extender.framework.profile import Profile, ScorePluginEntry
from extender.framework.reuse import ForSameNodes
from extender.framework.types import Node, Pod
from extender.verbs import prioritize
from tests.plugin_helpers import pod
from tests.test_reuse import CLUSTERS, NAMESPACES, cluster, profile


def scored(profile: Profile, namespace: str, nodes: list[Node], reusable: bool) -> tuple:
    result = profile.prioritize(pod(namespace=namespace), nodes, reusable=reusable)
    return result.scores, result.by_plugin, result.error


@settings(max_examples=60, deadline=None)
@given(CLUSTERS, NAMESPACES, st.data())
def test_kept_scores_equal_fresh_ones_for_changing_candidate_lists(labels, namespaces, data):
    reusing, fresh = profile(), profile()
    nodes = cluster(labels)
    for namespace in namespaces * 2:
        # The filters pass a different subset, in the source's order or not, from request to request.
        candidates = data.draw(st.lists(st.sampled_from(nodes), unique_by=id, min_size=1))
        for _ in range(2):  # the second answers from what the first kept
            assert scored(reusing, namespace, candidates, True) == scored(fresh, namespace, candidates, False)


class Counting(ScorePlugin):
    """Scores the length of the node's name; normalizing relative to the longest, counting its calls."""

    name = "Counting"

    def __init__(self, key: object) -> None:
        super().__init__({})
        self.key = key
        self.normalized = 0

    def reuse_key(self, pod: Pod) -> object:
        return self.key

    def score(self, pod: Pod, node: Node) -> int:
        return len(node.name)

    def normalize_scores(self, pod: Pod, scores: dict[str, int]) -> None:
        self.normalized += 1
        longest = max(scores.values())
        scores.update({name: score * 100 // longest for name, score in scores.items()})


def test_the_same_candidates_are_normalized_and_combined_once():
    plugin = Counting(key=())
    profile = Profile("p", scores=[ScorePluginEntry(plugin, 1)])
    nodes = [Node("a"), Node("bb"), Node("cccc")]
    first = profile.prioritize(pod(), nodes, reusable=True)
    again = profile.prioritize(pod(), list(nodes), reusable=True)
    # kube-scheduler's parallel filters hand the same candidates over in another order each cycle.
    reordered = profile.prioritize(pod(), nodes[::-1], reusable=True)
    assert plugin.normalized == 1 and again.scores is first.scores and reordered.scores is first.scores
    assert again.scores == {"a": 3, "bb": 5, "cccc": 10}
    assert again.seconds_by_plugin == {"Counting": 0.0}  # no plugin ran
    # Normalizing depends on every candidate: without the longest name, the others score higher.
    fewer = profile.prioritize(pod(), nodes[:2], reusable=True)
    assert plugin.normalized == 2 and fewer.scores == {"a": 5, "bb": 10}
    # Same names, new objects (the source refreshed): worked out afresh.
    refreshed = profile.prioritize(pod(), [Node(n.name) for n in nodes], reusable=True)
    assert plugin.normalized == 3 and refreshed.scores == first.scores and refreshed.scores is not first.scores


def test_nothing_is_kept_without_a_reuse_key_or_for_full_nodes():
    keyless, keyed = Counting(key=None), Counting(key=())
    nodes = [Node("a"), Node("bb")]
    profiles = [
        (keyless, Profile("p", scores=[ScorePluginEntry(keyless, 1)]), True),
        (keyed, Profile("q", scores=[ScorePluginEntry(keyed, 1)]), False),
    ]
    for plugin, the_profile, reusable in profiles:
        answers = [the_profile.prioritize(pod(), nodes, reusable=reusable) for _ in range(2)]
        assert plugin.normalized == 2 and answers[0].scores == answers[1].scores == {"a": 5, "bb": 10}
        assert answers[0].scores is not answers[1].scores


def test_kept_values_need_the_same_nodes_in_any_order_and_stay_bounded():
    kept: ForSameNodes[str] = ForSameNodes()
    nodes = [Node("a"), Node("b")]
    kept.put("k", nodes, "value")
    assert kept.get("k", list(nodes)) == "value"
    assert kept.get("k", nodes[::-1]) == "value"
    assert kept.get("k", nodes[:1]) is None
    assert kept.get("k", [*nodes, Node("c")]) is None
    assert kept.get("k", [Node("a"), Node("b")]) is None
    assert kept.get("other", nodes) is None
    for key in range(ForSameNodes.MAX_KEYS + 5):
        kept.put(key, nodes, "value")
    assert len(kept._entries) <= ForSameNodes.MAX_KEYS


def test_the_answer_follows_the_request_order_and_is_built_again_only_for_other_scores():
    scores = {"a": 3, "b": 10}
    nodes = [Node("a"), Node("b")]
    first = prioritize._answer(scores, nodes)
    assert first == [{"Host": "a", "Score": 3}, {"Host": "b", "Score": 10}]
    reordered = prioritize._answer(scores, nodes[::-1])
    assert reordered == first[::-1] and all(x is y for x, y in zip(reordered, first[::-1]))  # the same entries
    other = prioritize._answer(dict(scores), nodes)
    assert other == first and other[0] is not first[0]


def test_a_profile_without_score_plugins_keeps_its_zeros_for_the_same_nodes_only():
    profile = Profile("p")
    nodes = [Node("a"), Node("b")]
    first = profile.prioritize(pod(), nodes, reusable=True)
    assert (
        first.scores == {"a": 0, "b": 0}
        and profile.prioritize(pod(), list(nodes), reusable=True).scores is first.scores
    )
    assert profile.prioritize(pod(), [nodes[1], Node("c")], reusable=True).scores == {"b": 0, "c": 0}
