"""NodeNameFilter: allow and deny lists of node-name globs, and maintenance windows.

Works from node names alone, so it needs no node source in node-name mode.
A node on the deny list, off a non-empty allow list, or named by a
maintenance entry while one of its windows is open is UnschedulableAndUnresolvable:
evicting pods would not make it fit. Globs are shell-style (``*``, ``?``, ``[ab]``).
A maintenance entry with ``pods`` (a pod selector, as NodeLabelPolicy's rules
take) keeps only the pods it selects off its nodes; without, every pod.

    - name: NodeNameFilter
      args:
        allow: ["gke-prod-*"]                 # when set, only matching nodes pass
        deny: ["*-canary-*"]                  # matching nodes never pass
        maintenance:                          # matching nodes do not pass while a window is open
        - name: pool-a-upgrade
          nodes: ["gke-prod-pool-a-*"]
          windows:
          - {start: "2026-03-01T22:00:00Z", end: "2026-03-02T04:00:00Z"}
          - {days: [Sat], from: "22:00", to: "04:00", timeZone: Europe/Berlin}
        - name: legacy-patching
          nodes: ["gke-prod-legacy-*"]
          pods: {namespaces: [payments]}      # omitted or {}: every pod
          windows:
          - {days: [Tue], from: "01:00", to: "03:00", timeZone: Europe/Berlin}
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from marshmallow import Schema, fields, post_load
from marshmallow.validate import Length

from extender.framework import clock as request_clock
from extender.framework import status
from extender.framework.args import unique_names
from extender.framework.globs import compile_globs, validate_glob
from extender.framework.plugin import SKIP, FilterPlugin, Skip
from extender.framework.status import Status
from extender.framework.types import Node, Pod

if TYPE_CHECKING:
    from extender.framework.selectors import PodSelector
    from extender.plugins.nodenamefilter.windows import Window

Clock = Callable[[], dt.datetime]
# The node-name patterns of the maintenance closed to a pod at one instant, each with its rejection message.
Closed = tuple[tuple[re.Pattern[str], str], ...]


def _window_schema() -> Schema:
    """Imported with the first maintenance window a policy has: the others do not load their parsing."""
    from extender.plugins.nodenamefilter.windows import WindowSchema

    return WindowSchema()


def _pod_selector_schema() -> Schema:
    """Imported with the first maintenance entry that selects pods: the selectors stay unloaded for the others."""
    from extender.framework.selectors import PodSelectorSchema

    return PodSelectorSchema()


def _globs(**kwargs: Any) -> fields.List[str]:
    return fields.List(fields.String(validate=validate_glob), **kwargs)


class Maintenance:
    __slots__ = ("name", "nodes", "pods", "windows")

    def __init__(
        self, name: str, nodes: re.Pattern[str], windows: tuple[Window, ...], pods: PodSelector | None = None
    ) -> None:
        self.name = name
        self.nodes = nodes
        self.windows = windows
        # The pods it closes its nodes to; None: every pod.
        self.pods = pods

    def open_until(self, now: dt.datetime) -> dt.datetime | None:
        """The end of the open window, the latest if several overlap."""
        ends = [end for window in self.windows if (end := window.active_until(now)) is not None]
        return max(ends, default=None)


class MaintenanceSchema(Schema):
    name = fields.String(required=True, validate=Length(min=1))
    nodes = _globs(required=True, validate=Length(min=1))
    pods = fields.Nested(_pod_selector_schema, load_default=None)
    windows = fields.List(fields.Nested(_window_schema), required=True, validate=Length(min=1))

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Maintenance:
        pattern = compile_globs(data["nodes"])
        assert pattern is not None  # nodes is not empty
        pods = data["pods"]
        if pods is not None:
            from extender.framework.selectors import PodSelector  # loaded with the entry's selector already

            pods = None if pods == PodSelector() else pods  # pods: {} selects every pod, as no selector does
        return Maintenance(data["name"], pattern, tuple(data["windows"]), pods)


class NodeNameFilterArgs(Schema):
    allow = _globs(load_default=list)
    deny = _globs(load_default=list)
    maintenance = fields.List(fields.Nested(MaintenanceSchema), load_default=list, validate=unique_names)


class NodeNameFilter(FilterPlugin):
    name: ClassVar[str] = "NodeNameFilter"
    args_schema = NodeNameFilterArgs

    def __init__(self, args: Mapping[str, Any], clock: Clock | None = None) -> None:
        super().__init__(args)
        self._allow = compile_globs(args["allow"])
        self._deny = compile_globs(args["deny"])
        self._maintenance: tuple[Maintenance, ...] = tuple(args["maintenance"])
        self._clock = clock  # None: the request's instant (``extender.framework.clock``)

    def prepare(self, pod: Pod) -> Closed | Skip:
        """The maintenance closed to the pod at the request's instant, read once per request, so all its nodes are
        judged at one instant. ``SKIP`` when no list is set and nothing is closed: no node can fail."""
        closed = self._closed_now(pod)
        return SKIP if not closed and self._allow is None and self._deny is None else closed

    def reuse_key(self, pod: Pod, closed: Closed | Skip) -> Hashable:
        """The verdict depends on the name and on which maintenance is closed to the pod (each with its end): the key
        holds every time- and pod-dependent input, so a verdict kept under it holds for any pod at any instant with
        the same key."""
        return closed

    def filter(self, pod: Pod, node: Node, closed: Closed | None = None) -> Status:
        """``closed`` is this request's ``prepare``; a call outside a request reads the clock itself."""
        if self._deny is not None and self._deny.match(node.name):
            return status.unresolvable("NodeNameFilter: node name is on the deny list")
        if self._allow is not None and not self._allow.match(node.name):
            return status.unresolvable("NodeNameFilter: node name is not on the allow list")
        if closed is None:
            closed = self._closed_now(pod)
        for nodes, reason in closed:
            if nodes.match(node.name):
                return status.unresolvable(reason)
        return status.SUCCESS

    def _closed_now(self, pod: Pod) -> Closed:
        return _closed(self._maintenance, self._clock() if self._clock is not None else request_clock.utc_now(), pod)


def _closed(maintenance: tuple[Maintenance, ...], now: dt.datetime, pod: Pod) -> Closed:
    """The node-name patterns closed to ``pod`` at ``now``, each with its rejection message."""
    closed = []
    for entry in maintenance:
        until = entry.open_until(now)
        if until is not None and (entry.pods is None or entry.pods.matches(pod)):
            until_text = until.isoformat(timespec="seconds")
            reason = f"NodeNameFilter: node is in maintenance {entry.name!r} until {until_text}"
            if entry.pods is not None:
                reason += f" for pods {entry.pods}"
            closed.append((entry.nodes, reason))
    return tuple(closed)
