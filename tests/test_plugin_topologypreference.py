"""TopologyPreference: weights for label values, optionally per pod selector, scaled to the best candidate."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from extender.plugins.topologypreference import TopologyPreference
from extender.wire.errors import flatten_errors
from tests.plugin_helpers import build, node, pod

ZONE = "topology.kubernetes.io/zone"
FAMILY = "cloud.google.com/machine-family"
ZONES = {"label": ZONE, "weights": {"europe-west1-b": 100, "europe-west1-c": 50}}
FAMILIES = {"label": FAMILY, "weights": {"c3": 100, "n2": 40}, "pods": {"namespaces": ["batch"]}}

B_C3 = node("b-c3", **{ZONE: "europe-west1-b", FAMILY: "c3"})
C_N2 = node("c-n2", **{ZONE: "europe-west1-c", FAMILY: "n2"})
D_E2 = node("d-e2", **{ZONE: "europe-west1-d", FAMILY: "e2"})
BARE = node("bare")


def scores(preferences, subject, nodes):
    plugin = build(TopologyPreference, {"preferences": preferences})
    raw = {candidate.name: plugin.score(subject, candidate) for candidate in nodes}
    plugin.normalize_scores(subject, raw)
    return raw


@pytest.mark.parametrize(
    ("preferences", "subject", "nodes", "expected"),
    [
        ([ZONES], pod(), [B_C3, C_N2, D_E2, BARE], {"b-c3": 100, "c-n2": 50, "d-e2": 0, "bare": 0}),
        # Scaled to the best candidate: without the b node, c is the best there is.
        ([ZONES], pod(), [C_N2, D_E2], {"c-n2": 100, "d-e2": 0}),
        # A preference for other pods does not apply.
        ([ZONES, FAMILIES], pod(namespace="web"), [B_C3, C_N2], {"b-c3": 100, "c-n2": 50}),
        # Preferences that apply add up: b-c3 200, c-n2 90.
        ([ZONES, FAMILIES], pod(namespace="batch"), [B_C3, C_N2, D_E2], {"b-c3": 100, "c-n2": 45, "d-e2": 0}),
        # No preference applies to the pod, or no candidate has a preferred value: all 0 (ties).
        ([FAMILIES], pod(namespace="web"), [B_C3, C_N2], {"b-c3": 0, "c-n2": 0}),
        ([ZONES], pod(), [D_E2, BARE], {"d-e2": 0, "bare": 0}),
        # A weight of 0 is allowed and counts as not preferred.
        (
            [{"label": ZONE, "weights": {"europe-west1-b": 0, "europe-west1-c": 1}}],
            pod(),
            [B_C3, C_N2],
            {"b-c3": 0, "c-n2": 100},
        ),
        # A missing label is not an empty value.
        (
            [{"label": "k", "weights": {"": 50, "a": 100}}],
            pod(),
            [node("empty", k=""), BARE],
            {"empty": 100, "bare": 0},
        ),
        # Ties among preferred nodes.
        ([ZONES], pod(), [B_C3, node("b-2", **{ZONE: "europe-west1-b"})], {"b-c3": 100, "b-2": 100}),
        # One candidate, and none.
        ([ZONES], pod(), [C_N2], {"c-n2": 100}),
        ([ZONES], pod(), [], {}),
        # Rounding: 1/3 -> 33, 2/3 -> 67.
        (
            [{"label": "k", "weights": {"a": 3, "b": 2, "c": 1}}],
            pod(),
            [node(v, k=v) for v in "abc"],
            {"a": 100, "b": 67, "c": 33},
        ),
    ],
)
def test_scores(preferences, subject, nodes, expected):
    assert scores(preferences, subject, nodes) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "preferences: Missing data for required field."),
        ({"preferences": []}, "preferences: Shorter than minimum length 1."),
        ({"preferences": [{"weights": {"a": 1}}]}, "preferences[0].label: Missing data for required field."),
        ({"preferences": [{"label": ZONE}]}, "preferences[0].weights: Missing data for required field."),
        ({"preferences": [{"label": ZONE, "weights": {}}]}, "preferences[0].weights: Shorter than minimum length 1."),
        (
            {"preferences": [{"label": ZONE, "weights": {"a": 101}}]},
            "preferences[0].weights.a: Must be greater than or equal to 0 and less than or equal to 100.",
        ),
        (
            {"preferences": [{"label": ZONE, "weights": {"a": -1}}]},
            "preferences[0].weights.a: Must be greater than or equal to 0 and less than or equal to 100.",
        ),
        ({"preferences": [{"label": ZONE, "weights": {"a": 1.5}}]}, "preferences[0].weights.a: Not a valid integer."),
        (
            {"preferences": [{"label": "bad key", "weights": {"a": 1}}]},
            "preferences[0].label: 'bad key' is not a valid key",
        ),
        (
            {"preferences": [{"label": ZONE, "weights": {"a": 1}, "pods": {"namespaces": ["Bad"]}}]},
            "preferences[0].pods.namespaces[0]: 'Bad' is not a valid namespace name",
        ),
    ],
)
def test_invalid_args_name_the_field(args, expected):
    with pytest.raises(ValidationError) as caught:
        TopologyPreference.args_schema().load(args)
    lines = flatten_errors(caught.value.messages)
    assert any(line.startswith(expected) for line in lines), lines
