"""Read a request body within the limits; ``extender.wire.decode`` turns it into a payload.

The scheduler sends compact, uncompressed JSON with ``Content-Type:
application/json``; anything else is answered with a 4xx that says what was
wrong. The limits bound the work one request can cause before any schema
looks at it: bytes (413, by the declared length before reading) and time (408)
here, nesting depth (400) and node count (413) in the decoder (``extender.wire.decode``).
"""

from __future__ import annotations

import io
import socket
from typing import IO

from flask import Request, Response
from werkzeug.exceptions import ClientDisconnected

from extender import read_deadline
from extender.errors import RequestError
from extender.http.body_budget import Holding

# The body is read, and charged to the budget, a piece of this size at a time. gunicorn (functions-framework's
# server) receives up to 1 MiB per recv() and copies what it holds beyond each read's size: smaller pieces would
# copy the rest of every MiB received again for each piece taken out of it.
_PIECE = 1 << 20
# Set in the WSGI environ once the whole body was read: the connection can serve the next request.
_COMPLETE = "extender.body_complete"
# The body's stream, in the WSGI environ, when the answer goes out with the body unread.
_UNREAD = "extender.unread_body"
# What of an unread body is taken in after the answer, so that the connection can serve the next request.
_DRAIN_BYTES = 1 << 16
_DRAIN_SECONDS = 0.5


def check_headers(request: Request, max_bytes: int) -> None:
    """What can be refused before a byte of the body is read: its type, encoding and declared size."""
    if request.mimetype != "application/json":
        got = request.content_type or "none"
        raise RequestError(415, f"Content-Type must be application/json, got {got}")
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        # kube-scheduler never compresses requests; inflating them would only invite decompression bombs.
        raise RequestError(415, f"Content-Encoding {encoding!r} is not supported: send the JSON uncompressed")
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        raise RequestError(413, _too_large(max_bytes, f"{declared} bytes declared"))


def read_body(request: Request, max_bytes: int, seconds: float, holding: Holding) -> bytearray:
    """The whole body, charged to ``holding`` as it arrives, within ``seconds``.

    Each piece is appended to one buffer as it comes and freed at once: the
    body is never held twice, and the buffer grows with the bytes received,
    as the budget is charged (a declared length that never arrives holds
    nothing). Above glibc's mmap threshold (``extender.http.memory``) the buffer
    grows by remapping, without copying.

    A body cut off, with broken chunked framing, or not complete in time is a
    4xx naming the problem: the client's fault, never a server error.
    """
    sock = _socket(request)
    alarm = read_deadline.arm(sock, seconds) if sock is not None else None
    body = bytearray()
    size = 0
    failure: Exception | None = None
    try:
        while piece := request.stream.read(_PIECE):
            size += len(piece)
            if size > max_bytes:
                raise RequestError(413, _too_large(max_bytes, f"more than {max_bytes} bytes sent"))
            holding.take(len(piece))
            body += piece
    except _transport_errors(RequestError) as exc:
        failure = exc
    if alarm is not None and read_deadline.disarm(alarm):
        raise _too_slow(seconds, size)
    if isinstance(failure, RequestError):
        raise failure
    if failure is not None:
        raise RequestError(400, f"broken upload after {size} bytes: {type(failure).__name__}: {failure}")
    declared = request.content_length
    if declared is not None and size != declared:
        raise RequestError(400, f"broken upload: the body ended after {size} of the {declared} bytes declared")
    request.environ[_COMPLETE] = True
    if not size:
        raise RequestError(400, "empty body: expected a JSON object")
    return body


def finish_body(request: Request) -> None:
    """Read nothing more of a body left unread until the answer is out; never raises.

    functions-framework reads whatever is left of the body after the answer,
    whatever its size and however slowly it comes; an answer given before the
    body (404, 405, 413, 415, a budget, deadline or framing error) must not
    wait for it. So the request's stream is replaced by an empty one, and
    ``hang_up_after`` deals with the rest once the answer is sent.
    """
    if request.environ.get(_COMPLETE) or not _has_body(request):
        return
    request.environ[_UNREAD] = request.stream
    request.stream = io.BytesIO()


def hang_up_after(request: Request, response: Response) -> None:
    """After ``response`` is sent, take in what is left of an unread body, or close the connection.

    A client that sent its whole body at once (a keep-alive client such as
    kube-scheduler) keeps its connection: the rest arrives within moments and
    the next request starts where it ends. A body larger than a little, slower
    than a moment, or broken ends the connection instead: where the next
    request would start is unknown, and waiting for it would hold a thread.
    """
    sock = _socket(request)
    unread = request.environ.get(_UNREAD)
    if sock is not None and unread is not None:
        response.call_on_close(lambda: _drain_or_hang_up(sock, unread))


def _drain_or_hang_up(sock: socket.socket, stream: IO[bytes]) -> None:
    alarm = read_deadline.arm(sock, _DRAIN_SECONDS)
    drained = 0
    ended = False
    try:
        while drained <= _DRAIN_BYTES and not ended:
            piece = stream.read(_DRAIN_BYTES)
            drained += len(piece)
            ended = not piece
    except _transport_errors():  # the connection is done for
        ended = False
    if read_deadline.disarm(alarm) or not ended:
        read_deadline.hang_up(sock)


def _transport_errors(*also: type[Exception]) -> tuple[type[Exception], ...]:
    """``also``, and what reading a body from the client can raise: a reset, a timeout or gunicorn's end of data
    (OSError), werkzeug's body cut short of its Content-Length, gunicorn's refusal of its framing (a chunk size, a
    missing CRLF). Looked up only when a read fails: gunicorn is imported once it serves, and absent where it cannot."""
    try:
        from gunicorn.http.errors import ParseException
    except ImportError:
        return (*also, OSError, ClientDisconnected)
    return (*also, OSError, ClientDisconnected, ParseException)


def _has_body(request: Request) -> bool:
    return bool(request.content_length) or "chunked" in request.headers.get("Transfer-Encoding", "").lower()


def _socket(request: Request) -> socket.socket | None:
    """The client connection under gunicorn (functions-framework's server) or werkzeug's development server."""
    sock = request.environ.get("gunicorn.socket") or request.environ.get("werkzeug.socket")
    return sock if isinstance(sock, socket.socket) else None


def _too_slow(seconds: float, size: int) -> RequestError:
    return RequestError(
        408, f"body not received within {seconds:g} s (EXTENDER_HTTP_TIMEOUT): {size} bytes arrived in that time"
    )


def _too_large(limit: int, got: str) -> str:
    return f"body too large: {got}, over the {limit}-byte limit (EXTENDER_MAX_BODY_BYTES)"
