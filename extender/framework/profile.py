"""A profile runs its enabled plugins over the candidate nodes of one request.

Plugins run plugin-major (each plugin over all remaining nodes), which gives
the same answer as the scheduler's node-major loop (a node is rejected by the
first failing plugin in policy order) while timing each plugin once.
Nodes that come from a node source (``reusable``) are the same objects from
request to request, so the results of plugins that offer a ``reuse_key`` are
kept across requests (see ``extender.framework.reuse``). Node-name requests go
further (``filter_names``, ``prioritize_names``): each name's verdict and each
candidate set's scores are kept for the source's generation, so a warm request
touches only the names it carries, never the nodes behind them.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, filterfalse, repeat
from operator import attrgetter, is_, not_
from typing import TYPE_CHECKING

from extender.framework import status as st
from extender.framework.plugin import MAX_NODE_SCORE, MIN_NODE_SCORE, FilterPlugin, PreemptPlugin, ScorePlugin
from extender.framework.reuse import KeptScores, KeptVerdicts, PerGeneration, ReusedResults
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
        # Per filter and score plugin (in order): its per-node results for the node source's Node objects.
        self._reused_statuses: tuple[ReusedResults[Status], ...] = tuple(ReusedResults() for _ in self.filters)
        self._reused_scores: tuple[ReusedResults[int], ...] = tuple(ReusedResults() for _ in self.scores)
        # Per key of every filter plugin: each node name's verdict of the whole chain, for a source's generation.
        self._verdicts: PerGeneration[KeptVerdicts] = PerGeneration()
        # Per key of every score plugin: the scores of one candidate set, for a source's generation.
        self._scored: PerGeneration[KeptScores] = PerGeneration()

    def filter(self, pod: Pod, nodes: Sequence[Node], reusable: bool = False) -> FilterResult:
        """``reusable``: the nodes are a node source's objects, whose plugin results may be kept across requests."""
        keys = tuple(_reuse_key(plugin, pod, reusable) for plugin in self.filters)
        seconds = dict.fromkeys((plugin.name for plugin in self.filters), 0.0)
        verdicts = self._verdicts_of(pod, nodes, keys, seconds)
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

    def filter_names(self, pod: Pod, names: Sequence[str], source: NodeSource) -> FilterResult:
        """``filter`` for a node-name request (``names`` unique): only names with no kept verdict are looked up.

        A node's verdict depends on the pod only through the filter plugins' keys, so it is kept per name for the
        source's generation when every plugin has a key. A node its source could not describe is never kept.
        """
        if not self.filters:  # every node passes: nothing to look up (nor to wait for, on a name the source lacks)
            return FilterResult(feasible=list(names))
        keys = tuple(_reuse_key(plugin, pod, True) for plugin in self.filters)
        if None in keys:
            return self.filter(pod, source.lookup(names), reusable=True)
        generation = source.generation()
        kept = self._verdicts.get(keys, generation) or KeptVerdicts()
        rejected = kept.rejected
        seconds = dict.fromkeys((plugin.name for plugin in self.filters), 0.0)
        if not kept.decided.issuperset(names):
            nodes = source.lookup(list(filterfalse(kept.decided.__contains__, names)))
            fresh = self.filter(pod, nodes, reusable=True)
            if fresh.error is not None:
                return fresh
            seconds, rejected = fresh.seconds_by_plugin, {**rejected, **fresh.rejected}
            if source.generation() is generation:
                self._verdicts.put(keys, generation, kept.adding(nodes, fresh.rejected))
        refused = list(filter(rejected.__contains__, names)) if rejected else []
        if not refused:
            return FilterResult(feasible=list(names), seconds_by_plugin=seconds)
        return FilterResult(
            feasible=list(filterfalse(rejected.__contains__, names)),
            rejected={name: rejected[name] for name in refused},
            seconds_by_plugin=seconds,
        )

    def _verdicts_of(
        self, pod: Pod, nodes: Sequence[Node], keys: tuple[Hashable | None, ...], seconds: dict[str, float]
    ) -> list[Status]:
        """Each node's verdict: Success, or the first rejection (or Error) in policy order. Plugins run plugin-major,
        each over the nodes still passing, reusing its own results where it has a key."""
        verdicts: list[Status] = [st.SUCCESS] * len(nodes)
        # The nodes still passing, and where they are in ``nodes``.
        passing, at = list(nodes), list(range(len(nodes)))
        for plugin, key, reused in zip(self.filters, keys, self._reused_statuses):
            started = time.perf_counter()
            outcomes = self._filter_outcomes(plugin, pod, passing, key, reused)
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

    def prioritize(self, pod: Pod, nodes: Sequence[Node], reusable: bool = False) -> ScoreResult:
        """``reusable`` as for ``filter``."""
        keys = tuple(_reuse_key(entry.plugin, pod, reusable) for entry in self.scores)
        return self._prioritize(pod, nodes, keys)[0]

    def prioritize_names(self, pod: Pod, names: Sequence[str], source: NodeSource) -> ScoreResult:
        """``prioritize`` for a node-name request (``names`` unique); kept scores are shared: nobody may change them.

        Normalizing depends on every candidate, so the scores are kept for the candidate set, in whatever order
        it comes (kube-scheduler's parallel filters hand the same candidates over in another order each cycle).
        """
        keys = tuple(_reuse_key(entry.plugin, pod, True) for entry in self.scores)
        if None in keys:
            return self._prioritize(pod, source.lookup(names), keys)[0]
        generation = source.generation()
        kept = self._scored.get(keys, generation)
        if kept is not None and len(kept.names) == len(names) and kept.names.issuperset(names):
            seconds = dict.fromkeys((entry.plugin.name for entry in self.scores), 0.0)
            return ScoreResult(scores=kept.scores, by_plugin=dict(kept.by_plugin), seconds_by_plugin=seconds)
        result, complete = self._prioritize(pod, source.lookup(names), keys)
        if complete and result.error is None and source.generation() is generation:
            # The names as the scores hold them: the answer's entries are found by the same string objects.
            kept = KeptScores(frozenset(result.scores), dict(result.by_plugin), result.scores)
            self._scored.put(keys, generation, kept)
        return result

    def _prioritize(
        self, pod: Pod, nodes: Sequence[Node], keys: tuple[Hashable | None, ...]
    ) -> tuple[ScoreResult, bool]:
        """The result, and whether every node had the facts its plugins read."""
        seconds = dict.fromkeys((entry.plugin.name for entry in self.scores), 0.0)
        complete = True
        result = ScoreResult(scores={}, seconds_by_plugin=seconds)
        total_weight = 0
        weighted = dict.fromkeys(map(_name, nodes), 0)
        for entry, key, reused in zip(self.scores, keys, self._reused_scores):
            plugin = entry.plugin
            started = time.perf_counter()
            scores, failure, whole = self._run_score(plugin, pod, nodes, key, reused)
            seconds[plugin.name] = time.perf_counter() - started
            if failure is not None:
                result.error = failure
                return result, False
            complete = complete and whole
            if scores is None:  # skipped: facts unknown and the profile fails open
                continue
            result.by_plugin[plugin.name] = scores
            total_weight += entry.weight
            for name, score in scores.items():
                weighted[name] += entry.weight * score
        result.scores = _to_extender_priorities(weighted, total_weight)
        return result, complete

    def preempt(self, pod: Pod, candidates: Mapping[str, Victims], nodes: Mapping[str, Node]) -> PreemptResult:
        """Keep the candidates where the pod would pass our filters and no plugin vetoes the victims.

        Filter plugins whose node facts are unknown are skipped here rather than failing: the scheduler calls
        filter again on the nominated node after preemption, and that call enforces them.
        """
        result = PreemptResult(accepted={})
        for node_name, victims in candidates.items():
            node = nodes.get(node_name) or Node(node_name)
            verdict = self._preempt_verdict(pod, node, victims, result.seconds_by_plugin)
            if verdict.is_success:
                result.accepted[node_name] = victims
            elif verdict.code is Code.ERROR:
                result.error = verdict
                result.accepted = {}
                return result
            else:
                result.rejected[node_name] = verdict
        return result

    def _preempt_verdict(self, pod: Pod, node: Node, victims: Victims, seconds: dict[str, float]) -> Status:
        for filter_plugin in self.filters:
            if filter_plugin.facts > Facts.NAME and node.labels is None:
                unknown = self._unknown_facts(filter_plugin.name, node)
                if unknown.code is Code.ERROR or unknown.is_success:
                    continue  # facts unavailable for now: the filter call after preemption enforces the plugin
                return unknown
            outcome = _timed(seconds, filter_plugin.name, next, self._run_filter(filter_plugin, pod, (node,)))
            if not outcome.is_success:
                return outcome
        for preempt_plugin in self.preempts:
            if preempt_plugin.victim_facts > VictimFacts.UID and any(victim.labels is None for victim in victims.pods):
                if self.fail_open:
                    continue
                return _missing_victim_details(preempt_plugin.name, node.name)
            outcome = _timed(seconds, preempt_plugin.name, _run_preempt, preempt_plugin, pod, node.name, victims)
            if not outcome.is_success:
                return outcome
        return st.SUCCESS

    def _filter_outcomes(
        self, plugin: FilterPlugin, pod: Pod, nodes: Sequence[Node], key: Hashable | None, reused: ReusedResults[Status]
    ) -> list[Status]:
        if key is None:
            return list(self._run_filter(plugin, pod, nodes))
        # An Error may be transient (facts unavailable, a crash): it is never kept.
        return reused.results(key, nodes, lambda new: list(self._run_filter(plugin, pod, new)), _no_error)

    def _run_filter(self, plugin: FilterPlugin, pod: Pod, nodes: Iterable[Node]) -> Iterator[Status]:
        """The plugin's verdict on each node in turn: one loop per plugin, as thousands of nodes may pass."""
        needs_labels, check = plugin.facts > Facts.NAME, plugin.filter
        for node in nodes:
            if needs_labels and node.labels is None:
                yield self._unknown_facts(plugin.name, node)
                continue
            try:
                outcome = check(pod, node)
            except Exception as exc:  # a plugin bug must become the answer's Error, not a 500
                yield _crashed(plugin.name, "filter", node.name, exc)
                continue
            # Only rejections and errors are reported with their plugin: a success (most nodes) needs no copy.
            yield outcome if outcome.code is Code.SUCCESS else outcome.with_plugin(plugin.name)

    def _run_score(
        self, plugin: ScorePlugin, pod: Pod, nodes: Sequence[Node], key: Hashable | None, reused: ReusedResults[int]
    ) -> tuple[dict[str, int] | None, Status | None, bool]:
        """Normalized scores or the failure, and whether every node had the facts the plugin reads."""
        unknowable: list[str] = []
        if plugin.facts > Facts.NAME and None in map(_labels, nodes):
            unknown = [node for node in nodes if node.labels is None]
            for node in unknown:
                verdict = self._unknown_facts(plugin.name, node)
                if verdict.is_success:
                    return None, None, False  # facts unavailable and the profile fails open: skip the plugin
                if verdict.code is Code.ERROR:
                    return None, verdict, False
                unknowable.append(node.name)
            if unknowable:  # the filters rejected them; they score lowest rather than failing the others
                nodes = [node for node in nodes if node.labels is not None]
        score = plugin.score
        try:
            if key is None:
                scores = {node.name: score(pod, node) for node in nodes}
            else:
                raw = reused.results(key, nodes, lambda new: [score(pod, node) for node in new])
                scores = dict(zip(map(_name, nodes), raw))
            plugin.normalize_scores(pod, scores)
        except Exception as exc:
            return None, _crashed(plugin.name, "score", "", exc), False
        scores.update(dict.fromkeys(unknowable, MIN_NODE_SCORE))
        if not _all_in_range(scores.values()):
            for name, score in scores.items():
                if type(score) is not int or not MIN_NODE_SCORE <= score <= MAX_NODE_SCORE:
                    return (
                        None,
                        st.error(
                            f"plugin {plugin.name} scored node {name} {score!r}, outside {MIN_NODE_SCORE}..{MAX_NODE_SCORE}"
                        ).with_plugin(plugin.name),
                        False,
                    )
        return scores, None, not unknowable

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


def _reuse_key(plugin: FilterPlugin | ScorePlugin, pod: Pod, reusable: bool) -> Hashable | None:
    """None when results are not to be reused; a plugin whose key fails runs per node, to report its failure there."""
    if not reusable:
        return None
    try:
        return plugin.reuse_key(pod)
    except Exception:
        return None


def _no_error(outcomes: list[Status]) -> bool:
    return Code.ERROR not in map(_code, outcomes)


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
