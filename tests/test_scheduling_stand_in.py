"""testkit.scheduling's stand-in asks the extender about the sample kube-scheduler would: ``numFeasibleNodesToFind``
of ``pkg/scheduler/schedule_one.go``, from where the last cycle stopped."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.fake_apiserver import node
from testkit.scheduling import Scheduler, chunk_size, feasible_nodes_to_find, guaranteed_pod


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (0, 50, 50),  # under 100 nodes: every one
        (0, 100, 100),  # adaptive: 50 % of 100 nodes is 50, raised to the least kube-scheduler looks for
        (0, 1000, 420),  # 50 - 8 = 42 %
        (0, 5000, 500),  # 50 - 40 = 10 %
        (0, 6000, 300),  # 50 - 48 = 2 %, raised to 5 %
        (0, 1500, 570),  # 50 - 12 = 38 %
        (30, 200, 100),  # 30 % of 200 is 60: at least 100
        (100, 5000, 5000),
        (50, 5000, 2500),
    ],
)
def test_the_sample_is_as_large_as_kube_schedulers(percentage: int, nodes: int, expected: int) -> None:
    assert feasible_nodes_to_find(percentage, nodes) == expected


NAMES = [f"node-{index}" for index in range(1000)]


def three_cycles(**options: Any) -> list[list[str]]:
    """The node names the stand-in's filter asks about for three pods, every node passing and scoring 0."""
    asked: list[list[str]] = []

    def call(verb: str, payload: dict[str, Any]) -> Any:
        if verb == "filter":
            asked.append(payload["NodeNames"])
            return {"NodeNames": payload["NodeNames"], "FailedNodes": {}, "Error": ""}
        return [{"Host": name, "Score": 0} for name in payload["NodeNames"]]

    scheduler = Scheduler(
        [node(name) for name in NAMES], call, bind=lambda pod, node: None, bind_delay=(0.0, 0.0), **options
    )
    for index in range(3):
        scheduler.schedule(guaranteed_pod(f"pod-{index}"))
    scheduler.wait_for_bindings()
    return asked


def test_each_cycle_asks_about_the_next_sample_round_the_cluster() -> None:
    asked = three_cycles()
    assert [len(sample) for sample in asked] == [420, 420, 420]
    assert asked[0] == NAMES[:420] and asked[1] == NAMES[420:840]
    assert asked[2] == NAMES[840:] + NAMES[:260]


def test_in_parallel_order_each_cycle_asks_about_the_same_nodes_in_another_order_chunk_by_chunk() -> None:
    """As kube-scheduler's parallel filter finds them: two chunks at a time, each chunk's nodes in its own order."""
    asked = three_cycles(percentage_of_nodes_to_score=100, parallel_order=True)
    assert [sorted(sample) for sample in asked] == [sorted(NAMES)] * 3
    assert len({tuple(sample) for sample in asked}) == 3 and NAMES not in asked
    size = chunk_size(len(NAMES))
    for sample in asked:
        positions = [int(name.split("-")[1]) for name in sample]
        for start in range(0, len(NAMES), size):
            chunk = [position for position in positions if start <= position < start + size]
            assert chunk == sorted(chunk)
