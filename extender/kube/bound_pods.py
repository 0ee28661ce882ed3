"""Pods bound to nodes lately, as the Kubernetes API reports them: what load metrics cannot show yet.

Every instance of the function sees every binding, its own, other instances' and other schedulers', because the
API is where bindings are made. Two ways to read them, one answer:

- ``PodWatch`` (the result cache on): one paginated LIST of the bound pods (``fieldSelector=spec.nodeName!=``,
  ``limit=500``), then a WATCH from the list's resourceVersion with bookmarks, which the API server ends every
  ``WATCH_SECONDS`` and which is opened again from the last resourceVersion seen. Every call that waits on the API
  (the LIST, opening the WATCH, after a failure, an end or a 410) runs on a thread of its own (``_connect``); a
  request never waits for those (a cold one aside: below), nor for a lock held across network I/O. The watch's
  events are read **on the request path** from what the socket holds (Cloud Run throttles the CPU between requests,
  so a reader thread would be behind exactly when a request needs it), by one request at a time; a request that
  finds another reading answers from the view at hand.
- ``list_bindings`` (the result cache off): the same LIST on every request, kept nowhere.

Invariants of the index (``Bindings``, a cache):

- **What it holds:** each bound pod whose binding time is within ``horizon`` seconds (the longest a NodeLoad
  metric's delay plus its maxAge: an older binding can no longer count against any sample that is still a fact) and
  that has not finished: uid, node, binding time (the PodScheduled condition's lastTransitionTime) and demand. A
  status update that changes none of these (the kubelet's, mostly) changes nothing. It is updated event by event
  (a pod added or removed replaces its node's tuple only), never rebuilt per request; old pods leave it oldest first.
- **Identity is the generation.** A published ``Bindings`` is never changed; every change publishes a new one in one
  assignment, sharing the unchanged nodes' tuples (and the map's shards whose nodes did not change:
  ``extender.kube.sharded_map``). A verdict kept under a view's identity therefore never outlives
  the bindings it counted, and a node's tuple is the same object as long as that node's pods are the same. Each
  view names the nodes whose tuples it changed from the one published before it (``Bindings.changed_since``), so
  that kept verdicts and scores are judged again on those nodes only.
- **Own bindings count at once** (``note_binding``, the bind verb: exact) until the watch's event replaces them; one
  the watch saw finish or go never comes back.
- **Answered pods are assumed** (``assume``), as kube-scheduler assumes a pod on its node before the binding lands:
  the function's answer (prioritize's highest scores, or filter's only feasible node) names where the scheduler will
  most likely bind the pod, and the pod counts there from the answer on, until the watch shows where it went (then
  that counts), the function binds it, or ``ASSUME_SECONDS`` pass without a binding (the scheduler placed it
  elsewhere or gave up). The next pod is judged at once on the bindings seen and assumed.
- **Pods placed elsewhere are waited for.** Several instances behind one scheduler: a pod whose filter this instance
  answered with several feasible nodes (``expect``) but whose prioritize went to another instance is bound where
  this one cannot know. A prioritize request (``expecting``; filter never) that reads the stream waits
  (``EXPECT_SECONDS`` at most, within its deadline) for the bindings of such pods answered within that time; after
  ``MISSES_TO_STOP`` of them in a row did not come (a dry run), requests stop waiting until one arrives again. One
  instance alone answers each pod's prioritize too, so it never waits.
- **Bounded.** At most ``MAX_PODS`` pods (the oldest go first, and views say they are incomplete), during a LIST too
  (only what the horizon needs is kept while the pages arrive); one event line at most ``MAX_LINE`` bytes; an API
  failure is retried at most every ``RETRY_SECONDS``; a LIST takes at most ``LIST_SECONDS``. A failure never empties
  an index that was listed: what it counted stays counted, and the view says why it may be incomplete
  (``Bindings.problem``): never an error, only a smaller in-flight term, which NodeLoad reports with a WARNING (one
  per problem per ``WARN_SECONDS``).
- **A cold instance waits once.** Until the first LIST answers, requests wait for it only until the deadline of the
  instance's first request (its share of httpTimeout), then answer at once with the bindings unknown.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import msgspec

from extender.background import started
from extender.kube.demand import PodDemand
from extender.kube.errors import KubeError
from extender.kube.lists import BoundPod, decode_watch_event
from extender.kube.sharded_map import ShardedIndex

if TYPE_CHECKING:
    from extender.kube.client import KubeClient
    from extender.outbound import Stream

logger = logging.getLogger("extender.nodeload")

MAX_PODS = 50_000
MAX_LINE = 4 * 1024 * 1024
WATCH_SECONDS = 60
# A watch silent for this long (no event, no bookmark, not ended by the server) is taken for dead and opened again.
STALL_SECONDS = 90.0
RETRY_SECONDS = 10.0
LIST_SECONDS = 60.0
# How long an answered pod counts where it was assumed while its binding has not shown (kube-scheduler's client may
# hold bindings back for seconds in a burst; a pod never bound stops counting then).
ASSUME_SECONDS = 30.0
# How long a prioritize request waits for the binding of a pod whose filter this instance answered and whose
# placement it does not know, and after how many such bindings in a row did not come requests stop waiting.
EXPECT_SECONDS = 0.5
MISSES_TO_STOP = 3
# One WARNING per problem this often at most.
WARN_SECONDS = 60.0
# Pods whose demand NodeLoad noted, pods assumed, and pods the watch saw go, remembered at most.
MAX_NOTED = 4096
# Bytes of events one read takes before the index is updated.
_READ_BYTES = 4 * 1024 * 1024


class Bindings:
    """The pods bound within the horizon, by node; never changed (its identity is its generation)."""

    __slots__ = ("__weakref__", "_changed", "_parent", "_uids", "by_node", "known", "problem")

    def __init__(
        self,
        by_node: Mapping[str, tuple[BoundPod, ...]],
        problem: str = "",
        known: bool = True,
        parent: Bindings | None = None,
        changed: frozenset[str] | None = None,
    ) -> None:
        self.by_node = by_node
        # The view this one was published after (held weakly), and the nodes whose pods differ from it.
        self._parent = weakref.ref(parent) if parent is not None and changed is not None else None
        self._changed = changed
        # Why pods may be missing ("": every binding the API reported is here).
        self.problem = problem
        # False until a list succeeded: then nothing is known of the bindings, not even that there are none.
        self.known = known
        self._uids: frozenset[str] | None = None

    @property
    def uids(self) -> frozenset[str]:
        """Every pod's uid (worked out when first asked: requests never need it)."""
        if self._uids is None:
            self._uids = frozenset(pod.uid for pods in self.by_node.values() for pod in pods)
        return self._uids

    def on(self, node: str) -> tuple[BoundPod, ...]:
        return self.by_node.get(node, ())

    def nodes_of(self, uid: str) -> frozenset[str]:
        """The nodes the pod ``uid`` is on: a pass over every pod, for views that are not a watch's (a list with the
        result cache off, ``explain``'s file), where the pod is rarely among them (``uids`` tells first)."""
        if uid not in self.uids:
            return frozenset()
        return frozenset(node for node, pods in self.by_node.items() if any(pod.uid == uid for pod in pods))

    def changed_since(self, other: Bindings) -> frozenset[str]:
        """The nodes whose pods differ between ``other`` and this view: along the chain of views published since
        (each knows what it changed), or else by comparing each node's tuple (an unchanged node keeps its tuple, so
        a node reported is at worst one whose pods are the same)."""
        changed: set[str] = set()
        view: Bindings | None = self
        for _ in range(_CHAIN):
            if view is other:
                return frozenset(changed)
            if view is None or view._changed is None or view._parent is None:
                break
            changed |= view._changed
            view = view._parent()
        mine, theirs = self.by_node, other.by_node
        return frozenset(node for node in mine.keys() | theirs.keys() if mine.get(node) is not theirs.get(node))

    def __len__(self) -> int:
        return sum(map(len, self.by_node.values()))


class Collector:
    """The pods to count as they arrive (bound within ``horizon`` of ``now``, not finished), by uid: never more than
    the newest ``MAX_PODS``, however many arrive (a LIST of every bound pod of a large cluster keeps only these)."""

    def __init__(self, now: float, horizon: float) -> None:
        self.since = now - horizon
        self.kept: dict[str, BoundPod] = {}
        self.capped = False
        self._ages: list[tuple[float, str]] = []

    def add(self, pods: Iterable[BoundPod]) -> None:
        kept, ages, since = self.kept, self._ages, self.since
        for pod in pods:
            if pod.finished or pod.bound_at < since:
                continue
            kept[pod.uid] = pod
            heapq.heappush(ages, (pod.bound_at, pod.uid))
            while len(kept) > MAX_PODS:
                self.capped = True
                bound_at, uid = heapq.heappop(ages)
                if (oldest := kept.get(uid)) is not None and oldest.bound_at == bound_at:
                    del kept[uid]


def collect(pods: Iterable[BoundPod], now: float, horizon: float) -> tuple[dict[str, BoundPod], bool]:
    """The pods to count (bound within ``horizon`` of ``now``, not finished), by uid, the newest ``MAX_PODS``; and
    whether some were left out for that cap."""
    collector = Collector(now, horizon)
    collector.add(pods)
    return collector.kept, collector.capped


def by_node(pods: Mapping[str, BoundPod]) -> dict[str, tuple[BoundPod, ...]]:
    nodes: dict[str, list[BoundPod]] = {}
    for pod in pods.values():
        nodes.setdefault(pod.node, []).append(pod)
    return {node: tuple(sorted(found, key=_order)) for node, found in nodes.items()}


def _order(pod: BoundPod) -> tuple[float, str]:
    return pod.bound_at, pod.uid


def _key(uid: str, node: str) -> str:
    """An own binding's key in the index until the watch shows it: never a uid (uids hold no newline)."""
    return f"{uid}\n{node}"


def _capped(horizon: float) -> str:
    return f"more than {MAX_PODS} pods were bound within {horizon:g} s: only the newest are counted"


def list_bindings(client: KubeClient, horizon: float, now: float, until: float) -> Bindings:
    """The bindings the API lists now (every page by ``until``, monotonic): the uncached reading of ``PodWatch``."""
    collector = Collector(now, horizon)
    try:
        list_version(client, collector, until)
    except KubeError as exc:
        return Bindings({}, f"listing the pods bound to nodes failed: {exc.message}", known=False)
    return Bindings(by_node(collector.kept), _capped(horizon) if collector.capped else "")


def list_version(client: KubeClient, collector: Collector, until: float) -> str:
    """Every page into ``collector``; the list's resourceVersion."""
    pages = _Pages(client, until)
    for page in pages:
        collector.add(page)
    return pages.version


class _Pages:
    """Every page's pods (each page decoded, handed over and dropped before the next is asked); ``version`` the
    list's resourceVersion once the last page was read."""

    def __init__(self, client: KubeClient, until: float) -> None:
        self.client, self.until, self.version = client, until, ""

    def __iter__(self) -> Iterator[list[BoundPod]]:
        token: str | None = None
        seen: set[str] = set()
        while True:
            if time.monotonic() >= self.until:
                raise KubeError("listing the pods bound to nodes took too long")
            pods, version, token = self.client.bound_pods_page(token, self.until)
            yield pods
            if not token:
                self.version = version
                return
            if token in seen:
                raise KubeError("the Kubernetes API repeated a continue token while listing pods: the list never ends")
            seen.add(token)


_EMPTY: Mapping[str, tuple[BoundPod, ...]] = {}
# Views a chain of changes is followed back at most before the nodes' tuples are compared instead.
_CHAIN = 64
_COLD = "the pods bound to nodes are not listed yet"


class PodWatch:
    """The index of bound pods of one API server, kept by LIST then WATCH as the module says; thread-safe.

    Locks: ``_lock`` guards the index and every field below it, and is held for in-memory work only (never across
    network I/O: ``_connect`` calls the API holding nothing); ``_reading`` makes one request at a time the reader of
    the stream, and nobody waits for it.
    """

    def __init__(self, client: KubeClient, horizon: float, assumes: bool = True) -> None:
        self.client = client
        self.horizon = horizon
        # Answered pods are assumed (``assume``); EXTENDER_ASSUME_PODS=off: they count once the watch shows them.
        self.assumes = assumes
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        # Each pod by uid; an own binding the watch has not shown yet by ``_key(uid, node)``.
        self._pods: dict[str, BoundPod] = {}
        # Each node's pods, the oldest first; each view publishes it (``extender.kube.sharded_map``).
        self._by_node: ShardedIndex[tuple[BoundPod, ...]] = ShardedIndex()
        # (bound_at, uid) of every pod put into the index, oldest first; entries of pods gone since are skipped.
        self._ages: list[tuple[float, str]] = []
        self.view = Bindings(_EMPTY, _COLD, known=False)
        # A list succeeded (then the index is never emptied again).
        self._known = False
        self._demands: dict[str, PodDemand] = {}
        # Own bindings and assumptions the watch has not shown yet: uid -> key in the index.
        self._own: dict[str, str] = {}
        # Assumptions among them: uid -> when they stop counting (monotonic), the oldest first.
        self._assumed: dict[str, float] = {}
        # Pods whose filter this instance answered with several nodes, placed elsewhere -> when (monotonic).
        self._expected: dict[str, float] = {}
        self._misses = 0
        # Pods the watch saw finish or go: a late note of their binding must not bring them back.
        self._gone: dict[str, None] = {}
        self._version = ""
        self._stream: Stream | None = None
        self._partial = bytearray()
        self._heard_at = 0.0
        # The thread calling the API (list, open the watch); set when it first answered, well or not.
        self._connecting: threading.Thread | None = None
        self._first_list = threading.Event()
        # The deadline cold requests wait for the first list until: the first request's.
        self._cold_until: float | None = None
        self._retry_at = 0.0
        self._problem = _COLD
        # Stopped reading at a request's deadline with events still to read.
        self._behind = False
        self._changed = True
        # The nodes whose tuples changed since the view was published (None: any may have).
        self._touched: set[str] | None = None
        self._warned: dict[str, float] = {}
        _LIVE.add(self)

    # --- what the function tells (any thread) ---------------------------------------------------------------------

    def note_demand(self, uid: str, demand: PodDemand) -> None:
        """The pod's demand, noted when NodeLoad judges it: its own binding can then count at once."""
        with self._lock:
            if len(self._demands) >= MAX_NOTED:
                self._demands.pop(next(iter(self._demands)))
            self._demands[uid] = demand

    def expect(self, uid: str) -> None:
        """The function answered the pod's filter with several feasible nodes: its binding follows, and where is
        known here only if this instance answers its prioritize too (``assume``)."""
        with self._lock:
            if len(self._expected) >= MAX_NOTED:
                self._expected.pop(next(iter(self._expected)))
            self._expected[uid] = time.monotonic()

    def assume(self, uid: str, best: Collection[str]) -> str | None:
        """The function answered for the pod, and kube-scheduler will most likely bind it to one of ``best`` (the
        nodes its answer ranks highest; empty: no binding follows). It counts on the one of them with the fewest pods
        bound lately (kube-scheduler's own scores favour the less requested node among equals) until the watch shows
        where it went, the function binds it, or ``ASSUME_SECONDS`` pass."""
        with self._lock:
            self._expected.pop(uid, None)
            if not self.assumes:
                return None
            if not best:
                if uid in self._assumed:
                    self._forget(uid)
                return None
            demand = self._demands.get(uid)
            bound_here = uid in self._own and uid not in self._assumed
            if demand is None or uid in self._gone or uid in self._pods or bound_here:
                return None  # not judged here, gone, shown by the watch, or bound by the function: known better
            self._forget(uid)
            if len(self._assumed) >= MAX_NOTED:
                self._forget(next(iter(self._assumed)))  # the oldest
            node = self._least_busy(best)
            self._count_own(uid, node, demand)
            self._assumed[uid] = time.monotonic() + ASSUME_SECONDS
            return node

    def _least_busy(self, nodes: Collection[str]) -> str:
        """The first of ``nodes`` with the fewest pods bound lately (one with none ends the search)."""
        by_node, chosen, fewest = self._by_node, "", -1
        for name in nodes:
            count = len(by_node.get(name, ()))
            if fewest < 0 or count < fewest:
                chosen, fewest = name, count
                if not count:
                    break
        return chosen

    def note_binding(self, uid: str, node: str) -> None:
        """The function bound the pod (the API accepted the Binding): it counts from now, until the watch shows it."""
        with self._lock:
            self._expected.pop(uid, None)
            demand = self._demands.get(uid)
            if demand is None or uid in self._gone or uid in self._pods:
                return  # not judged here (the watch brings it), gone already, or the watch showed it
            self._forget(uid)
            self._count_own(uid, node, demand)

    def _count_own(self, uid: str, node: str, demand: PodDemand) -> None:
        """The pod counts on ``node`` from now (an own binding or an assumption), until the watch shows it."""
        self._own[uid] = _key(uid, node)
        self._set(BoundPod(uid, node, time.time(), demand), self._own[uid])

    def _forget(self, uid: str) -> None:
        """The own binding's or assumption's note leaves the index (the watch showed the pod, or it went)."""
        self._assumed.pop(uid, None)
        key = self._own.pop(uid, None)
        if key is not None:
            self._remove(key)

    # --- reading (request threads) ---------------------------------------------------------------------------------

    def bindings(
        self, now: float, until: float, exclude: str = "", expecting: bool = False
    ) -> tuple[Bindings, frozenset[str]]:
        """The view to judge on at ``now`` (wall clock), caught up with the events the API sent, reading until
        ``until`` (monotonic) at most; and the nodes it holds the pod ``exclude`` on (shown by the watch, or bound
        or assumed by this instance). Waits for the first list only while the instance is cold, and then only until
        its first request's ``until``; ``expecting``, the request that reads the stream waits for the bindings of
        pods placed elsewhere (``_await_expected``); nobody waits for another's reading."""
        self.start(now)
        if not self._first_list.is_set():
            with self._lock:
                if self._cold_until is None:
                    self._cold_until = until
                cold_until = min(until, self._cold_until)
            self._first_list.wait(max(0.0, cold_until - time.monotonic()))
        if self._reading.acquire(blocking=False):
            try:
                if self._stream is not None:
                    self._read(until, now)
                if expecting:
                    self._await_expected(until, now, exclude)
            finally:
                self._reading.release()
            self.start(now)  # the stream ended or failed: opened again (or listed again) from now on
        with self._lock:
            self._publish(now)
            keys = (exclude, self._own.get(exclude))
            return self.view, frozenset(self._pods[key].node for key in keys if key is not None and key in self._pods)

    def start(self, now: float) -> None:
        """Call the API (list, or open the watch) on a thread of its own when it is due; never waits."""
        with self._lock:
            connecting = self._connecting
            due = self._stream is None and time.monotonic() >= self._retry_at
            if not due or (connecting is not None and connecting.is_alive()):
                return
            thread = self._connecting = threading.Thread(
                target=self._connect, args=(now,), name="extender-bound-pods", daemon=True
            )
        started(thread)  # one that cannot start is not alive: the next request tries again

    def _await_expected(self, until: float, now: float, exclude: str) -> None:
        """Read on (the reader only) until the watch shows the binding of every other pod placed elsewhere that this
        instance answered for within ``EXPECT_SECONDS``, or ``until``. Stops waiting after ``MISSES_TO_STOP``
        bindings in a row did not come, until one does."""
        while True:
            with self._lock:
                instant = time.monotonic()
                expected = {
                    uid: at
                    for uid, at in self._expected.items()
                    if instant - at < EXPECT_SECONDS and uid not in self._pods
                }
                missed = len(self._expected) - len(expected) - sum(uid in self._pods for uid in self._expected)
                self._misses += max(0, missed)
                self._expected = expected
                waiting = [at for uid, at in expected.items() if uid != exclude]
                stream = self._stream
                if not waiting or self._misses >= MISSES_TO_STOP or stream is None:
                    return
            limit = min(until, max(waiting) + EXPECT_SECONDS)
            if instant >= limit:
                return
            data = stream.read(min(limit, instant + 0.02), _READ_BYTES)
            if data:
                self._heard_at = time.monotonic()
                with self._lock:
                    self._lines(data, now)
            if stream.ended and self._stream is stream:
                self._ended(stream)
                return

    # --- calling the API (its own thread, holding no lock while it waits) -----------------------------------------

    def _connect(self, now: float) -> None:
        try:
            if not self._version:
                self._list(now)
            if self._version:
                self._open()
        except Exception as exc:  # a bug must cost the in-flight term, never a request  # noqa: BLE001
            with self._lock:
                self._fail(f"following the pods bound to nodes failed: {type(exc).__name__}: {exc}", "bug")
        finally:
            self._first_list.set()

    def _list(self, now: float) -> None:
        collector = Collector(now, self.horizon)
        try:
            version = list_version(self.client, collector, time.monotonic() + LIST_SECONDS)
        except KubeError as exc:
            with self._lock:
                self._fail(f"listing the pods bound to nodes failed: {exc.message}", "list")
            return
        with self._lock:
            # Assumptions made while the list ran stay until the watch shows them (the list may predate them).
            own = {uid: self._pods[key] for uid, key in self._own.items() if key in self._pods}
            self._pods, self._by_node, self._ages = {}, ShardedIndex(), []
            self._touched = None
            for pod in collector.kept.values():
                self._set(pod, pod.uid)
            for uid, pod in own.items():
                if uid in collector.kept:
                    del self._own[uid]
                else:
                    self._set(pod, self._own[uid])
            self._known = True
            self._version = version
            self._problem = _capped(self.horizon) if collector.capped else ""
            self._changed = True

    def _open(self) -> None:
        try:
            stream = self.client.watch_bound_pods(self._version, time.monotonic() + self.client.timeout, WATCH_SECONDS)
        except KubeError as exc:
            with self._lock:
                if exc.code == 410:
                    self._relist("the watch's resourceVersion expired (410 Gone)")
                else:
                    self._fail(f"watching the pods bound to nodes failed: {exc.message}", "watch")
            return
        with self._lock:
            self._partial.clear()
            self._heard_at = time.monotonic()
            self._stream = stream
            self._retry_at = 0.0
            if self._problem.startswith(("watching", "the watch", "following")):
                self._problem = ""

    # --- the stream (one request at a time: ``_reading``) ---------------------------------------------------------

    def _read(self, until: float, now: float) -> None:
        """Events the stream holds (never waiting for more), applied to the index; what is still unread at ``until``
        waits for the next request (the view says it is behind)."""
        stream = self._stream
        assert stream is not None
        while True:
            data = stream.read(time.monotonic(), _READ_BYTES)
            if data:
                self._heard_at = time.monotonic()
                with self._lock:
                    self._lines(data, now)
                if self._stream is not stream:
                    return
            if stream.ended:
                self._ended(stream)
                return
            if not data:
                self._behind = False
                if time.monotonic() - self._heard_at > STALL_SECONDS:
                    with self._lock:
                        self._closed(stream)
                        self._warn(f"the watch of bound pods was silent for {STALL_SECONDS:g} s: it is opened again")
                return
            if time.monotonic() >= until:
                self._behind = True
                return

    def _ended(self, stream: Stream) -> None:
        """The server ended the watch (it does every ``WATCH_SECONDS``) or it broke: the reading request opens it
        again at once, off the request path (``start``); meanwhile the view says so."""
        with self._lock:
            self._closed(stream)
            if stream.broken:
                self._fail(f"the watch of bound pods broke: {stream.broken}", "watch")

    def _closed(self, stream: Stream) -> None:
        stream.close()
        if self._stream is stream:
            self._stream = None
            self._partial.clear()

    def _lines(self, data: bytes, now: float) -> None:
        partial = self._partial
        partial += data
        start = 0
        while True:
            end = partial.find(b"\n", start)
            if end < 0:
                break
            line = bytes(partial[start:end])
            start = end + 1
            if line.strip() and not self._event(line, now):
                return
        del partial[:start]
        if len(partial) > MAX_LINE:
            self._broken(f"an event of the watch is longer than {MAX_LINE} bytes")

    def _event(self, line: bytes, now: float) -> bool:
        """Apply one event; False when the stream is no longer read (an error, a line that is not an event)."""
        try:
            event = decode_watch_event(line)
        except msgspec.DecodeError as exc:
            self._broken(f"an event of the watch cannot be read: {exc}")
            return False
        if event.kind == "ERROR":
            if self._stream is not None:
                self._closed(self._stream)
            if event.code == 410:
                self._relist(f"the watch expired (410 Gone: {event.message})")
            else:
                self._fail(f"the watch of bound pods failed: {event.code} {event.message}", "watch")
            return False
        if event.resource_version:
            self._version = event.resource_version
        pod = event.pod
        if event.kind == "DELETED":
            if pod is not None:
                self._gone_now(pod.uid)
        elif pod is not None and event.kind in ("ADDED", "MODIFIED"):
            if pod.finished or pod.bound_at < now - self.horizon:
                self._gone_now(pod.uid)
            else:
                self._forget(pod.uid)
                if self._expected.pop(pod.uid, None) is not None:
                    self._misses = 0
                if self._pods.get(pod.uid) != pod:
                    self._set(pod, pod.uid)
        return True

    def _gone_now(self, uid: str) -> None:
        self._forget(uid)
        self._remove(uid)
        if len(self._gone) >= MAX_NOTED:
            self._gone.pop(next(iter(self._gone)))
        self._gone[uid] = None

    def _broken(self, why: str) -> None:
        if self._stream is not None:
            self._closed(self._stream)
        self._fail(why, "watch")

    # --- problems (under ``_lock``) -------------------------------------------------------------------------------

    def _relist(self, why: str) -> None:
        """The resourceVersion is gone: list again (the pods counted so far stay counted meanwhile)."""
        self._version = ""
        self._retry_at = 0.0
        self._problem = f"{why}: listing the bound pods again"
        self._warn(self._problem, "410")

    def _fail(self, why: str, kind: str) -> None:
        """An API failure: tried again after RETRY_SECONDS; what the index counted stays counted."""
        self._retry_at = time.monotonic() + RETRY_SECONDS
        counted = "counting the pods seen before" if self._known else "no in-flight pods are counted"
        self._problem = f"{why}; {counted}"
        self._warn(self._problem, kind)

    def _warn(self, problem: str, kind: str = "") -> None:
        """One WARNING per kind of problem per ``WARN_SECONDS``."""
        kind = kind or problem
        now = time.monotonic()
        if now - self._warned.get(kind, -float("inf")) < WARN_SECONDS:
            return
        self._warned[kind] = now
        fields = {
            "event": "extender.nodeload",
            "source": "kubernetes",
            "problem": problem,
            "outcome": "in-flight pods may be missing",
        }
        logger.warning("NodeLoad: %s (bursts are not fully accounted for)", problem, extra={"json_fields": fields})

    # --- the index (under ``_lock``) ------------------------------------------------------------------------------

    def _set(self, pod: BoundPod, key: str) -> None:
        previous = self._pods.get(key)
        if previous is not None:
            self._drop_from_node(previous)
        self._pods[key] = pod
        heapq.heappush(self._ages, (pod.bound_at, key))
        self._by_node.set(pod.node, tuple(sorted((*self._by_node.get(pod.node, ()), pod), key=_order)))
        if self._touched is not None:
            self._touched.add(pod.node)
        self._changed = True

    def _remove(self, key: str) -> None:
        pod = self._pods.pop(key, None)
        if pod is not None:
            self._drop_from_node(pod)
            self._changed = True

    def _drop_from_node(self, pod: BoundPod) -> None:
        left = tuple(item for item in self._by_node.get(pod.node, ()) if item is not pod)
        if self._touched is not None:
            self._touched.add(pod.node)
        if left:
            self._by_node.set(pod.node, left)
        else:
            self._by_node.pop(pod.node)

    def _publish(self, now: float) -> None:
        """A new view when the index or its problem changed: assumptions past ``ASSUME_SECONDS``, pods past the
        horizon (oldest first, from ``_ages``) and past the cap forgotten first."""
        assumed, instant = self._assumed, time.monotonic()
        while assumed:
            uid, until = next(iter(assumed.items()))
            if until > instant:
                break  # the oldest first: the rest count on
            self._forget(uid)
        ages, pods, since = self._ages, self._pods, now - self.horizon
        while ages and (ages[0][0] < since or len(pods) > MAX_PODS):
            bound_at, key = heapq.heappop(ages)
            found = pods.get(key)
            if found is not None and found.bound_at == bound_at:
                if bound_at >= since:
                    self._problem = self._problem or _capped(self.horizon)
                if key != found.uid:
                    self._forget(found.uid)
                self._remove(key)
        if len(ages) > 2 * len(pods) + 1024:  # entries of pods gone otherwise
            self._ages = [(pod.bound_at, key) for key, pod in pods.items()]
            heapq.heapify(self._ages)
        problem = self._problem
        if not problem and self._behind:
            problem = "the watch of bound pods is behind: the events left wait for the next request"
        if not problem and self._stream is None and self._known:
            problem = "the watch of bound pods is being opened again"
        view = self.view
        if self._changed or problem != view.problem or self._known != view.known:
            touched = self._touched
            self.view = Bindings(
                self._by_node.publish(), problem, self._known, view, None if touched is None else frozenset(touched)
            )
            self._touched = set()
            self._changed = False

    def _after_fork_in_child(self) -> None:
        """The parent's stream and API thread are not this process's: start afresh."""
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        self._stream = None
        self._connecting = None
        self._first_list = threading.Event()
        self._cold_until = None
        self._version = ""
        self._pods, self._by_node, self._ages = {}, ShardedIndex(), []
        self._touched = None
        self._own = {}
        self._assumed = {}
        self._expected = {}
        self._known = False
        self._problem = _COLD
        self._changed = True


_LIVE: weakref.WeakSet[PodWatch] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for watch in list(_LIVE):
        watch._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
