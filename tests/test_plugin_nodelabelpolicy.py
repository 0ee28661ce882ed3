"""NodeLabelPolicy: pods matching a rule may only run on nodes matching its node selector."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from extender.framework.status import Code
from extender.framework.types import Facts, Node
from extender.plugins.nodelabelpolicy import NodeLabelPolicy
from extender.wire.errors import flatten_errors
from tests.plugin_helpers import build, node, pod

POOL = "cloud.google.com/gke-nodepool"
RULES = [
    {
        "name": "ml-on-gpu",
        "pods": {"namespaces": ["ml"]},
        "nodeSelector": {"matchLabels": {POOL: "gpu"}},
    },
    {
        "name": "others-off-gpu",
        "pods": {"excludeNamespaces": ["ml"]},
        "nodeSelector": {"matchExpressions": [{"key": POOL, "operator": "NotIn", "values": ["gpu"]}]},
    },
    {
        "name": "critical-on-big-nodes",
        "pods": {"priority": {"min": 1000}},
        "nodeSelector": {"matchExpressions": [{"key": "example.com/cpus", "operator": "Gt", "values": ["7"]}]},
    },
]
GPU = node("gpu-1", **{POOL: "gpu", "example.com/cpus": "16"})
WEB = node("web-1", **{POOL: "web", "example.com/cpus": "4"})
BARE = node("bare-1")


@pytest.mark.parametrize(
    ("subject", "candidate", "broken"),
    [
        (pod(namespace="ml"), GPU, None),
        (pod(namespace="ml"), WEB, "ml-on-gpu"),
        (pod(namespace="ml"), BARE, "ml-on-gpu"),
        (pod(namespace="default"), WEB, None),
        (pod(namespace="default"), BARE, None),  # NotIn matches a node without the label
        (pod(namespace="default"), GPU, "others-off-gpu"),
        (pod(namespace="ml", priority=1000), GPU, None),
        (pod(namespace="default", priority=1000), WEB, "critical-on-big-nodes"),
        (pod(namespace="default", priority=1000), BARE, "critical-on-big-nodes"),  # Gt never matches a missing label
    ],
)
def test_rules_that_match_the_pod_must_all_hold(subject, candidate, broken):
    outcome = build(NodeLabelPolicy, {"rules": RULES}).filter(subject, candidate)
    if broken is None:
        assert outcome.is_success, outcome
    else:
        assert outcome.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert f"rule {broken!r}" in outcome.reason


def test_the_message_names_the_rule_and_what_the_node_lacks_and_is_the_same_for_every_node():
    plugin = build(NodeLabelPolicy, {"rules": RULES[:1]})
    first, second = (plugin.filter(pod(namespace="ml"), candidate).reason for candidate in (WEB, BARE))
    assert first == "NodeLabelPolicy rule 'ml-on-gpu': node does not match cloud.google.com/gke-nodepool=gpu"
    # One text for all nodes: the scheduler's event counts them ("3 <message>") instead of listing each.
    assert first == second


@pytest.mark.parametrize(
    ("rule", "candidate", "passes"),
    [
        # An empty pod selector applies to every pod; an empty node selector accepts every node.
        ({"name": "all-pods", "nodeSelector": {"matchLabels": {POOL: "web"}}}, WEB, True),
        ({"name": "all-pods", "nodeSelector": {"matchLabels": {POOL: "web"}}}, GPU, False),
        ({"name": "all-pods", "pods": {}, "nodeSelector": {"matchLabels": {POOL: "web"}}}, GPU, False),
        ({"name": "any-node", "nodeSelector": {}}, BARE, True),
        (
            {
                "name": "other-pods",
                "pods": {"labelSelector": {"matchLabels": {"team": "x"}}},
                "nodeSelector": {"matchLabels": {POOL: "web"}},
            },
            GPU,
            True,
        ),
    ],
)
def test_empty_selectors(rule, candidate, passes):
    assert build(NodeLabelPolicy, {"rules": [rule]}).filter(pod(), candidate).is_success is passes


def test_all_nodes_rejected():
    plugin = build(NodeLabelPolicy, {"rules": [{"name": "nowhere", "nodeSelector": {"matchLabels": {POOL: "none"}}}]})
    outcomes = [plugin.filter(pod(), candidate) for candidate in (GPU, WEB, BARE)]
    assert [outcome.code for outcome in outcomes] == [Code.UNSCHEDULABLE_AND_UNRESOLVABLE] * 3


def test_empty_labels_differ_from_unknown_labels_only_in_the_profile():
    # The plugin itself reads "no labels" for an empty map; unknown labels (None) never reach it (the profile
    # applies the failurePolicy first), and it declares that it needs them.
    assert NodeLabelPolicy.facts is Facts.LABELS
    plugin = build(
        NodeLabelPolicy,
        {"rules": [{"name": "r", "nodeSelector": {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}}]},
    )
    assert plugin.filter(pod(), Node("n", labels={})).is_success


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "rules: Missing data for required field."),
        ({"rules": []}, "rules: Shorter than minimum length 1."),
        ({"rules": [{"nodeSelector": {}}]}, "rules[0].name: Missing data for required field."),
        ({"rules": [{"name": "a"}]}, "rules[0].nodeSelector: Missing data for required field."),
        (
            {"rules": [{"name": "a", "nodeSelector": {}}, {"name": "a", "nodeSelector": {}}]},
            "rules[1].name: duplicate rule name 'a'",
        ),
        (
            {
                "rules": [
                    {
                        "name": "a",
                        "nodeSelector": {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]},
                    }
                ]
            },
            "rules[0].nodeSelector.matchExpressions[0].values: Gt needs exactly one value, an integer",
        ),
        (
            {"rules": [{"name": "a", "pods": {"namespaces": "ml"}, "nodeSelector": {}}]},
            "rules[0].pods.namespaces: Not a valid list.",
        ),
        ({"rules": [{"name": "a", "nodeSelectors": {}}]}, "rules[0].nodeSelectors: Unknown field."),
    ],
)
def test_invalid_args_name_the_field(args, expected):
    with pytest.raises(ValidationError) as caught:
        NodeLabelPolicy.args_schema().load(args)
    assert expected in flatten_errors(caught.value.messages)
