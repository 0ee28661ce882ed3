"""Admission by body size: large requests served at once must not add up past the instance's memory.

At its peak a full-node request holds about 2.5 times its body (the body, the
nesting check's rendering of it, the echoed nodes): 1000 nodes, 18.6 MB, cost
~45 MB each. Eight at once (THREADS) would pass a 512 MiB instance, which
Cloud Run then restarts, failing every request on it. So requests whose
bodies together would pass the budget wait for earlier ones to finish; one
alone always goes ahead, whatever its size. kube-scheduler calls one at a
time, so in practice nothing waits; node-name requests (tens of kB) never do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from extender.errors import RequestError

BUDGET_ENV = "EXTENDER_MAX_BODY_BYTES_IN_FLIGHT"
# With 512 MiB, room for ~100 MB of baseline (modules, google-cloud-logging, a 5000-node cache) and the peaks.
DEFAULT_BUDGET_BYTES = 96 * 1024 * 1024


class BodyBudget:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._in_flight = 0
        self._requests = 0
        self._changed = threading.Condition()

    @contextmanager
    def admit(self, body_bytes: int, wait_seconds: float) -> Iterator[None]:
        """Hold ``body_bytes`` of the budget; after ``wait_seconds`` without room, a 503 that says why."""
        deadline = time.monotonic() + wait_seconds
        with self._changed:
            while self._requests and self._in_flight + body_bytes > self.budget_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RequestError(
                        503,
                        f"busy: {self._requests} request(s) with {self._in_flight} bytes of body in flight, and "
                        f"{body_bytes} more would pass {BUDGET_ENV} ({self.budget_bytes}); none finished within "
                        f"{wait_seconds:g} s",
                    )
                self._changed.wait(left)
            self._in_flight += body_bytes
            self._requests += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= body_bytes
                self._requests -= 1
                self._changed.notify_all()
