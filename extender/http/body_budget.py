"""The body budget: large requests served at once must not add up past the instance's memory.

At its peak a full-node request holds a small multiple of its body (the body,
a copy of each echoed node's bytes, the answer): THREADS large ones at once
could pass the instance's memory, and Cloud Run then restarts it, failing
every request on it. So bodies are charged to a shared budget as their
bytes arrive, and held until the request is answered; a request whose next
piece would pass the budget waits for earlier ones to finish.

Charged by bytes received, not by the declared Content-Length: a slow or
stalled upload (or a chunked one, which declares nothing) holds only what it
has sent. The oldest request in flight never waits, so there is always
progress and two growing requests cannot wait on each other. kube-scheduler
calls one at a time, so in practice nothing waits; node-name requests (tens
of kB) never do.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from extender.errors import RequestError
from extender.settings import BUDGET_ENV


class BodyBudget:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._in_flight = 0
        # Arrival number -> bytes held, in arrival order (dicts keep it): the first key is the oldest request.
        self._held: dict[int, int] = {}
        self._arrivals = itertools.count()
        self._changed = threading.Condition()

    @contextmanager
    def hold(self, wait_seconds: float) -> Iterator[Holding]:
        """A share of the budget for one request, empty at first and given back whole when the request ends."""
        with self._changed:
            key = next(self._arrivals)
            self._held[key] = 0
        try:
            yield Holding(self, key, time.monotonic() + wait_seconds, wait_seconds)
        finally:
            with self._changed:
                self._in_flight -= self._held.pop(key)
                self._changed.notify_all()

    def _take(self, key: int, size: int, deadline: float, wait_seconds: float) -> None:
        with self._changed:
            while next(iter(self._held)) != key and self._in_flight + size > self.budget_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    others = len(self._held) - 1
                    raise RequestError(
                        503,
                        f"busy: {others} other request(s) with {self._in_flight - self._held[key]} bytes of body in "
                        f"flight, and {self._held[key] + size} bytes of this one would pass {BUDGET_ENV} "
                        f"({self.budget_bytes}); none finished within {wait_seconds:g} s",
                    )
                self._changed.wait(left)
            self._held[key] += size
            self._in_flight += size


class Holding:
    """One request's share: ``take`` charges bytes as they arrive, waiting while they would pass the budget."""

    def __init__(self, budget: BodyBudget, key: int, deadline: float, wait_seconds: float) -> None:
        self._budget = budget
        self._key = key
        self._deadline = deadline
        self._wait_seconds = wait_seconds

    def take(self, size: int) -> None:
        """Charge ``size`` more bytes; after the request's wait without room, a 503 that says why."""
        self._budget._take(self._key, size, self._deadline, self._wait_seconds)
