"""InstanceCost: a price table, spot discounts, a default for unknown types, linear scores over the candidates."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from extender.framework.plugin import MAX_NODE_SCORE
from extender.plugins.instancecost import InstanceCost
from extender.wire.errors import flatten_errors
from tests.plugin_helpers import build, node, pod

TYPE = "node.kubernetes.io/instance-type"
PRICES = {"e2-standard-4": 0.134, "n2-standard-8": 0.388, "c3-standard-8": 0.400}


def scores(args, nodes):
    plugin = build(InstanceCost, args)
    raw = {candidate.name: plugin.score(pod(), candidate) for candidate in nodes}
    plugin.normalize_scores(pod(), raw)
    return raw


def typed(name, kind, **labels):
    return node(name, **{TYPE: kind}, **labels)


@pytest.mark.parametrize(
    ("args", "nodes", "expected"),
    [
        # Linear between the cheapest (100) and the dearest (0) candidate.
        (
            {"prices": PRICES},
            [typed("e2", "e2-standard-4"), typed("n2", "n2-standard-8"), typed("c3", "c3-standard-8")],
            {"e2": 100, "n2": 5, "c3": 0},
        ),
        # Only the candidates count: without the e2 node, n2 is the cheapest.
        ({"prices": PRICES}, [typed("n2", "n2-standard-8"), typed("c3", "c3-standard-8")], {"n2": 100, "c3": 0}),
        # Spot and preemptible nodes cost spotDiscount less (0.388 * 0.3 = 0.1164 < 0.134).
        (
            {"prices": PRICES, "spotDiscount": 0.7},
            [
                typed("e2", "e2-standard-4"),
                typed("n2-spot", "n2-standard-8", **{"cloud.google.com/gke-spot": "true"}),
                typed("c3", "c3-standard-8"),
            ],
            {"e2": 94, "n2-spot": 100, "c3": 0},
        ),
        (
            {"prices": PRICES, "spotDiscount": 0.7},
            [
                typed("n2", "n2-standard-8"),
                typed("n2-pvm", "n2-standard-8", **{"cloud.google.com/gke-preemptible": "true"}),
            ],
            {"n2": 0, "n2-pvm": 100},
        ),
        # A spot label that is not "true" is no discount; without spotDiscount spot nodes cost the table price.
        (
            {"prices": PRICES, "spotDiscount": 0.7},
            [typed("a", "e2-standard-4", **{"cloud.google.com/gke-spot": "false"}), typed("b", "e2-standard-4")],
            {"a": 100, "b": 100},
        ),
        (
            {"prices": PRICES},
            [typed("a", "e2-standard-4", **{"cloud.google.com/gke-spot": "true"}), typed("b", "e2-standard-4")],
            {"a": 100, "b": 100},
        ),
        # Unknown types (and nodes without the label) cost the dearest listed price unless defaultPrice says otherwise.
        (
            {"prices": PRICES},
            [typed("e2", "e2-standard-4"), typed("x", "m3-ultramem-32"), node("bare")],
            {"e2": 100, "x": 0, "bare": 0},
        ),
        ({"prices": PRICES}, [typed("c3", "c3-standard-8"), typed("x", "m3-ultramem-32")], {"c3": 100, "x": 100}),
        (
            {"prices": PRICES, "defaultPrice": 0.8},
            [typed("e2", "e2-standard-4"), typed("c3", "c3-standard-8"), typed("x", "m3-ultramem-32")],
            {"e2": 100, "c3": 60, "x": 0},
        ),
        # An unknown type on a spot node is not discounted: it never beats a listed type (it used to cost
        # 0.4 * 0.3 = 0.12 and beat e2 at 0.134).
        (
            {"prices": PRICES, "spotDiscount": 0.7},
            [typed("e2", "e2-standard-4"), typed("x", "zz", **{"cloud.google.com/gke-spot": "true"})],
            {"e2": 100, "x": 0},
        ),
        # The legacy beta label still names the type on old nodes.
        (
            {"prices": PRICES},
            [node("old", **{"beta.kubernetes.io/instance-type": "e2-standard-4"}), typed("c3", "c3-standard-8")],
            {"old": 100, "c3": 0},
        ),
        # Ties: equal prices score alike, at the top.
        ({"prices": PRICES}, [typed("a", "e2-standard-4"), typed("b", "e2-standard-4")], {"a": 100, "b": 100}),
        # One candidate.
        ({"prices": PRICES}, [typed("only", "c3-standard-8")], {"only": 100}),
        # No candidates.
        ({"prices": PRICES}, [], {}),
        # Free is a price too.
        ({"prices": {"free": 0, "paid": 1}}, [typed("f", "free"), typed("p", "paid")], {"f": 100, "p": 0}),
    ],
)
def test_scores(args, nodes, expected):
    assert scores(args, nodes) == expected


def test_scores_round_to_the_nearest_integer():
    # 0.25 -> 75 exactly; 1/3 of the spread -> 66.67 -> 67
    got = scores({"prices": {"a": 0, "b": 0.25, "c": 1, "d": 1 / 3}}, [typed(k, k) for k in "abcd"])
    assert got == {"a": 100, "b": 75, "c": 0, "d": 67}
    assert all(0 <= score <= MAX_NODE_SCORE for score in got.values())


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"prices": {"e2-standard-4": -1}}, "prices.e2-standard-4: Must be greater than or equal to 0."),
        ({"prices": {"e2 standard": 1}}, "prices.e2 standard: 'e2 standard' is not a valid label value"),
        ({"prices": {"e2-standard-4": "cheap"}}, "prices.e2-standard-4: must be a number"),
        ({"prices": {"e2-standard-4": "0.134"}}, "prices.e2-standard-4: must be a number"),
        ({"prices": {"e2-standard-4": True}}, "prices.e2-standard-4: must be a number"),
        ({"prices": PRICES, "spotDiscount": "0.7"}, "spotDiscount: must be a number"),
        ({}, "prices: Missing data for required field."),
        ({"prices": {}}, "prices: needs at least one instance type and its price"),
        ({"prices": PRICES, "defaultPrice": 0.1}, "defaultPrice: 0.1 is below the dearest listed price (0.4)"),
        ({"prices": PRICES, "scale": "absolute"}, "ceiling: scale: absolute needs a ceiling"),
        ({"prices": PRICES, "ceiling": 1}, "ceiling: only scale: absolute takes a ceiling"),
        ({"prices": PRICES, "scale": "log"}, "scale: Must be one of: relative, absolute."),
        ({"prices": ["e2-standard-4"]}, "prices: Not a valid mapping type."),
        ({"prices": PRICES, "spotDiscount": 1.5}, "spotDiscount: Must be greater than or equal to 0 and less than or equal to 1."),
        ({"prices": PRICES, "defaultPrice": -0.1}, "defaultPrice: Must be greater than or equal to 0."),
        ({"spotPrice": 0.3}, "spotPrice: Unknown field."),
    ],
)
def test_invalid_args_name_the_field(args, expected):
    with pytest.raises(ValidationError) as caught:
        InstanceCost.args_schema().load(args)
    lines = flatten_errors(caught.value.messages)
    assert any(line.startswith(expected) for line in lines), lines


def test_absolute_scale_scores_each_price_against_the_ceiling():
    """Relative scores make 0.134 vs 0.135 a 100 vs 0; against a ceiling of 1.0 they are 87 and 87 (86.6, 86.5)."""
    close = {"a": 0.134, "b": 0.135, "dear": 1.5}
    nodes = [typed("a", "a"), typed("b", "b")]
    assert scores({"prices": close}, nodes) == {"a": 100, "b": 0}
    absolute = {"prices": close, "scale": "absolute", "ceiling": 1.0}
    assert scores(absolute, nodes) == {"a": 87, "b": 87}
    # At or above the ceiling: 0; free: 100; unknown types cost the dearest listed price (1.5, above the ceiling).
    assert scores({**absolute, "prices": {**close, "free": 0}}, [typed("f", "free"), typed("d", "dear"), node("x")]) == {
        "f": 100, "d": 0, "x": 0
    }
