"""Large freed buffers go back to the operating system (the effect on peak RSS is measured by the bench)."""

from __future__ import annotations

import sys

import pytest

from extender.memory import hold_mmap_threshold


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_mmap_threshold_is_held_on_glibc():
    assert hold_mmap_threshold() is True
