"""Deadlines for reading from a connection: when one passes, the connection's reading side is shut down.

A socket timeout bounds each ``recv``, not the read: the server's body reader
loops over ``recv`` until it has the bytes it was asked for, so a client
dripping a byte just inside the timeout would hold a serving thread for as
long as it likes. Shutting down reading wakes the blocked ``recv`` (it sees the
end of the stream) whatever the server's read loop does, and the answer can
still be written; the connection is not reused after that.

One watchdog thread keeps the deadlines of every body being read (request
bodies, the Kubernetes API's answers); arming one costs a heap push, not a
thread.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable

_changed = threading.Condition()
# (deadline, alarm number): the earliest first.
_deadlines: list[tuple[float, int]] = []
# Alarm number -> what to do when it goes off, while armed.
_armed: dict[int, Callable[[], None]] = {}
_numbers = itertools.count()
# The process the watchdog thread runs in: a forked worker starts its own.
_watchdog_pid: int | None = None


def arm(sock: socket.socket, seconds: float) -> int:
    """Stop reading ``sock`` in ``seconds`` unless ``disarm`` comes first; the alarm's number."""
    return arm_action(functools.partial(stop_reading, sock), seconds)


def arm_action(action: Callable[[], None], seconds: float) -> int:
    """Call ``action`` (on the watchdog thread: it must be quick and never raise) in ``seconds`` unless disarmed."""
    global _watchdog_pid
    with _changed:
        if _watchdog_pid != os.getpid():
            _deadlines.clear()
            _armed.clear()
            threading.Thread(target=_watch, name="read-deadline", daemon=True).start()
            _watchdog_pid = os.getpid()
        number = next(_numbers)
        _armed[number] = action
        heapq.heappush(_deadlines, (time.monotonic() + seconds, number))
        _changed.notify()
    return number


def disarm(number: int) -> bool:
    """Whether the alarm went off before this (the socket's reading side is shut down then)."""
    with _changed:
        return _armed.pop(number, None) is None


def stop_reading(sock: socket.socket) -> None:
    """Shut down the reading side only; for TLS, of the TCP socket beneath, so the answer can still be sent."""
    _shutdown(sock, socket.SHUT_RD)


def hang_up(sock: socket.socket) -> None:
    """End the connection after an answer already written: the client reads it, then the end of the stream.

    The server, reading on for a next request, finds the end too and closes its side.
    """
    _shutdown(sock, socket.SHUT_RDWR)


def _shutdown(sock: socket.socket, how: int) -> None:
    try:
        socket.socket.shutdown(sock, how)
    except OSError:
        pass  # already closed or reset by the client


def _watch() -> None:
    while True:
        with _changed:
            while not _deadlines or _deadlines[0][0] > time.monotonic():
                _changed.wait(_deadlines[0][0] - time.monotonic() if _deadlines else None)
            _, number = heapq.heappop(_deadlines)
            action = _armed.pop(number, None)
        if action is not None:
            action()
