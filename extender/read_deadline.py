"""Deadlines for reading from a connection: when one passes, the connection's reading side is shut down.

A socket timeout bounds each ``recv``, not the read: the server's body reader
loops over ``recv`` until it has the bytes it was asked for, so a client
dripping a byte just inside the timeout would hold a serving thread for as
long as it likes. Shutting down reading wakes the blocked ``recv`` (it sees the
end of the stream) whatever the server's read loop does, and the answer can
still be written; the connection is not reused after that.

One watchdog thread keeps the deadlines of every body being read (request
bodies, the Kubernetes API's answers); arming one costs a heap push, not a
thread, and wakes the watchdog only when it would otherwise sleep past the new
deadline. A disarmed deadline stays in the heap until its time; the watchdog
drops those in batches, waking at most every ``_SLACK`` seconds for them, so
an alarm goes off up to ``_SLACK`` late and a request wakes no other thread.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import os
import socket
import threading
import time
from collections.abc import Callable

from extender.background import started

_changed = threading.Condition()
# (deadline, alarm number): the earliest first.
_deadlines: list[tuple[float, int]] = []
# Alarm number -> what to do when it goes off, while armed.
_armed: dict[int, Callable[[], None]] = {}
_numbers = itertools.count()
# The process the alarms belong to, and the one the watchdog thread runs in: a forked worker starts its own.
_deadlines_pid: int | None = None
_watchdog_pid: int | None = None
# When the watchdog looks at the deadlines next (infinity: not before it is notified).
_wakes_at = math.inf
# How late an alarm may go off: the shortest the watchdog sleeps while deadlines are pending.
_SLACK = 0.05


def arm(sock: socket.socket, seconds: float) -> int:
    """Stop reading ``sock`` in ``seconds`` unless ``disarm`` comes first; the alarm's number."""
    return arm_action(functools.partial(stop_reading, sock), seconds)


def arm_action(action: Callable[[], None], seconds: float) -> int:
    """Call ``action`` (on the watchdog thread: it must be quick and never raise) in ``seconds`` unless disarmed."""
    global _deadlines_pid, _watchdog_pid, _wakes_at
    pid = os.getpid()
    with _changed:
        if _deadlines_pid != pid:  # a forked worker's copy of its parent's alarms: none is its own
            _deadlines.clear()
            _armed.clear()
            _wakes_at = math.inf
            _deadlines_pid = pid
        if _watchdog_pid != pid and started(threading.Thread(target=_watch, name="read-deadline", daemon=True)):
            _watchdog_pid = pid  # else the next alarm armed starts it, and the alarms armed before go off then
        number = next(_numbers)
        _armed[number] = action
        deadline = time.monotonic() + seconds
        heapq.heappush(_deadlines, (deadline, number))
        if deadline < _wakes_at:
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
    global _wakes_at
    while True:
        with _changed:
            now = time.monotonic()
            while not _deadlines or _deadlines[0][0] > now:
                _wakes_at = max(_deadlines[0][0], now + _SLACK) if _deadlines else math.inf
                _changed.wait(None if _wakes_at == math.inf else _wakes_at - now)
                now = time.monotonic()
            _wakes_at = now  # looking now: an alarm armed meanwhile finds it awake
            due = []
            while _deadlines and _deadlines[0][0] <= now:
                _, number = heapq.heappop(_deadlines)
                action = _armed.pop(number, None)
                if action is not None:
                    due.append(action)
        for action in due:
            action()
