"""A plugin's per-node results kept across requests, for the Node objects a node source reuses.

In node-name mode the node source answers every request with the same prebuilt
Node objects until its cache refreshes, and most plugin work depends on the pod
only through a small key (which rules apply to it). So a result is remembered
per (key, node object): a warm request costs a few C-level passes over the
nodes instead of a Python call per node.

Results are keyed by ``id(node)``, and every remembered node is kept alive by
its entry, so an id can never be reused by another object while it is a key.
A refresh replaces the Node objects whose facts changed (the kubernetes source
keeps the others): only those are worked out again. A source that rebuilds
them all makes the next request miss on most of them and start the entry
afresh, which also lets the old objects go. Memory stays
bounded: at most ``MAX_KEYS`` entries of at most ``MAX_NODES`` nodes each.
Entries are replaced in one assignment and only ever grow by adding a node
before its result, so concurrent requests at worst compute a result twice.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Generic, TypeVar

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


class ForSameNodes(Generic[T]):
    """A value worked out from a whole candidate set (normalized scores and their sum), kept per key.

    Normalizing depends on every candidate, so a value is only handed back for exactly the Node objects it was worked
    out from; in any order, as kube-scheduler's parallel filters hand the same feasible nodes over in a different
    order each cycle. One C-level pass over the candidates' identities instead of thousands of scores. The entry keeps
    those nodes alive, so their identities cannot pass to other objects; at most ``MAX_KEYS`` entries are kept.
    """

    MAX_KEYS = 16

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[tuple[Node, ...], set[int], T]] = {}

    def get(self, key: Hashable, nodes: Sequence[Node]) -> T | None:
        """``nodes`` are distinct objects (a request's node names are unique)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        _, ids, value = entry
        return value if len(ids) == len(nodes) and ids.issuperset(map(id, nodes)) else None

    def put(self, key: Hashable, nodes: Sequence[Node], value: T) -> None:
        if len(nodes) > ReusedResults.MAX_NODES:
            return
        if len(self._entries) >= self.MAX_KEYS and key not in self._entries:
            self._entries = {}
        self._entries[key] = (tuple(nodes), set(map(id, nodes)), value)
