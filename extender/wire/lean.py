"""Decode an ExtenderArgs body reading only what the schemas read.

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
UTF-8, nesting or node counts over the limits) returns None: the full decoder
and the schemas then answer it with their usual messages. What this path
accepts differs from the full decoder in one respect only: a number in a
node field nothing reads is checked for syntax, not for fitting a float64.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import orjson

from extender.body import MAX_DEPTH, MAX_NODES
from extender.wire.schemas import EncodedNode

_NULL = msgspec.Raw(b"null")


class _Metadata(msgspec.Struct):
    name: msgspec.Raw = _NULL
    labels: msgspec.Raw = _NULL


class _Node(msgspec.Struct):
    metadata: _Metadata | None = None


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


class _ListMetadata(msgspec.Struct):
    continue_: msgspec.Raw = msgspec.field(name="continue", default=_NULL)


class _NodeListPage(msgspec.Struct):
    metadata: _ListMetadata | None = None
    items: list[_Node] | None = None


_decode_args = msgspec.json.Decoder(_Args).decode
_decode_node = msgspec.json.Decoder(_Node).decode
_decode_node_list = msgspec.json.Decoder(_NodeListPage).decode
# UnicodeDecodeError: msgspec quotes an unknown field's name in its message, and that name may not be UTF-8.
_NOT_LEAN = (msgspec.DecodeError, msgspec.ValidationError, orjson.JSONDecodeError, RecursionError, UnicodeDecodeError)


def decode_extender_args(body: bytes) -> dict[str, Any] | None:
    """The payload ``ExtenderArgsSchema`` loads, with ``EncodedNode`` items; None if the full decoder must look."""
    try:
        args = _decode_args(body)
        if args.Nodes is None:  # no node objects to skip: the full decoder is quicker than decoding in parts
            return None
        if args.NodeNameToVictims != _NULL or args.NodeNameToMetaVictims != _NULL:
            return None
        encoded = args.Nodes.items
        if encoded is not None and len(encoded) > MAX_NODES:
            return None
        # Levels above each part: the request {}, then Nodes {}, then items [].
        parts = ((args.Pod, 1), (args.NodeNames, 1), (args.Nodes.metadata, 2))
        if not _valid_text(body) or not all(_within_depth(raw, MAX_DEPTH - above) for raw, above in parts):
            return None
        payload: dict[str, Any] = {"Pod": _loads(args.Pod), "NodeNames": _loads(args.NodeNames)}
        names = payload["NodeNames"]
        if isinstance(names, (list, dict)) and len(names) > MAX_NODES:
            return None
        nodes = None if encoded is None else [_node(raw) for raw in encoded]
        if nodes is not None and None in nodes:
            return None
        payload["Nodes"] = {"items": nodes}
        return payload
    except _NOT_LEAN:
        return None


def decode_node_list(body: bytes) -> dict[str, Any] | None:
    """A page of the API server's node list, with only each node's name and labels; None to leave it to orjson.

    A 5000-node cluster lists ~45 MB of metadata (managedFields, annotations):
    decoding only names and labels takes a fraction of the time and memory.
    """
    try:
        page = _decode_node_list(body)
        if not _valid_text(body):
            return None
        items = None if page.items is None else [_facts(node.metadata) for node in page.items]
        listed = None if page.metadata is None else {"continue": _loads(page.metadata.continue_)}
        return {"metadata": listed, "items": items}
    except _NOT_LEAN:
        return None


def _node(raw: msgspec.Raw) -> EncodedNode | None:
    """None when the node nests deeper than the limit allows (it sits 3 levels down)."""
    if not _within_depth(raw, MAX_DEPTH - 3):
        return None
    return EncodedNode(_facts(_decode_node(raw).metadata), orjson.Fragment(bytes(raw)))


def _facts(metadata: _Metadata | None) -> dict[str, Any]:
    return {} if metadata is None else {"metadata": {"name": _loads(metadata.name), "labels": _loads(metadata.labels)}}


def _loads(raw: msgspec.Raw) -> Any:
    return orjson.loads(memoryview(raw))


def _valid_text(body: bytes) -> bool:
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
    in, or makes some line start further in. The body is measured part by
    part: one node's rendering at a time fits the heap, the whole body's
    (1.4 times its size) would be fresh pages for every request.
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
