"""Each node's allocatable CPU and memory, listed from the Kubernetes API: what a load share is a share of.

A node inventory, kept as the kubernetes node source keeps its list (and, like it, whatever the result cache says):
listed on a thread of its own, again every ``REFRESH_SECONDS`` (stale-while-revalidate: requests read the list at
hand), at most every ``RETRY_SECONDS`` after a failure. A cold instance's first request waits for the first list
within the deadline it gives. A node the list lacks (new since) has no allocatable until the next list: its load is
judged as measured, and the request says so; asking about it starts that list (at most every ``RETRY_SECONDS``).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from extender.kube.demand import Resources
from extender.kube.errors import KubeError

if TYPE_CHECKING:
    from extender.kube.client import KubeClient

# A node's allocatable changes only with its kubelet's configuration; a new node is listed when first asked about.
# Whole Node objects are tens of kB each: a 5000-node list is tens of MB, not to be read often.
REFRESH_SECONDS = 1800.0
RETRY_SECONDS = 10.0
LIST_SECONDS = 30.0


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
        _LIVE.add(self)

    def current(self, until: float) -> tuple[Mapping[str, Resources] | None, str]:
        """The list at hand and why it may lack nodes (""); a refresh starts when it is due, and a cold instance
        waits for it until ``until`` (monotonic)."""
        now = time.monotonic()
        thread = None
        with self._lock:
            due = now - self._listed_at > REFRESH_SECONDS and now - self._attempt_at > RETRY_SECONDS
            if due and self._listing is None:
                self._attempt_at = now
                thread = self._listing = threading.Thread(target=self._list, name="extender-allocatable", daemon=True)
            waiting = self._listing if self.nodes is None else None
        if thread is not None:
            thread.start()
        if waiting is not None:
            waiting.join(max(0.0, until - time.monotonic()))
        return self.nodes, self.problem

    def node_unknown(self) -> None:
        """A node the list lacks was asked about (it joined since): list again soon, without waiting for it."""
        now = time.monotonic()
        with self._lock:
            if self._listing is not None or now - self._attempt_at <= RETRY_SECONDS:
                return
            self._attempt_at = now
            thread = self._listing = threading.Thread(target=self._list, name="extender-allocatable", daemon=True)
        thread.start()

    def _list(self) -> None:
        try:
            listed = self.client.node_allocatable(total=LIST_SECONDS)
        except KubeError as exc:
            self.problem = f"listing the nodes' allocatable resources failed: {exc.message}"
        except Exception as exc:  # a bug must cost the allocatable, never a request  # noqa: BLE001
            self.problem = f"listing the nodes' allocatable resources failed: {type(exc).__name__}: {exc}"
        else:
            self.nodes, self.problem = listed, ""
            self._listed_at = time.monotonic()
        finally:
            with self._lock:
                self._listing = None

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._listing = None


_LIVE: weakref.WeakSet[NodeAllocatable] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for source in list(_LIVE):
        source._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
