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

No plugin is ever skipped silently. Each enabled entry has its own
``EntryPolicy``: when a node's facts are missing (the node source cannot
answer for it), ``failurePolicy`` Fail rejects that node as Unschedulable (a
filter request answers Error only when no node could be judged at all), scores
it 0 for that plugin, or vetoes that preemption candidate; Ignore lets the node
pass, leaves the plugin out of that node's score or accepts the candidate. An
audited entry (``enforcement: Audit``) decides as usual, but its rejections
and vetoes only become notes and its scores count for nothing; its failures
(an exception, an Error status, a score outside 0..100) change nothing either:
the answer is what the enforced plugins alone give. Every plugin that did not
judge a node, every verdict an audit held back and every audited plugin's
failure is in the result's ``skipped``, ``would_reject`` / ``would_veto`` and
``audit_failed`` notes, which the decision log reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, eq, is_, not_
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, TypeVarTuple

from extender.framework import status as st
from extender.framework.cycle import CycleState
from extender.framework.plugin import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    FilterPlugin,
    Observed,
    Plugin,
    PreemptPlugin,
    ScorePlugin,
    exempts,
    has_own_facts,
    observes,
    tells_incomplete,
)
from extender.framework.status import Code, Status
from extender.framework.types import Facts, Node, Pod, VictimFacts, Victims

if TYPE_CHECKING:
    from extender.nodesource.base import NodeSource

# The extender protocol's score range (k8s.io/kube-scheduler/extender/v1).
MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10


# Per node name, the statuses (with their plugins) of a kind of note, in policy order.
Notes = dict[str, tuple[Status, ...]]

_K = TypeVar("_K")
_V = TypeVar("_V")
_Args = TypeVarTuple("_Args")


class EntryPolicy(NamedTuple):
    """How one enabled plugin entry applies: its ``failurePolicy`` and ``enforcement``."""

    fail_open: bool = False  # failurePolicy Ignore: a node whose facts are missing passes the plugin
    audit: bool = False  # enforcement Audit: rejections, vetoes and scores are only noted


class Judging:
    """What one request's plugins did not decide: filled while judging, read into the result."""

    __slots__ = ("failed", "ran", "skipped", "unjudged", "would")

    def __init__(self) -> None:
        # Plugins that did not judge a node: facts missing, the scheduler's filter trusted.
        self.skipped: Notes = {}
        # Rejections (filter) or vetoes (preempt) of audited plugins, which did not apply.
        self.would: Notes = {}
        # Failures of audited plugins (an Error), which did not apply either: the node passed them.
        self.failed: Notes = {}
        # Nodes rejected only because their facts were missing (failurePolicy Fail), with why (an Error status).
        self.unjudged: dict[str, Status] = {}
        # Plugins that judged at least one node, and those skipped somewhere: one skipped everywhere has no time.
        self.ran: set[str] = set()

    def skip(self, node: str, status: Status) -> None:
        self.skipped[node] = (*self.skipped.get(node, ()), status)

    def hold_back(self, node: str, status: Status) -> None:
        """An audited plugin's verdict other than Success: a rejection or veto is held back, a failure noted."""
        notes = self.failed if status.code is Code.ERROR else self.would
        notes[node] = (*notes.get(node, ()), status)

    def timed_only_if_ran(self, seconds: dict[str, float]) -> None:
        """Drop the time of plugins that were skipped on every node they were asked about: they did not run."""
        for statuses in list(self.skipped.values()):
            for status in statuses:
                if status.plugin not in self.ran:
                    seconds.pop(status.plugin, None)


# The results are plain classes, filled in while a request is judged: a dataclass compiles its methods from source
# when its module is imported, on the way to a cold instance's first answer. An argument left out (None) starts empty.


class FilterResult:
    __slots__ = (
        "assumed",
        "audit_failed",
        "error",
        "exempt",
        "feasible",
        "incomplete",
        "observed",
        "rejected",
        "rejected_kept",
        "seconds_by_plugin",
        "skipped",
        "unjudged",
        "would_reject",
    )

    def __init__(
        self,
        feasible: list[str],
        rejected: dict[str, Status] | None = None,
        error: Status | None = None,
        seconds_by_plugin: dict[str, float] | None = None,
        skipped: Notes | None = None,
        would_reject: Notes | None = None,
        unjudged: dict[str, Status] | None = None,
        audit_failed: Notes | None = None,
        observed: dict[str, Observed] | None = None,
        exempt: dict[str, str] | None = None,
        incomplete: dict[str, str] | None = None,
    ) -> None:
        # The names of the nodes every filter accepts, in input order.
        self.feasible = feasible
        self.rejected = _or_empty(rejected)
        # The kept map ``rejected`` equals, when it does (``extender.framework.kept``): never changed, so what is
        # derived from the rejections (the answer's failure maps, the decision entry's groups) may be kept by its
        # identity. ``rejected`` stays the request's own.
        self.rejected_kept: Mapping[str, Status] | None = None
        self.error = error
        self.seconds_by_plugin = _or_empty(seconds_by_plugin)
        self.skipped = _or_empty(skipped)
        self.would_reject = _or_empty(would_reject)
        self.audit_failed = _or_empty(audit_failed)
        # Nodes rejected only because their facts were missing, with why: never kept, and when they are all, the
        # answer is that Error.
        self.unjudged = _or_empty(unjudged)
        # What the plugins that measure something measured in this request, by plugin (``Plugin.observations``).
        self.observed = _or_empty(observed)
        # The filters whose rules the pod is exempt from, with why (``Plugin.exemption``): it passed them unjudged.
        self.exempt = _or_empty(exempt)
        # The filters that said what this request judged on may be incomplete, with why (``Plugin.incomplete``).
        self.incomplete = _or_empty(incomplete)
        # This request's alone: the one feasible node the pod was assumed on (``extender.kube.assume``).
        self.assumed = ""


class ScoreResult:
    __slots__ = (
        "_best",
        "assumed",
        "audit_failed",
        "audited",
        "by_plugin",
        "covering",
        "demoted",
        "derived_from",
        "error",
        "incomplete",
        "kept",
        "observed",
        "scores",
        "seconds_by_plugin",
        "skipped",
    )

    def __init__(
        self,
        scores: dict[str, int],
        by_plugin: dict[str, dict[str, int]] | None = None,
        error: Status | None = None,
        seconds_by_plugin: dict[str, float] | None = None,
        kept: bool = False,
        skipped: Notes | None = None,
        audited: list[str] | None = None,
        audit_failed: Notes | None = None,
        observed: dict[str, Observed] | None = None,
        derived_from: tuple[dict[str, int], tuple[str, ...]] | None = None,
        incomplete: dict[str, str] | None = None,
        best: list[str] | None = None,
        covering: dict[str, int] | None = None,
    ) -> None:
        # Final extender scores (0..10) per node name; empty when ``error`` is set.
        self.scores = scores
        # Normalized plugin scores (0..100) per plugin, for explanations.
        self.by_plugin = _or_empty(by_plugin)
        self.error = error
        self.seconds_by_plugin = _or_empty(seconds_by_plugin)
        # Kept across requests (``extender.framework.kept``): the same objects answer again, and nobody may change
        # them, so what is derived from them (the encoded answer, the top scores) may be kept by their identity too.
        self.kept = kept
        self.skipped = _or_empty(skipped)
        # Audited score plugins: in ``by_plugin``, but not in ``scores``.
        self.audited = [] if audited is None else audited
        # Audited score plugins that failed, noted on every node they were to score: left out of ``by_plugin``.
        self.audit_failed = _or_empty(audit_failed)
        # What the score plugins that measure something measured in this request, by plugin.
        self.observed = _or_empty(observed)
        # The score plugins that said what this request judged on may be incomplete, with why (never kept).
        self.incomplete = _or_empty(incomplete)
        # Kept scores derived from kept ones (``extender.framework.kept``): those, and the only names whose scores
        # may differ, so that what was derived from them is updated for those names only.
        self.derived_from = derived_from
        # Kept scores of more nodes than ``scores`` (a plugin's scores are each node's own: ``scores_per_node``), of
        # which ``scores`` is the part this request asked about; ``kept`` and ``derived_from`` then speak of them.
        self.covering = covering
        # This request's alone (``extender.verbs.assumed``): the node the pod was assumed on, and the nodes tied with
        # it at the top that the answer gave one point less.
        self.assumed = ""
        self.demoted: tuple[str, ...] = ()
        # ``best()`` when known already (kept scores' own: ``extender.framework.kept``).
        self._best = best

    def best(self) -> list[str]:
        """The nodes with the highest score, in the order of ``scores``: worked out once per result, since the
        answer's tie-break and the decision entry both read it."""
        if self._best is None:
            self._best = top_nodes(self.scores)
        return self._best


def top_nodes(scores: Mapping[str, int]) -> list[str]:
    """The nodes with the highest score, in the order of ``scores``: one C-speed pass over every score."""
    top = max(scores.values(), default=None)
    return [] if top is None else nodes_scored(scores, top)


def nodes_scored(scores: Mapping[str, int], score: int) -> list[str]:
    """The nodes scored ``score``, in the order of ``scores``: one C-speed pass over every score."""
    return list(compress(scores, map(eq, scores.values(), repeat(score))))


def top_nodes_after(
    best: list[str], before: Mapping[str, int], scores: Mapping[str, int], changed: Iterable[str]
) -> list[str] | None:
    """``top_nodes(scores)`` from ``best``, the ``top_nodes(before)``, where ``scores`` holds the same nodes in the
    same order and differs from ``before`` at most at ``changed``: without a pass over every score. None when that
    pass is needed: a changed node joined the top among others (its place among them is not known here), or every
    node at the top fell."""
    if not best:
        return None
    top = before[best[0]]
    fell: set[str] = set()
    rose: list[str] = []
    for name in changed:
        old, new = before[name], scores[name]
        if new > top or (new == top and old != top):
            rose.append(name)
        elif old == top and new != top:
            fell.add(name)
    if rose:  # one node alone above every other is the top; anything else needs the pass
        highest = max(scores[name] for name in rose)
        alone = [name for name in rose if scores[name] == highest]
        return alone if highest > top and len(alone) == 1 else None
    if not fell:
        return best
    return [name for name in best if name not in fell] or None


class PreemptResult:
    __slots__ = ("accepted", "audit_failed", "error", "rejected", "seconds_by_plugin", "skipped", "would_veto")

    def __init__(
        self,
        accepted: dict[str, Victims],
        rejected: dict[str, Status] | None = None,
        error: Status | None = None,
        seconds_by_plugin: dict[str, float] | None = None,
        skipped: Notes | None = None,
        would_veto: Notes | None = None,
        audit_failed: Notes | None = None,
    ) -> None:
        self.accepted = accepted
        self.rejected = _or_empty(rejected)
        self.error = error
        self.seconds_by_plugin = _or_empty(seconds_by_plugin)
        self.skipped = _or_empty(skipped)
        self.would_veto = _or_empty(would_veto)
        self.audit_failed = _or_empty(audit_failed)


def _or_empty(mapping: dict[_K, _V] | None) -> dict[_K, _V]:
    """The given dict itself (a caller may fill it later), or a new empty one."""
    return {} if mapping is None else mapping


class ScorePluginEntry:
    __slots__ = ("plugin", "weight")

    def __init__(self, plugin: ScorePlugin, weight: int) -> None:
        self.plugin = plugin
        self.weight = weight


class Profile:
    def __init__(
        self,
        name: str,
        filters: Sequence[FilterPlugin] = (),
        scores: Sequence[ScorePluginEntry] = (),
        preempts: Sequence[PreemptPlugin] = (),
        fail_open: bool = False,
        entries: Mapping[tuple[str, str], EntryPolicy] | None = None,
        preempt_trusted: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.filters = tuple(filters)
        self.scores = tuple(scores)
        self.preempts = tuple(preempts)
        # The policy-level failurePolicy (Ignore: open), the default of every entry.
        self.fail_open = fail_open
        # Per (extension point, plugin name), where an entry differs from the default.
        self.entries = dict(entries or {})
        self._default_entry = EntryPolicy(fail_open=fail_open)
        # Filters preempt cannot evaluate (no node source, or one lacking their label keys, in full-node mode), with
        # why: the policy trusts the scheduler's filter there (preemptTrustsSchedulerFilter), and they pass, noted.
        self.preempt_trusted = dict(preempt_trusted or {})
        # Each plugin instance once (one may serve several extension points), in running order.
        plugins = [*self.filters, *(entry.plugin for entry in self.scores), *self.preempts]
        self.plugins: tuple[Plugin, ...] = tuple({id(plugin): plugin for plugin in plugins}.values())
        self.facts = max((plugin.facts for plugin in self.plugins), default=Facts.NAME)
        self.filter_facts = max((plugin.facts for plugin in self.filters), default=Facts.NAME)
        self.victim_facts = max((plugin.victim_facts for plugin in self.preempts), default=VictimFacts.UID)

    def entry(self, point: str, plugin: Plugin) -> EntryPolicy:
        """How the plugin applies at ``point`` (``filter``, ``score``, ``preempt``)."""
        return self.entries.get((point, plugin.name), self._default_entry)

    def filter(self, pod: Pod, nodes: Sequence[Node], cycle: CycleState | None = None) -> FilterResult:
        return judged_or_error(self.filter_each(pod, nodes, cycle), len(nodes))

    def filter_each(self, pod: Pod, nodes: Sequence[Node], cycle: CycleState | None = None) -> FilterResult:
        """Each node's verdict, without the request-wide rule of ``judged_or_error`` (kept results apply it over the
        whole request)."""
        cycle = cycle or CycleState(pod)
        seconds = dict.fromkeys((plugin.name for plugin in self.filters), 0.0)
        judging = Judging()
        verdicts = self._verdicts_of(cycle, nodes, seconds, judging)
        judging.timed_only_if_ran(seconds)
        names = list(map(_name, nodes))
        result = FilterResult(
            feasible=names,
            seconds_by_plugin=seconds,
            skipped=judging.skipped,
            would_reject=judging.would,
            unjudged=judging.unjudged,
            audit_failed=judging.failed,
            observed=self.observations(cycle, self.judging_filters(cycle)),
            exempt=self.exemptions(cycle, self.judging_filters(cycle)),
            incomplete=self.incompletes(cycle, self.judging_filters(cycle)),
        )
        # Split at C speed: most nodes pass, and only the others need a look of their own.
        passed = list(map(is_, map(_code, verdicts), repeat(Code.SUCCESS)))
        if False in passed:
            for name, verdict in compress(zip(names, verdicts, strict=True), map(not_, passed)):
                if verdict.code is Code.ERROR:
                    return FilterResult(
                        feasible=[],
                        error=verdict,
                        seconds_by_plugin=seconds,
                        observed=result.observed,
                        incomplete=result.incomplete,
                    )
                result.rejected[name] = verdict
            result.feasible = list(compress(names, passed))
        return result

    def filter_names(
        self, pod: Pod, names: Sequence[str], source: NodeSource, cycle: CycleState | None = None
    ) -> FilterResult:
        """``filter`` for a node-name request: the facts of ``names`` come from ``source``."""
        cycle = cycle or CycleState(pod)
        if not self.judging_filters(cycle):  # every node passes: nothing to look up (nor to wait for on the source)
            return FilterResult(feasible=list(names), seconds_by_plugin=dict.fromkeys(map(_name, self.filters), 0.0))
        return self.filter(pod, source.lookup(names), cycle)

    def judging_filters(self, cycle: CycleState) -> tuple[FilterPlugin, ...]:
        """The filters that judge nodes in this request, in policy order: one that skips it passes every node."""
        return tuple(plugin for plugin in self.filters if not cycle.skips(plugin))

    def observations(self, cycle: CycleState, plugins: Iterable[Plugin]) -> dict[str, Observed]:
        """What those of ``plugins`` that measure something measured in this request, by plugin name."""
        observed: dict[str, Observed] = {}
        for plugin in plugins:
            if observes(plugin):
                try:
                    found = plugin.observations(*cycle.extra(plugin))
                except Exception:  # noqa: BLE001 — plugin code (custom plugins too): reported where it ran
                    found = None
                if found is not None:
                    observed[plugin.name] = found
        return observed

    def exemptions(self, cycle: CycleState, plugins: Iterable[Plugin]) -> dict[str, str]:
        """Those of ``plugins`` whose rules the request's pod is exempt from, each with why (``Plugin.exemption``)."""
        exempt: dict[str, str] = {}
        for plugin in plugins:
            if exempts(plugin):
                try:
                    why = plugin.exemption(cycle.pod, *cycle.extra(plugin))
                except Exception:  # noqa: BLE001 — plugin code (custom plugins too): its verdicts report its failures
                    why = None
                if why:
                    exempt[plugin.name] = why
        return exempt

    def incompletes(self, cycle: CycleState, plugins: Iterable[Plugin]) -> dict[str, str]:
        """Those of ``plugins`` that say what this request judged on may be incomplete, each with why
        (``Plugin.incomplete``); asked per request: it describes this request's view."""
        incomplete: dict[str, str] = {}
        for plugin in plugins:
            if tells_incomplete(plugin):
                try:
                    why = plugin.incomplete(*cycle.extra(plugin))
                except Exception:  # noqa: BLE001 — plugin code (custom plugins too): its verdicts report its failures
                    why = None
                if why:
                    incomplete[plugin.name] = why
        return incomplete

    def _verdicts_of(
        self, cycle: CycleState, nodes: Sequence[Node], seconds: dict[str, float], judging: Judging
    ) -> list[Status]:
        """Each node's verdict: Success, or the first rejection (or Error) in policy order."""
        verdicts: list[Status] = [st.SUCCESS] * len(nodes)
        # The nodes still passing, and where they are in ``nodes``.
        passing, at = list(nodes), list(range(len(nodes)))
        for plugin in self.judging_filters(cycle):
            started = time.perf_counter()
            outcomes = list(self._run_filter(plugin, self.entry("filter", plugin), cycle, passing, judging))
            passed = list(map(is_, map(_code, outcomes), repeat(Code.SUCCESS)))
            failed = False
            if False in passed:
                for index, outcome in compress(zip(at, outcomes, strict=True), map(not_, passed)):
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
        seconds: dict[str, float] = {}
        judging = Judging()
        result = ScoreResult(scores={}, seconds_by_plugin=seconds, skipped=judging.skipped, audit_failed=judging.failed)
        total_weight = 0
        # Per node, the weight of the plugins left out for it (failurePolicy Ignore with its facts missing).
        left_out_weight: dict[str, int] = {}
        weighted = dict.fromkeys(map(_name, nodes), 0)
        for entry in self.scores:
            plugin = entry.plugin
            policy = self.entry("score", plugin)
            started = time.perf_counter()
            scores, left_out, failure = self._run_score(plugin, policy, cycle, nodes, judging)
            if failure is not None:
                seconds[plugin.name] = time.perf_counter() - started
                if policy.audit:  # changes nothing: the enforced plugins alone score
                    for node in nodes:
                        judging.hold_back(node.name, failure)
                    continue
                result.error = failure
                return result
            if not scores:  # skipped on every node: it did not run
                continue
            seconds[plugin.name] = time.perf_counter() - started
            result.by_plugin[plugin.name] = scores
            if policy.audit:  # computed and shown, counts for nothing
                result.audited.append(plugin.name)
                continue
            total_weight += entry.weight
            for name in left_out:
                left_out_weight[name] = left_out_weight.get(name, 0) + entry.weight
            for name, score in scores.items():
                weighted[name] += entry.weight * score
        result.scores = _to_extender_priorities(weighted, total_weight, left_out_weight)
        result.observed = self.observations(cycle, (entry.plugin for entry in self.scores))
        result.incomplete = self.incompletes(cycle, (entry.plugin for entry in self.scores))
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

        Preempt requests carry no Node objects: every filter runs on every candidate, reading what ``nodes`` (the
        node source) supplies. A candidate whose facts are missing follows each filter's failurePolicy (Fail vetoes
        that candidate); a filter in ``preempt_trusted`` passes on the scheduler's own filter result. Both are noted.
        """
        cycle = cycle or CycleState(pod)
        judging = Judging()
        result = PreemptResult(
            accepted={}, skipped=judging.skipped, would_veto=judging.would, audit_failed=judging.failed
        )
        for node_name, victims in candidates.items():
            node = nodes.get(node_name) or Node(node_name)
            verdict = self._preempt_verdict(cycle, node, victims, result.seconds_by_plugin, judging)
            if verdict.is_success:
                result.accepted[node_name] = victims
            elif verdict.code is Code.ERROR:
                result.error = verdict
                result.accepted = {}
                return result
            else:
                result.rejected[node_name] = verdict
        judging.timed_only_if_ran(result.seconds_by_plugin)
        if candidates and len(judging.unjudged) == len(candidates):  # all vetoed unjudged: why is the Error
            result.error = next(iter(judging.unjudged.values()))
        return result

    def _preempt_verdict(
        self, cycle: CycleState, node: Node, victims: Victims, seconds: dict[str, float], judging: Judging
    ) -> Status:
        for filter_plugin in self.judging_filters(cycle):
            blind = self.preempt_trusted.get(filter_plugin.name)
            if blind is not None:
                judging.skip(node.name, _trusted(filter_plugin.name, blind))
                continue
            entry = self.entry("filter", filter_plugin)
            run = self._run_filter(filter_plugin, entry, cycle, (node,), judging)
            outcome = _timed(seconds, filter_plugin.name, next, run)
            if not outcome.is_success:
                return outcome
        pod = cycle.pod
        for preempt_plugin in self.preempts:
            entry = self.entry("preempt", preempt_plugin)
            if preempt_plugin.victim_facts > VictimFacts.UID and any(victim.labels is None for victim in victims.pods):
                missing = _missing_victim_details(preempt_plugin.name, node.name)
                cause = st.error(missing).with_plugin(preempt_plugin.name)
                outcome = _unknown_facts(preempt_plugin.name, cause, entry.fail_open)
                judging.skip(node.name, outcome)
                if not outcome.is_success and not entry.audit:
                    judging.unjudged[node.name] = cause
            else:
                judging.ran.add(preempt_plugin.name)
                outcome = _timed(seconds, preempt_plugin.name, _run_preempt, preempt_plugin, pod, node.name, victims)
            if outcome.is_success:
                continue
            if entry.audit:
                judging.hold_back(node.name, outcome)
                continue
            return outcome
        return st.SUCCESS

    def _run_filter(
        self, plugin: FilterPlugin, entry: EntryPolicy, cycle: CycleState, nodes: Sequence[Node], judging: Judging
    ) -> Iterator[Status]:
        """The plugin's verdict on each node in turn: one loop per plugin, as thousands of nodes may pass."""
        needs_labels, check, pod, name = plugin.facts > Facts.NAME, plugin.filter, cycle.pod, plugin.name
        # Read once: an Enum member read from its class is a lookup each time (Python 3.11), per node here.
        success, unschedulable = Code.SUCCESS, Code.UNSCHEDULABLE
        own = _own_missing(plugin, "filter", cycle, nodes)
        # Its missing_facts failed: a plugin bug, each node's outcome (the request's Error, or an audited failure).
        failure, own = (own, _NONE_MISSING) if isinstance(own, Status) else (None, own)
        # Its prepare, once: failing, it is the failure of each node it would judge (enforced, the first fails all).
        extra: tuple[Any, ...] = ()
        broken: Exception | None = None
        try:
            extra = cycle.extra(plugin)
        except Exception as exc:  # noqa: BLE001 — plugin code (custom plugins too): reported on the nodes, below
            broken = exc
        ran = False
        for node in nodes:
            if (needs_labels and node.labels is None) or (own and node.name in own):
                cause = _cause(name, node) if needs_labels and node.labels is None else own[node.name].with_plugin(name)
                outcome = _unknown_facts(name, cause, entry.fail_open)
                # Not judged: passed (Ignore), rejected (Fail), or rejected as a node its source cannot know.
                judging.skip(node.name, outcome)
                if outcome.code is unschedulable and not entry.audit:
                    judging.unjudged[node.name] = cause
            else:
                if not ran:
                    ran = True
                    judging.ran.add(name)
                if failure is not None:
                    outcome = failure
                elif broken is not None:
                    outcome = _crashed(name, "filter", node.name, broken)
                else:
                    try:
                        outcome = check(pod, node, *extra)
                    except Exception as exc:  # noqa: BLE001 — plugin code (custom plugins too): its bug is the answer's Error, not a 500
                        outcome = _crashed(name, "filter", node.name, exc)
                if outcome.code is success:
                    yield outcome  # most nodes: no copy
                    continue
                outcome = outcome.with_plugin(name)
            if outcome.code is not success and entry.audit:
                judging.hold_back(node.name, outcome)
                yield st.SUCCESS
            else:
                yield st.SUCCESS if outcome.code is success else outcome

    def _run_score(
        self, plugin: ScorePlugin, entry: EntryPolicy, cycle: CycleState, nodes: Sequence[Node], judging: Judging
    ) -> tuple[dict[str, int], list[str], Status | None]:
        """Normalized scores, the nodes the plugin is left out for (facts missing, Ignore), and a failure if any.

        A node whose facts are missing scores 0 (failurePolicy Fail, or a node its source cannot know); with Ignore
        the plugin is left out of its score. Both are noted as skipped.
        """
        zeros: list[str] = []
        left_out: list[str] = []
        needs_labels = plugin.facts > Facts.NAME
        own = _own_missing(plugin, "score", cycle, nodes)
        if isinstance(own, Status):
            return {}, [], own
        if (needs_labels and None in map(_labels, nodes)) or own:
            unjudged: Status | None = None
            for node in nodes:
                if (needs_labels and node.labels is None) or node.name in own:
                    cause = _cause(plugin.name, node) if needs_labels and node.labels is None else own[node.name]
                    cause = cause.with_plugin(plugin.name)
                    outcome = _unknown_facts(plugin.name, cause, entry.fail_open)
                    (left_out if outcome.is_success else zeros).append(node.name)
                    judging.skip(node.name, _score_skipped(plugin.name, outcome))
                    if outcome.code is Code.UNSCHEDULABLE and unjudged is None:
                        unjudged = cause
            if unjudged is not None and len(zeros) == len(nodes) and not entry.audit:
                return {}, [], unjudged  # not one node could be judged: why is the Error (every node scores 0 anyway)
            nodes = [node for node in nodes if not ((needs_labels and node.labels is None) or node.name in own)]
        if not nodes:
            return dict.fromkeys(zeros, MIN_NODE_SCORE), left_out, None
        score, pod = plugin.score, cycle.pod
        try:
            extra = cycle.extra(plugin)
            scores = {node.name: score(pod, node, *extra) for node in nodes}
            plugin.normalize_scores(pod, scores, *extra)
        except Exception as exc:  # noqa: BLE001 — plugin code (custom plugins too): its bug is the answer's Error, not a 500
            return {}, [], _crashed(plugin.name, "score", "", exc)
        scores.update(dict.fromkeys(zeros, MIN_NODE_SCORE))
        if not _all_in_range(scores.values()):
            for name, value in scores.items():
                if type(value) is not int or not MIN_NODE_SCORE <= value <= MAX_NODE_SCORE:
                    return {}, [], st.error(
                        f"plugin {plugin.name} scored node {name} {value!r}, outside {MIN_NODE_SCORE}..{MAX_NODE_SCORE}"
                    ).with_plugin(plugin.name)
        return scores, left_out, None


def judged_or_error(result: FilterResult, count: int) -> FilterResult:
    """The filter answer for a request of ``count`` nodes: when not one node could be judged (every one lacked its
    facts under failurePolicy Fail), the answer is the Error saying why, not a rejection of every node for what is the
    node source's failure."""
    if result.error is not None or not count or len(result.unjudged) < count:
        return result
    return FilterResult(
        feasible=[],
        error=next(iter(result.unjudged.values())),
        seconds_by_plugin=result.seconds_by_plugin,
        skipped=result.skipped,
        audit_failed=result.audit_failed,
        observed=result.observed,
        exempt=result.exempt,
        incomplete=result.incomplete,
    )


_NONE_MISSING: Mapping[str, Status] = {}


def _own_missing(plugin: Plugin, point: str, cycle: CycleState, nodes: Sequence[Node]) -> Mapping[str, Status] | Status:
    """The nodes whose facts of its own ``plugin`` lacks at ``point`` (``Plugin.missing_facts``), or the Error of its
    failing to say."""
    if not has_own_facts(plugin):
        return _NONE_MISSING
    try:
        return plugin.missing_facts(point, nodes, *cycle.extra(plugin))
    except Exception as exc:  # noqa: BLE001 — plugin code (custom plugins too): its bug is the answer's Error, not a 500
        return _crashed(plugin.name, point, "", exc)


def _cause(plugin: str, node: Node) -> Status:
    """Why ``node`` has no labels: its source's word, else that nobody supplies them (an Error)."""
    return (node.why_unknown or _missing_labels(plugin, node.name)).with_plugin(plugin)


def _unknown_facts(plugin: str, cause: Status, fail_open: bool) -> Status:
    """The verdict on a node without facts: a rejection if its source says it cannot be known, else the entry's
    failurePolicy decides (Success: passes unjudged; Unschedulable: rejected, naming plugin and cause)."""
    if cause.code is not Code.ERROR:
        return cause
    if fail_open:
        return Status(Code.SUCCESS, f"not evaluated (failurePolicy Ignore): {cause.reason}", plugin)
    judged = f"plugin {plugin} could not judge the node (failurePolicy Fail): {cause.reason}"
    return st.unschedulable(judged).with_plugin(plugin)


def _score_skipped(plugin: str, outcome: Status) -> Status:
    if outcome.is_success:
        return Status(Code.SUCCESS, f"left out of the node's score ({outcome.reason})", plugin)
    return Status(outcome.code, f"scored 0: {outcome.reason}", plugin)


def _trusted(plugin: str, blind: str) -> Status:
    return Status(
        Code.SUCCESS,
        f"not evaluated: {blind}; the scheduler's own filter result is trusted (preemptTrustsSchedulerFilter)",
        plugin,
    )


def _run_preempt(plugin: PreemptPlugin, pod: Pod, node_name: str, victims: Victims) -> Status:
    try:
        outcome = plugin.select_victims(pod, node_name, victims)
    except Exception as exc:  # noqa: BLE001 — plugin code (custom plugins too): its bug is the answer's Error, not a 500
        return _crashed(plugin.name, "preempt", node_name, exc)
    return outcome.with_plugin(plugin.name)


def _timed(seconds: dict[str, float], name: str, run: Callable[[*_Args], Status], *args: *_Args) -> Status:
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


def _to_extender_priorities(
    weighted_totals: dict[str, int], total_weight: int, left_out_weight: Mapping[str, int]
) -> dict[str, int]:
    """Map weighted sums of 0..100 plugin scores onto the protocol's integer 0..10, rounding half up.

    A node's sum is over the plugins that scored it: one a plugin was left out for is divided by the weights of the
    others (a weighted mean over what is known), and one no plugin scored gets the lowest score.
    """
    unit = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
    if left_out_weight:
        return {
            name: _scaled(total, (total_weight - left_out_weight.get(name, 0)) * unit)
            for name, total in weighted_totals.items()
        }
    if total_weight == 0:
        return dict.fromkeys(weighted_totals, MIN_EXTENDER_PRIORITY)
    scale = total_weight * unit
    half = scale // 2
    return {name: (total + half) // scale for name, total in weighted_totals.items()}


def unrounded_scores(
    entries: Sequence[ScorePluginEntry], result: ScoreResult, names: Iterable[str]
) -> dict[str, float]:
    """Each node's weighted mean of its enforced plugins' 0..100 scores: what its 0..10 score rounds."""
    weights = {entry.plugin.name: entry.weight for entry in entries if entry.plugin.name not in result.audited}
    plugins = [(weights[name], scores) for name, scores in result.by_plugin.items() if name in weights]
    means: dict[str, float] = {}
    for name in names:
        known = [(weight, scores[name]) for weight, scores in plugins if name in scores]
        total_weight = sum(weight for weight, _ in known)
        means[name] = sum(weight * score for weight, score in known) / total_weight if total_weight else 0.0
    return means


def _scaled(total: int, scale: int) -> int:
    return (total + scale // 2) // scale if scale else MIN_EXTENDER_PRIORITY


def _missing_labels(plugin: str, node: str) -> Status:
    return st.error(
        f"plugin {plugin} needs node labels, but none are known for node {node}: preempt requests never carry Node "
        "objects, nor do node-name requests (nodeCacheCapable: true); a nodeSource in the policy supplies them"
    ).with_plugin(plugin)


def _missing_victim_details(plugin: str, node: str) -> str:
    return (
        f"plugin {plugin} needs victim pod details, but only their UIDs are known for node {node}: "
        "node-name preempt requests (nodeCacheCapable: true) need the Kubernetes API (KUBERNETES_API_URL)"
    )


def _crashed(plugin: str, point: str, node: str, exc: Exception) -> Status:
    where = f" on node {node}" if node else ""
    return st.error(f"plugin {plugin} failed in {point}{where}: {type(exc).__name__}: {exc}").with_plugin(plugin)
