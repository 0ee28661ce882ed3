"""kubernetes: node labels listed from the API server, cached by each warm function instance.

A request never waits for the API while the cache is warm: a list older than
``cacheTTL`` is served while a background thread lists again
(stale-while-revalidate). A request waits, at most ``maxWait``, only when the
cache is cold or names a node the cache does not know (a new node); such
refetches start at most once per ``minRefreshInterval``, so a stream of made-up
names cannot hammer the API server. The lookup itself is one dict access per
name into an index of prebuilt Nodes that each refresh swaps in whole.

A name still unknown after that is a node whose facts are missing, whether the
list lacks it (the scheduler names nodes from its own cache, which a list may
lag or lead) or the API is down or slow: each plugin entry's ``failurePolicy``
decides (Fail rejects the node as Unschedulable, so the scheduler may retry and
preempt there; Ignore lets it pass), and the decision is logged. Such a node is
never unresolvable: only the scheduler knows it does not exist.

Cloud Functions throttles CPU between requests, so a background list started
by one request may finish during the next ones; the cache stays correct, only
later. functions-framework builds the function in gunicorn's master process and
forks the worker: the worker inherits the first list and starts its own threads.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, NamedTuple

from extender.background import started
from extender.framework.types import Node
from extender.nodesource.base import unavailable
from extender.nodesource.health import SourceHealth
from extender.settings import DEFAULT_MAX_AGE

if TYPE_CHECKING:
    from extender.kube.client import KubeClient
    from extender.kube.lists import NodeFacts

logger = logging.getLogger("extender")
# A failing list's WARNING, with ``source`` and ``problem``: what the source_failures metric counts.
EVENT = "extender.nodesource"

# How many names a log line shows before "and N more".
_SHOWN = 5


class KubernetesSettings(NamedTuple):
    # Age after which a lookup starts a background refresh (and still answers from the cache).
    cache_ttl: float = 30.0
    # Longest a request waits for a list: cold cache or an unknown node; capped at the client's call budget.
    max_wait: float = 1.0
    # Deadline of a whole background list, every page (each page's call also within the client's call deadline).
    list_timeout: float = 10.0
    # Refreshes (by age, unknown names or after a failure) start at most this often.
    min_refresh_interval: float = 5.0


class _Snapshot(NamedTuple):
    nodes: dict[str, Node]
    # Clock time the last successful list started; None before the first one.
    listed_at: float | None = None
    # Why the latest list failed; empty when it succeeded.
    error: str = ""


class KubernetesNodes:
    def __init__(
        self,
        client: KubeClient,
        settings: KubernetesSettings,
        fail_open: bool,
        clock: Callable[[], float] = time.monotonic,
        max_age: float = DEFAULT_MAX_AGE,
    ) -> None:
        self._client = client
        self._settings = settings
        self._fail_open = fail_open
        self._clock = clock
        self._wait = min(settings.max_wait, client.timeout)
        self._max_age = max_age  # healthz: the oldest last successful list that is still healthy
        self._snapshot = _Snapshot({})
        self._lock = threading.Lock()
        self._refreshing: Future[_Snapshot] | None = None
        self._last_attempt = -math.inf
        _LIVE.add(self)

    def _forget_threads(self) -> None:
        """In a forked child: the parent's list thread does not exist here, so it must not be waited for."""
        self._lock = threading.Lock()
        self._refreshing = None
        self._last_attempt = -math.inf

    def start(self, wait: float = 0.0) -> Future[_Snapshot] | None:
        """List now, waiting up to ``wait`` seconds: an instance that starts warm never fails its first requests.

        Start-up goes on when the API is slow or down: the failurePolicy then decides per request.
        """
        began = time.perf_counter()
        first = self._refresh(self._clock())
        if first is not None and wait > 0:
            try:
                listed = first.result(timeout=wait)
            except FutureTimeout:
                problem = f"the Kubernetes API did not list the nodes within {wait:g} s of start-up"
                fields = {"event": EVENT, "source": "kubernetes", "problem": problem, "outcome": "listing on"}
                logger.warning("%s; listing on", problem, extra={"json_fields": fields})
            else:
                if not listed.error:
                    seconds = time.perf_counter() - began
                    logger.info("listed %d nodes from the Kubernetes API in %.0f ms", len(listed.nodes), seconds * 1000)
        return first

    def lookup(self, names: Sequence[str]) -> list[Node]:
        snapshot, now = self._current()
        try:
            return list(map(snapshot.nodes.__getitem__, names))  # the warm path: one C-level pass
        except KeyError:
            return self._lookup_unknown(names, now)

    def generation(self) -> object:
        """Each list's index: a refresh makes a new one (keeping the Node objects of unchanged nodes)."""
        return self._current()[0].nodes

    def health(self) -> SourceHealth:
        """For healthz. Like a lookup, it starts a refresh when the list is old, so that an uptime check keeps an
        idle instance's list fresh (the answer is still the list at hand)."""
        snapshot, now = self._current()
        age = None if snapshot.listed_at is None else max(0.0, now - snapshot.listed_at)
        return SourceHealth("kubernetes", len(snapshot.nodes), age, self._max_age, snapshot.error)

    def _current(self) -> tuple[_Snapshot, float]:
        """The snapshot to answer from, and the time; a refresh starts in the background when it is old."""
        snapshot = self._snapshot
        now = self._clock()
        if snapshot.listed_at is None or now - snapshot.listed_at > self._settings.cache_ttl:
            self._refresh(now)
        return snapshot, now

    def _lookup_unknown(self, names: Sequence[str], now: float) -> list[Node]:
        refresh = self._refresh(now)
        if refresh is not None:
            try:
                refresh.result(timeout=self._wait)
            except FutureTimeout:
                pass
        snapshot = self._snapshot
        slow = refresh is not None and not refresh.done()
        nodes = [snapshot.nodes.get(name) or self._unknown(name, snapshot, slow) for name in names]
        self._log_unknown(nodes)
        return nodes

    def _unknown(self, name: str, snapshot: _Snapshot, slow: bool) -> Node:
        if slow:
            return unavailable(
                name, f"the Kubernetes API did not list the nodes within {self._wait:g} s (nodeSource maxWait)"
            )
        if snapshot.error or snapshot.listed_at is None:
            return unavailable(name, f"node facts unavailable: {snapshot.error or 'the nodes were not listed yet'}")
        age = max(0.0, self._clock() - snapshot.listed_at)
        return unavailable(name, f"node {name} is not in the node list fetched {age:.1f} s ago from the Kubernetes API")

    def _log_unknown(self, nodes: Sequence[Node]) -> None:
        pending = [(node.name, node.why_unknown.reason) for node in nodes if node.why_unknown is not None]
        if pending:
            logger.warning(
                "node labels unavailable for %s: %s; each plugin's failurePolicy decides (policy default %s): %s",
                _names([name for name, _ in pending]),
                pending[-1][1],
                "Ignore" if self._fail_open else "Fail",
                "Fail rejects these nodes, Ignore lets them pass",
            )

    def _refresh(self, now: float) -> Future[_Snapshot] | None:
        """The list in flight, else a new one if the rate limit allows, else None."""
        with self._lock:
            if self._refreshing is not None:
                return self._refreshing
            if now - self._last_attempt < self._settings.min_refresh_interval:
                return None
            self._last_attempt = now
            future: Future[_Snapshot] = Future()
            self._refreshing = future
        if not started(threading.Thread(target=self._list, args=(future,), name="extender-node-list", daemon=True)):
            with self._lock:  # no list in flight: the next one the rate limit allows tries again
                self._refreshing = None
            return None
        return future

    def _list(self, future: Future[_Snapshot]) -> None:
        started = self._clock()
        snapshot = self._snapshot
        try:
            listed = self._client.list_nodes(total=self._settings.list_timeout)
            snapshot = _Snapshot(_index(listed, snapshot.nodes), listed_at=started)
        except Exception as exc:  # noqa: BLE001 — KubeError, or a bug: either way the list's error, said to requests
            reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            snapshot = snapshot._replace(error=f"listing nodes failed: {reason}")
            served = (
                f"still serving the list from {started - snapshot.listed_at:.0f} s ago"
                if snapshot.listed_at
                else "no list yet"
            )
            fields = {"event": EVENT, "source": "kubernetes", "problem": snapshot.error, "outcome": served}
            logger.warning("%s; %s", snapshot.error, served, extra={"json_fields": fields})
        finally:
            self._snapshot = snapshot
            with self._lock:
                self._refreshing = None
            future.set_result(snapshot)


_LIVE: weakref.WeakSet[KubernetesNodes] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for source in list(_LIVE):
        source._forget_threads()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _index(listed: Iterable[NodeFacts], previous: dict[str, Node]) -> dict[str, Node]:
    """Name -> Node, built once per list so that lookups only index a dict.

    A node whose labels did not change keeps its Node object from the ``previous`` list: what the plugins worked out
    for it (kept per Node object) stays valid, so a refresh costs the requests after it nothing.
    """
    nodes: dict[str, Node] = {}
    for name, labels in listed:
        known = previous.get(name)
        nodes[name] = known if known is not None and known.labels == labels else Node(name, labels)
    return nodes


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return f"{shown} and {len(names) - _SHOWN} more" if len(names) > _SHOWN else shown
