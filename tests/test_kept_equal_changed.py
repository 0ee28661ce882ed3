"""Kept results derived across keys that differ only on the nodes a plugin names (``Plugin.changed_nodes``) answer
exactly as the plain profile: a plugin whose per-node input changes a few nodes at a time (as NodeLoad's in-flight
pods do with each binding), beside plugins whose keys stay and one that normalizes over every candidate, enforced
and audited, from one thread and from eight at once."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Collection, Hashable
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.framework import status
from extender.framework.kept import MAX_KEYS, Derived, KeptProfile, KeptVerdicts
from extender.framework.plugin import FilterPlugin, ScorePlugin
from extender.framework.profile import EntryPolicy, FilterResult, Profile, ScorePluginEntry, top_nodes, top_nodes_after
from extender.framework.status import Status
from extender.framework.types import Node, Pod
from extender.verbs import prioritize
from tests.plugin_helpers import ListedNodes

NODES = [Node(f"node-{index}", labels={"zone": "ab"[index % 2]}) for index in range(40)]


class State:
    """Per-node values, never changed (a new one per change), by identity as NodeLoad's bindings are."""

    def __init__(self, values: dict[str, int], mode: int) -> None:
        self.values = values
        self.mode = mode


# The state each request judges on, by pod uid (requests run on several threads at once).
STATES: dict[str, State] = {}
_lock = threading.Lock()


class Shifting(FilterPlugin, ScorePlugin):
    """Rejects a node whose value is above 70 (60 in mode 1), scores its value; names the nodes whose value differs."""

    name = "Shifting"

    def __init__(self) -> None:
        super().__init__({})
        self.asked = 0

    def prepare(self, pod: Pod) -> State:
        return STATES[pod.uid]

    def reuse_key(self, pod: Pod, state: State) -> Hashable:
        return (state.mode, _Same(state))

    def changed_nodes(self, old: Hashable, new: Hashable) -> Collection[str] | None:
        assert isinstance(old, tuple) and isinstance(new, tuple)
        if old[0] != new[0]:
            return None
        before, after = old[1].state.values, new[1].state.values
        return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}

    def filter(self, pod: Pod, node: Node, state: State) -> Status:
        with _lock:
            self.asked += 1
        limit = 60 if state.mode else 70
        return status.unschedulable("too high") if state.values.get(node.name, 0) > limit else status.SUCCESS

    def score(self, pod: Pod, node: Node, state: State) -> int:
        return min(100, state.values.get(node.name, 0))


class _Same:
    __slots__ = ("state",)

    def __init__(self, state: State) -> None:
        self.state = state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.state is self.state

    def __hash__(self) -> int:
        return id(self.state)


class Zone(FilterPlugin, ScorePlugin):
    """Its key never changes: zone b is rejected for pods of namespace 'a-only'; scores relative to the longest name
    (normalized over every candidate)."""

    name = "Zone"

    def __init__(self) -> None:
        super().__init__({})

    def reuse_key(self, pod: Pod) -> Hashable:
        return pod.namespace

    def filter(self, pod: Pod, node: Node) -> Status:
        rejected = pod.namespace == "a-only" and (node.labels or {}).get("zone") == "b"
        return status.unschedulable("zone") if rejected else status.SUCCESS

    def score(self, pod: Pod, node: Node) -> int:
        return int(node.name.split("-")[1]) + 1

    def normalize_scores(self, pod: Pod, scores: dict[str, int]) -> None:
        top = max(scores.values())
        scores.update({name: score * 100 // top for name, score in scores.items()})


def profile(audit: bool) -> Profile:
    shifting, zone = Shifting(), Zone()
    entries = {("filter", "Shifting"): EntryPolicy(audit=True), ("score", "Shifting"): EntryPolicy(audit=True)}
    return Profile(
        "p",
        [zone, shifting],
        [ScorePluginEntry(shifting, 3), ScorePluginEntry(zone, 1)],
        entries=entries if audit else None,
    )


def requests(seed: int, count: int, most_changed: int = 3) -> list[tuple[Pod, list[str]]]:
    """A burst: each step changes a few nodes' values (``most_changed`` at most; now and then the mode, which names
    nothing), then a pod asks about some candidates (often the same set, as a burst's pods do)."""
    rng = random.Random(seed)
    values = {node.name: rng.randrange(100) for node in NODES}
    mode = 0
    same = [node.name for node in NODES if rng.random() < 0.8]
    made: list[tuple[Pod, list[str]]] = []
    for index in range(count):
        if rng.random() < 0.7:
            values = dict(values)
            for name in rng.sample(list(values), rng.randint(1, most_changed)):
                values[name] = rng.randrange(100)
        if rng.random() < 0.05:
            mode = 1 - mode
        uid = f"{seed}-{index}"
        STATES[uid] = State(values, mode)
        names = same if rng.random() < 0.7 else rng.sample([node.name for node in NODES], rng.randint(1, len(NODES)))
        namespace = rng.choice(["default", "default", "a-only"])
        made.append((Pod(uid=uid, name=uid, namespace=namespace), names))
    return made


def answer(served: Profile | KeptProfile, pod: Pod, names: list[str], source: ListedNodes) -> tuple[object, ...]:
    if isinstance(served, KeptProfile):
        filtered = served.filter_names(pod, names, source)
        scored = served.prioritize_names(pod, filtered.feasible, source) if filtered.feasible else None
    else:
        filtered = served.filter(pod, source.lookup(names))
        scored = served.prioritize(pod, source.lookup(filtered.feasible)) if filtered.feasible else None
    verdicts = (filtered.feasible, dict(filtered.rejected), dict(filtered.would_reject), filtered.error)
    # Scores to compare, not the same Error (or the same audited plugin's failure) on both sides.
    assert scored is None or (scored.error is None and not scored.audit_failed), scored.error or scored.audit_failed
    scores = None
    if scored is not None:
        # The top nodes as a set: their order is the kept scores' (the first request's), the plain ones the request's.
        scores = (dict(scored.scores), scored.by_plugin, scored.error, scored.audited, sorted(scored.best()))
    return verdicts, scores


@pytest.mark.parametrize("audit", [False, True])
# A few changed nodes are found in the request's names one by one, more in one pass (kept.MAX_SCANS).
@pytest.mark.parametrize("most_changed", [3, 6])
def test_derived_results_equal_plain_ones_through_a_burst(audit, most_changed):
    source = ListedNodes(NODES)
    kept, plain = KeptProfile(profile(audit)), profile(audit)
    burst = requests(1, 300, most_changed)
    for pod, names in burst:
        assert answer(kept, pod, names, source) == answer(plain, pod, names, source), pod.uid
    # Derived, not worked out whole: the kept profile's filter judged far fewer nodes than the plain one.
    kept_shifting, plain_shifting = kept.plain.filters[1], plain.filters[1]
    assert isinstance(kept_shifting, Shifting) and isinstance(plain_shifting, Shifting)
    assert kept_shifting.asked * (4 if most_changed == 3 else 3) < plain_shifting.asked


def shapes_taking_turns(seed: int, count: int) -> list[tuple[Pod, list[str]]]:
    """A burst of several workloads: the pods' shapes (here the mode, which no plugin can derive across) take turns,
    ten of them, while each binding changes two nodes; every pod asks about every node."""
    rng = random.Random(seed)
    names = [node.name for node in NODES]
    values = {name: rng.randrange(100) for name in names}
    made: list[tuple[Pod, list[str]]] = []
    for index in range(count):
        values = {**values, **{name: rng.randrange(100) for name in rng.sample(names, 2)}}
        uid = f"shapes-{seed}-{index}"
        STATES[uid] = State(values, index % 10)
        made.append((Pod(uid=uid, name=uid, namespace="default"), names))
    return made


def test_pods_of_ten_shapes_taking_turns_each_derive_from_their_shape_s_last_key():
    """Every shape's newest key stays kept however many keys the bindings add (``MAX_KEYS`` drops the oldest), so
    after each shape's first pod only the changed nodes are judged, and every answer is the plain profile's."""
    source = ListedNodes(NODES)
    kept, plain = KeptProfile(profile(False)), profile(False)
    for pod, names in shapes_taking_turns(3, 200):
        assert answer(kept, pod, names, source) == answer(plain, pod, names, source), pod.uid
    kept_shifting, plain_shifting = kept.plain.filters[1], plain.filters[1]
    assert isinstance(kept_shifting, Shifting) and isinstance(plain_shifting, Shifting)
    # Whole: the first pod of each shape (10 × 40 nodes); derived: the nodes changed since that shape's last pod.
    assert kept_shifting.asked <= 10 * len(NODES) + 190 * 10 * 2 < plain_shifting.asked


def test_what_is_derived_from_kept_objects_drops_the_oldest_past_its_bound():
    """``Derived`` (the encoded prioritize entries, the decision log's top scores) keeps the newest ``MAX_KEYS``: each
    pod shape's newest scores keep their entries for the next pod of that shape to derive from."""
    derived: Derived[int] = Derived()
    objects = [object() for _ in range(MAX_KEYS + 5)]
    for number, kept in enumerate(objects):
        derived.put(kept, number)
    assert [derived.get(kept) for kept in objects] == [None] * 5 + list(range(5, MAX_KEYS + 5))
    assert derived.memo(objects[-1], lambda: -1) == MAX_KEYS + 4 and derived.memo(object(), lambda: -1) == -1


def test_the_next_pod_encodes_only_the_nodes_scored_again_after_scores_worked_out_whole(monkeypatch):
    """Scores worked out whole are kept, so the answer's entries encoded for them are kept too: the next pod of that
    shape (the first of a burst after a workload's first pod) encodes the changed nodes' entries alone."""
    source = ListedNodes(NODES)
    kept, plain = KeptProfile(profile(False)), profile(False)
    names = [node.name for node in NODES]
    values = {name: index * 2 for index, name in enumerate(names)}
    STATES["whole"], STATES["next"] = State(values, 0), State({**values, "node-3": 99}, 0)
    dumped: list[int] = []
    dump = prioritize._result.dump
    monkeypatch.setattr(prioritize._result, "dump", lambda entries: dumped.append(len(entries)) or dump(entries))
    for uid in ("whole", "next"):
        the_pod = Pod(uid=uid, name=uid, namespace="default")
        scored = kept.prioritize_names(the_pod, names, source)
        expected = plain.prioritize(the_pod, source.lookup(names)).scores
        assert scored.kept
        assert orjson.loads(orjson.dumps(prioritize._answer(scored, names))) == [
            {"Host": name, "Score": expected[name]} for name in names
        ]
    assert dumped == [len(names), 1]


@pytest.mark.parametrize(
    "make_burst",
    [lambda: requests(2, 400), lambda: shapes_taking_turns(4, 400)],
    ids=["a burst", "ten shapes taking turns"],
)
def test_derived_results_equal_plain_ones_from_eight_threads_at_once(
    make_burst: Callable[[], list[tuple[Pod, list[str]]]],
) -> None:
    """Also with ten shapes taking turns: the kept keys are dropped oldest first while other requests read and add
    theirs (``_store``)."""
    source = ListedNodes(NODES)
    kept, plain = KeptProfile(profile(False)), profile(False)
    burst = make_burst()
    expected = [answer(plain, pod, names, source) for pod, names in burst]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda request: answer(kept, *request, source), burst))
    for index, (pod, _) in enumerate(burst):
        assert got[index] == expected[index], pod.uid


def test_a_change_that_moves_no_verdict_keeps_the_kept_verdicts_and_one_that_does_replaces_them():
    """Most bindings of a burst move no node across a threshold: the verdicts derived for the new key are then the
    kept ones, the same object (no map of every node copied per request); a node crossing one is replaced."""
    source = ListedNodes(NODES)
    kept = KeptProfile(profile(False))
    names = [node.name for node in NODES]
    values = dict.fromkeys(names, 10)

    def ask(uid: str, changed: dict[str, int]) -> list[KeptVerdicts]:
        STATES[uid] = State({**values, **changed}, 0)
        result = kept.filter_names(Pod(uid=uid, name=uid, namespace="default"), names, source)
        assert result.feasible == [name for name in names if changed.get(name, 10) <= 70]
        return list(kept._kept.verdicts.values())

    [first] = ask("u1", {})
    assert ask("u2", {"node-0": 20})[-1] is first
    crossed = ask("u3", {"node-0": 90})[-1]
    assert crossed is not first and crossed.verdicts["node-0"] is not None and first.verdicts["node-0"] is None


def test_refusals_read_from_the_kept_verdicts_are_the_kept_ones_and_a_swapped_rejection_is_not():
    """A filter whose verdicts were read from the kept verdicts it ends with refuses exactly the kept rejections when
    the counts match (its rejections a copy of the kept map: ``FilterResult.rejected_kept``); a change that swaps one
    rejection for another keeps the count, not the set, and answers the new set."""
    source = ListedNodes(NODES)
    kept = KeptProfile(profile(False))
    names = [node.name for node in NODES]
    values = {**dict.fromkeys(names, 10), "node-1": 90}

    def ask(uid: str, changed: dict[str, int]) -> FilterResult:
        STATES[uid] = State({**values, **changed}, 0)
        return kept.filter_names(Pod(uid=uid, name=uid, namespace="default"), names, source)

    first = ask("r1", {})
    moved = ask("r2", {"node-1": 95, "node-0": 20})  # both judged again, both keep their verdicts
    assert set(moved.rejected) == {"node-1"} and moved.rejected_kept is first.rejected_kept is not None
    swapped = ask("r3", {"node-1": 10, "node-2": 90})
    assert set(swapped.rejected) == {"node-2"} and swapped.feasible == [name for name in names if name != "node-2"]
    assert swapped.rejected_kept is not None and set(swapped.rejected_kept) == {"node-2"}


@given(
    st.lists(st.integers(0, 10), min_size=1, max_size=30),
    st.dictionaries(st.integers(0, 29), st.integers(0, 10), max_size=4),
)
def test_the_top_nodes_after_a_few_changes_are_those_of_the_whole_pass(before_scores, changes):
    """Derived kept scores take their top nodes from the entry they came from (``top_nodes_after``): the same nodes,
    in the same order, as a pass over every score, or None when only that pass can tell."""
    names = [f"node-{index}" for index in range(len(before_scores))]
    before = dict(zip(names, before_scores, strict=True))
    changed = [names[index] for index in changes if index < len(names)]
    after = {**before, **{names[index]: score for index, score in changes.items() if index < len(names)}}
    derived = top_nodes_after(top_nodes(before), before, after, changed)
    assert derived is None or derived == top_nodes(after)


@pytest.mark.parametrize(
    ("change", "derived"),
    [
        ({"b": 5}, ["a", "c"]),  # a top node falls, others stay at the top
        ({"d": 6}, ["a", "b", "c"]),  # a node below moves, still below
        ({"d": 10}, ["d"]),  # one node rises above every other
        ({"d": 9}, None),  # one joins the top: its place among the others needs the pass
        ({"a": 1, "b": 1, "c": 1}, None),  # every top node fell
    ],
)
def test_the_top_nodes_are_derived_where_a_few_changes_tell_them(change, derived):
    before = {"a": 9, "b": 9, "d": 3, "c": 9}
    assert top_nodes_after(top_nodes(before), before, {**before, **change}, list(change)) == derived
