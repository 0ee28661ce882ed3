"""Each node's allocatable CPU and memory, listed from the Kubernetes API: what a load share is a share of.

A node inventory, kept as the kubernetes node source keeps its list (and, like it, whatever the result cache says):
listed on a thread of its own, again every ``REFRESH_SECONDS`` (stale-while-revalidate: requests read the list at
hand), at most every ``RETRY_SECONDS`` after a failure. A cold instance waits for its first list only until the
deadline of its first request (later requests, and every request once that list answered, well or not, wait for
nothing). A failed list keeps the last one; without any, NodeLoad falls back to the metric's ``capacity`` query
(``extender.plugins.nodeload.predicted``), and each failure is a WARNING (one per ``WARN_SECONDS``). A node the
list lacks (new since) is listed again at once (at most every ``RETRY_SECONDS``) and meanwhile judged by the other
sources. Each list is a new mapping, never changed: NodeLoad keeps verdicts under its identity and, after a relist,
judges again only the nodes whose entry differs (``predicted.changed_allocatable``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from extender.background import started
from extender.kube.demand import Resources
from extender.kube.errors import KubeError

if TYPE_CHECKING:
    from extender.kube.client import KubeClient

# A node's allocatable changes only with its kubelet's configuration; a new node is listed when first asked about.
# Whole Node objects are tens of kB each: a 5000-node list is tens of MB, not to be read often.
REFRESH_SECONDS = 1800.0
RETRY_SECONDS = 10.0
LIST_SECONDS = 30.0
WARN_SECONDS = 60.0

logger = logging.getLogger("extender.nodeload")


class NodeAllocatable:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        # The last list (node -> its allocatable as a Resources' requests), never changed; None before the first.
        self.nodes: Mapping[str, Resources] | None = None
        self.problem = "the nodes are not listed yet"
        self._listed_at = -float("inf")
        self._attempt_at = -float("inf")
        self._lock = threading.Lock()
        self._listing: threading.Thread | None = None
        # Set once the first list answered (well or not); cold requests wait for it until ``_cold_until``.
        self._first = threading.Event()
        self._cold_until: float | None = None
        self._warned_at = -float("inf")
        _LIVE.add(self)

    def current(self, until: float) -> tuple[Mapping[str, Resources] | None, str]:
        """The list at hand and why it may lack nodes (""); a refresh starts when it is due, and a cold instance
        waits for its first list until ``until`` (monotonic) of its first request at most (a deadline already past
        included: the first request's is the cold instance's only wait)."""
        self.start()
        if not self._first.is_set():
            with self._lock:
                if self._cold_until is None:
                    self._cold_until = until
                cold_until = min(until, self._cold_until)
            self._first.wait(max(0.0, cold_until - time.monotonic()))
        return self.nodes, self.problem

    def start(self) -> None:
        """List on a thread of its own when a list is due (the first, a refresh); never waits."""
        self._list_again(refresh=True)

    def node_unknown(self) -> None:
        """A node the list lacks was asked about (it joined since): list again soon, without waiting for it."""
        self._list_again(refresh=False)

    def _list_again(self, refresh: bool) -> None:
        """A list on a thread of its own, unless one is in flight or began within ``RETRY_SECONDS`` (or, for a
        ``refresh``, the last one landed within ``REFRESH_SECONDS``); when its thread cannot start, none is in flight
        (the next due request tries again)."""
        now = time.monotonic()
        with self._lock:
            if self._listing is not None or now - self._attempt_at <= RETRY_SECONDS:
                return
            if refresh and now - self._listed_at <= REFRESH_SECONDS:
                return
            self._attempt_at = now
            thread = self._listing = threading.Thread(target=self._list, name="extender-allocatable", daemon=True)
        if not started(thread):
            with self._lock:
                if self._listing is thread:
                    self._listing = None

    def _list(self) -> None:
        try:
            listed = self.client.node_allocatable(total=LIST_SECONDS)
        except KubeError as exc:
            self._failed(exc.message)
        except Exception as exc:  # a bug must cost the allocatable, never a request  # noqa: BLE001
            self._failed(f"{type(exc).__name__}: {exc}")
        else:
            self.nodes, self.problem = listed, ""
            self._listed_at = time.monotonic()
        finally:
            with self._lock:
                self._listing = None
            self._first.set()

    def _failed(self, why: str) -> None:
        kept = "the last list counts" if self.nodes is not None else "the metrics' capacity query counts, if any"
        self.problem = f"listing the nodes' allocatable resources failed: {why}; {kept}"
        now = time.monotonic()
        if now - self._warned_at >= WARN_SECONDS:
            self._warned_at = now
            fields = {
                "event": "extender.nodeload",
                "source": "kubernetes",
                "problem": self.problem,
                "outcome": "allocatable may be missing",
            }
            logger.warning("NodeLoad: %s", self.problem, extra={"json_fields": fields})

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._listing = None
        self._first = threading.Event()
        if self.nodes is not None:
            self._first.set()
        self._cold_until = None


_LIVE: weakref.WeakSet[NodeAllocatable] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for source in list(_LIVE):
        source._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
