"""A plugin's facts of its own (``Plugin.missing_facts``, ``Plugin.observations``): nodes it lacks them for are
judged as nodes with unknown labels, never silently, and what it measured reaches the decision entry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from extender.decision_log import decision_fields
from extender.framework import status
from extender.framework.plugin import FilterPlugin, Observed, ScorePlugin
from extender.framework.profile import EntryPolicy, Profile, ScorePluginEntry
from extender.framework.status import Code, Status
from extender.framework.types import Node, Pod
from extender.verbs import Answer
from tests.plugin_helpers import pod

NODES = [Node("a"), Node("b"), Node("x-1")]


class Measured(FilterPlugin, ScorePlugin):
    """Knows a load for every node but those named x-*; rejects b; scores 100 minus its measured 20."""

    name: ClassVar[str] = "Measured"

    def __init__(self, broken: bool = False) -> None:
        super().__init__({})
        self.broken = broken

    def prepare(self, pod: Pod) -> str:
        return "instant"

    def missing_facts(self, point: str, nodes: Sequence[Node], prepared: str) -> Mapping[str, Status]:
        if self.broken:
            raise RuntimeError("the metrics store is gone")
        return {node.name: status.error("no load for the node") for node in nodes if node.name.startswith("x-")}

    def filter(self, pod: Pod, node: Node, prepared: str) -> Status:
        assert not node.name.startswith("x-"), "never asked about a node without facts"
        return status.unschedulable("Measured: too busy") if node.name == "b" else status.SUCCESS

    def score(self, pod: Pod, node: Node, prepared: str) -> int:
        assert not node.name.startswith("x-")
        return 80

    def normalize_scores(self, pod: Pod, scores: dict[str, int], prepared: str) -> None:
        pass

    def observations(self, prepared: str) -> Observed:
        return lambda node: {"load": {"value": None if node.startswith("x-") else 0.2, "ageSeconds": 1.5}}


def profile(plugin: Measured, fail_open: bool = False, audit: bool = False) -> Profile:
    policy = EntryPolicy(fail_open=fail_open, audit=audit)
    entries = {("filter", "Measured"): policy, ("score", "Measured"): policy}
    return Profile("default", filters=[plugin], scores=[ScorePluginEntry(plugin, 1)], entries=entries)


def test_a_node_without_the_plugin_s_facts_follows_failure_policy_fail_and_is_noted():
    judged = profile(Measured()).filter(pod(), NODES)
    assert judged.feasible == ["a"] and judged.rejected["b"].reason == "Measured: too busy"
    missing = judged.rejected["x-1"]
    assert missing.code is Code.UNSCHEDULABLE and missing.plugin == "Measured"
    assert missing.reason == "plugin Measured could not judge the node (failurePolicy Fail): no load for the node"
    assert [note.reason for note in judged.skipped["x-1"]] == [missing.reason] and judged.unjudged["x-1"]
    scored = profile(Measured()).prioritize(pod(), NODES)
    assert scored.by_plugin["Measured"] == {"a": 80, "b": 80, "x-1": 0} and "x-1" in scored.skipped


def test_with_failure_policy_ignore_it_passes_and_is_left_out_of_the_score():
    judged = profile(Measured(), fail_open=True).filter(pod(), NODES)
    assert judged.feasible == ["a", "x-1"] and judged.skipped["x-1"][0].code is Code.SUCCESS
    scored = profile(Measured(), fail_open=True).prioritize(pod(), NODES)
    assert "x-1" not in scored.by_plugin["Measured"] and scored.scores["x-1"] == 0
    assert scored.skipped["x-1"][0].reason.startswith("left out of the node's score")


def test_not_one_node_with_facts_answers_the_error_saying_why():
    judged = profile(Measured()).filter(pod(), [Node("x-1"), Node("x-2")])
    assert judged.error is not None and judged.error.reason == "no load for the node"


def test_a_plugin_failing_to_say_which_facts_it_lacks_is_its_failure():
    enforced = profile(Measured(broken=True)).filter(pod(), NODES)
    assert enforced.error is not None
    assert enforced.error.reason == "plugin Measured failed in filter: RuntimeError: the metrics store is gone"
    audited = profile(Measured(broken=True), audit=True)
    judged, scored = audited.filter(pod(), NODES), audited.prioritize(pod(), NODES)
    assert (
        judged.error is None and judged.feasible == ["a", "b", "x-1"] and set(judged.audit_failed) == {"a", "b", "x-1"}
    )
    assert scored.error is None and set(scored.audit_failed) == {"a", "b", "x-1"}


def test_what_the_plugin_measured_reaches_the_decision_entry_for_the_nodes_it_names():
    judged = profile(Measured()).filter(pod(), NODES)
    fields = decision_fields(None, Answer({}, result=judged, pod=pod()), 0.001, 5.0, method="POST", path="/filter")
    facts: dict[str, Any] = fields["nodeFacts"]["Measured"]
    assert facts == {
        "b": {"load": {"value": 0.2, "ageSeconds": 1.5}},
        "x-1": {"load": {"value": None, "ageSeconds": 1.5}},
    }  # the rejected and the skipped: the entry names no node that passed
