"""Kept results are bounded by the live nodes: a refresh lets the Node objects of older generations go."""

from __future__ import annotations

import gc
import random

import pytest

from extender.framework.kept import KeptProfile
from extender.framework.types import Node
from extender.policy.loader import parse_policy
from tests.plugin_helpers import ListedNodes, pod
from tests.test_kept_equal import POLICY

NODES = 2000
REFRESHES = 200
CHURN = NODES // 100  # 1% of the nodes change their labels at each refresh


class Tracked(Node):
    """A Node that counts the ones alive (a NamedTuple takes no weak reference)."""

    alive = 0

    def __new__(cls, name: str, labels: dict[str, str]) -> Tracked:
        Tracked.alive += 1
        return super().__new__(cls, name, labels)

    def __del__(self) -> None:
        Tracked.alive -= 1


@pytest.mark.usefixtures("broken_plugin")
def test_after_many_refreshes_with_churn_the_kept_nodes_stay_within_the_live_ones(monkeypatch):
    monkeypatch.setenv("EXTENDER_RESULT_CACHE", "on")
    served = parse_policy(POLICY, "test").profiles["default"]
    assert isinstance(served, KeptProfile)
    rng = random.Random(14)
    names = [f"node-{index}" for index in range(NODES)]

    def made(name: str) -> Node:
        return Tracked(name, {"zone": rng.choice("abc"), "pool": rng.choice(["web", "gpu"])})

    listed = {name: made(name) for name in names}
    source = ListedNodes(list(listed.values()))
    namespaces = ["default", "ml", "web"]
    for refresh in range(REFRESHES):
        for name in rng.sample(names, CHURN):
            listed[name] = made(name)
        source.list(list(listed.values()))
        the_pod = pod(namespace=namespaces[refresh % len(namespaces)])
        feasible = served.filter_names(the_pod, names, source).feasible
        if refresh % 20 == 0:
            served.prioritize_names(the_pod, feasible, source)
    gc.collect()
    assert NODES <= Tracked.alive <= 1.2 * NODES
