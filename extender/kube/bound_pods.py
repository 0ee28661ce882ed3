"""Pods bound to nodes lately, as the Kubernetes API reports them: what load metrics cannot show yet.

Every instance of the function sees every binding, its own, other instances' and other schedulers', because the
API is where bindings are made. Two ways to read them, one answer:

- ``PodWatch`` (the result cache on): one paginated LIST of the bound pods (``fieldSelector=spec.nodeName!=``,
  ``limit=500``, on a thread of its own), then a WATCH from the list's resourceVersion with bookmarks, which the API
  server ends every ``WATCH_SECONDS`` and which is opened again from the last resourceVersion seen. Its events are
  read **on the request path**, by one request at a time, within a deadline the request gives: Cloud Run throttles
  the CPU between requests, so a reader thread would be behind exactly when a request needs it; a request instead
  reads what the API sent while the instance was idle (the socket holds it) before it judges. Events past the
  deadline wait for the next request: the request says its view may be behind, never waits past its budget.
- ``list_bindings`` (the result cache off): the same LIST on every request, kept nowhere.

Invariants of the index (``Bindings``, a cache):

- **What it holds:** each bound pod whose binding time is within ``horizon`` seconds (the longest a NodeLoad
  metric's delay plus its maxAge: an older binding can no longer count against any sample that is still a fact) and
  that has not finished: uid, node, binding time (the PodScheduled condition's lastTransitionTime) and demand. A
  status update that changes none of these (the kubelet's, mostly) changes nothing.
- **Identity is the generation.** A published ``Bindings`` is never changed; every change (a binding arrived, a pod
  finished or was deleted, an old one pruned) publishes a new one in one assignment. A verdict kept under a view's
  identity therefore never outlives the bindings it counted.
- **Own bindings count at once.** ``note_binding`` (the bind verb, after the API accepted the Binding) adds the pod
  with the demand NodeLoad noted when it judged it; the watch's event for it replaces it later.
- **Bindings on their way.** kube-scheduler binds a pod asynchronously and starts the next pod's cycle at once, so
  the next filter may arrive before the binding: a request waits (``EXPECT_SECONDS`` at most, within its deadline)
  for the binding of every other pod this instance answered with feasible nodes within that time. Once
  ``MISSES_TO_STOP`` such bindings in a row did not come (a caller that filters without binding: a dry run, a gang
  held at Permit, another extender rejecting), requests stop waiting until an expected binding arrives again.
- **Bounded.** At most ``MAX_PODS`` pods (the oldest go first, and views say they are incomplete); one event line at
  most ``MAX_LINE`` bytes; an API failure is retried at most every ``RETRY_SECONDS``; a LIST takes at most
  ``LIST_SECONDS``. Without these the view says why it may be incomplete (``Bindings.problem``): it is never an
  error, only a smaller in-flight term, which NodeLoad reports with a WARNING.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import msgspec

from extender.kube.demand import PodDemand
from extender.kube.errors import KubeError
from extender.kube.lists import BoundPod, decode_watch_event

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
EXPECT_SECONDS = 0.5
MISSES_TO_STOP = 3
# Pods whose demand NodeLoad noted, and answers still expecting a binding, remembered at most.
MAX_NOTED = 4096
# Bytes of events one read takes before the index is updated.
_READ_BYTES = 4 * 1024 * 1024
# How often pods past the horizon are dropped.
_PRUNE_SECONDS = 10.0


class Bindings:
    """The pods bound within the horizon, by node; never changed (its identity is its generation)."""

    __slots__ = ("by_node", "known", "problem", "uids")

    def __init__(self, by_node: Mapping[str, tuple[BoundPod, ...]], problem: str = "", known: bool = True) -> None:
        self.by_node = by_node
        # Why pods may be missing ("": every binding the API reported is here).
        self.problem = problem
        # False until a list succeeded: then nothing is known of the bindings, not even that there are none.
        self.known = known
        self.uids = frozenset(pod.uid for pods in by_node.values() for pod in pods)

    def on(self, node: str) -> tuple[BoundPod, ...]:
        return self.by_node.get(node, ())

    def __len__(self) -> int:
        return len(self.uids)


def collect(pods: Iterable[BoundPod], now: float, horizon: float) -> tuple[dict[str, BoundPod], bool]:
    """The pods to count (bound within ``horizon`` of ``now``, not finished), by uid, the newest ``MAX_PODS``; and
    whether some were left out for that cap."""
    kept = {pod.uid: pod for pod in pods if not pod.finished and pod.bound_at >= now - horizon}
    if len(kept) <= MAX_PODS:
        return kept, False
    newest = sorted(kept.values(), key=lambda pod: pod.bound_at)[-MAX_PODS:]
    return {pod.uid: pod for pod in newest}, True


def by_node(pods: Mapping[str, BoundPod]) -> dict[str, tuple[BoundPod, ...]]:
    nodes: dict[str, list[BoundPod]] = {}
    for pod in pods.values():
        nodes.setdefault(pod.node, []).append(pod)
    return {node: tuple(sorted(found, key=lambda pod: (pod.bound_at, pod.uid))) for node, found in nodes.items()}


def _capped(horizon: float) -> str:
    return f"more than {MAX_PODS} pods were bound within {horizon:g} s: only the newest are counted"


def list_bindings(client: KubeClient, horizon: float, now: float, until: float) -> Bindings:
    """The bindings the API lists now (every page by ``until``, monotonic): the uncached reading of ``PodWatch``."""
    listed: list[BoundPod] = []
    try:
        listed.extend(_list_pages(client, until))
    except _ListEnd:
        pass
    except KubeError as exc:
        return Bindings({}, f"listing the pods bound to nodes failed: {exc.message}", known=False)
    kept, capped = collect(listed, now, horizon)
    return Bindings(by_node(kept), _capped(horizon) if capped else "")


def _list_pages(client: KubeClient, until: float) -> Iterable[BoundPod]:
    """Every page's pods (each page decoded and dropped before the next is asked), and the list's resourceVersion
    last, through ``_ListEnd``."""
    token: str | None = None
    seen: set[str] = set()
    while True:
        if time.monotonic() >= until:
            raise KubeError("listing the pods bound to nodes took too long")
        pods, version, token = client.bound_pods_page(token, until)
        yield from pods
        if not token:
            raise _ListEnd(version)
        if token in seen:
            raise KubeError("the Kubernetes API repeated a continue token while listing pods: the list never ends")
        seen.add(token)


class _ListEnd(Exception):
    def __init__(self, version: str) -> None:
        super().__init__(version)
        self.version = version


_EMPTY: Mapping[str, tuple[BoundPod, ...]] = {}


class PodWatch:
    """The index of bound pods of one API server, kept by LIST then WATCH as the module says; thread-safe."""

    def __init__(self, client: KubeClient, horizon: float) -> None:
        self.client = client
        self.horizon = horizon
        self._pods: dict[str, BoundPod] = {}
        self._by_node: dict[str, tuple[BoundPod, ...]] = {}
        self.view = Bindings(_EMPTY, "the pods bound to nodes are not listed yet", known=False)
        # A list succeeded (and no failure since made the index unknown).
        self._known = False
        # One reader of the stream and writer of the index at a time.
        self._reading = threading.Lock()
        # What the function itself did, told by other threads (never waits for the reader).
        self._notes = threading.Lock()
        self._demands: dict[str, PodDemand] = {}
        self._expected: dict[str, float] = {}
        # Expected bindings that did not come, in a row (reset when one arrives).
        self._misses = 0
        self._own: dict[str, BoundPod] = {}
        self._version = ""
        self._stream: Stream | None = None
        self._partial = bytearray()
        self._heard_at = 0.0
        self._listing: threading.Thread | None = None
        self._listed: tuple[dict[str, BoundPod], str, bool] | KubeError | None = None
        self._retry_at = 0.0
        self._pruned_at = 0.0
        self._problem = self.view.problem
        # Stopped reading at a request's deadline with events still to read.
        self._behind = False
        self._changed = True
        self._warned = ""
        _LIVE.add(self)

    # --- what the function tells (any thread) ---------------------------------------------------------------------

    def note_demand(self, uid: str, demand: PodDemand) -> None:
        """The pod's demand, noted when NodeLoad judges it: its own binding can then count at once."""
        with self._notes:
            if len(self._demands) >= MAX_NOTED:
                self._demands.pop(next(iter(self._demands)))
            self._demands[uid] = demand

    def note_answer(self, uid: str, feasible: bool) -> None:
        """The function answered filter or prioritize for the pod: with feasible nodes, its binding is on its way."""
        now = time.monotonic()
        with self._notes:
            if not feasible:
                self._expected.pop(uid, None)
                return
            if len(self._expected) >= MAX_NOTED:
                self._expected = {key: at for key, at in self._expected.items() if now - at < EXPECT_SECONDS}
            self._expected[uid] = now

    def note_binding(self, uid: str, node: str) -> None:
        """The function bound the pod (the API accepted the Binding): it counts from now."""
        with self._notes:
            self._expected.pop(uid, None)
            demand = self._demands.get(uid)
            if demand is not None:
                self._own[uid] = BoundPod(uid, node, time.time(), demand)
            else:  # judged by another instance: the watch brings it, and the next requests wait for it
                self._expected[uid] = time.monotonic()

    # --- reading (request threads) ---------------------------------------------------------------------------------

    def bindings(self, now: float, until: float, exclude: str = "") -> tuple[Bindings, int]:
        """The view to judge on at ``now`` (wall clock), caught up with what the API sent, reading until ``until``
        (monotonic) at most; and how many bindings this instance expected (other pods than ``exclude``) did not come
        in time. A request that finds another reading waits for it within ``until``, then takes the view it left."""
        if not self._reading.acquire(timeout=max(0.0, until - time.monotonic())):
            return self.view, 0
        try:
            self._advance(now, until)
            late = self._wait_for_expected(now, until, exclude)
            self._publish(now)
            return self.view, late
        finally:
            self._reading.release()

    def start(self, now: float) -> None:
        """Start the first list (or a list due again) without waiting for it, unless a request is reading."""
        if not self._reading.acquire(blocking=False):
            return
        try:
            if not self._version and self._listing is None and time.monotonic() >= self._retry_at:
                self._start_list(now)
        finally:
            self._reading.release()

    def _advance(self, now: float, until: float) -> None:
        """One step of LIST then WATCH, then every event the stream holds (within ``until``). A cold index waits for
        its first list within ``until``."""
        listing = self._listing
        if listing is not None and not self._version and not self._pods:
            listing.join(max(0.0, until - time.monotonic()))
        self._take_listed(now)
        if self._stream is None and self._version and time.monotonic() >= self._retry_at:
            self._open(until)
        elif not self._version and self._listing is None and time.monotonic() >= self._retry_at:
            self._start_list(now)
            if not self._pods:  # nothing to judge on meanwhile: wait for it, within the deadline
                self._advance(now, until)
                return
        if self._stream is not None:
            self._read(until, wait=False, now=now)

    def _wait_for_expected(self, now: float, until: float, exclude: str) -> int:
        """Read on until every binding expected has arrived, or ``EXPECT_SECONDS`` after its answer, or ``until``;
        how many of those waited for did not arrive."""
        awaited: set[str] = set()
        while True:
            with self._notes:
                self._merge_own()
                started = time.monotonic()
                self._expected = {uid: at for uid, at in self._expected.items() if started - at < EXPECT_SECONDS}
                waiting = {uid: at for uid, at in self._expected.items() if uid != exclude and uid not in self._pods}
            awaited.update(waiting)
            if not waiting or self._misses >= MISSES_TO_STOP:
                break
            limit = min(until, max(waiting.values()) + EXPECT_SECONDS)
            if self._stream is None or started >= limit:
                break
            # In short slices: an own binding (another thread's bind) is taken between them.
            self._read(min(limit, started + 0.02), wait=True, now=now)
        missed = [uid for uid in awaited if uid not in self._pods]
        if missed:
            with self._notes:
                self._misses += len(missed)
                for uid in missed:  # each counts once
                    self._expected.pop(uid, None)
        return len(missed)

    def _merge_own(self) -> None:
        """Own bindings the watch has not delivered yet join the index (under ``_notes``)."""
        for uid, pod in list(self._own.items()):
            if uid not in self._pods:
                self._set(pod)
            del self._own[uid]

    # --- LIST ------------------------------------------------------------------------------------------------------

    def _start_list(self, now: float) -> None:
        self._problem = "the pods bound to nodes are being listed" if not self._pods else self._problem
        thread = threading.Thread(target=self._list, args=(now,), name="extender-bound-pods", daemon=True)
        self._listing = thread
        thread.start()

    def _list(self, now: float) -> None:
        pods: list[BoundPod] = []
        try:
            try:
                for pod in _list_pages(self.client, time.monotonic() + LIST_SECONDS):
                    pods.append(pod)
            except _ListEnd as end:
                kept, capped = collect(pods, now, self.horizon)
                self._listed = (kept, end.version, capped)
        except KubeError as exc:
            self._listed = exc
        except Exception as exc:  # a bug must cost the in-flight term, never a request  # noqa: BLE001
            self._listed = KubeError(f"{type(exc).__name__}: {exc}")

    def _take_listed(self, now: float) -> None:
        listed, thread = self._listed, self._listing
        if thread is None or thread.is_alive():
            return
        self._listing, self._listed = None, None
        if isinstance(listed, KubeError) or listed is None:
            why = listed.message if listed is not None else "the list ended without an answer"
            self._fail(f"listing the pods bound to nodes failed: {why}", keep=False)
            return
        kept, version, capped = listed
        self._known = True
        self._pods = dict(kept)
        self._by_node = by_node(self._pods)
        self._version = version
        self._problem = _capped(self.horizon) if capped else ""
        self._retry_at = 0.0

    # --- WATCH -----------------------------------------------------------------------------------------------------

    def _open(self, until: float) -> None:
        try:
            self._stream = self.client.watch_bound_pods(self._version, until, WATCH_SECONDS)
        except KubeError as exc:
            if exc.code == 410:
                self._relist("the watch's resourceVersion expired (410 Gone)")
            else:
                self._fail(f"watching the pods bound to nodes failed: {exc.message}", keep=True)
            return
        self._partial.clear()
        self._heard_at = time.monotonic()
        if self._problem.startswith(("watching", "the watch")):
            self._problem = ""

    def _read(self, until: float, wait: bool, now: float) -> None:
        """Events the stream holds (waiting for the first until ``until`` when ``wait``), applied to the index; what
        is still unread at ``until`` waits for the next request (the view says it is behind)."""
        stream = self._stream
        assert stream is not None
        deadline = until if wait else time.monotonic()
        while True:
            data = stream.read(deadline, _READ_BYTES)
            if data:
                self._heard_at = time.monotonic()
                self._lines(data, now)
                if self._stream is None:
                    return
            if stream.ended:
                self._ended(stream)
                return
            if not data:
                self._behind = False
                if time.monotonic() - self._heard_at > STALL_SECONDS:
                    stream.close()
                    self._stream = None
                    self._retry_at = 0.0
                    self._warn(f"the watch of bound pods was silent for {STALL_SECONDS:g} s: it is opened again")
                return
            if time.monotonic() >= until:
                self._behind = True
                return
            deadline = time.monotonic()

    def _ended(self, stream: Stream) -> None:
        stream.close()
        self._stream = None
        if stream.broken:
            self._fail(f"the watch of bound pods broke: {stream.broken}", keep=True)

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
            assert self._stream is not None
            self._stream.close()
            self._stream = None
            if event.code == 410:
                self._relist(f"the watch expired (410 Gone: {event.message})")
            else:
                self._fail(f"the watch of bound pods failed: {event.code} {event.message}", keep=True)
            return False
        if event.resource_version:
            self._version = event.resource_version
        pod = event.pod
        if event.kind == "DELETED":
            if pod is not None:
                self._remove(pod.uid)
        elif pod is not None and event.kind in ("ADDED", "MODIFIED"):
            if pod.finished or pod.bound_at < now - self.horizon:
                self._remove(pod.uid)
            elif self._pods.get(pod.uid) != pod:
                if pod.uid not in self._pods:
                    self._arrived(pod.uid)
                self._set(pod)
        return True

    def _arrived(self, uid: str) -> None:
        """A new binding: if this instance expected it, bindings are arriving, so requests wait for them again."""
        with self._notes:
            if uid in self._expected or uid in self._demands:
                self._misses = 0

    def _broken(self, why: str) -> None:
        if self._stream is not None:
            self._stream.close()
        self._stream = None
        self._partial.clear()
        self._fail(why, keep=True)

    def _relist(self, why: str) -> None:
        """The resourceVersion is gone: list again (the pods counted so far stay counted meanwhile)."""
        self._version = ""
        self._retry_at = 0.0
        self._problem = f"{why}: listing the bound pods again"
        self._warn(self._problem)

    def _fail(self, why: str, keep: bool) -> None:
        """An API failure: tried again after RETRY_SECONDS; ``keep`` the index (a watch fails: what it saw still
        counts) or not (no list yet: nothing is known)."""
        self._retry_at = time.monotonic() + RETRY_SECONDS
        counted = "counting the pods seen before" if keep and self._version else "no in-flight pods are counted"
        self._problem = f"{why}; {counted}"
        if not keep:
            self._pods, self._by_node = {}, {}
            self._known = False
            self._changed = True
        self._warn(self._problem)

    def _warn(self, problem: str) -> None:
        if problem != self._warned:
            self._warned = problem
            fields = {
                "event": "extender.nodeload",
                "source": "kubernetes",
                "problem": problem,
                "outcome": "in-flight pods may be missing",
            }
            logger.warning("NodeLoad: %s (bursts are not fully accounted for)", problem, extra={"json_fields": fields})

    # --- the index -------------------------------------------------------------------------------------------------

    def _set(self, pod: BoundPod) -> None:
        previous = self._pods.get(pod.uid)
        if previous is not None:
            self._drop_from_node(previous)
        self._pods[pod.uid] = pod
        self._by_node[pod.node] = tuple(
            sorted((*self._by_node.get(pod.node, ()), pod), key=lambda item: (item.bound_at, item.uid))
        )
        self._changed = True

    def _remove(self, uid: str) -> None:
        pod = self._pods.pop(uid, None)
        if pod is not None:
            self._drop_from_node(pod)
            self._changed = True

    def _drop_from_node(self, pod: BoundPod) -> None:
        left = tuple(item for item in self._by_node.get(pod.node, ()) if item.uid != pod.uid)
        if left:
            self._by_node[pod.node] = left
        else:
            self._by_node.pop(pod.node, None)

    def _publish(self, now: float) -> None:
        """A new view when the index or its problem changed; pods past the horizon dropped now and then."""
        if time.monotonic() - self._pruned_at > _PRUNE_SECONDS:
            self._pruned_at = time.monotonic()
            for uid in [uid for uid, pod in self._pods.items() if pod.bound_at < now - self.horizon]:
                self._remove(uid)
            if len(self._pods) > MAX_PODS:
                kept, _ = collect(self._pods.values(), now, self.horizon)
                self._pods, self._by_node = kept, by_node(kept)
                self._problem = _capped(self.horizon)
                self._changed = True
        problem = self._problem
        if not problem and self._behind:
            problem = "the watch of bound pods is behind: the events left wait for the next request"
        if self._changed or problem != self.view.problem or self._known != self.view.known:
            self.view = Bindings(dict(self._by_node), problem, self._known)
            self._changed = False

    def _after_fork_in_child(self) -> None:
        """The parent's stream and list thread are not this process's: start afresh."""
        self._reading = threading.Lock()
        self._notes = threading.Lock()
        self._stream = None
        self._listing = None
        self._listed = None
        self._version = ""
        self._pods, self._by_node = {}, {}
        self._known = False
        self._changed = True


_LIVE: weakref.WeakSet[PodWatch] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for watch in list(_LIVE):
        watch._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
