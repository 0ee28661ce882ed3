"""Results kept across requests: one switchable layer around a plain ``Profile``.

In node-name mode a node source answers every request with the same Node
objects until it refreshes, and a plugin's per-node result depends on the
request only through its reuse key (``Plugin.reuse_key``). ``KeptProfile``
keeps, for node-name requests only:

- each node name's verdict of the whole filter chain, per tuple of the filter
  plugins' keys;
- the scores of one candidate set (normalizing depends on every candidate),
  per tuple of the score plugins' keys; when every score plugin's scores are
  each node's own (``ScorePlugin.scores_per_node``), of every node asked
  about under those keys, of which a request takes its candidates' part;

both for one generation of the node source (``NodeSource.generation``). A warm
request then touches only the names it carries. Invariants:

- A kept value is a function of its key and the Node objects it was worked
  out for: the keys come from the request's ``CycleState``, the same ones its
  plugins ran with, and hold every time-dependent input (a plugin whose result
  depends on anything else has no key, and nothing is kept for its chain).
- Only the current generation is kept. When a request sees a new generation,
  everything of older ones is dropped; a verdict of the generation before is
  carried over only for the same Node object (a refresh keeps the objects of
  unchanged nodes). So the kept Node objects are the live ones.
- Bounded: at most ``MAX_KEYS`` keys per generation, a new one dropping the
  oldest (``_store``).
- Never kept: Errors (they may be transient, an audited plugin's included),
  nodes their source could not describe or a plugin did not judge
  (``FilterResult.skipped``), scores of a candidate set with such a node,
  anything worked out while the generation
  changed under the request. Audited
  plugins' held-back rejections are kept with the verdicts, so a kept answer
  reports them as the plain profile does.
- Kept values are never changed, only replaced in one assignment: concurrent
  requests at worst work a value out twice.
- A request whose keys differ from a kept entry's of this generation only
  where the plugins name the nodes that changed (``Plugin.changed_nodes``,
  e.g. NodeLoad's in-flight pods after a binding, or its answers after a
  refresh) derives its entry from that
  one: verdicts of the named nodes are dropped and judged again through the
  whole chain; scores of the same candidate set are worked out again for the
  named nodes by every plugin, taken only from the plugins whose keys changed
  (their scores are per node, as the hook promises) and combined with the kept
  ones of the others. The derived entry is the one worked out afresh, since
  every other node's result is the same under both keys (the kept verdicts
  themselves when the nodes judged again keep theirs); a node the new
  judging skips or fails on makes it worked out whole, as above. The few
  changed nodes a filter request does not bring are judged beside it, so
  that kept verdicts that held stay as they are (kube-scheduler asks about a
  sample of a large cluster, ``percentageOfNodesToScore``, which moves on pod
  by pod); scores each node's own are derived from the newest such entry
  whatever its candidates, the request's candidates it lacks scored and added.
- What is worked out from kept values is kept with them, by identity: a
  request that rejects exactly the kept rejections answers with the kept map
  copied (``FilterResult.rejected_kept``), and kept scores carry their top
  nodes, those of derived scores taken from the entry they came from
  (``top_nodes_after``) where the few nodes scored again tell them.

``EXTENDER_RESULT_CACHE=off`` (``extender.settings``) serves the plain profile.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from itertools import compress
from operator import attrgetter, not_
from typing import TYPE_CHECKING, Generic, TypeVar

from extender.framework.cycle import CycleState
from extender.framework.plugin import Observed, Plugin
from extender.framework.profile import (
    FilterResult,
    PreemptResult,
    Profile,
    ScoreResult,
    _to_extender_priorities,
    judged_or_error,
    top_nodes,
    top_nodes_after,
)
from extender.framework.status import Status
from extender.framework.types import Facts, Node, Pod, Victims

if TYPE_CHECKING:
    from extender.nodesource.base import NodeSource

# Kept entries per generation: a stream of pods with ever new keys cannot grow memory without end.
MAX_KEYS = 16
# Changed nodes a request's names are scanned for one by one (each scan may pass over every name).
MAX_SCANS = 3

T = TypeVar("T")
_V = TypeVar("_V")
_labels = attrgetter("labels")
_why_unknown = attrgetter("why_unknown")


class KeptVerdicts:
    """Each name's verdict of the whole filter chain: Success for a name in ``nodes`` unless ``rejected``.

    Shared by every request: nobody changes them (``adding`` makes new ones).
    """

    __slots__ = ("nodes", "rejected", "verdicts", "would_reject")

    def __init__(
        self,
        nodes: Mapping[str, Node],
        rejected: Mapping[str, Status],
        would_reject: Mapping[str, tuple[Status, ...]],
        verdicts: dict[str, Status | None] | None = None,
    ) -> None:
        # The Node object each verdict was worked out for, by name.
        self.nodes = nodes
        self.rejected = rejected
        # Rejections audited plugins held back (the node passed), by name.
        self.would_reject = would_reject
        # Each name's verdict in one map, for one lookup per name a request brings: None (it passes) or its rejection.
        if verdicts is None:
            verdicts = dict.fromkeys(nodes)
            verdicts.update(rejected)
        self.verdicts = verdicts

    def replacing(
        self,
        changed: Collection[str],
        nodes: Sequence[Node],
        rejected: Mapping[str, Status],
        would_reject: Mapping[str, tuple[Status, ...]],
        unjudged: Collection[str],
    ) -> KeptVerdicts:
        """Without the verdicts of ``changed`` names (whose inputs changed), with those on ``nodes`` (judged again or
        first), except those a plugin did not judge or failed on (``unjudged``) or whose source could not describe
        them: each map copied once, and none when the nodes judged again kept their verdicts (a binding that moves
        no node across a threshold: most of a burst's)."""
        described = {node.name: node for node in nodes if node.why_unknown is None and node.name not in unjudged}
        gone = [name for name in changed if name in self.nodes and name not in described]
        if not described and not gone:
            return self
        refused = {name: rejected[name] for name in described if name in rejected}
        held = {name: would_reject[name] for name in described if name in would_reject}
        if not gone and self._holds(described, refused, held):
            return self
        stale = [*gone, *(name for name in described if name in self.nodes)]
        kept_nodes, verdicts = {**self.nodes, **described}, {**self.verdicts, **dict.fromkeys(described)}
        for name in gone:
            del kept_nodes[name], verdicts[name]
        verdicts.update(refused)
        return KeptVerdicts(
            kept_nodes, _replaced(self.rejected, stale, refused), _replaced(self.would_reject, stale, held), verdicts
        )

    def _holds(
        self, nodes: Mapping[str, Node], rejected: Mapping[str, Status], would_reject: Mapping[str, tuple[Status, ...]]
    ) -> bool:
        """Whether these verdicts are the kept ones, of the same Node objects."""
        kept_nodes, verdicts, held = self.nodes, self.verdicts, self.would_reject
        return all(
            kept_nodes.get(name) is node
            and name in verdicts
            and verdicts[name] == rejected.get(name)
            and held.get(name) == would_reject.get(name)
            for name, node in nodes.items()
        )


def _replaced(kept: Mapping[str, _V], stale: Collection[str], new: Mapping[str, _V]) -> Mapping[str, _V]:
    """``kept`` without the ``stale`` names, with ``new``: the same object when that changes nothing."""
    if not new and not any(map(kept.__contains__, stale)):
        return kept
    replaced = dict(kept)
    for name in stale:
        replaced.pop(name, None)
    replaced.update(new)
    return replaced


_NO_VERDICTS = KeptVerdicts({}, {}, {})


class KeptScores:
    """The scores of one candidate set: only that set may use them, or any set of the nodes they hold when the
    scores are each node's own. Shared by every request: nobody changes them (``best``, worked out from them, is set
    once)."""

    __slots__ = ("_best", "audited", "by_plugin", "names", "scores")

    def __init__(
        self,
        names: frozenset[str],
        by_plugin: Mapping[str, dict[str, int]],
        scores: dict[str, int],
        audited: tuple[str, ...] = (),
        best: list[str] | None = None,
    ) -> None:
        self.names = names
        self.by_plugin = by_plugin
        self.scores = scores
        self.audited = audited
        self._best = best

    def part(self, names: Sequence[str]) -> KeptScores:
        """These scores of ``names`` alone, in their order: scores each node's own (``ScorePlugin.scores_per_node``)."""

        def of(scores: Mapping[str, int]) -> dict[str, int]:
            return dict(zip(names, map(scores.__getitem__, names), strict=True))

        scores = of(self.scores)
        by_plugin = {name: of(each) for name, each in self.by_plugin.items()}
        return KeptScores(frozenset(scores), by_plugin, scores, self.audited)

    def best(self) -> list[str]:
        """``top_nodes`` of the scores: given by the entry these were derived from, else worked out once."""
        if self._best is None:
            self._best = top_nodes(self.scores)
        return self._best


class _Generation:
    """What is kept for one generation of the node source; replaced whole when a new one arrives."""

    __slots__ = ("generation", "inherited", "scores", "verdicts")

    def __init__(self, generation: object, inherited: Mapping[Hashable, KeptVerdicts]) -> None:
        self.generation = generation  # held, so its identity cannot pass to another object
        self.verdicts: dict[Hashable, KeptVerdicts] = {}
        self.scores: dict[Hashable, KeptScores] = {}
        # The verdicts of the generation before, taken over (for unchanged Node objects) by each key's first request.
        self.inherited = dict(inherited)


class KeptProfile:
    """A plain profile with results kept across node-name requests; answers exactly as the plain one."""

    def __init__(self, plain: Profile) -> None:
        self.plain = plain
        self.name, self.filters, self.scores, self.preempts = plain.name, plain.filters, plain.scores, plain.preempts
        self.plugins = plain.plugins
        self.fail_open, self.facts, self.victim_facts = plain.fail_open, plain.facts, plain.victim_facts
        self.entry = plain.entry
        self._kept = _Generation(None, {})

    def filter(self, pod: Pod, nodes: Sequence[Node], cycle: CycleState | None = None) -> FilterResult:
        """Full-node requests bring new Node objects each time: nothing to keep."""
        return self.plain.filter(pod, nodes, cycle)

    def prioritize(self, pod: Pod, nodes: Sequence[Node], cycle: CycleState | None = None) -> ScoreResult:
        return self.plain.prioritize(pod, nodes, cycle)

    def preempt(
        self, pod: Pod, candidates: Mapping[str, Victims], nodes: Mapping[str, Node], cycle: CycleState | None = None
    ) -> PreemptResult:
        return self.plain.preempt(pod, candidates, nodes, cycle)

    def filter_names(
        self, pod: Pod, names: Sequence[str], source: NodeSource, cycle: CycleState | None = None
    ) -> FilterResult:
        """Only names with no kept verdict are looked up and filtered (``names`` unique)."""
        plain = self.plain
        cycle = cycle or CycleState(pod)
        keys = tuple(map(cycle.reuse_key, plain.filters))
        if not plain.judging_filters(cycle) or None in keys:
            return plain.filter_names(pod, names, source, cycle)
        generation = source.generation()
        kept_now = self._current(generation)
        kept = kept_now.verdicts.get(keys)
        # Names whose kept verdicts are stale: under keys that differ only on the nodes the plugins name, all but those.
        changed: Collection[str] = ()
        if kept is None:
            found = _derivable(kept_now.verdicts, keys, plain.filters)
            if found is not None:
                kept, changed = found[0], found[1]
        seconds = dict.fromkeys((plugin.name for plugin in plain.filters), 0.0)
        # Each name's verdict: None (it passes) or its rejection; and where the names judged again are among them.
        verdicts: list[Status | None] | None = None
        again: list[tuple[int, str]] | None = None
        # The kept verdicts ``verdicts`` were read from, one per name (``_all_kept``).
        read_from: KeptVerdicts | None = None
        if kept is None:  # the first request of this generation with these keys
            nodes = source.lookup(names)
            previous = kept_now.inherited.pop(keys, _NO_VERDICTS)
            known = previous.nodes.get
            fresh = [node for node in nodes if known(node.name) is not node]
            carried = [node for node in nodes if known(node.name) is node]
            kept = _NO_VERDICTS.replacing((), carried, previous.rejected, previous.would_reject, ())
        else:
            verdict_of = kept.verdicts
            # The changed nodes this request brings are judged again: where it holds them, when they are a few.
            again = _positions(names, [name for name in changed if name in verdict_of])
            try:
                verdicts = list(map(verdict_of.__getitem__, names)) if again is not None else None
                read_from = kept if verdicts is not None else None
            except KeyError:  # names without a kept verdict (nodes that joined)
                verdicts = None
            if again is not None and verdicts is not None:
                fresh = source.lookup([name for _, name in again]) if again else []
            else:  # those nodes and the names without a kept verdict, in the request's order (as plain judges them)
                stale = {name for name in changed if name in verdict_of}
                fresh = source.lookup([name for name in names if name in stale or name not in verdict_of])
        rejected, would_reject = kept.rejected, kept.would_reject
        fresh_result = FilterResult(feasible=[])
        if fresh:
            fresh_result = plain.filter_each(pod, fresh, cycle)
            if fresh_result.error is not None:
                return fresh_result
            seconds = fresh_result.seconds_by_plugin
            unjudged = fresh_result.skipped.keys() | fresh_result.audit_failed.keys()
        else:
            unjudged = set()
        if fresh or changed:
            judged = _judged_beside(plain, pod, source, cycle, kept, changed, again, fresh, fresh_result, unjudged)
            kept = kept.replacing(changed, *judged)
            # The kept maps lack what was not judged (skipped, failed): this request's own results count for it.
            rejected = {**kept.rejected, **fresh_result.rejected} if fresh_result.rejected else kept.rejected
            would_reject = {**kept.would_reject, **fresh_result.would_reject}
        if source.generation() is generation:
            _store(kept_now.verdicts, keys, kept)
        result = FilterResult(
            feasible=list(names),
            seconds_by_plugin=seconds,
            skipped=fresh_result.skipped,
            unjudged=fresh_result.unjudged,
            audit_failed=fresh_result.audit_failed,
            observed=fresh_result.observed if fresh else plain.observations(cycle, plain.judging_filters(cycle)),
            exempt=plain.exemptions(cycle, plain.judging_filters(cycle)),
            incomplete=plain.incompletes(cycle, plain.judging_filters(cycle)),
        )
        if would_reject:
            result.would_reject = {name: would_reject[name] for name in names if name in would_reject}
        if verdicts is None:
            verdicts = list(map(rejected.get, names))
        elif again:  # the few judged again: this request's verdicts where they are
            for index, name in again:
                verdicts[index] = fresh_result.rejected.get(name)
        # One lookup per name, then C-speed passes: which names are refused, in the request's order.
        if any(verdicts):
            result.feasible = list(compress(names, map(not_, verdicts)))
            if _all_kept(kept, read_from, len(names) - len(result.feasible), names, verdicts):
                result.rejected, result.rejected_kept = dict(kept.rejected), kept.rejected
            else:
                result.rejected = dict(zip(compress(names, verdicts), filter(None, verdicts), strict=True))
        return judged_or_error(result, len(names))

    def prioritize_names(
        self, pod: Pod, names: Sequence[str], source: NodeSource, cycle: CycleState | None = None
    ) -> ScoreResult:
        """Scores kept for the candidate set, in whatever order it comes (kube-scheduler's parallel filters hand
        the same candidates over in another order each cycle); with scores each node's own, for any candidates the
        kept scores hold."""
        plain = self.plain
        cycle = cycle or CycleState(pod)
        keys = tuple(cycle.reuse_key(entry.plugin) for entry in plain.scores)
        if None in keys:
            return plain.prioritize_names(pod, names, source, cycle)
        generation = source.generation()
        kept_now = self._current(generation)
        kept = kept_now.scores.get(keys)
        if kept is not None and len(kept.names) == len(names) and kept.names.issuperset(names):
            seconds = dict.fromkeys((entry.plugin.name for entry in plain.scores), 0.0)
            return _kept_scores(plain, cycle, kept, seconds, None, None)
        derived = self._derived_scores(pod, names, source, cycle, kept_now, keys, kept)
        if derived is not None:
            return derived
        nodes = source.lookup(names)
        result = plain.prioritize(pod, nodes, cycle)
        # Scores some plugin could not work out for every node (``skipped``) are never kept, as verdicts are not.
        described = not result.skipped and self._described(nodes)
        same_generation = source.generation() is generation
        if result.error is None and not result.audit_failed and described and same_generation:
            # The names as the scores hold them: the answer's entries are found by the same string objects.
            kept_scores = KeptScores(
                frozenset(result.scores), dict(result.by_plugin), result.scores, tuple(result.audited)
            )
            _store(kept_now.scores, keys, kept_scores)
            # Its scores are the kept ones now, never changed: what is derived from them (the encoded answer) is kept
            # with them, so the next pod's scores, derived from these, encode only the nodes scored again.
            result.kept = True
        return result

    def _derived_scores(
        self,
        pod: Pod,
        names: Sequence[str],
        source: NodeSource,
        cycle: CycleState,
        kept_now: _Generation,
        keys: tuple[Hashable, ...],
        kept: KeptScores | None,
    ) -> ScoreResult | None:
        """The scores of a kept entry for the same candidates under keys that differ only on nodes the plugins name,
        with those nodes scored again (module docstring); None when there is none, or the new scoring skipped or
        failed somewhere (the request is then scored whole).

        With every score plugin's scores each node's own (``ScorePlugin.scores_per_node``), the entry may hold other
        nodes too (``kept``, of these keys, or the newest derivable one), and the candidates it lacks are scored and
        added: kube-scheduler asks about a sample of a large cluster that moves round it pod by pod, so an entry
        grows to the nodes of the generation (its bound) and each request takes its candidates' part of it. A part of
        more than half the entry's nodes, none new (every node asked about, a few rejected since), is kept instead."""
        plain = self.plain
        plugins = [entry.plugin for entry in plain.scores]
        per_node = all(plugin.scores_per_node for plugin in plugins)
        rescored: list[str] = []
        changed_plugins: list[str] = []
        if per_node and kept is not None:
            old = kept
        else:
            found = _derivable(kept_now.scores, keys, plugins, None if per_node else _holding_only(names))
            if found is None:
                return None
            old, changed, changed_plugins = found
            rescored = [name for name in changed if name in old.names]
            if per_node and len(rescored) > len(names):  # scoring the candidates whole costs less
                return None
        held = old.names
        added = [] if not per_node or held.issuperset(names) else [name for name in names if name not in held]
        generation = kept_now.generation
        seconds = dict.fromkeys((plugin.name for plugin in plugins), 0.0)
        kept = old
        observed = None
        derived_from = None
        if rescored or added:
            nodes = source.lookup([*rescored, *added])
            result = plain.prioritize(pod, nodes, cycle)
            if result.error is not None or result.skipped or result.audit_failed or not self._described(nodes):
                return None
            by_plugin = dict(old.by_plugin)
            # Every plugin's scores for the nodes added; only the changed plugins' for the nodes scored again.
            for name in {*changed_plugins, *(by_plugin if added else ())}:
                if name not in by_plugin or name not in result.by_plugin:
                    return None
                fresh = result.by_plugin[name]
                if name not in changed_plugins:
                    fresh = {node: fresh[node] for node in added}
                by_plugin[name] = {**by_plugin[name], **fresh}
            if added and by_plugin.keys() != result.by_plugin.keys():
                return None
            weighted = [
                (entry.weight, by_plugin[entry.plugin.name])
                for entry in plain.scores
                if entry.plugin.name in by_plugin and entry.plugin.name not in old.audited
            ]
            new = [*rescored, *added]
            totals = {name: sum(weight * scores[name] for weight, scores in weighted) for name in new}
            priorities = _to_extender_priorities(totals, sum(weight for weight, _ in weighted), {})
            # The kept entry's name objects stay the keys (an update keeps a key that is there), in its order.
            scores = {**old.scores, **priorities}
            # The top of scores holding other nodes is not this request's: worked out if ever needed.
            same = not added and len(old.names) == len(names)
            best = top_nodes_after(old.best(), old.scores, scores, rescored) if same else None
            kept = KeptScores(old.names.union(added) if added else old.names, by_plugin, scores, old.audited, best)
            seconds.update(result.seconds_by_plugin)
            observed = result.observed
            derived_from = (old.scores, tuple(new))
        if source.generation() is not generation:
            return None
        answered = kept
        if len(kept.names) != len(names):
            answered = kept.part(names)
            if not added and 2 * len(names) > len(kept.names):
                # Most of the nodes they hold, none new (every node asked about, a few rejected since, where a sample
                # is at most half of them): the part is kept, so that the next requests with these candidates take
                # it whole rather than a part each; what it is derived from names its own nodes only.
                base, changed_names = derived_from or (kept.scores, ())
                derived_from = (base, tuple(name for name in changed_names if name in answered.names))
                kept = answered
        _store(kept_now.scores, keys, kept)
        covering = kept.scores if answered is not kept else None
        return _kept_scores(plain, cycle, answered, seconds, observed, derived_from, covering)

    def _current(self, generation: object) -> _Generation:
        """What is kept for ``generation``: a new generation drops every older one's values."""
        kept = self._kept
        if kept.generation is not generation:
            kept = self._kept = _Generation(generation, kept.verdicts)
        return kept

    def _described(self, nodes: Sequence[Node]) -> bool:
        """Whether every node has the facts the plugins read (scores for a node not described are not kept)."""
        if set(map(_why_unknown, nodes)) - {None}:
            return False
        return self.plain.facts == Facts.NAME or None not in map(_labels, nodes)


def _all_kept(
    kept: KeptVerdicts,
    read_from: KeptVerdicts | None,
    refused: int,
    names: Sequence[str],
    verdicts: Sequence[Status | None],
) -> bool:
    """Whether the request's ``refused`` rejections are the kept ones, every one (``names`` unique): its rejections
    are then a copy of the kept map (one C-speed copy), which ``FilterResult.rejected_kept`` names.

    Verdicts read from these very kept verdicts (``read_from`` is ``kept``: the nodes judged again kept theirs, or
    ``replacing`` would have made new ones) are each name's kept verdict, so the names refused are kept rejections
    with their statuses, and the count alone tells; otherwise each refusal is compared with the kept one."""
    if refused != len(kept.rejected):
        return False
    if read_from is kept:
        return True
    refusals = zip(compress(names, verdicts), filter(None, verdicts), strict=True)
    return all(kept.rejected.get(name) == status for name, status in refusals)


def _judged_beside(
    plain: Profile,
    pod: Pod,
    source: NodeSource,
    cycle: CycleState,
    kept: KeptVerdicts,
    changed: Collection[str],
    again: list[tuple[int, str]] | None,
    fresh: Sequence[Node],
    fresh_result: FilterResult,
    unjudged: Collection[str],
) -> tuple[Sequence[Node], Mapping[str, Status], Mapping[str, tuple[Status, ...]], Collection[str]]:
    """The verdicts to keep from a request's judging (``KeptVerdicts.replacing``'s arguments), with those of the
    changed nodes the request does not bring, judged too when the request's own are a few (``again``).

    kube-scheduler asks about a sample of a large cluster that moves round it pod by pod, so the node a binding
    changed is seldom in the next request: judging it (a node or a few) lets verdicts that held stay the kept ones
    themselves, where dropping it copies every kept map. Its verdict is worked out under the request's keys, as a
    later request bringing it would work it out; one the chain cannot judge (a failure, a skip) is dropped as before.
    """
    if again is None:
        return fresh, fresh_result.rejected, fresh_result.would_reject, unjudged
    brought = {name for _, name in again}
    outside = [name for name in changed if name in kept.verdicts and name not in brought]
    if not outside:
        return fresh, fresh_result.rejected, fresh_result.would_reject, unjudged
    nodes = source.lookup(outside)
    beside = plain.filter_each(pod, nodes, cycle)
    if beside.error is not None:
        return fresh, fresh_result.rejected, fresh_result.would_reject, unjudged
    return (
        [*fresh, *nodes],
        {**fresh_result.rejected, **beside.rejected},
        {**fresh_result.would_reject, **beside.would_reject},
        {*unjudged, *beside.skipped, *beside.audit_failed},
    )


def _positions(names: Sequence[str], wanted: Collection[str]) -> list[tuple[int, str]] | None:
    """Where ``names`` holds each of ``wanted`` (those it lacks left out), in the request's order, found by a scan of
    the list each; None when there are more than ``MAX_SCANS`` (a pass over every name then costs less)."""
    if len(wanted) > MAX_SCANS:
        return None
    found = []
    for name in wanted:
        try:
            found.append((names.index(name), name))
        except ValueError:
            continue
    return sorted(found)


class Derived(Generic[T]):
    """Values worked out from kept objects (the kept scores a ``ScoreResult.kept`` hands back), by their identity.

    Kept results hand back the same, never changed, objects for the same candidates, so what is derived from one
    (its encoded answer entries, its top scores) holds as long as it is that object. At most ``MAX_KEYS`` are
    held (as many as the kept layer keeps per generation; a new one past that drops the oldest, as the kept keys
    do, so that each of a burst's pod shapes keeps what its next pod derives from); each is held with the object it
    came from, so that the identity stays that object's. Replaced in one assignment, never changed.
    """

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[int, tuple[object, T]] = {}

    def get(self, kept: object) -> T | None:
        found = self._values.get(id(kept))
        return found[1] if found is not None and found[0] is kept else None

    def put(self, kept: object, value: T) -> None:
        values = dict(self._values)
        if len(values) >= MAX_KEYS:
            del values[next(iter(values))]
        values[id(kept)] = (kept, value)
        self._values = values

    def memo(self, kept: object | None, make: Callable[[], T]) -> T:
        """What ``make`` works out, kept for ``kept``; worked out afresh when there is no kept object (None)."""
        if kept is None:
            return make()
        found = self.get(kept)
        if found is None:
            found = make()
            self.put(kept, found)
        return found


def _derivable(
    kept: Mapping[Hashable, T],
    keys: tuple[Hashable, ...],
    plugins: Sequence[Plugin],
    fits: Callable[[T], bool] | None = None,
) -> tuple[T, set[str], list[str]] | None:
    """The newest kept value (that ``fits``) whose keys differ from ``keys`` only where ``plugins`` (one per key)
    name the nodes that changed: with those nodes, and the names of the plugins whose keys differ."""
    for old_keys, value in reversed(tuple(kept.items())):
        if not isinstance(old_keys, tuple) or len(old_keys) != len(keys):
            continue
        found = _changed_between(plugins, old_keys, keys)
        if found is not None and (fits is None or fits(value)):
            return value, *found
    return None


def _changed_between(
    plugins: Sequence[Plugin], old_keys: tuple[Hashable, ...], keys: tuple[Hashable, ...]
) -> tuple[set[str], list[str]] | None:
    """The nodes whose results may differ between two tuples of keys, and the plugins whose keys differ; None when
    a plugin cannot tell (or none differ: that entry is found by its keys)."""
    changed: set[str] = set()
    differ: list[str] = []
    for plugin, old, new in zip(plugins, old_keys, keys, strict=True):
        if old is new or old == new:
            continue
        try:
            names = plugin.changed_nodes(old, new)
        except Exception:  # noqa: BLE001 — plugin code (custom plugins too): it cannot tell, so nothing is derived
            names = None
        if names is None:
            return None
        changed.update(names)
        differ.append(plugin.name)
    return (changed, differ) if differ else None


def _kept_scores(
    plain: Profile,
    cycle: CycleState,
    kept: KeptScores,
    seconds: dict[str, float],
    observed: dict[str, Observed] | None,
    derived_from: tuple[dict[str, int], tuple[str, ...]] | None,
    covering: dict[str, int] | None = None,
) -> ScoreResult:
    """A result of kept (or derived) scores: what this request observed and found incomplete is its own, never kept;
    ``covering``, the kept scores of more nodes these are part of (``ScoreResult.covering``)."""
    plugins = [entry.plugin for entry in plain.scores]
    return ScoreResult(
        kept.scores,
        dict(kept.by_plugin),
        seconds_by_plugin=seconds,
        kept=True,
        audited=list(kept.audited),
        observed=plain.observations(cycle, plugins) if observed is None else observed,
        derived_from=derived_from,
        incomplete=plain.incompletes(cycle, plugins),
        best=kept.best(),
        covering=covering,
    )


def _holding_only(names: Sequence[str]) -> Callable[[KeptScores], bool]:
    """Whether kept scores are of exactly the candidates ``names`` (unique)."""
    return lambda kept: len(kept.names) == len(names) and kept.names.issuperset(names)


def _store(kept: dict[Hashable, T], keys: Hashable, value: T) -> None:
    """Keep ``value`` under ``keys``; a new key when ``MAX_KEYS`` are kept drops the oldest (rare pods' keys age out
    instead of crowding out the common ones for a whole generation, which with a static source is the instance's
    life). Only the oldest goes: each binding adds a key derived from the one before, and a burst of pods of a few
    shapes (a key each) keeps every shape's newest key to derive the next from."""
    if keys not in kept and len(kept) >= MAX_KEYS:
        try:
            del kept[next(iter(kept))]
        except (KeyError, RuntimeError, StopIteration):  # another request changed the map meanwhile: start afresh
            kept.clear()
    kept[keys] = value


# Either profile serves requests; only the kept one keeps results across them.
ServedProfile = Profile | KeptProfile


def keeping_results(profile: Profile, enabled: bool) -> ServedProfile:
    """``profile`` with results kept across requests, or the plain profile when the result cache is off."""
    return KeptProfile(profile) if enabled else profile
