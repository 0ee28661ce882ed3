"""Read a request body within the limits and decode its JSON.

The scheduler sends compact, uncompressed JSON with ``Content-Type:
application/json``; anything else is answered with a 4xx that says what was
wrong. The limits bound the work one request can cause before any schema
looks at it: bytes (413) here, nesting depth (400) and node count (413) in
the decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Request

from extender.errors import RequestError

_CHUNK = 1 << 16


def read_json(request: Request, max_bytes: int, decode: Callable[[bytes], Any]) -> Any:
    """The body, decoded by ``decode`` (``extender.wire.decode``: JSON within the nesting and node count limits)."""
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
    return decode(body)


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
