"""Node names kept as one string object each, for the node-name requests that bring them again.

kube-scheduler names the same nodes in request after request, and decoding a body builds a new string for each name.
Every kept result (``extender.framework.kept``) is found by name: a lookup with a new string compares its characters
with the kept key's, out of the caches at thousands of nodes, where a lookup with the key itself stops at its
identity. So a node-name body's names are replaced, once decoded, by the strings kept for them (new ones are kept as
they come), as ``BuiltNames`` whose entries the schema does not look over again: the passes after it (the uniqueness
check, each kept verdict, the kept scores, the answer's entries) then find their keys by identity, and the decoded
strings are freed at once.

Invariants (a cache, as ``docs/architecture.md`` defines one):

- A kept string equals the name it stands for (the first string that name came as since the map started): the
  names a request is given are equal to those it sent, in the same order, so every answer is the uncached one.
- Bounded: at most ``limit`` names stay kept after a request (one that would keep more starts afresh with its own),
  each at most ``MAX_NAME_CHARS`` long: a request adding a longer one (no node's name) leaves nothing kept.
- Threads: ``dict.setdefault`` keeps a name once however many requests bring it at a time; the map is replaced
  whole, never cleared, so a request still using the one before at worst compares characters as before.
- Only a plain list of strings is replaced: anything else is left for the schemas to refuse as they always do.
- ``EXTENDER_RESULT_CACHE=off`` and ``EXTENDER_DECODER=full`` keep nothing (``Extender`` then has none).
"""

from __future__ import annotations

from typing import Any

from extender.wire.fields import BuiltNames, all_strings

# The longest name a Kubernetes node can have (a DNS subdomain).
MAX_NAME_CHARS = 253


class KeptNames:
    __slots__ = ("_kept", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # Each name kept, as its own key and value.
        self._kept: dict[str, str] = {}

    def replace_in(self, payload: Any) -> Any:
        """``payload`` (a decoded body) with its ``NodeNames``, if a list of strings, replaced by the kept ones."""
        names = payload.get("NodeNames") if type(payload) is dict else None
        if type(names) is list and names and all_strings(names):
            payload["NodeNames"] = self.kept(names)
        return payload

    def kept(self, names: list[str]) -> BuiltNames:
        """The kept string of each of ``names`` (strings), in order; names not kept yet are kept as they are, within
        the bounds (module docstring)."""
        table = self._kept
        before = len(table)
        found = BuiltNames(map(table.setdefault, names, names), distinct=False)
        if len(table) != before:  # names new to the map (an instance's first requests, nodes that joined): bounded?
            if max(map(len, names)) > MAX_NAME_CHARS:  # no node's list: none of it stays kept
                self._kept = {}
            elif len(table) > self.limit:  # another cluster's names, or a hostile caller's: afresh with these
                self._kept = dict(zip(found, found, strict=True))
        return found
