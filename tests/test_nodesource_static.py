"""The static node source: an inventory of node-name globs -> labels in the policy file."""

from __future__ import annotations

from extender.framework.status import Code
from extender.framework.types import Node
from extender.nodesource.static import InventoryEntry, StaticInventory

INVENTORY = StaticInventory(
    [
        InventoryEntry(("gke-prod-*",), {"team": "shared", "tier": "general"}),
        InventoryEntry(("gke-prod-gpu-*", "gke-prod-tpu-*"), {"tier": "accelerated"}),
    ]
)


def test_matching_entries_merge_in_file_order():
    assert INVENTORY.lookup(["gke-prod-gpu-1", "gke-prod-web-1", "gke-prod-tpu-9"]) == [
        Node("gke-prod-gpu-1", {"team": "shared", "tier": "accelerated"}),
        Node("gke-prod-web-1", {"team": "shared", "tier": "general"}),
        Node("gke-prod-tpu-9", {"team": "shared", "tier": "accelerated"}),
    ]


def test_a_node_outside_the_inventory_is_unknowable_not_unlabelled():
    [stray] = INVENTORY.lookup(["gke-dev-web-1"])
    assert stray.labels is None
    assert stray.why_unknown is not None and stray.why_unknown.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert stray.why_unknown.reason == "node gke-dev-web-1 matches no entry of the static nodeSource inventory"


def test_an_entry_without_globs_matches_no_node():
    inventory = StaticInventory([InventoryEntry((), {"tier": "none"}), InventoryEntry(("gke-*",), {"tier": "general"})])
    assert inventory.lookup(["gke-a"]) == [Node("gke-a", {"tier": "general"})]
    [stray] = inventory.lookup(["other"])
    assert stray.labels is None and stray.why_unknown is not None


class CountingInventory(StaticInventory):
    """Records each name it works out facts for."""

    def __init__(self, entries: list[InventoryEntry]) -> None:
        super().__init__(entries)
        self.described: list[str] = []

    def describe(self, name: str) -> Node:
        self.described.append(name)
        return super().describe(name)


def test_answers_are_remembered_per_name_and_the_memory_is_bounded():
    inventory = CountingInventory([InventoryEntry(("*",), {})])
    inventory.MAX_REMEMBERED = 10
    first = inventory.lookup(["a"])[0]
    assert inventory.lookup(["a"])[0] is first
    made_up = [f"made-up-{index}" for index in range(25)]
    inventory.lookup(made_up)
    inventory.lookup(["a", *made_up])  # all 26 still remembered: nothing worked out again
    assert inventory.described == ["a", *made_up]
    inventory.lookup(["another"])  # over the bound: forgotten, then learnt again as asked
    assert inventory.lookup(["a"]) == [Node("a", {})]
    assert inventory.described == ["a", *made_up, "another", "a"]


def test_preemption_drops_a_candidate_the_inventory_does_not_know():
    from extender.framework.profile import Profile
    from extender.framework.types import Pod, Victims
    from extender.plugins.nodelabelpolicy import NodeLabelPolicy
    from tests.plugin_helpers import build

    rule = {"rules": [{"name": "shared-only", "nodeSelector": {"matchLabels": {"team": "shared"}}}]}
    profile = Profile("p", filters=[build(NodeLabelPolicy, rule)], fail_open=True)
    candidates = {name: Victims((Pod(uid=f"victim-on-{name}"),)) for name in ("gke-prod-web-1", "gke-dev-web-1")}
    nodes = {node.name: node for node in INVENTORY.lookup(list(candidates))}
    result = profile.preempt(Pod(uid="preemptor", labels={}, annotations={}), candidates, nodes)
    assert list(result.accepted) == ["gke-prod-web-1"]
    assert result.rejected["gke-dev-web-1"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
