"""A map by node name that a writer changes a few keys of at a time and publishes whole after each change.

``PodWatch`` publishes a new view of the bound pods after each binding it reads, and a published view never changes
(its identity is its generation). Copying one dict of every node with pods lately for each view touched every key
and value of it (a reference count each, out of the CPU's caches at thousands of nodes) to change one node. Here the
keys are split into ``SHARDS`` dicts by their hash: a new map copies only the shards whose keys changed since the
map before it, and shares the others with it.

Invariants:

- A published ``ShardedMap`` is never changed: its shards are copies nobody writes to.
- ``ShardedIndex``: each shard not marked changed equals the same shard of the last map published, so a map
  published from it equals its live shards. Its owner serialises every call (``PodWatch`` holds its lock).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import chain
from typing import Generic, TypeVar, overload

_V = TypeVar("_V")
_T = TypeVar("_T")

# About 80 nodes a shard at 5000 nodes: a copy costs a few microseconds, and a lookup one more index.
SHARDS = 64
_MASK = SHARDS - 1


class ShardedMap(Mapping[str, _V]):
    """Published: read by any thread, never changed."""

    __slots__ = ("_shards",)

    def __init__(self, shards: tuple[dict[str, _V], ...]) -> None:
        self._shards = shards

    def __getitem__(self, key: str) -> _V:
        return self._shards[hash(key) & _MASK][key]

    @overload
    def get(self, key: str, /) -> _V | None: ...
    @overload
    def get(self, key: str, default: _V | _T, /) -> _V | _T: ...
    def get(self, key: str, default: object = None, /) -> object:
        return self._shards[hash(key) & _MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._shards[hash(key) & _MASK]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._shards)

    def __len__(self) -> int:
        return sum(map(len, self._shards))

    def __bool__(self) -> bool:
        return any(self._shards)


class ShardedIndex(Generic[_V]):
    """The writer's map: changed in place, and published as a ``ShardedMap`` sharing the shards unchanged since."""

    __slots__ = ("_changed", "_live", "_published")

    def __init__(self) -> None:
        self._live: list[dict[str, _V]] = [{} for _ in range(SHARDS)]
        self._published: tuple[dict[str, _V], ...] = tuple({} for _ in range(SHARDS))
        self._changed: set[int] = set()

    def get(self, key: str, default: _V) -> _V:
        return self._live[hash(key) & _MASK].get(key, default)

    def set(self, key: str, value: _V) -> None:
        shard = hash(key) & _MASK
        self._live[shard][key] = value
        self._changed.add(shard)

    def pop(self, key: str) -> None:
        shard = hash(key) & _MASK
        if key in self._live[shard]:
            del self._live[shard][key]
            self._changed.add(shard)

    def publish(self) -> ShardedMap[_V]:
        """A map equal to the live shards: the changed ones copied, the others those of the map published before."""
        if self._changed:
            shards = list(self._published)
            for shard in self._changed:
                shards[shard] = dict(self._live[shard])
            self._published = tuple(shards)
            self._changed.clear()
        return ShardedMap(self._published)
