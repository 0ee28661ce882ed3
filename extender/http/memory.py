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
heaps of their own: once the first answer is sent, no new heap is made and new
threads share the heaps that exist (the process's own, and the one the first
request's thread made before the setting was held, whose memory glibc gives
back whenever it empties). Buffers up to ``MMAP_THRESHOLD_BYTES`` (every request
the 32 MiB Cloud Functions limit lets through) come from these heaps, and a
request reuses the memory the one before it freed instead of faulting fresh
pages in; at most ``TRIM_THRESHOLD_BYTES`` stay free at a heap's top between
requests. Larger bodies (``EXTENDER_MAX_BODY_BYTES`` raised) are mapped and
given back when freed. docs/performance.md gives the measured effect.
"""

from __future__ import annotations

# mallopt's parameter numbers (malloc.h), and the values held.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# What a heap keeps free at its top for the next request: the buffers a request of a thousand nodes holds at once (its
# body, the nodes' bytes and its answer: about 60 MB).
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
ARENA_MAX = 1


def hold_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds and its number of heaps; False without glibc (musl, macOS), whose
    allocators differ."""
    import ctypes  # here, not at start-up: a cold instance's first answer need not wait for it to load

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    held = [
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        mallopt(M_ARENA_MAX, ARENA_MAX),
    ]
    return all(held)
