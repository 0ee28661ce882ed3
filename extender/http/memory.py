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

A request that decodes a body of millions of small values
(``extender.wire.decode_cost`` knows what its decoding may build) leaves its
memory held where it cannot go back: Python's allocator returns an arena (1
MiB) only once every object in it is gone, and the interpreter keeps the last
few lists, dicts, tuples and floats freed (its free lists) for reuse, each
holding one of the arenas that decoding filled; glibc returns a heap's free
memory only at its top. So a request whose decoding may have built a quarter
of what a decoding may build or more (``extender.wire.limits.GIVE_BACK_SHARE``)
owes memory (``owe_memory``);
once no request holds any of the body budget, the last one's answer is
followed by ``give_back_owed``: a full collection empties the free lists and
glibc returns every free page of every heap (``malloc_trim``). Waiting for the
last request matters: what requests in flight build and free would fill the
free lists and heaps again. Requests of the scheduler's own build far less
(the decoders count what a body holds before they estimate it that high) and
are not followed by it: their heaps keep their top for the next, and a full
collection does not walk a large node source's objects after each.

What stays is what Python's allocator cannot return: arenas that objects
outliving a request (each thread's context, caches) keep alive among what a
costly decoding built (docs/performance.md gives the measured figures).
"""

from __future__ import annotations

import gc
from functools import cache
from typing import Any

# mallopt's parameter numbers (malloc.h), and the values held.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
# Twice the largest buffer the heap serves: a request holds its body, the nodes' bytes and its answer at once. At most
# this much stays free per heap (per serving thread).
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES


def hold_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds; False without glibc (musl, macOS), whose allocators differ."""
    libc = _glibc()
    if libc is None:
        return False
    held = [libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)]
    return all(held)


# Whether a request built enough that memory is to be given back once none is in flight. Requests set and clear it
# from several threads: at worst memory is given back once more, or with the next request.
_owed = False


def owe_memory() -> None:
    global _owed
    _owed = True


def owes_memory() -> bool:
    return _owed


def give_back_owed() -> None:
    """``give_back``, if memory is still owed."""
    global _owed
    if _owed:
        _owed = False
        give_back()


def give_back() -> bool:
    """Let go of the interpreter's free lists, then return every free page of every heap to the system; False
    without glibc (the free lists are let go of all the same)."""
    gc.collect()
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


@cache
def _glibc() -> Any:
    """The C library, with glibc's allocator calls (ctypes is loaded here, after the first answer); None without
    them (musl, macOS), whose allocators differ."""
    import ctypes

    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
