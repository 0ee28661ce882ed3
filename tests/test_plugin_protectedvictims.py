"""ProtectedVictims: a candidate node whose victims include a protected pod is dropped from preemption."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from extender.framework.profile import Profile
from extender.framework.status import Code
from extender.framework.types import Pod, VictimFacts, Victims
from extender.plugins.protectedvictims import ProtectedVictims
from extender.wire.errors import flatten_errors
from tests.plugin_helpers import build, pod

PROTECT = [
    {"name": "system", "pods": {"namespaces": ["kube-system"]}},
    {"name": "opted-out", "pods": {"annotationSelector": {"matchLabels": {"example.com/preemptible": "false"}}}},
    {
        "name": "databases",
        "pods": {
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["postgres", "redis"]}]}
        },
    },
]
PREEMPTOR = pod("urgent", priority=1000)
BATCH = pod("batch-1", labels={"app": "batch"})
DNS = pod("coredns-1", namespace="kube-system")
OPTED_OUT = pod("report-1", annotations={"example.com/preemptible": "false"})
OPTED_IN = pod("report-2", annotations={"example.com/preemptible": "true"})
REDIS = pod("redis-0", labels={"app": "redis"})


@pytest.mark.parametrize(
    ("victims", "protected_by"),
    [
        ([BATCH], None),
        ([OPTED_IN], None),
        ([BATCH, DNS], "'system' protects victim kube-system/coredns-1"),
        ([OPTED_OUT], "'opted-out' protects victim default/report-1"),
        ([BATCH, OPTED_IN, REDIS], "'databases' protects victim default/redis-0"),
        ([], None),
    ],
)
def test_protected_victims_veto_their_node(victims, protected_by):
    outcome = build(ProtectedVictims, {"protect": PROTECT}).select_victims(PREEMPTOR, "node-a", Victims(tuple(victims)))
    if protected_by is None:
        assert outcome.is_success
    else:
        assert outcome.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert outcome.reason == f"ProtectedVictims rule {protected_by}"


def test_an_empty_pod_selector_protects_every_pod():
    plugin = build(ProtectedVictims, {"protect": [{"name": "everything"}]})
    assert not plugin.select_victims(PREEMPTOR, "node-a", Victims((BATCH,))).is_success


def test_the_profile_keeps_unprotected_candidates_and_drops_the_rest():
    profile = Profile("p", preempts=[build(ProtectedVictims, {"protect": PROTECT})])
    candidates = {"node-a": Victims((BATCH,)), "node-b": Victims((BATCH, DNS), 1), "node-c": Victims((OPTED_IN,))}
    result = profile.preempt(PREEMPTOR, candidates, {})
    assert result.error is None
    assert result.accepted == {"node-a": candidates["node-a"], "node-c": candidates["node-c"]}
    assert set(result.rejected) == {"node-b"}


def test_all_candidates_protected_vetoes_preemption():
    profile = Profile("p", preempts=[build(ProtectedVictims, {"protect": PROTECT})])
    result = profile.preempt(PREEMPTOR, {"node-a": Victims((DNS,)), "node-b": Victims((REDIS,))}, {})
    assert result.accepted == {}
    assert set(result.rejected) == {"node-a", "node-b"}


def test_victims_known_by_uid_only_cannot_be_checked():
    # nodeCacheCapable: true sends victim UIDs only; the plugin declares that it needs the pods.
    assert ProtectedVictims.victim_facts is VictimFacts.POD
    profile = Profile("p", preempts=[build(ProtectedVictims, {"protect": PROTECT})])
    result = profile.preempt(PREEMPTOR, {"node-a": Victims((Pod(uid="e0c37279"),))}, {})
    assert result.accepted == {}
    assert result.error is not None and result.error.code is Code.ERROR


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "protect: Missing data for required field."),
        ({"protect": []}, "protect: Shorter than minimum length 1."),
        ({"protect": [{"pods": {}}]}, "protect[0].name: Missing data for required field."),
        ({"protect": [{"name": "a"}, {"name": "a"}]}, "protect[1].name: duplicate rule name 'a'"),
        (
            {"protect": [{"name": "a", "pods": {"annotationSelector": {"matchLabels": {"bad key": "x"}}}}]},
            "protect[0].pods.annotationSelector.matchLabels.bad key: 'bad key' is not a valid key",
        ),
        ({"protect": [{"name": "a", "namespaces": ["x"]}]}, "protect[0].namespaces: Unknown field."),
    ],
)
def test_invalid_args_name_the_field(args, expected):
    with pytest.raises(ValidationError) as caught:
        ProtectedVictims.args_schema().load(args)
    lines = flatten_errors(caught.value.messages)
    assert any(line.startswith(expected) for line in lines), lines
