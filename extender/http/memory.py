"""One heap for every serving thread, which keeps the memory of a request's large buffers for the next one.

glibc gives each thread that allocates its own heap (arena), serves
allocations over a threshold with mmap and unmaps them when freed, raising
that threshold (up to 32 MiB) each time it frees one. A full-node request's
multi-megabyte body, node copies and answer then either come from fresh pages
(mapped, faulted in and zeroed for every request: about 15 ms of a 1000-node
request) or stay resident after the request in the heap of each thread that
served one, so that an instance's memory grows with the threads that served
large requests, past a 512 MiB instance with THREADS large requests at once.

The serving threads hold the GIL while they allocate, so they gain nothing from
heaps of their own: the process is held to one heap before any thread serves
(``extender.startup``; glibc never gives back the top of another thread's
heap). Buffers up to ``MMAP_THRESHOLD_BYTES`` (every request the 32 MiB Cloud
Functions limit lets through) come from it, and a request reuses the memory
the one before it freed instead of faulting fresh pages in; at most
``TRIM_THRESHOLD_BYTES`` stay free at the heap's top between requests. Larger
bodies (``EXTENDER_MAX_BODY_BYTES`` raised) are mapped and given back when
freed. docs/performance.md gives the measured effect.

What requests leave behind goes back when the instance is quiet
(``Release``). A request whose decoding may have built a large share of what
a decoding may build (``extender.wire.limits.GIVE_BACK_SHARE``: a body of
millions of small values, never one of the scheduler's own) is followed, once
no request holds any of the body budget, by giving memory back after its
answer. A request with a large body (``LARGE_BODY_BYTES``: full-node
requests) leaves its heap's top and its nodes' decodings (``KeptNodes``) for
the next request; they go back once no large request has come for
``EXTENDER_MEMORY_IDLE`` (extender.settings): kube-scheduler sends a burst of
requests while pods wait, and those find them. A request after a quiet time
decodes its nodes afresh and faults its buffers' pages in again. Giving back forgets the kept request data, empties the
interpreter's free lists (a full collection) and has glibc return every free
page of every heap (``malloc_trim``). Waiting for the last request matters:
what requests in flight build and free would fill them again.

Python's own allocator (pymalloc, for objects up to 512 bytes) returns an
arena of 1 MiB only once every object in it is gone: any object that outlives
a large request and was made during it (a thread's state, a grown dict, a
cache entry) keeps its whole arena, and the instance keeps tens of MB after
the worst bodies. glibc returns memory by the 4 KiB page, so the function is
served with ``PYTHONMALLOC=malloc``. glibc in turn keeps, per thread, a cache
of freed small chunks (tcache) that only that thread reuses and that
``malloc_trim`` cannot reach: up to seven chunks of each of 64 sizes per
serving thread, each keeping its page of the shared heap in use. One chunk per
size keeps the cache's fast path for the allocations that follow a free of
the same size, and starts up faster than none
(``GLIBC_TUNABLES=glibc.malloc.tcache_count=1``). Both are
``extender.settings.ALLOCATOR_ENVIRONMENT``, which Terraform sets and so does
the README's command: then RSS comes back to within a few MB of where it
started (tests/test_memory.py; docs/performance.md gives what it costs).
Start-up says so when they are not set.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from extender import read_deadline
from extender.background import started
from extender.http.after_answer import after_this_answer

# mallopt's parameter numbers (malloc.h), and the values held.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# What a heap keeps free at its top for the next request: the buffers a request of a thousand nodes holds at once (its
# body, the nodes' bytes and its answer: about 60 MB).
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
ARENA_MAX = 1
# A request body from which on what the request leaves behind is given back once the instance is quiet (full-node
# requests of some fifty nodes and more).
LARGE_BODY_BYTES = 1024 * 1024


def hold_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds and its number of heaps; False without glibc (musl, macOS), whose
    allocators differ."""
    libc = _glibc()
    if libc is None:
        return False
    held = [
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        libc.mallopt(M_ARENA_MAX, ARENA_MAX),
    ]
    return all(held)


class Release:
    """When the memory requests leave behind goes back (see above), for one extender.

    ``forget`` drops the request data kept across requests; ``idle`` says whether no request is in flight. A quiet
    instance's check runs on the read-deadline watchdog (no thread of its own), and gives memory back on a thread
    that ends when it is done: the watchdog's actions must be quick.
    """

    def __init__(self, forget: Callable[[], None], idle: Callable[[], bool], seconds: float) -> None:
        self._forget = forget
        self._idle = idle
        self._seconds = seconds
        self._lock = threading.Lock()
        # When the last request that left memory behind ended, and whether a check is armed for it.
        self._last = 0.0
        self._armed = False

    def after(self, body_bytes: int, costly: bool) -> None:
        """At the end of a request (before its answer is written): what it leaves behind, and when it goes back."""
        if costly and self._idle():
            after_this_answer(self.give_back)
        elif costly or body_bytes >= LARGE_BODY_BYTES:
            self._last = time.monotonic()
            with self._lock:
                if not self._armed:
                    self._armed = True
                    read_deadline.arm_action(self._check, self._seconds)

    def _check(self) -> None:
        waited = time.monotonic() - self._last
        with self._lock:
            if waited < self._seconds or not self._idle():
                # A request came since, or is in flight: look again once it could have been quiet long enough.
                again = self._seconds - waited if waited < self._seconds else self._seconds
                read_deadline.arm_action(self._check, again)
                return
            self._armed = False
        # A thread that cannot start gives nothing back this time: the next quiet spell tries again.
        started(threading.Thread(target=self.give_back, name="memory-release", daemon=True))

    def give_back(self) -> bool:
        """Forget the kept request data, let go of the interpreter's free lists, then return every free page of
        every heap to the system; False without glibc (the rest is done all the same)."""
        self._forget()
        gc.collect()
        libc = _glibc()
        if libc is None:
            return False
        libc.malloc_trim(0)
        return True


@cache
def _glibc() -> Any:
    """The C library, with glibc's allocator calls (ctypes is loaded here, at start-up with process tuning on); None
    without them (musl, macOS), whose allocators differ."""
    import ctypes

    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
