"""Decode the API server's lists: only what the plugins read, with its types and sizes checked.

A node list is mostly managedFields, annotations and status; a pod list mostly
spec and status: msgspec skips all that without building objects for it.
First each item is only located (one small object for its place in the body),
so a list longer than the caller allows is refused before anything is built
from its items; then each item is decoded into the fields the plugins read,
label and annotation maps kept as their bytes until they are needed (only
the victims' among a node's pods) and read only up to MAX_MAP_BYTES each
(Kubernetes' own limit for an object's annotations). So a list of any shape
costs a small multiple of its size at most. An item without a name (node) or
UID (pod), or a field of another type, makes the whole list an error naming
where, never half-used.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Collection
from typing import Annotated, Any, NamedTuple, TypeVar

import msgspec

from extender.framework.types import Pod
from extender.kube.demand import PodDemand, Resources, resources

# Largest label or annotation map read from one object, in bytes of JSON: Kubernetes refuses more annotations.
MAX_MAP_BYTES = 256 * 1024

_NULL = msgspec.Raw(b"null")
_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
# Name and labels of one node.
NodeFacts = tuple[str, dict[str, str]]
Item = TypeVar("Item")


class TooLong(Exception):
    """More items than the caller allows; ``count`` is how many there are."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


# Not tracked by the garbage collector: they hold strings and bytes, never cycles.
class _ListMetadata(msgspec.Struct, gc=False):
    resourceVersion: str | None = None
    continue_: str | None = msgspec.field(name="continue", default=None)


class _NodeMetadata(msgspec.Struct, gc=False):
    name: _NonEmpty
    labels: msgspec.Raw = _NULL


class _Node(msgspec.Struct, gc=False):
    metadata: _NodeMetadata


class _NodePage(msgspec.Struct, gc=False):
    metadata: _ListMetadata | None = None
    items: list[msgspec.Raw] | None = None


class _PodMetadata(msgspec.Struct, gc=False):
    uid: _NonEmpty
    name: msgspec.Raw = _NULL
    namespace: msgspec.Raw = _NULL
    labels: msgspec.Raw = _NULL
    annotations: msgspec.Raw = _NULL


class _PodSpec(msgspec.Struct, gc=False):
    priority: msgspec.Raw = _NULL


class _Pod(msgspec.Struct, gc=False):
    metadata: _PodMetadata
    spec: _PodSpec | None = None


class _PodPage(msgspec.Struct, gc=False):
    items: list[msgspec.Raw] | None = None


_node_page = msgspec.json.Decoder(_NodePage).decode
_node = msgspec.json.Decoder(_Node).decode
_pod_page = msgspec.json.Decoder(_PodPage).decode
_pod = msgspec.json.Decoder(_Pod).decode
_map = msgspec.json.Decoder(dict[str, str] | None).decode
_text = msgspec.json.Decoder(str | None).decode
_priority = msgspec.json.Decoder(int | None).decode


def decode_node_page(body: bytes | bytearray, max_items: int) -> tuple[list[NodeFacts], str | None]:
    """The page's nodes and its continue token (None on the last page).

    msgspec.DecodeError for any other shape, TooLong for more than ``max_items`` nodes.
    """
    page = _node_page(body)
    nodes = []
    for node in _items(page.items, _node, max_items):
        nodes.append((node.metadata.name, _read_map(node.metadata.labels, "labels", f"node {node.metadata.name}")))
    return nodes, page.metadata.continue_ if page.metadata is not None else None


def decode_pods(body: bytes | bytearray, uids: Collection[str], max_items: int) -> dict[str, Pod]:
    """UID -> Pod (as the wire schema loads one) for the listed pods among ``uids``.

    msgspec.DecodeError for any other shape, TooLong for more than ``max_items`` pods.
    """
    items = _items(_pod_page(body).items, _pod, max_items)
    return {pod.metadata.uid: _as_pod(pod) for pod in items if pod.metadata.uid in uids}


def _items(raws: list[msgspec.Raw] | None, decode: Callable[[msgspec.Raw], Item], max_items: int) -> list[Item]:
    """Each item decoded, once they are known to be no more than ``max_items``: a list of millions of tiny items
    costs one small object each (its place in the body), not the several its fields would."""
    if raws is None:
        return []
    if len(raws) > max_items:
        raise TooLong(len(raws))
    items = []
    for index, raw in enumerate(raws):
        try:
            items.append(decode(raw))
        except msgspec.DecodeError as exc:
            raise msgspec.ValidationError(f"items[{index}]: {exc}") from None
    return items


def _as_pod(item: _Pod) -> Pod:
    meta = item.metadata
    owner = f"pod {meta.uid}"
    try:
        name, namespace = _text(meta.name) or "", _text(meta.namespace) or ""
        priority = _priority(item.spec.priority) if item.spec is not None else None
    except msgspec.DecodeError as exc:
        raise msgspec.ValidationError(f"{owner}: {exc}") from None
    labels = _read_map(meta.labels, "labels", owner)
    return Pod(meta.uid, name, namespace, labels, _read_map(meta.annotations, "annotations", owner), priority)


def _read_map(raw: msgspec.Raw, what: str, owner: str) -> dict[str, str]:
    """A label or annotation map (null reads as empty) of at most MAX_MAP_BYTES."""
    if len(raw) > MAX_MAP_BYTES:
        raise msgspec.ValidationError(f"the {what} of {owner} take more than {MAX_MAP_BYTES} bytes")
    try:
        return _map(raw) or {}
    except msgspec.DecodeError as exc:
        raise msgspec.ValidationError(f"the {what} of {owner}: {exc}") from None


# --- Pods bound to nodes, for load estimates --------------------------------------------------------------------------


class BoundPod(NamedTuple):
    """A pod on a node, as far as what it will use there is concerned."""

    uid: str
    node: str
    # When it was bound (Unix seconds): its PodScheduled condition's lastTransitionTime, which the API server sets
    # when it binds; a pod that never went through binding (created with spec.nodeName) was bound when created.
    bound_at: float
    demand: PodDemand
    # Succeeded or Failed: it uses nothing any more.
    finished: bool = False


class _Quantities(msgspec.Struct, gc=False):
    requests: dict[str, str | int | float] | None = None
    limits: dict[str, str | int | float] | None = None


class _Container(msgspec.Struct, gc=False):
    resources: _Quantities | None = None
    restartPolicy: str | None = None


class _BoundSpec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None
    overhead: dict[str, str | int | float] | None = None


class _Condition(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    lastTransitionTime: datetime.datetime | None = None


class _BoundStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    conditions: list[_Condition] | None = None


class _BoundMetadata(msgspec.Struct, gc=False):
    uid: _NonEmpty
    creationTimestamp: datetime.datetime | None = None
    resourceVersion: str | None = None


class _BoundPodItem(msgspec.Struct, gc=False):
    metadata: _BoundMetadata
    spec: _BoundSpec | None = None
    status: _BoundStatus | None = None


class _BoundPage(msgspec.Struct, gc=False):
    metadata: _ListMetadata | None = None
    items: list[msgspec.Raw] | None = None


class _Event(msgspec.Struct, gc=False):
    type: str
    object: msgspec.Raw = _NULL


class _EventStatus(msgspec.Struct, gc=False):
    code: int | None = None
    message: str | None = None
    reason: str | None = None


class _Versioned(msgspec.Struct, gc=False):
    metadata: _ListMetadata | None = None


_bound_page = msgspec.json.Decoder(_BoundPage).decode
_bound_pod = msgspec.json.Decoder(_BoundPodItem).decode
_event = msgspec.json.Decoder(_Event).decode
_event_status = msgspec.json.Decoder(_EventStatus).decode
_versioned = msgspec.json.Decoder(_Versioned).decode


def decode_bound_pod_page(body: bytes | bytearray, max_items: int) -> tuple[list[BoundPod], str, str | None]:
    """The bound pods of a list page, the list's resourceVersion and its continue token (None on the last page).

    msgspec.DecodeError for any other shape, TooLong for more than ``max_items`` pods. A pod without a node is left
    out (the field selector asks for bound pods only).
    """
    page = _bound_page(body)
    pods = [pod for pod in map(_bound, _items(page.items, _bound_pod, max_items)) if pod is not None]
    metadata = page.metadata or _ListMetadata()
    return pods, metadata.resourceVersion or "", metadata.continue_ or None


class WatchEvent(NamedTuple):
    """One line of a watch: ADDED, MODIFIED, DELETED with the pod (None if it has no node), BOOKMARK, or ERROR with the
    Status's code and message."""

    kind: str
    pod: BoundPod | None = None
    resource_version: str = ""
    code: int = 0
    message: str = ""


def decode_watch_event(line: bytes | bytearray) -> WatchEvent:
    """One watch event (a JSON line); msgspec.DecodeError when it is not one."""
    event = _event(line)
    if event.type == "ERROR":
        status = _event_status(event.object)
        return WatchEvent("ERROR", code=status.code or 0, message=status.message or status.reason or "")
    if event.type == "BOOKMARK":
        metadata = _versioned(event.object).metadata
        return WatchEvent("BOOKMARK", resource_version=(metadata.resourceVersion or "") if metadata else "")
    item = _bound_pod(event.object)
    return WatchEvent(event.type, _bound(item), item.metadata.resourceVersion or "")


def _bound(item: _BoundPodItem) -> BoundPod | None:
    spec = item.spec
    if spec is None or not spec.nodeName:
        return None
    status = item.status
    conditions = status.conditions if status is not None and status.conditions else []
    bound_at = next(
        (
            condition.lastTransitionTime
            for condition in conditions
            if condition.type == "PodScheduled" and condition.status == "True" and condition.lastTransitionTime
        ),
        item.metadata.creationTimestamp,
    )
    demand = PodDemand(
        tuple(_resources(container) for container in spec.containers or ()),
        tuple((_resources(container), container.restartPolicy == "Always") for container in spec.initContainers or ()),
        resources(spec.overhead, None) if spec.overhead else Resources(),
    )
    finished = status is not None and status.phase in ("Succeeded", "Failed")
    return BoundPod(item.metadata.uid, spec.nodeName, bound_at.timestamp() if bound_at else 0.0, demand, finished)


def _resources(container: _Container) -> Resources:
    given = container.resources
    return resources(given.requests, given.limits) if given is not None else Resources()


# --- Nodes' allocatable resources -------------------------------------------------------------------------------------


class _NodeStatus(msgspec.Struct, gc=False):
    allocatable: dict[str, str | int | float] | None = None


class _AllocatableNode(msgspec.Struct, gc=False):
    metadata: _NodeMetadata
    status: _NodeStatus | None = None


class _AllocatablePage(msgspec.Struct, gc=False):
    metadata: _ListMetadata | None = None
    items: list[msgspec.Raw] | None = None


_allocatable_page = msgspec.json.Decoder(_AllocatablePage).decode
_allocatable_node = msgspec.json.Decoder(_AllocatableNode).decode


def decode_allocatable_page(body: bytes | bytearray, max_items: int) -> tuple[dict[str, Resources], str | None]:
    """Each node's allocatable CPU and memory (as a Resources' requests) and the page's continue token."""
    page = _allocatable_page(body)
    found: dict[str, Resources] = {}
    for node in _items(page.items, _allocatable_node, max_items):
        allocatable: Any = node.status.allocatable if node.status is not None else None
        found[node.metadata.name] = resources(allocatable, None)
    return found, page.metadata.continue_ if page.metadata is not None else None
