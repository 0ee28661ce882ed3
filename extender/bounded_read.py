"""Reading an HTTP answer's body within a deadline and a size cap, whatever the server does.

A socket timeout bounds each ``recv``, not the read: a server dripping a byte
just inside it would hold the thread for as long as it likes, and one that
sends without end would fill memory. Past the deadline the connection's
reading side is shut down (``extender.http.read_deadline``): the read ends, and
the connection is not reused. Used for Prometheus' answers (NodeLoad); the
deadline covers the body only, where ``extender.http.outbound`` (the
Kubernetes API's client) bounds the whole call, connect and head included.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import requests

from extender.http import read_deadline

# Answers are read in pieces this large: node lists run to tens of MB, and requests' default (10 kB) costs far more calls.
_READ_CHUNK = 1 << 20


class AnswerTooLarge(Exception):
    """The body passed the cap; nothing of it is used."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


def read_within(response: requests.Response, seconds: float, max_bytes: int) -> bytes:
    """The body of ``response`` (requested with ``stream=True``) within ``seconds`` and ``max_bytes``.

    ``requests.Timeout`` past the deadline, ``AnswerTooLarge`` past the cap, requests' own errors as they come.
    """
    if seconds <= 0:
        raise requests.Timeout()
    stop = _reading_stopper(response)
    alarm = read_deadline.arm_action(stop, seconds) if stop is not None else None
    pieces: list[bytes] = []
    size = 0
    failure: Exception | None = None
    try:
        for piece in response.iter_content(_READ_CHUNK):
            size += len(piece)
            if size > max_bytes:
                raise AnswerTooLarge(max_bytes)
            pieces.append(piece)
    except (AnswerTooLarge, requests.RequestException) as exc:
        failure = exc
    if alarm is not None and read_deadline.disarm(alarm):
        raise requests.Timeout()
    if failure is not None:
        raise failure
    return b"".join(pieces)


def _reading_stopper(response: requests.Response) -> Callable[[], None] | None:
    """What shuts down the reading side of the answer's connection; None when nothing is left to read (urllib3 has
    read an empty body and handed the connection back).

    The connection holds its socket while it may be reused; one the server closes after this answer (HTTP/1.0,
    ``Connection: close``) has passed the socket to the response, which urllib3 (2.3 on) shuts down itself.
    """
    connection = getattr(response.raw, "connection", None)
    if connection is None:
        return None
    sock = getattr(connection, "sock", None)
    if sock is not None:
        return functools.partial(read_deadline.stop_reading, sock)
    return functools.partial(_shut_down, response.raw)


def _shut_down(raw: Any) -> None:
    """On the watchdog thread: never raise."""
    try:
        raw.shutdown()
    except (AttributeError, OSError, RuntimeError, ValueError):
        pass  # already released or closed: nothing is being read
