"""A profile runs its enabled plugins over the candidate nodes of one request.

This is the reference semantics: every call works everything out from the
request alone. Results kept across requests are a separate layer wrapped
around it (``extender.framework.kept``) that must answer exactly as it does.

A node's verdict is Success, or the first rejection in policy order, as in
the scheduler's node-major loop (for each node, each filter until one fails).
The loop here runs plugin-major (each plugin over the nodes still passing),
which gives the same verdicts while timing each plugin once; an Error from
any plugin fails the whole request. Per-request plugin work lives in the
request's ``CycleState``, created here when the caller brings none.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_, not_
from typing import TYPE_CHECKING

from extender.framework import status as st
from extender.framework.cycle import CycleState
from extender.framework.plugin import MAX_NODE_SCORE, MIN_NODE_SCORE, FilterPlugin, PreemptPlugin, ScorePlugin
from extender.framework.status import Code, Status
from extender.framework.types import Facts, Node, Pod, VictimFacts, Victims

if TYPE_CHECKING:
    from extender.nodesource.base import NodeSource

# The extender protocol's score range (k8s.io/kube-scheduler/extender/v1).
MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10


@dataclass
class FilterResult:
    # The names of the nodes every filter accepts, in input order.
    feasible: list[str]
    rejected: dict[str, Status] = field(default_factory=dict)
    error: Status | None = None
    seconds_by_plugin: dict[str, float] = field(default_factory=dict)


@dataclass
class ScoreResult:
    # Final extender scores (0..10) per node name; empty when ``error`` is set.
    scores: dict[str, int]
    # Normalized plugin scores (0..100) per plugin, for explanations.
    by_plugin: dict[str, dict[str, int]] = field(default_factory=dict)
    error: Status | None = None
    seconds_by_plugin: dict[str, float] = field(default_factory=dict)
    # Kept across requests (``extender.framework.kept``): the same objects answer again, and nobody may change them,
    # so what is derived from them (the encoded answer, the top scores) may be kept by their identity too.
    kept: bool = False


@dataclass
class PreemptResult:
    accepted: dict[str, Victims]
    rejected: dict[str, Status] = field(default_factory=dict)
    error: Status | None = None
    seconds_by_plugin: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ScorePluginEntry:
    plugin: ScorePlugin
    weight: int


class Profile:
    def __init__(
        self,
        name: str,
        filters: Sequence[FilterPlugin] = (),
        scores: Sequence[ScorePluginEntry] = (),
        preempts: Sequence[PreemptPlugin] = (),
        fail_open: bool = False,
    ) -> None:
        self.name = name
        self.filters = tuple(filters)
        self.scores = tuple(scores)
        self.preempts = tuple(preempts)
        # When a plugin needs facts nobody could supply: skip the plugin (open) or fail the request (closed).
        self.fail_open = fail_open
        plugins = [*self.filters, *(entry.plugin for entry in self.scores), *self.preempts]
        self.facts = max((plugin.facts for plugin in plugins), default=Facts.NAME)
        self.victim_facts = max((plugin.victim_facts for plugin in self.preempts), default=VictimFacts.UID)

    def filter(self, pod: Pod, nodes: Sequence[Node], cycle: CycleState | None = None) -> FilterResult:
        cycle = cycle or CycleState(pod)
        seconds = dict.fromkeys((plugin.name for plugin in self.filters), 0.0)
        verdicts = self._verdicts_of(cycle, nodes, seconds)
        names = list(map(_name, nodes))
        result = FilterResult(feasible=names, seconds_by_plugin=seconds)
        # Split at C speed: most nodes pass, and only the others need a look of their own.
        passed = list(map(is_, map(_code, verdicts), repeat(Code.SUCCESS)))
        if False in passed:
            for name, verdict in compress(zip(names, verdicts), map(not_, passed)):
                if verdict.code is Code.ERROR:
                    return FilterResult(feasible=[], error=verdict, seconds_by_plugin=seconds)
                result.rejected[name] = verdict
            result.feasible = list(compress(names, passed))
        return result

    def filter_names(
        self, pod: Pod, names: Sequence[str], source: NodeSource, cycle: CycleState | None = None
    ) -> FilterResult:
        """``filter`` for a node-name request: the facts of ``names`` come from ``source``."""
        if not self.filters:  # every node passes: nothing to look up (nor to wait for, on a name the source lacks)
            return FilterResult(feasible=list(names))
        return self.filter(pod, source.lookup(names), cycle)

    def _verdicts_of(self, cycle: CycleState, nodes: Sequence[Node], seconds: dict[str, float]) -> list[Status]:
        """Each node's verdict: Success, or the first rejection (or Error) in policy order."""
        verdicts: list[Status] = [st.SUCCESS] * len(nodes)
        # The nodes still passing, and where they are in ``nodes``.
        passing, at = list(nodes), list(range(len(nodes)))
        for plugin in self.filters:
            started = time.perf_counter()
            outcomes = list(self._run_filter(plugin, cycle, passing))
            passed = list(map(is_, map(_code, outcomes), repeat(Code.SUCCESS)))
            failed = False
            if False in passed:
                for index, outcome in compress(zip(at, outcomes), map(not_, passed)):
                    verdicts[index] = outcome
                    failed = outcome.code is Code.ERROR
                    if failed:
                        break
                passing, at = list(compress(passing, passed)), list(compress(at, passed))
            seconds[plugin.name] += time.perf_counter() - started
            if failed:  # an Error fails the whole request: the other nodes need no verdict
                break
        return verdicts

    def prioritize(self, pod: Pod, nodes: Sequence[Node], cycle: CycleState | None = None) -> ScoreResult:
        cycle = cycle or CycleState(pod)
        seconds = dict.fromkeys((entry.plugin.name for entry in self.scores), 0.0)
        result = ScoreResult(scores={}, seconds_by_plugin=seconds)
        total_weight = 0
        weighted = dict.fromkeys(map(_name, nodes), 0)
        for entry in self.scores:
            plugin = entry.plugin
            started = time.perf_counter()
            scores, failure = self._run_score(plugin, cycle, nodes)
            seconds[plugin.name] = time.perf_counter() - started
            if failure is not None:
                result.error = failure
                return result
            if scores is None:  # skipped: facts unknown and the profile fails open
                continue
            result.by_plugin[plugin.name] = scores
            total_weight += entry.weight
            for name, score in scores.items():
                weighted[name] += entry.weight * score
        result.scores = _to_extender_priorities(weighted, total_weight)
        return result

    def prioritize_names(
        self, pod: Pod, names: Sequence[str], source: NodeSource, cycle: CycleState | None = None
    ) -> ScoreResult:
        """``prioritize`` for a node-name request: the facts of ``names`` come from ``source``."""
        return self.prioritize(pod, source.lookup(names), cycle)

    def preempt(
        self,
        pod: Pod,
        candidates: Mapping[str, Victims],
        nodes: Mapping[str, Node],
        cycle: CycleState | None = None,
    ) -> PreemptResult:
        """Keep the candidates where the pod would pass our filters and no plugin vetoes the victims.

        Filter plugins whose node facts are unknown are skipped here rather than failing: the scheduler calls
        filter again on the nominated node after preemption, and that call enforces them.
        """
        cycle = cycle or CycleState(pod)
        result = PreemptResult(accepted={})
        for node_name, victims in candidates.items():
            node = nodes.get(node_name) or Node(node_name)
            verdict = self._preempt_verdict(cycle, node, victims, result.seconds_by_plugin)
            if verdict.is_success:
                result.accepted[node_name] = victims
            elif verdict.code is Code.ERROR:
                result.error = verdict
                result.accepted = {}
                return result
            else:
                result.rejected[node_name] = verdict
        return result

    def _preempt_verdict(self, cycle: CycleState, node: Node, victims: Victims, seconds: dict[str, float]) -> Status:
        for filter_plugin in self.filters:
            if filter_plugin.facts > Facts.NAME and node.labels is None:
                unknown = self._unknown_facts(filter_plugin.name, node)
                if unknown.code is Code.ERROR or unknown.is_success:
                    continue  # facts unavailable for now: the filter call after preemption enforces the plugin
                return unknown
            outcome = _timed(seconds, filter_plugin.name, next, self._run_filter(filter_plugin, cycle, (node,)))
            if not outcome.is_success:
                return outcome
        pod = cycle.pod
        for preempt_plugin in self.preempts:
            if preempt_plugin.victim_facts > VictimFacts.UID and any(victim.labels is None for victim in victims.pods):
                if self.fail_open:
                    continue
                return _missing_victim_details(preempt_plugin.name, node.name)
            outcome = _timed(seconds, preempt_plugin.name, _run_preempt, preempt_plugin, pod, node.name, victims)
            if not outcome.is_success:
                return outcome
        return st.SUCCESS

    def _run_filter(self, plugin: FilterPlugin, cycle: CycleState, nodes: Iterable[Node]) -> Iterator[Status]:
        """The plugin's verdict on each node in turn: one loop per plugin, as thousands of nodes may pass."""
        needs_labels, check, pod = plugin.facts > Facts.NAME, plugin.filter, cycle.pod
        for node in nodes:
            if needs_labels and node.labels is None:
                yield self._unknown_facts(plugin.name, node)
                continue
            try:
                outcome = check(pod, node, *cycle.extra(plugin))
            except Exception as exc:  # a plugin bug must become the answer's Error, not a 500
                yield _crashed(plugin.name, "filter", node.name, exc)
                continue
            # Only rejections and errors are reported with their plugin: a success (most nodes) needs no copy.
            yield outcome if outcome.code is Code.SUCCESS else outcome.with_plugin(plugin.name)

    def _run_score(
        self, plugin: ScorePlugin, cycle: CycleState, nodes: Sequence[Node]
    ) -> tuple[dict[str, int] | None, Status | None]:
        """Normalized scores, or None and the failure (None, None: skipped as its facts are unknown)."""
        unknowable: list[str] = []
        if plugin.facts > Facts.NAME and None in map(_labels, nodes):
            unknown = [node for node in nodes if node.labels is None]
            for node in unknown:
                verdict = self._unknown_facts(plugin.name, node)
                if verdict.is_success:
                    return None, None  # facts unavailable and the profile fails open: skip the plugin
                if verdict.code is Code.ERROR:
                    return None, verdict
                unknowable.append(node.name)
            if unknowable:  # the filters rejected them; they score lowest rather than failing the others
                nodes = [node for node in nodes if node.labels is not None]
        score, pod = plugin.score, cycle.pod
        try:
            extra = cycle.extra(plugin)
            scores = {node.name: score(pod, node, *extra) for node in nodes}
            plugin.normalize_scores(pod, scores, *extra)
        except Exception as exc:
            return None, _crashed(plugin.name, "score", "", exc)
        scores.update(dict.fromkeys(unknowable, MIN_NODE_SCORE))
        if not _all_in_range(scores.values()):
            for name, score in scores.items():
                if type(score) is not int or not MIN_NODE_SCORE <= score <= MAX_NODE_SCORE:
                    return None, st.error(
                        f"plugin {plugin.name} scored node {name} {score!r}, outside {MIN_NODE_SCORE}..{MAX_NODE_SCORE}"
                    ).with_plugin(plugin.name)
        return scores, None

    def _unknown_facts(self, plugin: str, node: Node) -> Status:
        """A node whose labels nobody supplied: rejected if its source says it cannot be known, else failurePolicy."""
        why = node.why_unknown or _missing_labels(plugin, node.name)
        if why.code is Code.ERROR and self.fail_open:
            return st.SUCCESS
        return why.with_plugin(plugin)


def _run_preempt(plugin: PreemptPlugin, pod: Pod, node_name: str, victims: Victims) -> Status:
    try:
        outcome = plugin.select_victims(pod, node_name, victims)
    except Exception as exc:
        return _crashed(plugin.name, "preempt", node_name, exc)
    return outcome.with_plugin(plugin.name)


def _timed(seconds: dict[str, float], name: str, run, *args) -> Status:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    try:
        return run(*args)
    finally:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started


_labels = attrgetter("labels")
_name = attrgetter("name")
_code = attrgetter("code")


def _all_in_range(scores: Collection[int]) -> bool:
    """Whether every score is an int in 0..100, checked at C speed: thousands of nodes, several plugins."""
    if not scores:
        return True
    return set(map(type, scores)) == {int} and MIN_NODE_SCORE <= min(scores) and max(scores) <= MAX_NODE_SCORE


def _to_extender_priorities(weighted_totals: dict[str, int], total_weight: int) -> dict[str, int]:
    """Map weighted sums of 0..100 plugin scores onto the protocol's integer 0..10, rounding half up."""
    if total_weight == 0:
        return dict.fromkeys(weighted_totals, MIN_EXTENDER_PRIORITY)
    scale = total_weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
    half = scale // 2
    return {name: (total + half) // scale for name, total in weighted_totals.items()}


def _missing_labels(plugin: str, node: str) -> Status:
    return st.error(
        f"plugin {plugin} needs node labels, but none are known for node {node}: "
        "node-name requests (nodeCacheCapable: true) need a nodeSource in the policy"
    ).with_plugin(plugin)


def _missing_victim_details(plugin: str, node: str) -> Status:
    return st.error(
        f"plugin {plugin} needs victim pod details, but only their UIDs are known for node {node}: "
        "node-name preempt requests (nodeCacheCapable: true) need the Kubernetes API (KUBERNETES_API_URL)"
    ).with_plugin(plugin)


def _crashed(plugin: str, point: str, node: str, exc: Exception) -> Status:
    where = f" on node {node}" if node else ""
    return st.error(f"plugin {plugin} failed in {point}{where}: {type(exc).__name__}: {exc}").with_plugin(plugin)
