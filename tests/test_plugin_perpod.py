"""PerPod: what depends on the pod alone is worked out once per request, never carried into the next one."""

from __future__ import annotations

from extender.framework.perpod import PerPod
from tests.plugin_helpers import pod


def test_worked_out_once_per_pod_object_and_again_for_the_next_request():
    calls = []
    per_pod = PerPod(lambda subject: calls.append(subject.name) or len(calls))
    first = pod("a")
    assert [per_pod(first) for _ in range(3)] == [1, 1, 1]
    # An equal pod from another request is another object: worked out afresh (a clock may have moved on).
    assert per_pod(pod("a")) == 2
    assert per_pod(first) == 3
    assert calls == ["a", "a", "a"]
