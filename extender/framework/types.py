"""The facts plugins see about pods and nodes.

Only what policies read is parsed out of the Kubernetes objects. A fact that
is ``None`` is unknown (for instance node labels in a node-name request with
no node source), which plugins must treat differently from "empty".

``Pod`` and ``Node`` are values, equal when their fields are, so they are
NamedTuples: a frozen dataclass compiles its methods from source when its
module loads, several times what a NamedTuple class costs. Records only read,
like ``Victims``, are plain classes with ``__slots__``, cheaper still: a
NamedTuple class compiles each field's annotation and generates its
constructor from source.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from extender.framework.status import Status

if TYPE_CHECKING:
    from orjson import Fragment


class Facts(enum.IntEnum):
    """What a plugin needs to know about a node, from least to most."""

    NAME = 0
    LABELS = 1


class VictimFacts(enum.IntEnum):
    """What a preempt plugin needs to know about victim pods, from least to most."""

    UID = 0
    # Metadata and priority: node-name preempt requests carry UIDs only, so they are looked up in the Kubernetes API.
    POD = 1


class Pod(NamedTuple):
    uid: str
    name: str = ""
    namespace: str = ""
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    priority: int | None = None
    # The pod object as the request carried it (decoded JSON), for plugins that read more than the facts above (its
    # containers' resources, its owner); None where only the facts are known (victims, bindings).
    raw: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        """Without ``raw``: a whole pod object would drown the facts."""
        return (
            f"Pod(uid={self.uid!r}, name={self.name!r}, namespace={self.namespace!r}, labels={self.labels!r}, "
            f"annotations={self.annotations!r}, priority={self.priority!r})"
        )


class Node(NamedTuple):
    name: str
    labels: Mapping[str, str] | None = None
    # The node object exactly as received, echoed back in full-node answers: still encoded (a Fragment) when
    # only the facts were decoded from the request.
    raw: Mapping[str, Any] | Fragment | None = None
    # Why ``labels`` is None, when the node source knows: an Error status while facts are unavailable (the
    # failurePolicy decides), a rejection when the node cannot be known (e.g. the API server has no such node).
    why_unknown: Status | None = None
    # ``status.allocatable`` of a node object the request carried (quantities as strings), None when not known.
    allocatable: Mapping[str, str] | None = None

    def __repr__(self) -> str:
        """Without ``raw``: a whole node object would drown the facts."""
        return f"Node(name={self.name!r}, labels={self.labels!r}, why_unknown={self.why_unknown!r})"


class Victims:
    """The pods the scheduler proposes to evict on one node."""

    __slots__ = ("num_pdb_violations", "pods")

    def __init__(self, pods: tuple[Pod, ...], num_pdb_violations: int = 0) -> None:
        self.pods = pods
        self.num_pdb_violations = num_pdb_violations
