"""Threads started beside the requests (a refresh, a list, a watch, a watchdog): one that cannot start never fails a
request nor wedges the object that started it.

A process out of threads (a thread or memory limit) makes ``Thread.start`` raise RuntimeError. ``started`` says so
instead of raising, so that the starter gives back what it set aside for the thread (a lock the thread was to release,
the handle it waits on) and goes on with what it knows; the work is tried again when it is next due. Each thread name
is warned about once per ``WARN_SECONDS`` (bounded by the few names), never per request.
"""

from __future__ import annotations

import logging
import threading
import time

WARN_SECONDS = 60.0
EVENT = "extender.background"

logger = logging.getLogger(__name__)
_warned_at: dict[str, float] = {}
_warning = threading.Lock()


def started(thread: threading.Thread) -> bool:
    """Start ``thread``; False (and a WARNING at most once per ``WARN_SECONDS`` for its name) when it cannot start."""
    try:
        thread.start()
    except RuntimeError as exc:
        _warn(thread.name, exc)
        return False
    return True


def _warn(name: str, exc: RuntimeError) -> None:
    now = time.monotonic()
    with _warning:
        if now - _warned_at.get(name, -WARN_SECONDS) < WARN_SECONDS:
            return
        _warned_at[name] = now
    fields = {"event": EVENT, "thread": name, "problem": str(exc), "outcome": "tried again when next due"}
    message = "could not start the %s thread (%s): its work waits until it is next due"
    logger.warning(message, name, exc, extra={"json_fields": fields})
