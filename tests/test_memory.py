"""Large freed buffers go back to the operating system (the effect on peak RSS is measured by the bench)."""

from __future__ import annotations

import resource
import sys

import pytest

from extender.memory import hold_malloc_thresholds

PAGE = resource.getpagesize()


def minor_faults_allocating(size: int, rounds: int) -> int:
    """Page faults while allocating, touching and freeing ``size`` bytes ``rounds`` times."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):
        buffer = bytearray(size)
        buffer[::PAGE] = b"x" * len(range(0, size, PAGE))
        del buffer
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_thresholds_are_held_on_glibc():
    assert hold_malloc_thresholds() is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_freed_megabyte_is_reused_without_faulting_its_pages_in_again():
    # A node-name request's buffers (names, sets, answers) are about this size: the heap keeps them for the next one.
    assert hold_malloc_thresholds() is True
    size, rounds = 1 << 20, 20
    minor_faults_allocating(size, 1)
    trimmed_each_time = rounds * size // PAGE
    assert minor_faults_allocating(size, rounds) < trimmed_each_time // 4
