"""The fast decoder of ExtenderArgs bodies: only what the schemas read is decoded (``extender.wire.decode``).

A full-node request carries ~18.6 kB per node, nearly all of it
``managedFields`` and ``status.images`` that no plugin reads. Decoding all of
it into Python objects (and having the garbage collector walk them) costs
more than the rest of a filter call together, and memory several times the
body. Here msgspec finds each node's bytes without building objects for
them; only the Pod, NodeNames and each node's ``metadata.name`` and
``metadata.labels`` are decoded, by orjson exactly as the full decoder does.
Node objects travel on as their original bytes and are echoed byte-for-byte;
a node whose bytes were decoded before is taken as it was then
(``extender.wire.kept_nodes``).
A body with no node objects (a node-name request) has nothing to skip: the
full decoder reads it quicker than this path would in parts.

Anything unusual (a shape the schemas would reject, bytes that are not
UTF-8, nesting or node counts over the limits, a node over ``PART_BYTES``,
or more to build than the request can afford) returns None: the full decoder
and the schemas then answer it with their usual messages. What this path
accepts differs from the full decoder in two respects only: a number in a
node field nothing reads is checked for syntax, not for fitting a float64;
and a body too costly for the full decoder to build whole (its limit counts
every value, this path builds the few it reads) is answered here.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import msgspec
import orjson

from extender.wire.decode_cost import Meter
from extender.wire.kept_nodes import KeptNodes
from extender.wire.limits import MAX_DEPTH, MAX_NODES, PART_BYTES, RENDER_BYTES_PER_BYTE, WORST_BYTES_PER_BYTE
from extender.wire.nesting import deeper_than
from extender.wire.schemas import EncodedNode

_NULL = msgspec.Raw(b"null")


class Metadata(msgspec.Struct):
    name: msgspec.Raw = _NULL
    labels: msgspec.Raw = _NULL


class Status(msgspec.Struct):
    allocatable: msgspec.Raw = _NULL


class NodeFacts(msgspec.Struct):
    metadata: Metadata | None = None
    # Read only for its allocatable resources, in the same pass, and only when it is an object: nothing else reads a
    # node's status, so any other JSON value is taken as it is.
    status: Status | list[msgspec.Raw] | str | int | float | bool | None = None


# Unknown fields are left to the full decoder: every part of the body is measured for depth, and these are all.
class _NodeList(msgspec.Struct, forbid_unknown_fields=True):
    metadata: msgspec.Raw = _NULL
    items: list[msgspec.Raw] | None = None


class _Args(msgspec.Struct, forbid_unknown_fields=True):
    Pod: msgspec.Raw = _NULL
    Nodes: _NodeList | None = None
    NodeNames: msgspec.Raw = _NULL
    # Preemption fields have no place here, but the full decoder counts their nodes against the limit too.
    NodeNameToVictims: msgspec.Raw = _NULL
    NodeNameToMetaVictims: msgspec.Raw = _NULL


_decode_args = msgspec.json.Decoder(_Args).decode
_decode_node = msgspec.json.Decoder(NodeFacts).decode
# UnicodeDecodeError: msgspec quotes an unknown field's name in its message, and that name may not be UTF-8.
NOT_FAST = (msgspec.DecodeError, msgspec.ValidationError, orjson.JSONDecodeError, RecursionError, UnicodeDecodeError)


def decode_extender_args(
    body: bytes | bytearray, kept: KeptNodes | None = None, meter: Meter | None = None
) -> dict[str, Any] | None:
    """The payload ``ExtenderArgsSchema`` loads, with ``EncodedNode`` items; None if the full decoder must look.

    Nodes whose bytes ``kept`` holds are taken from it; those decoded here are added to it. ``meter``
    (``extender.wire.decode_cost``; none: unlimited) has afforded a Raw per node item; here it affords what is built
    beyond: what the pod, node names and the node list's metadata decode to (at most ``WORST_BYTES_PER_BYTE`` per
    byte; their depth is measured on the objects), then for the nodes not kept each one's indented rendering, to
    measure its depth (at most ``RENDER_BYTES_PER_BYTE`` times the largest), and what its name and labels decode to.
    """
    meter = meter if meter is not None else Meter(sys.maxsize)
    try:
        args = _decode_args(body)
        if args.Nodes is None:  # no node objects to skip: the full decoder is quicker than decoding in parts
            return None
        if args.NodeNameToVictims != _NULL or args.NodeNameToMetaVictims != _NULL:
            return None
        encoded = args.Nodes.items
        if encoded is not None and len(encoded) > MAX_NODES:
            return None
        # Outside the parts and the nodes there are only the known keys and JSON's punctuation, which msgspec has
        # checked.
        parts = (args.Pod, args.NodeNames, args.Nodes.metadata)
        decoded = sum(map(len, parts))
        if not all(valid_utf8(bytes(raw)) for raw in parts) or not meter.afford_more(WORST_BYTES_PER_BYTE * decoded):
            return None
        meter.built(WORST_BYTES_PER_BYTE * decoded)
        pod, names, list_metadata = map(loads_raw, parts)
        # Levels above each part: the request {}, and Nodes {} above the node list's metadata.
        if any(deeper_than(part, MAX_DEPTH - above) for part, above in ((pod, 1), (names, 1), (list_metadata, 2))):
            return None
        if isinstance(names, (list, dict)) and len(names) > MAX_NODES:
            return None
        nodes = None if encoded is None else _nodes(encoded, kept, meter)
        if encoded is not None and nodes is None:
            return None
        return {"Pod": pod, "NodeNames": names, "Nodes": {"items": nodes}}
    except NOT_FAST:
        return None


def _nodes(items: list[msgspec.Raw], kept: KeptNodes | None, meter: Meter) -> list[EncodedNode] | None:
    """Each item decoded, or taken from ``kept`` by its bytes; None when one is not UTF-8, nests deeper than the
    limit allows, is over ``PART_BYTES`` or more than ``meter`` affords (the full decoder then answers)."""
    nodes: list[EncodedNode | None] = list(map(kept.get, items)) if kept is not None else [None] * len(items)
    if None not in nodes:
        return nodes  # type: ignore[return-value]  # no None in it, as just checked
    unknown = [raw for raw, node in zip(items, nodes, strict=True) if node is None]
    largest = max(map(len, unknown))
    if largest > PART_BYTES or not meter.afford_more(RENDER_BYTES_PER_BYTE * largest):
        return None
    decoding = _Decoding(meter, sum(map(len, unknown)))
    fresh = []
    for index, node in enumerate(nodes):
        if node is None:
            encoded = bytes(items[index])
            node = decoding.node(items[index], encoded)
            if node is None:
                return None
            nodes[index] = node
            fresh.append((encoded, node))
    if kept is not None:
        kept.keep(fresh)
    return nodes  # type: ignore[return-value]  # each None was replaced by its node, or None returned


class _Decoding:
    """Nodes decoded one by one, what their names and labels decode to afforded beforehand in batches (one charge
    per ``_BATCH_BYTES`` of them, not per node) and counted as built as they are."""

    __slots__ = ("afforded", "meter", "spent", "unread")

    def __init__(self, meter: Meter, size: int) -> None:
        self.meter = meter
        self.afforded = self.spent = 0
        # Bytes of nodes not decoded yet: their names and labels are no more.
        self.unread = size

    def node(self, raw: msgspec.Raw, encoded: bytes) -> EncodedNode | None:
        """None when the node is not UTF-8, nests deeper than the limit allows (it sits 3 levels down: the request
        {}, Nodes {}, items []) or its name and labels cannot be afforded."""
        if not valid_utf8(encoded) or not _within_depth(raw, MAX_DEPTH - 3):
            return None
        decoded = _decode_node(raw)
        metadata = decoded.metadata
        status = decoded.status if isinstance(decoded.status, Status) else None
        size = 0 if metadata is None else len(metadata.name) + len(metadata.labels)
        size += 0 if status is None else len(status.allocatable)
        self.unread -= len(raw)
        if self.spent + size > self.afforded:
            grant = size + min(_BATCH_BYTES, self.unread)
            if not self.meter.afford_more(WORST_BYTES_PER_BYTE * grant):
                return None
            self.afforded += grant
        self.meter.built(WORST_BYTES_PER_BYTE * size)
        self.spent += size
        return EncodedNode(facts(metadata, status), orjson.Fragment(encoded))


# Bytes of node names and labels afforded at a time.
_BATCH_BYTES = 256 * 1024


def facts(metadata: Metadata | None, status: Status | None = None) -> dict[str, Any]:
    """What NodeSchema reads of a node: its name and labels, and its allocatable resources, decoded by orjson as the
    full decoder would."""
    read: dict[str, Any] = {}
    if metadata is not None:
        read["metadata"] = {"name": loads_raw(metadata.name), "labels": loads_raw(metadata.labels)}
    if status is not None and status.allocatable != _NULL:
        read["status"] = {"allocatable": loads_raw(status.allocatable)}
    return read


def loads_raw(raw: msgspec.Raw) -> Any:
    return orjson.loads(memoryview(raw))


def valid_utf8(body: bytes | bytearray) -> bool:
    """msgspec does not check the UTF-8 of strings it skips; orjson would refuse invalid UTF-8 anywhere."""
    if body.isascii():
        return True
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# A JSON string, to find where a key ends on the rare line that needs a closer look.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def _within_depth(value: msgspec.Raw, limit: int) -> bool:
    """Whether no container in ``value`` sits deeper than ``limit`` levels, without building the document.

    Formatted with one space of indent per level, the members of a container
    at level L start L spaces in: a container deeper than ``limit`` is a
    ``{``/``[`` (or a key whose value opens one) starting ``limit`` spaces
    in, or makes some line start further in. The body is measured node by
    node: one node's rendering at a time fits the heap, the whole body's
    (1.4 times its size) would be fresh pages for every request. A rendering
    grows with the depth of each value (a hostile node at ~1000 levels
    renders hundreds of times its size): its cost is afforded first.
    """
    formatted = msgspec.json.format(value, indent=1)
    margin = b"\n" + b" " * limit
    at = formatted.find(margin)
    while at != -1:
        start = at + len(margin)
        first = formatted[start : start + 1]
        if first in (b" ", b"{", b"["):
            return False
        if first == b'"':
            string = _STRING.match(formatted, start)
            if string is not None and formatted[string.end() : string.end() + 3] in (b": {", b": ["):
                return False
        at = formatted.find(margin, start)
    return True
