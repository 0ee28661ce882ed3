"""The node source interface."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from extender.framework.types import Node


class NodeSource(Protocol):
    def lookup(self, names: Sequence[str]) -> list[Node]:
        """Facts for ``names``, in order; a fact the source does not know stays ``None``."""
        ...


class NamesOnly:
    """No source configured: only the names are known."""

    def lookup(self, names: Sequence[str]) -> list[Node]:
        return [Node(name) for name in names]
