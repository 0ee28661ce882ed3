"""Give large freed buffers back to the operating system at once.

glibc serves allocations over 128 kB with mmap and unmaps them when they are
freed, but each time it frees one it raises that threshold (up to 32 MB):
from then on such buffers come from the heap and stay resident. A full-node
request's ~20 MB body and answer then keep their memory after the request, in
each thread that served one: eight 1000-node requests at once peaked at
579 MB, over a 512 MiB instance; with the threshold held at its default,
368 MB, and one request alone 120 MB instead of 196 MB.
"""

from __future__ import annotations

import ctypes

# mallopt's parameter number for the mmap threshold, and glibc's default threshold.
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


def hold_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at its default; False without glibc (musl, macOS), whose allocators differ."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
