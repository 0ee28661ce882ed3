"""Node objects the fast decoder has decoded, kept by their exact bytes for the next full-node requests.

kube-scheduler sends the same node objects, byte for byte, in request after
request until a node changes (its filter and prioritize calls for a pod, and
the next pods'). Decoding one (the nesting check, its name and labels) is a
pure function of its bytes, so a node whose bytes were decoded before is taken
as it was then: found by its first bytes (which name it), and taken only if
all its bytes are the same (one C-speed comparison, without copying them),
instead of three passes over them.

Invariants (a cache, as ``docs/architecture.md`` defines one):

- A value is what the fast decoder made of exactly the bytes it is kept with,
  at the items' level (``EncodedNode``), and it is taken only for the same
  bytes: a hit is the uncached decoding's answer. Nodes the fast decoder
  leaves to the full decoder are never kept.
- One value per first ``KEY_BYTES`` bytes: a node that changes replaces its
  older bytes.
- Bounded: the bytes kept never pass ``limit`` (``EXTENDER_MAX_BODY_BYTES``,
  the largest body); adding a request's new nodes past it starts afresh with
  them alone, which its body bounds.
- Threads: the map is never changed once shared, only replaced whole in one
  assignment; concurrent requests at worst decode a node twice. Nobody changes
  a kept ``EncodedNode`` (the schemas only read it).
- ``EXTENDER_RESULT_CACHE=off`` keeps nothing across requests, this included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from extender.wire.schemas import EncodedNode

if TYPE_CHECKING:  # msgspec is imported with the first full-node body, not at start-up
    from msgspec import Raw

# A node's first bytes: its name among them (kube-scheduler writes metadata.name first), so they tell nodes apart.
KEY_BYTES = 256

Kept = tuple[bytes, EncodedNode]


class KeptNodes:
    __slots__ = ("_known", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # (first bytes -> (all the bytes, the node decoded from them), the bytes kept): replaced whole, never changed.
        self._known: tuple[Mapping[bytes, Kept], int] = ({}, 0)

    def get(self, raw: Raw | bytes) -> EncodedNode | None:
        """The node decoded from exactly the bytes ``raw`` holds before, if it is kept (compared without a copy)."""
        kept = self._known[0].get(bytes(memoryview(raw)[:KEY_BYTES]))
        return kept[1] if kept is not None and len(kept[0]) == len(raw) and kept[0].startswith(raw) else None

    def forget(self) -> None:
        """Keep nothing (the instance gives its memory back: ``extender.http.memory.Release``)."""
        self._known = ({}, 0)

    def keep(self, fresh: Iterable[Kept]) -> None:
        """Add a request's newly decoded nodes; past the limit, they alone are kept."""
        known, size = self._known
        added = {encoded[:KEY_BYTES]: (encoded, node) for encoded, node in fresh}
        replaced = sum(len(known[key][0]) for key in added.keys() & known.keys())
        grown = size - replaced + sum(len(encoded) for encoded, _ in added.values())
        if grown <= self.limit:
            self._known = ({**known, **added}, grown)
            return
        size = sum(len(encoded) for encoded, _ in added.values())
        self._known = (added, size) if size <= self.limit else ({}, 0)
