"""The facts plugins see about pods and nodes.

Only what policies read is parsed out of the Kubernetes objects. A fact that
is ``None`` is unknown (for instance node labels in a node-name request with
no node source), which plugins must treat differently from "empty".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Facts(enum.IntEnum):
    """What a plugin needs to know about a node, from least to most."""

    NAME = 0
    LABELS = 1


@dataclass(frozen=True, slots=True)
class Pod:
    uid: str
    name: str = ""
    namespace: str = ""
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] | None = None
    # The node object exactly as received, echoed back in full-node answers.
    raw: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Victims:
    """The pods the scheduler proposes to evict on one node."""

    pods: tuple[Pod, ...]
    num_pdb_violations: int = 0
