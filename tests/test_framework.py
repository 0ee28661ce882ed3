"""The scheduling core: status mapping, score combination, plugin failures, preemption."""

from __future__ import annotations

from typing import ClassVar

import pytest

from extender.framework import status
from extender.framework.plugin import FilterPlugin, PreemptPlugin, ScorePlugin
from extender.framework.profile import Profile, ScorePluginEntry
from extender.framework.status import Code
from extender.framework.types import Facts, Node, Pod, Victims

POD = Pod(uid="u1", name="p", namespace="ns")
NODES = [Node("a", {}), Node("b", {}), Node("c", {})]


class RejectByName(FilterPlugin):
    name: ClassVar[str] = "RejectByName"

    def filter(self, pod, node):
        verdict = self.args.get(node.name)
        if verdict == "unschedulable":
            return status.unschedulable(f"{node.name} is full")
        if verdict == "unresolvable":
            return status.unresolvable("wrong rack")
        if verdict == "error":
            return status.error("license server down")
        if verdict == "crash":
            raise RuntimeError("boom")
        return status.SUCCESS


class FixedScore(ScorePlugin):
    name: ClassVar[str] = "FixedScore"

    def score(self, pod, node):
        return self.args[node.name]


class LabelScore(ScorePlugin):
    name: ClassVar[str] = "LabelScore"
    facts = Facts.LABELS

    def score(self, pod, node):
        return 100 if node.labels.get("fast") == "true" else 0


class VetoNamespace(PreemptPlugin):
    name: ClassVar[str] = "VetoNamespace"

    def select_victims(self, pod, node_name, victims):
        if any(victim.namespace == "kube-system" for victim in victims.pods):
            return status.unschedulable("would evict a kube-system pod")
        return status.SUCCESS


def test_filter_maps_statuses_and_keeps_order():
    profile = Profile("p", filters=[RejectByName({"b": "unschedulable", "c": "unresolvable"})])
    result = profile.filter(POD, NODES)
    assert result.feasible == ["a"]
    assert result.rejected["b"] == status.Status(Code.UNSCHEDULABLE, "b is full", "RejectByName")
    assert result.rejected["c"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.error is None
    assert set(result.seconds_by_plugin) == {"RejectByName"}


def test_first_failing_plugin_in_order_decides():
    first = RejectByName({"a": "unresolvable"})
    second = type("Second", (RejectByName,), {"name": "Second"})({"a": "unschedulable", "b": "unschedulable"})
    result = Profile("p", filters=[first, second]).filter(POD, NODES)
    assert result.rejected["a"].plugin == "RejectByName"
    assert result.rejected["b"].plugin == "Second"


@pytest.mark.parametrize(
    ("verdict", "message"),
    [("error", "license server down"), ("crash", "plugin RejectByName failed in filter on node b: RuntimeError: boom")],
)
def test_filter_error_fails_the_whole_answer(verdict, message):
    result = Profile("p", filters=[RejectByName({"b": verdict})]).filter(POD, NODES)
    assert result.error is not None and result.error.reason == message
    assert result.feasible == []


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ({"a": 0, "b": 50, "c": 100}, {"a": 0, "b": 5, "c": 10}),
        ({"a": 4, "b": 5, "c": 96}, {"a": 0, "b": 1, "c": 10}),  # rounds half up
        ({"a": 0, "b": 0, "c": 0}, {"a": 0, "b": 0, "c": 0}),
    ],
)
def test_single_score_maps_onto_0_to_10(scores, expected):
    result = Profile("p", scores=[ScorePluginEntry(FixedScore(scores), 1)]).prioritize(POD, NODES)
    assert result.scores == expected
    assert list(result.scores) == ["a", "b", "c"]


def test_weights_combine_as_a_weighted_average():
    cheap = FixedScore({"a": 100, "b": 0, "c": 0})
    near = type("Near", (FixedScore,), {"name": "Near"})({"a": 0, "b": 100, "c": 0})
    result = Profile("p", scores=[ScorePluginEntry(cheap, 3), ScorePluginEntry(near, 1)]).prioritize(POD, NODES)
    assert result.scores == {"a": 8, "b": 3, "c": 0}  # 75 -> 7.5 -> 8, 25 -> 2.5 -> 3
    assert result.by_plugin == {"FixedScore": {"a": 100, "b": 0, "c": 0}, "Near": {"a": 0, "b": 100, "c": 0}}


@pytest.mark.parametrize("bad", [101, -1, 5.5, "7"])
def test_scores_outside_the_framework_range_are_errors(bad):
    result = Profile("p", scores=[ScorePluginEntry(FixedScore({"a": 1, "b": bad, "c": 1}), 1)]).prioritize(POD, NODES)
    assert result.error is not None and "scored node b" in result.error.reason


def test_missing_labels_score_zero_or_leave_the_plugin_out():
    """One node without facts used to zero every score (Fail) or drop the plugin for every node (Ignore). Now Fail
    scores that node 0 for the plugin, Ignore leaves the plugin out of that node's score only; both are noted."""
    nodes = [Node("a", {"fast": "true"}), Node("b"), Node("c", {})]
    fast = ScorePluginEntry(LabelScore({}), 1)
    near = ScorePluginEntry(FixedScore({"a": 0, "b": 100, "c": 100}), 1)
    closed = Profile("p", scores=[fast, near]).prioritize(POD, nodes)
    assert closed.error is None and closed.scores == {"a": 5, "b": 5, "c": 5}
    assert closed.by_plugin["LabelScore"] == {"a": 100, "c": 0, "b": 0}
    assert "failurePolicy Fail" in closed.skipped["b"][0].reason and list(closed.skipped) == ["b"]
    opened = Profile("p", scores=[fast, near], fail_open=True).prioritize(POD, nodes)
    assert opened.error is None and opened.scores == {"a": 5, "b": 10, "c": 5}  # b: FixedScore's 100 alone
    assert "failurePolicy Ignore" in opened.skipped["b"][0].reason and "b" not in opened.by_plugin["LabelScore"]


def test_a_score_plugin_that_judges_no_node_is_an_error_under_fail_and_left_out_under_ignore():
    names_only = [Node("a"), Node("b")]
    closed = Profile("p", scores=[ScorePluginEntry(LabelScore({}), 1)]).prioritize(POD, names_only)
    assert "needs node labels" in closed.error.reason
    opened = Profile("p", scores=[ScorePluginEntry(LabelScore({}), 1)], fail_open=True).prioritize(POD, names_only)
    assert opened.error is None and opened.scores == {"a": 0, "b": 0}
    assert opened.seconds_by_plugin == {}  # skipped on every node: it did not run


def test_preempt_drops_nodes_the_filters_reject_and_vetoed_victims():
    victims = {
        "a": Victims((Pod(uid="v1", namespace="default"),)),
        "b": Victims((Pod(uid="v2", namespace="kube-system"),)),
        "c": Victims((Pod(uid="v3", namespace="default"),), num_pdb_violations=1),
    }
    profile = Profile("p", filters=[RejectByName({"c": "unresolvable"})], preempts=[VetoNamespace({})])
    result = profile.preempt(POD, victims, {})
    assert result.accepted == {"a": victims["a"]}
    assert result.rejected["b"].plugin == "VetoNamespace"
    assert result.rejected["c"].plugin == "RejectByName"


def test_preempt_never_skips_label_filters_silently():
    """Preempt used to let a label filter pass unnoticed when no labels were known."""

    class NeedsLabels(RejectByName):
        name: ClassVar[str] = "NeedsLabels"
        facts = Facts.LABELS

    candidates = {"a": Victims(())}
    vetoed = Profile("p", filters=[NeedsLabels({"a": "unresolvable"})]).preempt(POD, candidates, {})
    assert vetoed.accepted == {} and vetoed.rejected["a"].plugin == "NeedsLabels"
    assert "failurePolicy Fail" in vetoed.rejected["a"].reason
    ignored = Profile("p", filters=[NeedsLabels({})], fail_open=True).preempt(POD, candidates, {})
    assert "a" in ignored.accepted and "failurePolicy Ignore" in ignored.skipped["a"][0].reason
    blind = {"NeedsLabels": "preempt requests carry no Node objects and no nodeSource is configured"}
    trusted = Profile("p", filters=[NeedsLabels({})], preempt_trusted=blind).preempt(POD, candidates, {})
    assert "a" in trusted.accepted and "preemptTrustsSchedulerFilter" in trusted.skipped["a"][0].reason
    assert "NeedsLabels" not in trusted.seconds_by_plugin
