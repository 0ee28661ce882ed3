"""Work a plugin does once per pod, that is once per request, rather than once per node.

The profile calls a plugin once per node with the same Pod object, so what
depends on the pod alone (which rules apply to it, whether a window is open
now) is worked out on the first node and kept for the rest, keyed by the
pod's identity. The cache is one tuple replaced in one assignment, so
concurrent requests at worst work it out again; it never carries a decision
from one request into another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from extender.framework.types import Pod

T = TypeVar("T")


class PerPod(Generic[T]):
    def __init__(self, compute: Callable[[Pod], T]) -> None:
        self._compute = compute
        self._last: tuple[Pod, T] | None = None

    def __call__(self, pod: Pod) -> T:
        last = self._last
        if last is not None and last[0] is pod:
            return last[1]
        value = self._compute(pod)
        self._last = (pod, value)
        return value
