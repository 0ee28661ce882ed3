"""Decode a page of the API server's node list: only each node's name and labels.

A 5000-node cluster lists ~45 MB of metadata (managedFields, annotations):
decoding only names and labels (msgspec skipping the rest, orjson decoding
what is kept, as the fast request decoder does) takes a fraction of the time
and memory. Anything unusual is decoded whole by orjson.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from extender.wire.fast_decoder import NOT_FAST, NodeFacts, facts, loads_raw, valid_utf8


class _ListMetadata(msgspec.Struct):
    continue_: msgspec.Raw = msgspec.field(name="continue", default=msgspec.Raw(b"null"))


class _NodeListPage(msgspec.Struct):
    metadata: _ListMetadata | None = None
    items: list[NodeFacts] | None = None


_decode_page = msgspec.json.Decoder(_NodeListPage).decode


def decode_node_list(body: bytes) -> Any:
    """The page with each node reduced to its name and labels, or decoded whole when its shape is unusual."""
    return decode_names_and_labels(body) or orjson.loads(body)


def decode_names_and_labels(body: bytes) -> dict[str, Any] | None:
    """The page with only each node's name and labels; None to leave it to orjson."""
    try:
        page = _decode_page(body)
        if not valid_utf8(body):
            return None
        items = None if page.items is None else [facts(node.metadata) for node in page.items]
        listed = None if page.metadata is None else {"continue": loads_raw(page.metadata.continue_)}
        return {"metadata": listed, "items": items}
    except NOT_FAST:
        return None
