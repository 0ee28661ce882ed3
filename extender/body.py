"""Read a request body within the size limit and decode its JSON.

The scheduler sends compact JSON with ``Content-Type: application/json``;
anything else is answered with a 4xx that says what was wrong.
"""

from __future__ import annotations

from typing import Any

import orjson
from flask import Request

from extender.errors import RequestError

_CHUNK = 1 << 16


def read_json(request: Request, max_bytes: int) -> Any:
    if request.mimetype != "application/json":
        got = request.content_type or "none"
        raise RequestError(415, f"Content-Type must be application/json, got {got}")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise RequestError(415, f"Content-Encoding {encoding!r} is not supported: send the JSON uncompressed")
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        _discard(request)
        raise RequestError(413, _too_large(max_bytes, f"{declared} bytes"))
    body = request.stream.read(max_bytes + 1)
    if len(body) > max_bytes:
        _discard(request)
        raise RequestError(413, _too_large(max_bytes, "more"))
    if not body:
        raise RequestError(400, "empty body: expected a JSON object")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestError(400, f"malformed JSON: {exc}") from None


def _too_large(limit: int, got: str) -> str:
    return f"body too large: {got} over the {limit}-byte limit (EXTENDER_MAX_BODY_BYTES)"


def _discard(request: Request) -> None:
    """Consume the rest of the body in small chunks: the framework reads it whole before answering otherwise."""
    while request.stream.read(_CHUNK):
        pass
