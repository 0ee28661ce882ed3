"""Normalized scores and their weighted sum kept for a node source's candidate set: the same answers, sooner."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.framework.kept import KeptProfile, ServedProfile
from extender.framework.plugin import ScorePlugin
from extender.framework.profile import Profile, ScorePluginEntry, ScoreResult
from extender.framework.types import Node, Pod
from extender.verbs import prioritize
from tests.plugin_helpers import ListedNodes, pod
from tests.test_reuse import CLUSTERS, NAMESPACES, cluster, profile


def scored(profile: ServedProfile, namespace: str, nodes: list, source: ListedNodes | None = None) -> tuple:
    """Prioritize node names from ``source`` when given, else the Node objects themselves."""
    the_pod = pod(namespace=namespace)
    result = profile.prioritize(the_pod, nodes) if source is None else profile.prioritize_names(the_pod, nodes, source)
    return result.scores, result.by_plugin, result.error


@settings(max_examples=60, deadline=None)
@given(CLUSTERS, NAMESPACES, st.data())
def test_kept_scores_equal_fresh_ones_for_changing_candidate_lists(labels, namespaces, data):
    reusing, fresh = profile(), profile()
    nodes = cluster(labels)
    source = ListedNodes(nodes)
    for namespace in namespaces * 2:
        # The filters pass a different subset, in the source's order or not, from request to request.
        candidates = data.draw(st.lists(st.sampled_from(nodes), unique_by=id, min_size=1))
        names = [node.name for node in candidates]
        for _ in range(2):  # the second answers from what the first kept
            assert scored(reusing, namespace, names, source) == scored(fresh, namespace, candidates)


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
    profile = KeptProfile(Profile("p", scores=[ScorePluginEntry(plugin, 1)]))
    source = ListedNodes([Node("a"), Node("bb"), Node("cccc")])
    names = ["a", "bb", "cccc"]
    first = profile.prioritize_names(pod(), names, source)
    again = profile.prioritize_names(pod(), list(names), source)
    # kube-scheduler's parallel filters hand the same candidates over in another order each cycle.
    reordered = profile.prioritize_names(pod(), names[::-1], source)
    assert plugin.normalized == 1 and again.scores is first.scores and reordered.scores is first.scores
    assert again.scores == {"a": 3, "bb": 5, "cccc": 10}
    assert again.seconds_by_plugin == {"Counting": 0.0}  # no plugin ran
    assert source.looked_up == [3]  # nor was any node looked up
    # Normalizing depends on every candidate: without the longest name, the others score higher.
    fewer = profile.prioritize_names(pod(), names[:2], source)
    assert plugin.normalized == 2 and fewer.scores == {"a": 5, "bb": 10}
    # The same names in a new list (the source refreshed): worked out afresh.
    source.list([Node(name) for name in names])
    refreshed = profile.prioritize_names(pod(), names, source)
    assert plugin.normalized == 3 and refreshed.scores == first.scores and refreshed.scores is not first.scores


def test_nothing_is_kept_without_a_reuse_key_or_for_full_nodes():
    keyless, keyed = Counting(key=None), Counting(key=())
    nodes = [Node("a"), Node("bb")]
    source = ListedNodes(nodes)
    keyless_profile = KeptProfile(Profile("p", scores=[ScorePluginEntry(keyless, 1)]))
    keyed_profile = KeptProfile(Profile("q", scores=[ScorePluginEntry(keyed, 1)]))
    by_name = [keyless_profile.prioritize_names(pod(), ["a", "bb"], source) for _ in range(2)]
    full = [keyed_profile.prioritize(pod(), nodes) for _ in range(2)]
    for plugin, answers in ((keyless, by_name), (keyed, full)):
        assert plugin.normalized == 2 and answers[0].scores == answers[1].scores == {"a": 5, "bb": 10}
        assert answers[0].scores is not answers[1].scores


@pytest.mark.parametrize("kept", [True, False])
def test_the_answer_follows_the_request_order(kept):
    result = ScoreResult({"a": 3, "b": 10}, kept=kept)
    first = prioritize._answer(result, ["a", "b"])
    assert orjson.loads(orjson.dumps(first)) == [{"Host": "a", "Score": 3}, {"Host": "b", "Score": 10}]
    reordered = prioritize._answer(result, ["b", "a"])
    assert orjson.loads(orjson.dumps(reordered)) == [{"Host": "b", "Score": 10}, {"Host": "a", "Score": 3}]
    other = prioritize._answer(ScoreResult({"a": 4, "b": 10}, kept=kept), ["a", "b"])
    assert orjson.loads(orjson.dumps(other))[0] == {"Host": "a", "Score": 4}


def test_names_that_need_escaping_are_encoded_as_json():
    names = ['quote"d', "back\\slash", "new\nline", "ünïcode"]
    answer = prioritize._answer(ScoreResult(dict.fromkeys(names, 7)), names)
    assert orjson.loads(orjson.dumps(answer)) == [{"Host": name, "Score": 7} for name in names]


def test_a_profile_without_score_plugins_keeps_its_zeros_for_the_same_nodes_only():
    profile = KeptProfile(Profile("p"))
    source = ListedNodes([Node("a"), Node("b"), Node("c")])
    first = profile.prioritize_names(pod(), ["a", "b"], source)
    assert first.scores == {"a": 0, "b": 0}
    assert profile.prioritize_names(pod(), ["b", "a"], source).scores is first.scores
    assert profile.prioritize_names(pod(), ["b", "c"], source).scores == {"b": 0, "c": 0}
