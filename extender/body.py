"""Read a request body within the limits and decode its JSON.

The scheduler sends compact, uncompressed JSON with ``Content-Type:
application/json``; anything else is answered with a 4xx that says what was
wrong. The limits bound the work one request can cause before any schema
looks at it: bytes (413), nesting depth (400) and node count (413).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from flask import Request

from extender.errors import RequestError

_CHUNK = 1 << 16

# Far deeper than Kubernetes objects nest (the recorded requests reach 15 levels), far below
# orjson's own limits (1024 to decode; 254 to encode the node objects a filter answer echoes).
MAX_DEPTH = 64
# Above the largest cluster GKE supports (65,000 nodes).
MAX_NODES = 65_536

_TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"
# What orjson decodes that holds nothing deeper.
_SCALARS = {str, int, float, bool, type(None)}


def read_json(request: Request, max_bytes: int, lean: Callable[[bytes], Any | None] | None = None) -> Any:
    """The decoded body; ``lean`` may decode it faster, returning None for anything it leaves to the full decoder."""
    if request.mimetype != "application/json":
        got = request.content_type or "none"
        raise RequestError(415, f"Content-Type must be application/json, got {got}")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        # kube-scheduler never compresses requests; inflating them would only invite decompression bombs.
        raise RequestError(415, f"Content-Encoding {encoding!r} is not supported: send the JSON uncompressed")
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        raise RequestError(413, _too_large(max_bytes, f"{declared} bytes"))
    body = request.stream.read(max_bytes + 1)
    if len(body) > max_bytes:
        raise RequestError(413, _too_large(max_bytes, "more"))
    if not body:
        raise RequestError(400, "empty body: expected a JSON object")
    if lean is not None and (payload := lean(body)) is not None:
        return payload
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        # orjson stops at its own depth limit before ours can look: same problem, same message.
        message = _TOO_DEEP if "depth limit" in str(exc) else f"malformed JSON: {exc}"
        raise RequestError(400, message) from None
    _check_depth(payload)
    _check_node_count(payload)
    return payload


def discard_body(request: Request) -> None:
    """Consume what is left of the body in small chunks.

    functions-framework reads the whole body into memory after the answer
    otherwise, whatever its size; an answer given before reading (404, 413,
    415) must not let a huge body through that way.
    """
    while request.stream.read(_CHUNK):
        pass


def _too_large(limit: int, got: str) -> str:
    return f"body too large: {got} over the {limit}-byte limit (EXTENDER_MAX_BODY_BYTES)"


def _check_depth(payload: Any) -> None:
    """Level by level, without recursion: a hostile document must not exhaust the stack."""
    level = [payload] if isinstance(payload, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise RequestError(400, _TOO_DEEP)
        deeper: list[Any] = []
        for container in level:
            if type(container) is list and set(map(type, container)) <= _SCALARS:
                continue  # thousands of node names: looked over at C speed
            for child in container.values() if type(container) is dict else container:
                if type(child) is dict or type(child) is list:
                    deeper.append(child)
        level = deeper


def _check_node_count(payload: Any) -> None:
    if not isinstance(payload, dict):
        return
    nodes = payload.get("Nodes")
    # Where ExtenderArgs and ExtenderPreemptionArgs carry nodes.
    carriers = {
        "Nodes.items": nodes.get("items") if isinstance(nodes, dict) else None,
        "NodeNames": payload.get("NodeNames"),
        "NodeNameToVictims": payload.get("NodeNameToVictims"),
        "NodeNameToMetaVictims": payload.get("NodeNameToMetaVictims"),
    }
    for field, carried in carriers.items():
        if isinstance(carried, (list, dict)) and len(carried) > MAX_NODES:
            raise RequestError(413, f"too many nodes: {len(carried)} in {field}, over the limit of {MAX_NODES}")
