"""Per-request state: what a plugin works out for one request never reaches another one."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from extender.framework import status
from extender.framework.cycle import CycleState
from extender.framework.kept import KeptProfile
from extender.framework.plugin import SKIP, FilterPlugin, ScorePlugin
from extender.framework.profile import EntryPolicy, Profile, ScorePluginEntry
from extender.framework.status import Status
from extender.framework.types import Node, Pod, Victims
from extender.plugins.nodenamefilter import NodeNameFilter
from tests.plugin_helpers import ListedNodes, build, node, pod

UTC = dt.UTC
WINDOW = {
    "maintenance": [
        {"name": "m", "nodes": ["n-*"], "windows": [{"start": "2026-03-01T13:00:00Z", "end": "2026-03-01T14:00:00Z"}]}
    ]
}


def at(hour: int, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 3, 1, hour, minute, second, tzinfo=UTC)


def test_interleaved_requests_at_a_window_boundary_leave_no_sticky_verdict():
    """Request A is judged at 12:59:59; request B, served between A's keys and A's verdicts, at 13:00:00 (the
    window opens). Each is judged at its own instant, and what is kept under "no window closed" stays true: an hour
    after the window ended the node is accepted again."""
    now = [at(12, 59, 59)]
    # A deny list (matching no node here) keeps the filter from skipping the request while no window is closed.
    args = {"deny": ["other-*"], **WINDOW}
    served = KeptProfile(Profile("p", filters=[build(NodeNameFilter, args, clock=lambda: now[0])]))

    class Interleaving(ListedNodes):
        """A node source whose first lookup lets another request run to its end (as another thread may)."""

        def __init__(self, nodes: list[Node]) -> None:
            super().__init__(nodes)
            self.interleave = True

        def lookup(self, names: Sequence[str]) -> list[Node]:
            if self.interleave:
                self.interleave = False
                now[0] = at(13)
                other = served.filter_names(pod(name="b"), list(names), self)
                assert other.feasible == [] and "until 2026-03-01T14:00" in other.rejected["n-1"].reason
            return super().lookup(names)

    source = Interleaving([node("n-1")])
    assert served.filter_names(pod(name="a"), ["n-1"], source).feasible == ["n-1"]  # judged at its own instant
    assert not source.interleave  # request B ran inside request A
    now[0] = at(15)
    later = served.filter_names(pod(name="c"), ["n-1"], source)
    assert later.feasible == ["n-1"] and not later.rejected
    assert later.feasible == Profile("fresh", filters=served.filters).filter_names(pod(), ["n-1"], source).feasible


class Preparing(FilterPlugin):
    """Counts its prepare calls; rejects nodes whose name is the prepared value."""

    name = "Preparing"

    def __init__(self) -> None:
        super().__init__({})
        self.prepared = 0

    def prepare(self, pod: Pod) -> str:
        self.prepared += 1
        return pod.name

    def reuse_key(self, pod: Pod, prepared: str) -> str:
        return prepared

    def filter(self, pod: Pod, node: Node, prepared: str) -> Status:
        return status.unschedulable("named like the pod") if node.name == prepared else status.SUCCESS


def test_a_plugin_prepares_once_per_request_and_the_cycle_holds_its_value_and_key():
    plugin = Preparing()
    cycle = CycleState(pod(name="n-2"))
    result = Profile("p", filters=[plugin]).filter(cycle.pod, [node("n-1"), node("n-2"), node("n-3")], cycle)
    assert result.feasible == ["n-1", "n-3"] and list(result.rejected) == ["n-2"]
    assert cycle.reuse_key(plugin) == "n-2" and plugin.prepared == 1
    Profile("p", filters=[plugin]).filter(pod(name="n-1"), [node("n-1")])
    assert plugin.prepared == 2  # a new request prepares afresh


class PreparedScore(ScorePlugin):
    """Scores the prepared value on every node and keeps the default ``normalize_scores``."""

    name = "PreparedScore"

    def prepare(self, pod: Pod) -> int:
        return len(pod.name)

    def score(self, pod: Pod, node: Node, prepared: int) -> int:
        return prepared


def test_a_score_plugin_that_prepares_keeps_the_default_normalizing():
    result = Profile("p", scores=[ScorePluginEntry(PreparedScore({}), 1)]).prioritize(pod(name="seven"), [node("n-1")])
    assert result.error is None and result.by_plugin == {"PreparedScore": {"n-1": 5}}


class FailsToPrepare(Preparing):
    name = "FailsToPrepare"

    def prepare(self, pod: Pod) -> str:
        self.prepared += 1
        raise RuntimeError("no rules today")


def test_a_prepare_that_fails_is_not_tried_per_node_and_is_the_failure_of_each_node_it_would_judge():
    plugin = FailsToPrepare()
    audited = Profile("p", filters=[plugin], entries={("filter", "FailsToPrepare"): EntryPolicy(audit=True)})
    audited.filter(pod(), [node("n-1")])
    per_request = plugin.prepared
    result = audited.filter(pod(), [node("n-1"), node("n-2"), node("n-3")])
    assert result.feasible == ["n-1", "n-2", "n-3"] and plugin.prepared == 2 * per_request
    for name in ("n-1", "n-3"):
        reason = f"plugin FailsToPrepare failed in filter on node {name}: RuntimeError: no rules today"
        assert result.audit_failed[name][0].reason == reason
    enforced = Profile("p", filters=[plugin]).filter(pod(), [node("n-1"), node("n-2")])
    assert enforced.error is not None and enforced.error.reason.endswith("on node n-1: RuntimeError: no rules today")


class Skipping(FilterPlugin):
    """Skips the requests of pods named "skip"; counts the nodes it is asked about."""

    name = "Skipping"

    def __init__(self) -> None:
        super().__init__({})
        self.judged = 0

    def prepare(self, pod: Pod) -> object:
        return SKIP if pod.name == "skip" else None

    def filter(self, pod: Pod, node: Node, prepared: object) -> Status:
        self.judged += 1
        return status.unschedulable("judged and rejected")


def test_a_filter_that_skips_the_request_passes_every_node_unasked_and_nothing_is_looked_up():
    plugin = Skipping()
    source = ListedNodes([node("n-1"), node("n-2")])
    for served in (Profile("p", filters=[plugin]), KeptProfile(Profile("p", filters=[plugin]))):
        skipped = served.filter_names(pod(name="skip"), ["n-1", "n-2"], source)
        assert (
            skipped.feasible == ["n-1", "n-2"]
            and not skipped.rejected
            and skipped.seconds_by_plugin == {"Skipping": 0.0}
        )
        assert plugin.judged == 0 and source.looked_up == []
        judged = served.filter_names(pod(name="other"), ["n-1", "n-2"], source)
        assert judged.feasible == [] and set(judged.rejected) == {"n-1", "n-2"} and plugin.judged == 2
        plugin.judged, source.looked_up = 0, []
    # Beside a filter that judges, the skipping one is left out of each node's chain; in preemption too.
    both = Profile("p", filters=[plugin, build(NodeNameFilter, {"deny": ["n-2"]})])
    result = both.filter(pod(name="skip"), [node("n-1"), node("n-2")])
    assert result.feasible == ["n-1"] and list(result.rejected) == ["n-2"] and plugin.judged == 0
    preempted = both.preempt(pod(name="skip"), {"n-1": Victims(())}, {"n-1": node("n-1")})
    assert list(preempted.accepted) == ["n-1"] and plugin.judged == 0


def test_node_name_filter_skips_only_with_no_list_and_no_window_closed():
    def skips(args: dict, hour: int) -> bool:
        return CycleState(pod()).skips(build(NodeNameFilter, args, clock=lambda: at(hour)))

    assert skips({}, 12) and skips(WINDOW, 12) and skips(WINDOW, 14)
    assert not skips(WINDOW, 13) and not skips({"deny": ["x-*"]}, 12) and not skips({"allow": ["n-*"]}, 12)
