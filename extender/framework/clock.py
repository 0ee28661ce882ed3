"""The instant a request is judged at, for every plugin whose verdict depends on the time (a maintenance window, the
age of a measured sample).

Plugins read it once per request, in ``prepare``, so that all the nodes of a request are judged at one instant. It
is the wall clock, unless ``judged_at`` sets another instant for what runs inside it: ``explain --at`` judges a
pod at a chosen time through the function's own code. The instant is a context variable, not state on a shared
object: served requests, on their own threads, always read the wall clock.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Iterator
from contextvars import ContextVar

_judged_at: ContextVar[float | None] = ContextVar("judged_at", default=None)


def now() -> float:
    """Seconds since the epoch."""
    at = _judged_at.get()
    return time.time() if at is None else at


def utc_now() -> dt.datetime:
    """``now`` as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(now(), dt.UTC)


@contextlib.contextmanager
def judged_at(instant: dt.datetime) -> Iterator[None]:
    """Judge what runs in this block (on this thread) at ``instant``, an aware datetime."""
    if instant.tzinfo is None:
        raise ValueError("the instant needs a UTC offset")
    token = _judged_at.set(instant.timestamp())
    try:
        yield
    finally:
        _judged_at.reset(token)


def parse_instant(value: object) -> dt.datetime:
    """An RFC 3339 timestamp (``2026-03-01T02:30:00Z``, ``2026-03-01T03:30:00+01:00``), as text or as the datetime
    YAML may have read it into; ValueError saying what is wrong."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an RFC 3339 timestamp such as 2026-03-01T22:00:00Z") from None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):  # YAML reads 2026-03-01 as a date
        raise ValueError(f"{value} is a date, not an instant: write a timestamp such as {value}T00:00:00Z")
    if not isinstance(value, dt.datetime):
        raise ValueError("must be an RFC 3339 timestamp such as 2026-03-01T22:00:00Z")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{value.isoformat()} has no UTC offset: end it with Z or an offset such as +01:00")
    return value
