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

from collections.abc import Callable, Collection
from typing import Annotated, TypeVar

import msgspec

from extender.framework.types import Pod

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
