"""Property-based: arbitrary JSON and arbitrary well-formed requests at every verb.

Never a 500, always JSON, and never a node outside the input.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.scheduler_checks import check_answer
from tests.conftest import make_client

POLICY = """
# InstanceCost reads node labels: node-name requests get its Error, full-node requests its scores.
nodeCacheCapable: false
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}]}
    score: {enabled: [{name: InstanceCost, weight: 2}]}
  pluginConfig:
  - name: NodeNameFilter
    args: {deny: ["*-x*"]}
  - name: InstanceCost
    args: {prices: {small: 1.0, large: 4.0}, spotDiscount: 0.25}
"""
VERBS = ["filter", "prioritize", "preempt", "bind"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    policy = tmp_path_factory.mktemp("policy") / "policy.yaml"
    policy.write_text(POLICY)
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield make_client(monkeypatch, policy)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
wire_keys = st.sampled_from(
    [
        "Pod",
        "Nodes",
        "NodeNames",
        "NodeNameToVictims",
        "NodeNameToMetaVictims",
        "PodName",
        "PodNamespace",
        "PodUID",
        "Node",
        "items",
        "metadata",
    ]
)
wire_shaped = st.recursive(
    json_values,
    lambda children: (
        st.dictionaries(wire_keys | st.text(max_size=8), children, max_size=6) | st.lists(children, max_size=4)
    ),
    max_leaves=40,
)


def assert_clean(response):
    assert response.status_code != 500, response.data
    assert response.mimetype == "application/json"
    answer = response.get_json()
    if response.status_code != 200:
        assert 400 <= response.status_code < 500
        assert isinstance(answer["Error"], str) and answer["Error"]
    return answer


@SETTINGS
@given(verb=st.sampled_from(VERBS), payload=wire_shaped)
def test_arbitrary_json_never_breaks_the_function(client, verb, payload):
    assert_clean(client.post(f"/{verb}", data=json.dumps(payload), content_type="application/json"))


@SETTINGS
@given(verb=st.sampled_from(VERBS), body=st.binary(max_size=200))
def test_arbitrary_bytes_never_break_the_function(client, verb, body):
    assert_clean(client.post(f"/{verb}", data=body, content_type="application/json"))


label_values = st.text(st.characters(codec="utf-8"), max_size=12)
labels = st.dictionaries(
    st.sampled_from(["node.kubernetes.io/instance-type", "cloud.google.com/gke-spot", "zone", "x"]),
    st.sampled_from(["small", "large", "true", "false"]) | label_values,
    max_size=4,
)
node_names = st.lists(
    st.text(st.characters(codec="ascii", categories=["L", "N", "Pd"]), min_size=1, max_size=12), max_size=8, unique=True
)
pods = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"name": st.text(max_size=8), "namespace": st.text(max_size=8), "uid": st.uuids().map(str)},
            optional={"labels": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)},
        )
    },
    optional={"spec": st.fixed_dictionaries({}, optional={"priority": st.integers(-(2**31), 2**31 - 1) | st.none()})},
)


@st.composite
def extender_args(draw):
    names = draw(node_names)
    pod = draw(pods)
    if draw(st.booleans()):
        items = [
            {"metadata": {"name": name, "labels": draw(labels), "uid": name}, "status": {"images": []}}
            for name in names
        ]
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    return {"Pod": pod, "Nodes": None, "NodeNames": names}


@st.composite
def preemption_args(draw):
    names = draw(node_names)
    pod = draw(pods)
    victims = {name: draw(st.lists(pods, max_size=3)) for name in names}
    if draw(st.booleans()):
        full = {name: {"Pods": pods_, "NumPDBViolations": draw(st.integers(0, 3))} for name, pods_ in victims.items()}
        return {"Pod": pod, "NodeNameToVictims": full, "NodeNameToMetaVictims": None}
    meta = {
        name: {"Pods": [{"UID": p["metadata"]["uid"]} for p in pods_], "NumPDBViolations": 0}
        for name, pods_ in victims.items()
    }
    return {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}


@SETTINGS
@given(verb=st.sampled_from(["filter", "prioritize"]), request=extender_args())
def test_well_formed_requests_get_answers_the_scheduler_accepts(client, verb, request):
    response = client.post(f"/{verb}", data=json.dumps(request), content_type="application/json")
    assert response.status_code == 200, response.data
    answer = response.get_json()
    check_answer(verb, request, answer)
    if verb == "filter":
        kept = (
            answer["NodeNames"]
            if request["NodeNames"] is not None
            else [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
        )
        denied = set(answer["FailedAndUnresolvableNodes"])
        assert all("-x" not in name for name in kept)
        assert all("-x" in name for name in denied)


@SETTINGS
@given(request=preemption_args())
def test_well_formed_preemption_requests_answer_offered_victims_only(client, request):
    response = client.post("/preempt", data=json.dumps(request), content_type="application/json")
    assert response.status_code == 200, response.data
    answer = response.get_json()
    check_answer("preempt", request, answer)
    offered = (
        request["NodeNameToVictims"] if request["NodeNameToVictims"] is not None else request["NodeNameToMetaVictims"]
    )
    assert set(answer["NodeNameToMetaVictims"]) == {name for name in offered if "-x" not in name}
