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

A request that decodes a body of millions of small values
(``extender.wire.decode_cost`` knows what its decoding may build) leaves its
memory held where it cannot go back: Python's allocator returns an arena (1
MiB) only once every object in it is gone, and the interpreter keeps the last
few lists, dicts, tuples and floats freed (its free lists) for reuse, each
holding one of the arenas that decoding filled; glibc returns a heap's free
memory only at its top, and keeps ``TRIM_THRESHOLD_BYTES`` of that. So a
request whose decoding may have built a quarter of what a decoding may build
or more (``extender.wire.limits.GIVE_BACK_SHARE``) owes memory
(``owe_memory``); once no request holds any of the body budget, the last
one's answer is followed by ``give_back_owed``: a full collection empties the
free lists and glibc returns every free page of every heap (``malloc_trim``).
Waiting for the last request matters: what requests in flight build and free
would fill the free lists and heaps again. Requests of the scheduler's own
build far less (the decoders count what a body holds before they estimate it
that high) and are not followed by it: their heap keeps its top for the
next, and a full collection does not walk a large node source's objects
after each.

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
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# What a heap keeps free at its top for the next request: the buffers a request of a thousand nodes holds at once (its
# body, the nodes' bytes and its answer: about 60 MB).
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
ARENA_MAX = 1


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
