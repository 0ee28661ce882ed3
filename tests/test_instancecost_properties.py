"""Property-based: no InstanceCost configuration the policy accepts can fail at request time.

Prices, default price, spot discount and ceiling are drawn from every float (huge, tiny, subnormal, zero, infinite,
NaN); whatever the args schema accepts must score every set of candidates, served through a profile, with 0..100
per node, and never an error.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError

from extender.framework.profile import Profile, ScorePluginEntry
from extender.framework.types import Node, Pod
from extender.plugins.instancecost import INSTANCE_TYPE_LABEL, SPOT_LABELS, InstanceCost

TYPES = ["a", "b", "c", "unlisted"]
prices = (
    st.floats(allow_nan=True, allow_infinity=True) | st.floats(min_value=0, max_value=1e-3) | st.integers(0, 10**20)
)
args = st.fixed_dictionaries(
    {"prices": st.dictionaries(st.sampled_from(TYPES[:3]), prices, min_size=1)},
    optional={
        "defaultPrice": prices,
        "spotDiscount": st.floats(allow_nan=True) | st.sampled_from([0, 0.5, 1]),
        "scale": st.sampled_from(["relative", "absolute"]),
        "ceiling": prices,
    },
)
nodes = st.lists(
    st.tuples(st.sampled_from([*TYPES, None]), st.sampled_from([None, *SPOT_LABELS])), max_size=8
).map(
    lambda drawn: [
        Node(
            f"n{index}",
            {**({INSTANCE_TYPE_LABEL: kind} if kind else {}), **({spot: "true"} if spot else {})},
        )
        for index, (kind, spot) in enumerate(drawn)
    ]
)


@settings(max_examples=400, deadline=None)
@given(args, nodes)
def test_accepted_args_never_fail_to_score(given_args, candidates):
    try:
        loaded = InstanceCost.args_schema().load(given_args)
    except ValidationError:
        return
    profile = Profile("p", scores=[ScorePluginEntry(InstanceCost(loaded), 1)])
    result = profile.prioritize(Pod(uid="u"), candidates)
    assert result.error is None, result.error
    assert set(result.by_plugin.get("InstanceCost", {})) == {node.name for node in candidates}
    assert all(0 <= score <= 100 for score in result.by_plugin.get("InstanceCost", {}).values())
    assert all(0 <= score <= 10 for score in result.scores.values())


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(TYPES[:3]), st.floats(min_value=0, max_value=1e15), min_size=2))
def test_the_relative_scale_ranks_exactly(table):
    """The cheapest candidate scores 100, the dearest 0 when they differ, and a cheaper one never scores less."""
    plugin = InstanceCost(InstanceCost.args_schema().load({"prices": table}))
    candidates = [Node(kind, {INSTANCE_TYPE_LABEL: kind}) for kind in table]
    raw = {node.name: plugin.score(Pod(uid="u"), node) for node in candidates}
    plugin.normalize_scores(Pod(uid="u"), raw)
    cheapest, dearest = min(table, key=table.get), max(table, key=table.get)
    assert raw[cheapest] == 100
    if table[cheapest] != table[dearest]:
        assert raw[dearest] == 0
    for one in table:
        for other in table:
            if table[one] < table[other]:
                assert raw[one] >= raw[other]
