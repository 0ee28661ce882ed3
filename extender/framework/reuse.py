"""Results kept across requests, for the nodes a node source answers with.

In node-name mode the node source answers every request with the same prebuilt
Node objects until its cache refreshes, and most plugin work depends on the pod
only through a small key (which rules apply to it). Two levels keep that work:

- ``ReusedResults``: one plugin's result per (key, Node object). Results are
  keyed by ``id(node)``, and every remembered node is kept alive by its entry,
  so an id can never be reused by another object while it is a key. A refresh
  replaces only the Node objects whose facts changed (the kubernetes source
  keeps the others), so only those are worked out again.
- ``PerGeneration``: a whole chain's verdict per node name (``KeptVerdicts``)
  and a candidate set's scores (``KeptScores``), for one generation of the
  source. A warm request then touches only the names it carries: a few
  C-level passes over strings it has just decoded, no Node objects at all.

Memory stays bounded: at most ``MAX_KEYS`` entries of at most ``MAX_NODES``
nodes each. Entries are replaced in one assignment and only ever grow by
adding a node before its result, so concurrent requests at worst compute a
result twice.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Generic, TypeVar

from extender.framework.status import Status
from extender.framework.types import Node

T = TypeVar("T")
_why_unknown = attrgetter("why_unknown")


class _Entry(Generic[T]):
    __slots__ = ("nodes", "results")

    def __init__(self) -> None:
        self.nodes: list[Node] = []  # keeps every node whose id is a key of ``results`` alive
        self.results: dict[int, T] = {}

    def add(self, nodes: Sequence[Node], results: Sequence[T]) -> None:
        # A node its source could not describe is made up anew by each request: remembering it would only grow.
        described = list(map(is_, map(_why_unknown, nodes), repeat(None)))
        kept = list(compress(nodes, described))
        self.nodes.extend(kept)
        self.results.update(zip(map(id, kept), compress(results, described)))


class ReusedResults(Generic[T]):
    MAX_KEYS = 16
    MAX_NODES = 100_000

    def __init__(self) -> None:
        self._entries: dict[Hashable, _Entry[T]] = {}

    def results(
        self,
        key: Hashable,
        nodes: Sequence[Node],
        compute: Callable[[Sequence[Node]], list[T]],
        keep: Callable[[list[T]], bool] = lambda computed: True,
    ) -> list[T]:
        """The results for ``nodes`` in order; ``compute`` works out those not remembered (never None).

        New results are remembered only when ``keep`` approves them (an error may be transient).
        """
        entry = self._entries.get(key)
        if entry is None:
            return self._start(key, nodes, compute, keep)
        found: list[T | None] = list(map(entry.results.get, map(id, nodes)))
        unknown = list(map(is_, found, repeat(None)))
        if True not in unknown:  # most requests stop here
            return found  # type: ignore[return-value]
        missing = list(compress(range(len(found)), unknown))
        if 2 * len(missing) > len(nodes) or len(entry.results) + len(missing) > self.MAX_NODES:
            return self._start(key, nodes, compute, keep)  # the source refreshed (or the entry is full): start afresh
        new_nodes = [nodes[index] for index in missing]
        computed = compute(new_nodes)
        if keep(computed):
            entry.add(new_nodes, computed)
        for index, result in zip(missing, computed):
            found[index] = result
        return found  # type: ignore[return-value]

    def _start(
        self,
        key: Hashable,
        nodes: Sequence[Node],
        compute: Callable[[Sequence[Node]], list[T]],
        keep: Callable[[list[T]], bool],
    ) -> list[T]:
        computed = compute(nodes)
        if keep(computed) and len(nodes) <= self.MAX_NODES:
            entry: _Entry[T] = _Entry()
            entry.add(nodes, computed)
            if len(self._entries) >= self.MAX_KEYS and key not in self._entries:
                self._entries = {}
            self._entries[key] = entry
        return computed


class PerGeneration(Generic[T]):
    """A value kept per key for one generation of a node source (``NodeSource.generation``); at most ``MAX_KEYS``.

    Values are never changed once kept, only replaced in one assignment: concurrent requests at worst work a value
    out twice. A value is kept with its generation, which it keeps alive, so an identity can never pass to another
    object while it is a key.
    """

    MAX_KEYS = 16

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[object, T]] = {}

    def get(self, key: Hashable, generation: object) -> T | None:
        entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] is generation else None

    def put(self, key: Hashable, generation: object, value: T) -> None:
        if len(self._entries) >= self.MAX_KEYS and key not in self._entries:
            self._entries = {}
        self._entries[key] = (generation, value)


@dataclass(frozen=True)
class KeptVerdicts:
    """Each node name's verdict of a whole filter chain: Success for a name in ``decided`` unless ``rejected``."""

    decided: frozenset[str] = frozenset()
    rejected: Mapping[str, Status] = field(default_factory=dict)

    def adding(self, nodes: Sequence[Node], rejected: Mapping[str, Status]) -> KeptVerdicts:
        """These verdicts and those of ``nodes``; a node its source could not describe is made up anew each time."""
        described = [node.name for node in nodes if node.why_unknown is None]
        if len(self.decided) + len(described) > ReusedResults.MAX_NODES:
            return KeptVerdicts()  # full: start afresh with the next request
        refused = {name: rejected[name] for name in described if name in rejected}
        return KeptVerdicts(self.decided.union(described), {**self.rejected, **refused} if refused else self.rejected)


@dataclass(frozen=True)
class KeptScores:
    """The scores of one candidate set: normalizing depends on every candidate, so only that set may use them."""

    names: frozenset[str]
    by_plugin: Mapping[str, dict[str, int]]
    scores: dict[str, int]
