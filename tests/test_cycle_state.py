"""Per-request state: what a plugin works out for one request never reaches another one."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from extender.framework import status
from extender.framework.cycle import CycleState
from extender.framework.kept import KeptProfile
from extender.framework.plugin import FilterPlugin
from extender.framework.profile import Profile
from extender.framework.status import Status
from extender.framework.types import Node, Pod
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
    served = KeptProfile(Profile("p", filters=[build(NodeNameFilter, WINDOW, clock=lambda: now[0])]))

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
