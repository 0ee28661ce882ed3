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
        (
            {"prices": PRICES, "spotDiscount": 1.5},
            "spotDiscount: Must be greater than or equal to 0 and less than or equal to 1.",
        ),
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
    assert scores(
        {**absolute, "prices": {**close, "free": 0}}, [typed("f", "free"), typed("d", "dear"), node("x")]
    ) == {"f": 100, "d": 0, "x": 0}


def test_the_relative_scale_is_exact_in_any_unit():
    """Per-second prices used to be rounded to millionths: 2.1e-6 and 2.4e-6 both became 2 and both scored 100."""
    per_second = {"prices": {"a": 2.1e-6, "b": 2.4e-6, "c": 2.2e-6}}
    assert scores(per_second, [typed(k, k) for k in "abc"]) == {"a": 100, "b": 0, "c": 67}
    # The decimals as written: 0.135 is 27/200, so 100 × (1 − 0.135) is 86.5 exactly and rounds half up.
    absolute = {"prices": {"a": 0.135}, "scale": "absolute", "ceiling": 1.0}
    assert scores(absolute, [typed("a", "a")]) == {"a": 87}
    # Spot discounts too: 3e-7 × (1 − 0.5) = 1.5e-7 is the cheapest, exactly between 1e-7 and 2e-7 to nothing else.
    spot = {"prices": {"a": 1e-7, "b": 3e-7, "c": 2e-7}, "spotDiscount": 0.5}
    nodes = [typed("a", "a"), typed("b", "b", **{"cloud.google.com/gke-spot": "true"}), typed("c", "c")]
    assert scores(spot, nodes) == {"a": 100, "b": 50, "c": 0}


def test_a_tiny_ceiling_scores_instead_of_dividing_by_zero():
    """A ceiling of 4e-7 used to be rounded to 0 millionths: every prioritize failed with ZeroDivisionError."""
    args = {"prices": {"a": 1e-7, "b": 4e-7, "c": 5e-7}, "scale": "absolute", "ceiling": 4e-7}
    assert scores(args, [typed(k, k) for k in "abc"]) == {"a": 75, "b": 0, "c": 0}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"prices": {"a": 1e303}}, "prices.a: 1e+303 is no price: at most 1e+15"),
        ({"prices": {"a": 1.0}, "defaultPrice": 1e303}, "defaultPrice: 1e+303 is no price: at most 1e+15"),
        ({"prices": {"a": 1.0}, "scale": "absolute", "ceiling": 1e303}, "ceiling: 1e+303 is no price: at most 1e+15"),
        ({"prices": {"a": float("inf")}}, "prices.a: Special numeric values (nan or infinity) are not permitted."),
        ({"prices": {"a": float("nan")}}, "prices.a: Special numeric values (nan or infinity) are not permitted."),
        ({"prices": {"a": 1.0}, "spotDiscount": float("nan")}, "spotDiscount: Special numeric values"),
        ({"prices": {"a": 1.0}, "scale": "absolute", "ceiling": 0}, "ceiling: Must be greater than 0"),
    ],
)
def test_prices_the_plugin_cannot_score_are_field_errors(args, expected):
    """1e303 used to pass the args schema and stop check-policy (and start-up) with an OverflowError traceback."""
    with pytest.raises(ValidationError) as caught:
        InstanceCost.args_schema().load(args)
    lines = flatten_errors(caught.value.messages)
    assert any(line.startswith(expected) for line in lines), lines


def test_check_policy_names_a_huge_price_at_its_field(tmp_path, capsys):
    from extender.__main__ import main

    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "nodeCacheCapable: false\nprofiles:\n- name: default\n"
        "  plugins: {score: {enabled: [{name: InstanceCost, weight: 1}]}}\n"
        "  pluginConfig: [{name: InstanceCost, args: {prices: {e2-standard-4: 1e303}}}]\n"
    )
    assert main(["check-policy", str(policy)]) == 1
    err = capsys.readouterr().err
    assert "profiles[0].pluginConfig[0].args.prices.e2-standard-4: 1e+303 is no price: at most 1e+15" in err
    assert "Traceback" not in err


def test_a_json_policy_may_write_prices_with_exponents(tmp_path):
    """JSON numbers such as 2e-6 (and YAML's, as YAML 1.2 and Kubernetes read them) are numbers, not strings."""
    import json

    from extender.policy.loader import load_policy

    document = {
        "nodeCacheCapable": False,
        "profiles": [
            {
                "name": "default",
                "plugins": {"score": {"enabled": [{"name": "InstanceCost", "weight": 1}]}},
                "pluginConfig": [{"name": "InstanceCost", "args": {"prices": {"a": 2e-6, "b": 3e-6}}}],
            }
        ],
    }
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(document).replace("2e-06", "2e-6").replace("3e-06", "3E-6"))
    assert "2e-6" in policy.read_text()
    load_policy(policy)
    (tmp_path / "policy.yaml").write_text(
        "nodeCacheCapable: false\nprofiles:\n- name: default\n"
        "  plugins: {score: {enabled: [{name: InstanceCost, weight: 1}]}}\n"
        "  pluginConfig: [{name: InstanceCost, args: {prices: {a: 2e-6, b: 1e+3}}}]\n"
    )
    load_policy(tmp_path / "policy.yaml")
