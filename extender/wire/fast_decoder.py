"""The fast decoder of ExtenderArgs bodies: only what the schemas read is decoded (``extender.wire.decode``).

A full-node request carries ~18.6 kB per node, nearly all of it
``managedFields`` and ``status.images`` that no plugin reads. Decoding all of
it into Python objects (and having the garbage collector walk them) costs
more than the rest of a filter call together, and memory several times the
body. Here msgspec finds each node's bytes without building objects for
them; only the Pod, NodeNames and each node's ``metadata.name`` and
``metadata.labels`` are decoded, by orjson exactly as the full decoder does.
Node objects travel on as their original bytes and are echoed byte-for-byte.
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
from extender.wire.limits import MAX_DEPTH, MAX_NODES, PART_BYTES, RENDER_BYTES_PER_BYTE, WORST_BYTES_PER_BYTE
from extender.wire.nesting import deeper_than
from extender.wire.schemas import EncodedNode

_NULL = msgspec.Raw(b"null")


class Metadata(msgspec.Struct):
    name: msgspec.Raw = _NULL
    labels: msgspec.Raw = _NULL


class NodeFacts(msgspec.Struct):
    metadata: Metadata | None = None


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


def decode_extender_args(body: bytes | bytearray, meter: Meter | None = None) -> dict[str, Any] | None:
    """The payload ``ExtenderArgsSchema`` loads, with ``EncodedNode`` items; None if the full decoder must look.

    ``meter`` (``extender.wire.decode_cost``; none: unlimited) has afforded a Raw per node item; here it affords
    what is built beyond: each node's indented rendering, to measure its depth (at most ``RENDER_BYTES_PER_BYTE``
    times the largest), then what is decoded (the pod, node names, the node list's metadata, each node's name and
    labels: at most ``WORST_BYTES_PER_BYTE`` per byte), whose depth is measured on the objects.
    """
    meter = meter if meter is not None else Meter(sys.maxsize)
    try:
        args = _decode_args(body)
        if args.Nodes is None:  # no node objects to skip: the full decoder is quicker than decoding in parts
            return None
        if args.NodeNameToVictims != _NULL or args.NodeNameToMetaVictims != _NULL:
            return None
        encoded = args.Nodes.items or []
        if len(encoded) > MAX_NODES or not valid_utf8(body):
            return None
        largest = max(map(len, encoded), default=0)
        if largest > PART_BYTES or not meter.afford_more(RENDER_BYTES_PER_BYTE * largest):
            return None
        parts = len(args.Pod) + len(args.NodeNames) + len(args.Nodes.metadata)
        if not meter.afford_more(WORST_BYTES_PER_BYTE * parts):
            return None
        meter.built(WORST_BYTES_PER_BYTE * parts)
        pod, names, list_metadata = loads_raw(args.Pod), loads_raw(args.NodeNames), loads_raw(args.Nodes.metadata)
        # Levels above: the request {}, and Nodes {} above the node list's metadata.
        if any(deeper_than(part, MAX_DEPTH - above) for part, above in ((pod, 1), (names, 1), (list_metadata, 2))):
            return None
        if isinstance(names, (list, dict)) and len(names) > MAX_NODES:
            return None
        nodes = _EncodedNodes(meter, sum(map(len, encoded)))
        for raw in encoded:
            # Levels above each node: the request {}, then Nodes {}, then items [].
            if not _within_depth(raw, MAX_DEPTH - 3) or not nodes.add(raw):
                return None
        return {"Pod": pod, "NodeNames": names, "Nodes": {"items": None if args.Nodes.items is None else nodes.items}}
    except NOT_FAST:
        return None


class _EncodedNodes:
    """Nodes as ``EncodedNode`` items, what their names and labels decode to afforded beforehand, in batches (one
    charge per ``_BATCH_BYTES`` of them, not per node), and counted as built as they are."""

    __slots__ = ("afforded", "items", "meter", "spent", "unread")

    def __init__(self, meter: Meter, size: int) -> None:
        self.meter = meter
        self.items: list[EncodedNode] = []
        self.afforded = self.spent = 0
        # Bytes of nodes not added yet: their names and labels are no more.
        self.unread = size

    def add(self, raw: msgspec.Raw) -> bool:
        """False if the node's name and labels cannot be afforded."""
        metadata = _decode_node(raw).metadata
        size = 0 if metadata is None else len(metadata.name) + len(metadata.labels)
        self.unread -= len(raw)
        if self.spent + size > self.afforded:
            grant = size + min(_BATCH_BYTES, self.unread)
            if not self.meter.afford_more(WORST_BYTES_PER_BYTE * grant):
                return False
            self.afforded += grant
        self.meter.built(WORST_BYTES_PER_BYTE * size)
        self.spent += size
        self.items.append(EncodedNode(facts(metadata), orjson.Fragment(bytes(raw))))
        return True


# Bytes of node names and labels afforded at a time.
_BATCH_BYTES = 256 * 1024


def facts(metadata: Metadata | None) -> dict[str, Any]:
    """What NodeSchema reads of a node: its name and labels, decoded by orjson as the full decoder would."""
    if metadata is None:
        return {}
    return {"metadata": {"name": loads_raw(metadata.name), "labels": loads_raw(metadata.labels)}}


def loads_raw(raw: msgspec.Raw) -> Any:
    return orjson.loads(memoryview(raw))


def valid_utf8(body: bytes | bytearray) -> bool:
    """msgspec does not check the UTF-8 of strings it skips; orjson would refuse invalid UTF-8."""
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
