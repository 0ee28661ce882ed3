"""The node source interface, and what sources share.

A source answers every name it is asked about. A node it cannot describe
keeps ``labels=None`` and says why in ``why_unknown``: an Error while facts are
unavailable (the policy's failurePolicy decides), a rejection when the node
cannot be known (no such node, no inventory entry). Plugins that need facts
never see such a node as if it had no labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from extender.framework import status
from extender.framework.types import Node


class NodeSource(Protocol):
    def lookup(self, names: Sequence[str]) -> list[Node]:
        """Facts for ``names``, in order; a fact the source does not know stays ``None``."""
        ...

    def generation(self) -> object:
        """An object that stays the same while every name this source described keeps its Node object.

        What was worked out per node name stays valid as long as the generation is the same object, so a warm
        request need not look its nodes up at all. Like ``lookup``, it starts a refresh when the facts are old.
        """
        ...


def unavailable(name: str, reason: str) -> Node:
    """Facts that may come later (the API is down or slow): the failurePolicy decides."""
    return Node(name, why_unknown=status.error(reason))


def unknowable(name: str, reason: str) -> Node:
    """A node the source is sure it cannot describe: plugins that need facts reject it."""
    return Node(name, why_unknown=status.unresolvable(reason))


class PerNameSource:
    """Facts that follow from the name alone (an inventory, a naming scheme), worked out once per name."""

    # Bounded so that a stream of made-up names cannot grow memory without end.
    MAX_REMEMBERED = 100_000

    def __init__(self) -> None:
        self._known: dict[str, Node] = {}

    def lookup(self, names: Sequence[str]) -> list[Node]:
        known = self._known
        try:
            return list(map(known.__getitem__, names))  # the warm path: one C-level pass
        except KeyError:
            if len(known) > self.MAX_REMEMBERED:
                known = self._known = {}  # a new generation
            return [known.get(name) or known.setdefault(name, self.describe(name)) for name in names]

    def generation(self) -> object:
        """Adding a name leaves the others' Node objects alone: only starting afresh makes a new generation."""
        return self._known

    def describe(self, name: str) -> Node:
        raise NotImplementedError


class NamesOnly(PerNameSource):
    """No source configured: only the names are known (each name's Node is built once, thousands per request)."""

    def describe(self, name: str) -> Node:
        return Node(name)
