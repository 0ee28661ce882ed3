"""The floor: an empty WSGI handler under the same gunicorn, reading the body and answering ``{}``.

Whatever it costs (HTTP parsing, moving the body over loopback) no extender
served this way can avoid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]
