"""Give large freed buffers back to the operating system at once, and keep the heap's top for the next request.

glibc serves allocations over 128 kB with mmap and unmaps them when they are
freed, but each time it frees one it raises that threshold (up to 32 MB):
from then on such buffers come from the heap and stay resident. A full-node
request's multi-megabyte body and answer then keep their memory after the
request, in each thread that served one (each has its own heap), so the
instance's memory grows with the threads that served large requests, past a
512 MiB instance with THREADS large requests at once. Holding the threshold
sends such buffers back when freed; the price is mapping fresh pages for each
one. Buffers up to ``MMAP_THRESHOLD_BYTES`` (node-name requests and answers,
small full-node ones) keep coming from the heap.

Holding the mmap threshold also holds the trim threshold at its 128 kB
default: a heap would give back all but 128 kB of free memory at its top after
every request, and the next request would fault those pages in again. Each
heap keeps up to ``TRIM_THRESHOLD_BYTES`` free at its top for the next
request. A request whose buffers together pass that still has its heap
trimmed when they are freed, down to 128 kB (glibc's top pad), and the next
one faults them all in again; a full-node request of a hundred nodes holds its
body, the nodes' bytes and its answer at once, each under the mmap threshold,
so the trim threshold is twice that. docs/performance.md gives the measured
effect.
"""

from __future__ import annotations

# mallopt's parameter numbers (malloc.h), and the values held.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
# Twice the largest buffer the heap serves: a request holds its body, the nodes' bytes and its answer at once. At most
# this much stays free per heap (per serving thread).
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES


def hold_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds; False without glibc (musl, macOS), whose allocators differ."""
    import ctypes  # here, not at start-up: a cold instance's first answer need not wait for it to load

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    held = [mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)]
    return all(held)
