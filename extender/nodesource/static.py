"""static: an inventory in the policy file, node-name globs -> labels, for when the API is out of reach.

Every entry whose globs match a node contributes its labels, later entries
overriding earlier ones, so a ``"*"`` entry can give defaults. A node that
matches no entry is rejected by plugins that need labels: an inventory that
forgot a node must not let it pass a rule as if it had no labels.

    nodeSource:
      static:
        nodes:
        - names: ["*"]
          labels: {team: shared}
        - names: ["gke-prod-gpu-*"]
          labels: {team: ml, cloud.google.com/gke-accelerator: nvidia-l4}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from extender.framework.globs import compile_globs
from extender.framework.types import Node
from extender.nodesource.base import PerNameSource, unknowable


class InventoryEntry(NamedTuple):
    names: tuple[str, ...]
    labels: Mapping[str, str]


class StaticInventory(PerNameSource):
    def __init__(self, entries: Sequence[InventoryEntry]) -> None:
        super().__init__()
        # One regex per entry: a node is matched against each entry once, however many globs it lists. An entry
        # without globs matches no node.
        self._entries = [
            (pattern, dict(entry.labels)) for entry in entries if (pattern := compile_globs(entry.names)) is not None
        ]

    def describe(self, name: str) -> Node:
        labels: dict[str, str] = {}
        matched = False
        for pattern, entry_labels in self._entries:
            if pattern.match(name):
                labels.update(entry_labels)
                matched = True
        if not matched:
            return unknowable(name, f"node {name} matches no entry of the static nodeSource inventory")
        return Node(name, labels)
