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
memory only at its top. So requests count what their decoding may have built
(``owe_memory``); once ``OWE_AFTER_BYTES`` are counted and no request holds
any of the body budget, the last one's answer is followed by
``give_back_owed``: if the process then holds ``HOARDED_BYTES`` more than
after it last gave memory back, a full collection empties the free lists and
glibc returns every free page of every heap (``malloc_trim``). Waiting for the
last request matters: what requests in flight build and free would fill the
free lists and heaps again. Looking first matters too: requests whose
decoding was costly only in the worst case (node-name bodies are charged by
their size) leave the process as it was, and their heaps keep their top.

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
# What requests' decoding may have built before the process looks at what it holds.
OWE_AFTER_BYTES = 16 * 1024 * 1024
# How much more the process may hold than after it last gave memory back (or started) before it gives back again.
HOARDED_BYTES = 8 * 1024 * 1024


def hold_malloc_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds; False without glibc (musl, macOS), whose allocators differ."""
    libc = _glibc()
    if libc is None:
        return False
    held = [libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)]
    return all(held)


# What requests' decoding may have built since the process last looked, and what it held when it last gave memory
# back. Requests change them from several threads without a lock: at worst a count is lost, or memory is given
# back once more.
_owed = 0
_held_after_giving_back: int | None = None


def owe_memory(built: int) -> None:
    global _owed
    _owed += built


def owes_memory() -> bool:
    return _owed >= OWE_AFTER_BYTES


def give_back_owed() -> None:
    """``give_back``, if memory is still owed and the process holds ``HOARDED_BYTES`` more than after it last gave
    memory back (or when it cannot tell)."""
    global _owed, _held_after_giving_back
    if not owes_memory():
        return
    _owed = 0
    held = resident_bytes()
    if held is not None and _held_after_giving_back is not None and held < _held_after_giving_back + HOARDED_BYTES:
        return
    give_back()
    _held_after_giving_back = resident_bytes()


def resident_bytes() -> int | None:
    """The process's resident memory (Linux); None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _page_size()
    except (OSError, ValueError, IndexError):
        return None


@cache
def _page_size() -> int:
    import os

    return os.sysconf("SC_PAGE_SIZE")


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
