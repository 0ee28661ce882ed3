"""Label and pod selectors: Kubernetes semantics, and the field-path messages of invalid ones."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from extender.framework.selectors import LabelSelectorSchema, PodSelectorSchema
from extender.wire.errors import flatten_errors
from tests.plugin_helpers import pod

ZONE_A = {"topology.kubernetes.io/zone": "a", "idx": "5", "gpu": ""}


def selector(data):
    return LabelSelectorSchema().load(data)


@pytest.mark.parametrize(
    ("data", "labels", "expected"),
    [
        # An empty selector matches everything, even an object without labels.
        ({}, {}, True),
        ({}, ZONE_A, True),
        ({"matchLabels": {}, "matchExpressions": []}, ZONE_A, True),
        ({"matchLabels": {"topology.kubernetes.io/zone": "a"}}, ZONE_A, True),
        ({"matchLabels": {"topology.kubernetes.io/zone": "b"}}, ZONE_A, False),
        ({"matchLabels": {"missing": "x"}}, ZONE_A, False),
        # matchLabels with an empty value needs the key with an empty value.
        ({"matchLabels": {"gpu": ""}}, ZONE_A, True),
        ({"matchLabels": {"missing": ""}}, ZONE_A, False),
        (
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}]},
            ZONE_A,
            True,
        ),
        (
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]},
            ZONE_A,
            False,
        ),
        ({"matchExpressions": [{"key": "missing", "operator": "In", "values": ["a"]}]}, ZONE_A, False),
        # NotIn matches objects without the key, as in Kubernetes.
        (
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["b"]}]},
            ZONE_A,
            True,
        ),
        (
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["a"]}]},
            ZONE_A,
            False,
        ),
        ({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["a"]}]}, ZONE_A, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, ZONE_A, True),
        ({"matchExpressions": [{"key": "missing", "operator": "Exists"}]}, ZONE_A, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, ZONE_A, False),
        ({"matchExpressions": [{"key": "missing", "operator": "DoesNotExist"}]}, ZONE_A, True),
        ({"matchExpressions": [{"key": "idx", "operator": "Gt", "values": ["4"]}]}, ZONE_A, True),
        ({"matchExpressions": [{"key": "idx", "operator": "Gt", "values": ["5"]}]}, ZONE_A, False),
        ({"matchExpressions": [{"key": "idx", "operator": "Lt", "values": ["6"]}]}, ZONE_A, True),
        ({"matchExpressions": [{"key": "idx", "operator": "Lt", "values": ["-1"]}]}, ZONE_A, False),
        # Gt/Lt never match a missing key or a value that is not an integer.
        ({"matchExpressions": [{"key": "missing", "operator": "Gt", "values": ["0"]}]}, ZONE_A, False),
        (
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "Lt", "values": ["9"]}]},
            ZONE_A,
            False,
        ),
        ({"matchExpressions": [{"key": "gpu", "operator": "Lt", "values": ["9"]}]}, ZONE_A, False),
        # Values parse as Go's int64 does: a sign is fine, spaces, underscores and overflow are not numbers.
        ({"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["-3"]}]}, {"n": "+2"}, True),
        ({"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["1"]}]}, {"n": "1_000"}, False),
        ({"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["1"]}]}, {"n": str(2**63)}, False),
        ({"matchExpressions": [{"key": "n", "operator": "Lt", "values": ["1"]}]}, {"n": str(-(2**63))}, True),
        # Everything must hold.
        (
            {
                "matchLabels": {"topology.kubernetes.io/zone": "a"},
                "matchExpressions": [
                    {"key": "idx", "operator": "Gt", "values": ["1"]},
                    {"key": "gpu", "operator": "DoesNotExist"},
                ],
            },
            ZONE_A,
            False,
        ),
    ],
)
def test_label_selector_semantics(data, labels, expected):
    assert selector(data).matches(labels) is expected


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ({}, "<everything>"),
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {
                "matchExpressions": [
                    {"key": "z", "operator": "In", "values": ["y", "x"]},
                    {"key": "z", "operator": "NotIn", "values": ["w"]},
                    {"key": "g", "operator": "Exists"},
                    {"key": "h", "operator": "DoesNotExist"},
                    {"key": "n", "operator": "Gt", "values": ["3"]},
                    {"key": "n", "operator": "Lt", "values": ["9"]},
                ]
            },
            "z in (x,y),z notin (w),g,!h,n>3,n<9",
        ),
    ],
)
def test_selectors_print_as_kubectl_does(data, text):
    assert str(selector(data)) == text


def problems(schema, data):
    with pytest.raises(ValidationError) as caught:
        schema.load(data)
    return flatten_errors(caught.value.messages)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "matchExpressions[0].values: In needs at least one value",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]},
            "matchExpressions[0].values: NotIn needs at least one value",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "matchExpressions[0].values: Exists takes no values",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
            "matchExpressions[0].values: DoesNotExist takes no values",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1", "2"]}]},
            "matchExpressions[0].values: Gt needs exactly one value, an integer",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": [str(2**63)]}]},
            "matchExpressions[0].values: Gt needs exactly one value, an integer",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Lt", "values": ["1.5"]}]},
            "matchExpressions[0].values: Lt needs exactly one value, an integer",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]},
            "matchExpressions[0].operator: unknown operator 'in'",
        ),
        ({"matchExpressions": [{"operator": "Exists"}]}, "matchExpressions[0].key: Missing data for required field."),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "not ok"]}]},
            "matchExpressions[0].values[1]: 'not ok' is not a valid label value",
        ),
        (
            {"matchExpressions": [{"key": "-a", "operator": "Exists"}]},
            "matchExpressions[0].key: '-a' is not a valid key",
        ),
        (
            {"matchLabels": {"Example.com/zone": "a"}},
            "matchLabels.Example.com/zone: 'Example.com/zone' is not a valid key: the prefix",
        ),
        ({"matchLabels": {"zone": "a b"}}, "matchLabels.zone: 'a b' is not a valid label value"),
        ({"matchLabels": {"zone": "x" * 64}}, "matchLabels.zone: "),
        ({"matchLabel": {"zone": "a"}}, "matchLabel: Unknown field."),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "value": "x"}]},
            "matchExpressions[0].value: Unknown field.",
        ),
    ],
)
def test_invalid_label_selectors_name_the_field(data, expected):
    assert any(line.startswith(expected) for line in problems(LabelSelectorSchema(), data)), problems(
        LabelSelectorSchema(), data
    )


def test_annotation_selector_values_are_free_text():
    loaded = PodSelectorSchema().load(
        {
            "annotationSelector": {
                "matchLabels": {"example.com/reason": "do not evict, ever"},
                "matchExpressions": [{"key": "example.com/note", "operator": "In", "values": ["a b"]}],
            }
        }
    )
    assert loaded.matches(pod(annotations={"example.com/reason": "do not evict, ever", "example.com/note": "a b"}))
    assert not loaded.matches(pod(annotations={"example.com/reason": "whatever"}))


@pytest.mark.parametrize(
    ("data", "subject", "expected"),
    [
        ({}, pod(), True),
        ({"namespaces": ["default", "ml"]}, pod(namespace="ml"), True),
        ({"namespaces": ["ml"]}, pod(namespace="default"), False),
        ({"excludeNamespaces": ["kube-system"]}, pod(namespace="kube-system"), False),
        ({"excludeNamespaces": ["kube-system"]}, pod(namespace="default"), True),
        ({"labelSelector": {"matchLabels": {"team": "ml"}}}, pod(labels={"team": "ml"}), True),
        ({"labelSelector": {"matchLabels": {"team": "ml"}}}, pod(labels={"team": "web"}), False),
        ({"labelSelector": {}}, pod(), True),
        (
            {"annotationSelector": {"matchExpressions": [{"key": "example.com/keep", "operator": "Exists"}]}},
            pod(annotations={"example.com/keep": ""}),
            True,
        ),
        (
            {"annotationSelector": {"matchExpressions": [{"key": "example.com/keep", "operator": "Exists"}]}},
            pod(),
            False,
        ),
        ({"priority": {"min": 1000}}, pod(priority=1000), True),
        ({"priority": {"min": 1000}}, pod(priority=999), False),
        ({"priority": {"max": 0}}, pod(priority=None), True),  # no spec.priority reads as 0, as in Kubernetes
        ({"priority": {"min": 1}}, pod(priority=None), False),
        ({"priority": {"min": -10, "max": 10}}, pod(priority=-10), True),
        ({"priority": {"min": -10, "max": 10}}, pod(priority=11), False),
        # Every criterion that is set must hold.
        (
            {"namespaces": ["ml"], "labelSelector": {"matchLabels": {"team": "ml"}}},
            pod(namespace="ml", labels={"team": "web"}),
            False,
        ),
    ],
)
def test_pod_selector_semantics(data, subject, expected):
    assert PodSelectorSchema().load(data).matches(subject) is expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"namespaces": []}, "namespaces: Shorter than minimum length 1."),
        ({"namespaces": ["Kube_System"]}, "namespaces[0]: 'Kube_System' is not a valid namespace name"),
        ({"excludeNamespaces": []}, "excludeNamespaces: Shorter than minimum length 1."),
        ({"priority": {"min": 10, "max": 1}}, "priority: min (10) is above max (1)"),
        ({"priority": {"min": "10"}}, "priority.min: Not a valid integer."),
        ({"labelSelector": {"matchLabels": {"a": 1}}}, "labelSelector.matchLabels.a: Not a valid string."),
        ({"namespace": ["ml"]}, "namespace: Unknown field."),
    ],
)
def test_invalid_pod_selectors_name_the_field(data, expected):
    assert any(line.startswith(expected) for line in problems(PodSelectorSchema(), data)), problems(
        PodSelectorSchema(), data
    )
