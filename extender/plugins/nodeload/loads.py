"""The metric answers a NodeLoad instance judges on: asked once per ``refreshInterval``, kept in between.

A cache, stale-while-revalidate, one per plugin instance. Invariants:

- **What is kept.** A ``Snapshot``: each metric's latest usable answer (and why its last refresh failed, if it
  did). A snapshot is never changed, only replaced in one assignment; a request reads one snapshot, at one
  instant (``LoadView``), so its nodes are all judged on the same answers.
- **When it is asked.** The first request after ``refreshInterval`` has passed since the last refresh began
  starts a refresh on a thread of its own, within ``query_seconds`` (a share of the scheduler's httpTimeout): one
  query per metric, the metrics at once. Only one refresh is in flight: the requests meanwhile, that one included,
  judge on the snapshot at hand, so a slow or hung Prometheus never holds a warm request. A request waits only
  when there is nothing to judge on: a cold instance's first requests (for the first refresh, at most
  ``query_seconds``), and the first request after the snapshot was asked ``maxAge`` ago or more (an instance idle
  that long), which refreshes on its own path.
- **How old it may be.** Never older than ``maxAge`` for judging: a sample (its time as Prometheus gives it) older
  than that is not a fact, whatever is kept. A failed refresh keeps the previous answer of that metric (with one
  WARNING per refresh saying why), so an unreachable Prometheus leaves nodes without facts ``maxAge`` after the last
  answer, not at once.
- **Bounded.** One snapshot per instance, each answer at most ``MAX_SERIES`` series of at most ``MAX_ANSWER_BYTES``.
- **Forks.** A refresh in flight when the process forks has no thread in the child: the child's refresh lock starts
  free (gunicorn forks its worker from the process that built the function).
- **Switchable off.** ``keep`` false (``EXTENDER_RESULT_CACHE=off``) asks Prometheus on every request and keeps
  nothing; tests/test_nodeload_kept_equal*.py check that both answer alike while the answers do not change.
"""

from __future__ import annotations

import bisect
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from itertools import filterfalse
from typing import Any
from urllib.parse import urlsplit

from extender.background import started
from extender.errors import bounded
from extender.plugins.nodeload.answers import AnswerError, MetricAnswer, label_problem, parse_answer, quoted
from extender.plugins.nodeload.args import Metric
from extender.plugins.nodeload.prometheus import Querier, QueryError

logger = logging.getLogger("extender.nodeload")
EVENT = "extender.nodeload"
# The source a refresh's warnings name (their ``source`` field, which the source_failures metric counts).
CLOUD_MONITORING_HOST = "monitoring.googleapis.com"
Clock = Callable[[], float]
USED = "answer used"
# An odd answer (empty, series without the node label, values far outside the unit) is warned about once a minute.
WARN_EVERY = 60.0


class Snapshot:
    """Each metric's latest usable answer, and why the last refresh of a metric failed; never changed. ``metrics``
    are the metrics asked, by name (their queries and node labels, for messages).

    A refreshed snapshot knows what it changed from the one it replaced (``changed_since``), worked out once by the
    refresh: the nodes whose samples moved (a value, a value that is not a number, or none where there was one) and
    those whose sample time alone moved. So verdicts and scores kept on the one before are judged again on those
    nodes only (``NodeLoad.changed_nodes``): a kept result reads nothing of the answers but its node's samples (a
    node without one is never kept: its words depend on the whole answer)."""

    __slots__ = ("__weakref__", "_changed", "_parent", "answers", "failures", "metrics")

    def __init__(
        self,
        answers: Mapping[str, MetricAnswer],
        failures: Mapping[str, str],
        metrics: Mapping[str, Metric],
        replacing: Snapshot | None = None,
    ) -> None:
        self.answers = answers
        self.failures = failures
        self.metrics = metrics
        # The snapshot this one replaced (held weakly: no chain of old answers is kept alive) and what changed since.
        self._parent: weakref.ref[Snapshot] | None = None
        self._changed: tuple[frozenset[str], frozenset[str]] | None = None
        if replacing is not None and replacing.answers.keys() == answers.keys():
            self._parent = weakref.ref(replacing)
            self._changed = _changed_samples(replacing.answers, answers)

    def changed_since(self, before: Snapshot) -> tuple[frozenset[str], frozenset[str]] | None:
        """The nodes whose samples moved from ``before`` to this snapshot, and those whose sample time alone moved;
        None unless ``before`` is this snapshot or the one it replaced (with the same metrics answered)."""
        if before is self:
            return frozenset(), frozenset()
        if self._parent is None or self._parent() is not before:
            return None
        return self._changed


def _changed_samples(
    before: Mapping[str, MetricAnswer], after: Mapping[str, MetricAnswer]
) -> tuple[frozenset[str], frozenset[str]]:
    """Over every metric: the nodes whose sample moved (value, not-a-number text, or presence), and those whose sample
    time alone moved."""
    moved: set[str] = set()
    retimed: set[str] = set()
    for metric, answer in after.items():
        old = before[metric]
        if old is answer:  # a failed refresh keeps the answer
            continue
        values, old_values = answer.values, old.values
        moved.update(values.keys() ^ old_values.keys(), answer.not_finite.keys() ^ old.not_finite.keys())
        moved.update(node for node, value in values.items() if node in old_values and old_values[node] != value)
        old_texts = old.not_finite
        moved.update(node for node, text in answer.not_finite.items() if node in old_texts and old_texts[node] != text)
        old_times = old.times
        retimed.update(node for node, at in answer.times.items() if old_times.get(node) != at)
    return frozenset(moved), frozenset(retimed - moved)


def changed_between(before: tuple[Any, ...], after: tuple[Any, ...]) -> tuple[frozenset[str], frozenset[str]] | None:
    """Between two ``LoadView.key``s: the nodes whose samples moved and those whose sample time alone moved
    (``Snapshot.changed_since``); None when either view holds a sample too old (which ones are, across two
    snapshots, is not in the keys) or the snapshots are not one the other's successor."""
    if before == after:
        return frozenset(), frozenset()
    if any(count for _, count in before[1:]) or any(count for _, count in after[1:]):
        return None
    snapshot: Snapshot = after[0]
    return snapshot.changed_since(before[0])


NOT_ASKED = Snapshot({}, {}, {})


class LoadView:
    """One request's view of a snapshot, at the request's instant: which samples are still facts."""

    __slots__ = ("expired", "max_age", "now", "snapshot", "source")

    def __init__(self, snapshot: Snapshot, now: float, max_age: float, source: str = "Prometheus") -> None:
        self.snapshot = snapshot
        self.now = now
        self.max_age = max_age
        # What the answers come from, in the reasons (``prometheus.source_name``).
        self.source = source
        # Per metric answered, how many of its samples are older than maxAge now: samples expire oldest first, so
        # this count says which (``key``).
        self.expired = {
            name: bisect.bisect_left(answer.sorted_times, now - max_age) for name, answer in snapshot.answers.items()
        }

    def key(self) -> tuple[Any, ...]:
        """What a verdict judged on this view depends on besides the node: the snapshot (by identity) and which of its
        samples are too old. A kept verdict thus never outlives the answers, nor the freshness, it was judged on."""
        return (self.snapshot, *sorted(self.expired.items()))

    def value(self, metric: str, node: str) -> float:
        """The node's value: only asked for nodes ``unknown`` says have one."""
        return self.snapshot.answers[metric].values[node]

    def unknown(self, metric: str, names: Sequence[str]) -> dict[str, str]:
        """The names of ``names`` without a fresh finite sample of ``metric``, each with why (the same words for every
        node alike, so that rejections group as the pod's events group them)."""
        answer = self.snapshot.answers.get(metric)
        failure = self.snapshot.failures.get(metric)
        cause = f" (its last refresh failed: {failure})" if failure else ""
        if answer is None:
            return dict.fromkeys(names, f"NodeLoad: no {metric} answer from {self.source} yet{cause}")
        missing: dict[str, str] = {}
        without = list(filterfalse(answer.values.__contains__, names))
        if without:  # the words are worked out only for a request that needs them: most have a value for every node
            asked = self.snapshot.metrics[metric]
            if answer.unlabelled == answer.series:  # no series at all, or none naming a node
                absent = f"NodeLoad: metric {metric}: {label_problem(answer, asked.query, asked.node_label)}"
            else:
                absent = (
                    f"NodeLoad: no series of {_possessive(self.source)} {metric} query {quoted(asked.query)} has "
                    f"label {asked.node_label} set to this node's name (they name {_others(answer)})"
                )
            not_finite = f"NodeLoad: the node's {metric} sample is not a finite number"
            missing = {name: not_finite if name in answer.not_finite else absent for name in without}
        expired = self.expired[metric]
        if expired:
            times = answer.times
            if expired == len(answer.sorted_times):  # every sample is too old
                old = [name for name in names if name in times]
            else:
                limit = self.now - self.max_age
                old = [name for name in names if times.get(name, limit) < limit]
            stale = f"NodeLoad: the node's {metric} sample is older than maxAge ({self.max_age:g} s){cause}"
            missing.update(dict.fromkeys(old, stale))
        return missing

    def facts(self, node: str) -> dict[str, dict[str, Any]]:
        """What the snapshot says of the node: per metric its value (a number, NaN or infinity as Prometheus writes
        it, None when it has none) and its age in seconds at the request's instant."""
        shown: dict[str, dict[str, Any]] = {}
        for metric, answer in self.snapshot.answers.items():
            value: float | str | None = answer.values.get(node, answer.not_finite.get(node))
            at = answer.times.get(node)
            age = None if at is None else round(max(0.0, self.now - at), 3)
            shown[metric] = {"value": value, "ageSeconds": age}
        return shown


class Loads:
    """The snapshot of one NodeLoad instance, refreshed as the module says; thread-safe."""

    def __init__(
        self,
        metrics: Sequence[Metric],
        querier: Querier,
        *,
        refresh_interval: float,
        query_seconds: float,
        keep: bool,
        max_age: float = math.inf,
    ) -> None:
        self.metrics = tuple(metrics)
        self._by_name = {metric.name: metric for metric in self.metrics}
        self.querier = querier
        self.refresh_interval = refresh_interval
        self.query_seconds = query_seconds
        self.max_age = max_age
        self.keep = keep
        self.source = source_of(querier)
        self._current = NOT_ASKED
        # When the last refresh began (the clock's time), None before the first.
        self._asked_at: float | None = None
        self._refreshing = threading.Lock()
        # When each kind of odd answer was last warned about (monotonic), by metric: bounded by the metrics.
        self._warned: dict[tuple[str, str], float] = {}
        self._warning = threading.Lock()
        _LIVE.add(self)

    def snapshot(self, now: float) -> Snapshot:
        """The snapshot to judge at ``now`` (the request's instant). When a refresh is due and no other is in flight,
        it runs on a thread of its own while this request judges on the snapshot at hand; only a request with
        nothing to judge on (cold, or the snapshot asked ``max_age`` ago or more) refreshes on its own path first."""
        if not self.keep:
            return self._refreshed(NOT_ASKED)
        asked_at = self._asked_at
        if asked_at is not None and 0 <= now - asked_at < self.refresh_interval:
            return self._current
        if asked_at is not None and 0 <= now - asked_at < self.max_age:
            if self._refreshing.acquire(blocking=False):
                name = "extender-nodeload-refresh"
                if not started(threading.Thread(target=self._refresh, args=(now,), name=name, daemon=True)):
                    self._refreshing.release()  # no thread to refresh on: the next request past the interval tries
            return self._current
        cold = asked_at is None  # nothing to judge on meanwhile: wait for the refresh in flight (and its last threads)
        if not self._refreshing.acquire(blocking=cold, timeout=self.query_seconds * 1.25 if cold else -1):
            return self._current
        self._refresh(now)
        return self._current

    def _refresh(self, now: float) -> None:
        """Refresh unless another did meanwhile; called holding ``_refreshing``, which it releases."""
        try:
            asked_at = self._asked_at
            if asked_at is not None and 0 <= now - asked_at < self.refresh_interval:
                return  # refreshed while this request waited
            self._current = self._refreshed(self._current)
            self._asked_at = now  # after the snapshot: a cold request that finds it set finds the snapshot too
        except Exception:  # a bug must cost this refresh (the last answers stay), never a request nor the thread
            logger.exception("NodeLoad: refreshing the metrics failed")
        finally:
            self._refreshing.release()

    def _refreshed(self, previous: Snapshot) -> Snapshot:
        """``previous`` with a new answer of each metric that got one; a metric that got none keeps its answer and
        says why (a WARNING each time)."""
        outcomes = self._ask_all()
        answers = dict(previous.answers)
        failures: dict[str, str] = {}
        for metric in self.metrics:
            outcome = outcomes[metric.name]
            if isinstance(outcome, MetricAnswer):
                answers[metric.name] = outcome
            else:
                failures[metric.name] = outcome
                _warn(self.source, metric, outcome, answers.get(metric.name))
        return Snapshot(answers, failures, self._by_name, previous)

    def _ask_all(self) -> dict[str, MetricAnswer | str]:
        """Each metric's answer or why it has none, the metrics asked at once within ``query_seconds``."""
        deadline = time.monotonic() + self.query_seconds
        outcomes: dict[str, MetricAnswer | str] = {}

        def ask(metric: Metric) -> None:
            outcomes[metric.name] = self._ask(metric, deadline - time.monotonic())

        running: list[threading.Thread] = []
        unstarted: list[Metric] = []  # asked on this thread, after the first, when theirs cannot start
        for metric in self.metrics[1:]:
            thread = threading.Thread(target=ask, args=(metric,), name="extender-nodeload-query", daemon=True)
            if started(thread):
                running.append(thread)
            else:
                unstarted.append(metric)
        for metric in (self.metrics[0], *unstarted):
            ask(metric)
        for thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))
        late = f"no answer within {self.query_seconds:.1f} s"
        return {metric.name: outcomes.get(metric.name, late) for metric in self.metrics}

    def _ask(self, metric: Metric, seconds: float) -> MetricAnswer | str:
        try:
            answer, oddities = parse_answer(self.querier.query(metric.query, seconds), metric.node_label)
        except (QueryError, AnswerError) as exc:
            return str(exc)
        except Exception as exc:  # a bug must cost this refresh, never the request that makes it
            logger.exception("NodeLoad: querying metric %s failed", metric.name)
            return f"{type(exc).__name__}: {exc}"
        for oddity in oddities:
            _warn(self.source, metric, oddity, None, USED)
        problem = label_problem(answer, metric.query, metric.node_label)
        if problem and self._due(metric.name, "labels"):
            named = answer.unlabelled < answer.series
            used = "answer used for the nodes it names" if named else "no node has facts"
            _warn(self.source, metric, problem, None, used)
        far, node, value = metric.unit.far_outside(answer.values) if metric.unit is not None else (0, "", 0.0)
        if far and metric.unit is not None and self._due(metric.name, "unit"):
            _warn(
                self.source,
                metric,
                f"query {quoted(metric.query)} answers values far outside the metric's unit, {metric.unit.described}, "
                f"such as node {node}: {value:g} ({far} of {len(answer.values)} nodes); is it answering another unit "
                "(unit: percent for 0..100)?",
                None,
                "answer used: its values are judged as they are",
            )
        return answer

    def none_matched(self, snapshot: Snapshot, metric: str, names: Sequence[str]) -> None:
        """A WARNING, once a minute, when ``metric``'s answer names nodes on its label but none of ``names`` (a
        request's nodes, none of which has a sample): the label holds something else than the nodes' names."""
        answer = snapshot.answers.get(metric)
        if answer is None or not names or not (answer.values or answer.not_finite):
            return
        if any(name in answer.values or name in answer.not_finite for name in names):
            return
        if self._due(metric, "unmatched"):
            asked = snapshot.metrics[metric]
            problem = (
                f"the series of query {quoted(asked.query)} name {_others(answer)} on label {asked.node_label}, none "
                f"of the {len(names)} nodes asked about (such as {bounded(names[0], 256)}): is the node's name in "
                "another label? (check-policy --probe shows which)"
            )
            _warn(self.source, asked, problem, None, "those nodes have no facts")

    def _due(self, metric: str, problem: str) -> bool:
        """Whether a WARNING about this kind of ``problem`` of ``metric`` is due: once per WARN_EVERY seconds, not
        per refresh (a refresh every few seconds would repeat it as often)."""
        now = time.monotonic()
        with self._warning:
            last = self._warned.get((metric, problem))
            if last is not None and now - last < WARN_EVERY:
                return False
            self._warned[metric, problem] = now
            return True


def source_of(querier: Querier) -> str:
    """``cloud-monitoring`` for Google Cloud Managed Service for Prometheus' query API, else ``prometheus``."""
    url = getattr(querier, "url", "")
    google = isinstance(url, str) and urlsplit(url).hostname == CLOUD_MONITORING_HOST
    return "cloud-monitoring" if google else "prometheus"


def _others(answer: MetricAnswer) -> str:
    """``3 nodes, such as 10.0.0.4:9100``: what an answer names on its node label."""
    named = len(answer.values) + len(answer.not_finite)
    first = next(iter(answer.values), None) or next(iter(answer.not_finite))
    return f"{named} {'node' if named == 1 else 'nodes'}, such as {bounded(first, 256)}"


def _warn(source: str, metric: Metric, problem: str, kept: MetricAnswer | None, used: str = "") -> None:
    """One WARNING: an answer not used (the previous one is kept, if any), or one used with something odd in it
    (``used`` says what follows). ``source`` and ``outcome`` are what the source_failures metric counts by."""
    if used:
        what = used
    elif kept is None:
        what = "no answer: its nodes have no facts"
    else:
        what = "no new answer: the previous one is used until its samples are older than maxAge"
    fields = {
        "event": EVENT,
        "source": source,
        "metric": metric.name,
        "query": metric.query,
        "nodeLabel": metric.node_label,
        "problem": problem,
        "outcome": what,
    }
    logger.warning("NodeLoad: metric %s: %s (%s)", metric.name, problem, what, extra={"json_fields": fields})


def _possessive(name: str) -> str:
    """``Prometheus'``, ``Cloud Monitoring's``."""
    return f"{name}'" if name.endswith("s") else f"{name}'s"


# Every instance's snapshot holder, for the fork handler below.
_LIVE: weakref.WeakSet[Loads] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A refresh in flight in the parent (its thread does not exist in the child) must not keep the child's lock."""
    for loads in list(_LIVE):
        loads._refreshing = threading.Lock()
        loads._warning = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
