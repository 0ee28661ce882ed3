"""A multi-profile policy, end to end through the function, on the kube-scheduler recordings.

Each profile is served under its own URL segment; the ``c1`` profiles
reproduce the decisions the recording extender made in scenario c1 (node-b
has no license slot: FailedNodes; node-c is in the wrong rack:
FailedAndUnresolvableNodes), once from node names and a custom plugin, once
from node labels, which also ranks the node of the preferred zone first.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import textwrap

import pytest

from testkit.scheduler_checks import check_answer
from tests.recordings import exchanges, scenarios

POLICY = """
apiVersion: extender.scheduling.gcf/v1alpha1
kind: ExtenderPolicy
# Label-reading profiles serve full-node requests only: node-name requests to them answer Error.
nodeCacheCapable: false
failurePolicy: Fail
pluginModules: [tests.custom_plugins]
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}]}
- name: c1
  plugins:
    filter: {enabled: [{name: NodeNameFilter}, {name: LicenseSlots}]}
  pluginConfig:
  - {name: NodeNameFilter, args: {deny: [node-c]}}
  - {name: LicenseSlots, args: {full: [node-b]}}
- name: c1-labels
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}, {name: LicenseSlots}]}
    score: {enabled: [{name: TopologyPreference, weight: 1}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: rack
        pods: {namespaces: [default], labelSelector: {matchLabels: {app: demo}}}
        nodeSelector: {matchExpressions: [{key: harness/idx, operator: NotIn, values: ["2"]}]}
  - {name: LicenseSlots, args: {full: [node-b]}}
  - name: TopologyPreference
    args: {preferences: [{label: topology.kubernetes.io/zone, weights: {zone-1: 100, zone-0: 10}}]}
- name: cost
  plugins:
    score: {enabled: [{name: InstanceCost, weight: 2}, {name: TopologyPreference, weight: 1}]}
  pluginConfig:
  - {name: InstanceCost, args: {prices: {e2-standard-4: 0.134, n2-standard-8: 0.388}, spotDiscount: 0.7}}
  - {name: TopologyPreference, args: {preferences: [{label: topology.kubernetes.io/zone, weights: {zone-0: 100}}]}}
- name: protect-low
  plugins:
    preempt: {enabled: [{name: ProtectedVictims}]}
  pluginConfig:
  - {name: ProtectedVictims, args: {protect: [{name: low, pods: {labelSelector: {matchLabels: {prio: low}}}}]}}
- name: protect-system
  plugins:
    preempt: {enabled: [{name: ProtectedVictims}]}
  pluginConfig:
  - {name: ProtectedVictims, args: {protect: [{name: system, pods: {namespaces: [kube-system]}}]}}
"""
PROFILES = ["default", "c1", "c1-labels", "cost", "protect-low", "protect-system"]
EXCHANGES = exchanges()


@pytest.fixture
def client(client_factory, tmp_path):
    (tmp_path / "policy.yaml").write_text(POLICY)
    return client_factory(tmp_path / "policy.yaml")


def post(client, profile, verb, body):
    path = f"/{verb}" if profile is None else f"/{profile}/{verb}"
    response = client.post(path, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.data
    return response


def exchange(recording, seq):
    return next(e for e in EXCHANGES if e.recording == recording and e.seq == seq)


def recorded(*names):
    """The recordings of these scenarios, of every kube-scheduler version that recorded them."""
    return pytest.mark.parametrize(
        "recording", [found for found in scenarios() if found.name in names], ids=lambda found: found.id
    )


def kept(answer):
    if answer.get("Nodes") is not None:
        return [node["metadata"]["name"] for node in answer["Nodes"]["items"]]
    return answer["NodeNames"]


def test_every_profile_answers_every_recorded_request_as_the_scheduler_expects(client):
    for profile in PROFILES:
        for recorded in EXCHANGES:
            answer = post(client, profile, recorded.verb, recorded.request).get_json()
            check_answer(recorded.verb, recorded.request, answer)


@recorded("c1-partial-reject-nodecache-false", "c1-partial-reject-nodecache-true")
def test_the_c1_profile_reproduces_the_recorded_decisions_in_both_modes(client, recording):
    first = exchange(recording, 1)
    summary = recording.summary
    answer = post(client, "c1", "filter", first.request).get_json()
    want = first.recorded_response
    assert kept(answer) == summary["allowed"] == kept(want)
    assert answer["FailedNodes"] == {"node-b": "LicenseSlots: node has no license slot"}
    assert set(answer["FailedAndUnresolvableNodes"]) == set(want["FailedAndUnresolvableNodes"]) == {"node-c"}
    assert answer["FailedAndUnresolvableNodes"]["node-c"] == "NodeNameFilter: node name is on the deny list"
    assert answer["Error"] == ""


@recorded("c1-partial-reject-nodecache-false")
def test_the_c1_labels_profile_reproduces_c1_from_labels_and_breaks_the_recorded_tie(client, recording):
    summary = recording.summary
    answer = post(client, "c1-labels", "filter", exchange(recording, 1).request).get_json()
    assert kept(answer) == summary["allowed"]
    assert list(answer["FailedNodes"]) == ["node-b"]
    assert answer["FailedAndUnresolvableNodes"] == {
        "node-c": "NodeLabelPolicy rule 'rack': node does not match harness/idx notin (2)"
    }
    scores = post(client, "c1-labels", "prioritize", exchange(recording, 2).request).get_json()
    assert scores == [{"Host": "node-a", "Score": 1}, {"Host": "node-d", "Score": 10}]
    # The recording extender scored both nodes alike and they are identical, idle nodes: the scheduler picked one at
    # random (v1.28.4 node-d, v1.35.4 node-a). The zone preference decides where the recording could not.
    assert len({entry["Score"] for entry in exchange(recording, 2).recorded_response}) == 1
    assert summary["bound_to"] in summary["allowed"]


@recorded("c1-partial-reject-nodecache-true")
def test_label_profiles_answer_node_name_requests_with_an_error_that_says_what_is_missing(client, recording):
    answer = post(client, "c1-labels", "filter", exchange(recording, 1).request).get_json()
    assert answer["NodeNames"] == [] and "NodeLabelPolicy needs node labels" in answer["Error"]
    assert "nodeSource" in answer["Error"]
    response = post(client, "c1-labels", "prioritize", exchange(recording, 2).request)
    assert response.get_json() == [{"Host": "node-a", "Score": 0}, {"Host": "node-d", "Score": 0}]
    assert "TopologyPreference needs node labels" in response.headers["X-Extender-Error"]


def with_labels(request, labels_by_node):
    """The recorded request with extra labels on its nodes, as on a real GKE cluster."""
    request = copy.deepcopy(request)
    for node in request["Nodes"]["items"]:
        node["metadata"]["labels"].update(labels_by_node.get(node["metadata"]["name"], {}))
    return request


@recorded("c1-partial-reject-nodecache-false")
def test_the_cost_profile_weighs_price_against_zone(client, recording):
    # node-a (zone-0) is an on-demand e2 at 0.134; node-d (zone-1) a spot n2 at 0.388 * 0.3 = 0.1164, the cheapest.
    request = with_labels(
        exchange(recording, 2).request,
        {
            "node-a": {"node.kubernetes.io/instance-type": "e2-standard-4"},
            "node-d": {"node.kubernetes.io/instance-type": "n2-standard-8", "cloud.google.com/gke-spot": "true"},
        },
    )
    # InstanceCost (weight 2): node-d 100, node-a 0; TopologyPreference (weight 1): node-a 100, node-d 0.
    # (2*100 + 0) / 30 = 6.7 -> 7 and (0 + 100) / 30 = 3.3 -> 3.
    assert post(client, "cost", "prioritize", request).get_json() == [
        {"Host": "node-a", "Score": 3},
        {"Host": "node-d", "Score": 7},
    ]


@recorded("c1-partial-reject-nodecache-false")
def test_the_cost_profile_ties_nodes_of_unknown_price(client, recording):
    scores = post(client, "cost", "prioritize", exchange(recording, 2).request).get_json()
    # No instance types: equal prices, both 100 (200 of the 300 points); the zone preference alone decides.
    assert scores == [{"Host": "node-a", "Score": 10}, {"Host": "node-d", "Score": 7}]


@recorded("g-preempt-nodecache-false-echo")
def test_protected_victims_veto_preemption_and_unprotected_ones_pass(client, recording):
    preempt = exchange(recording, 4)
    assert post(client, "protect-low", "preempt", preempt.request).get_json() == {"NodeNameToMetaVictims": {}}
    assert post(client, "protect-system", "preempt", preempt.request).get_json() == preempt.recorded_response


@recorded("g-preempt-nodecache-true-echo")
def test_protected_victims_never_pass_victims_known_by_uid_only(client, recording):
    answer = post(client, "protect-system", "preempt", exchange(recording, 4).request).get_json()
    assert answer["NodeNameToMetaVictims"] == {}
    assert "ProtectedVictims needs victim pod details" in answer["Error"]


@recorded("c1-partial-reject-nodecache-false")
def test_the_default_profile_answers_without_a_segment_and_unknown_profiles_are_404(client, recording):
    first = exchange(recording, 1)
    assert kept(post(client, None, "filter", first.request).get_json()) == ["node-a", "node-b", "node-c", "node-d"]
    assert kept(post(client, "default", "filter", first.request).get_json()) == [
        "node-a",
        "node-b",
        "node-c",
        "node-d",
    ]
    response = client.post("/gpu/filter", data=first.body, content_type="application/json")
    assert response.status_code == 404 and "gpu" in response.get_json()["Error"]


def test_maintenance_windows_follow_the_real_clock(client_factory, tmp_path):
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    policy = textwrap.dedent(
        f"""
        profiles:
        - name: default
          plugins: {{filter: {{enabled: [{{name: NodeNameFilter}}]}}}}
          pluginConfig:
          - name: NodeNameFilter
            args:
              maintenance:
              - name: upgrade
                nodes: ["node-[ab]"]
                windows:
                - start: "{(now - dt.timedelta(hours=1)).isoformat()}"
                  end: "{(now + dt.timedelta(hours=1)).isoformat()}"
              - name: last-week
                nodes: ["node-c"]
                windows:
                - start: "{(now - dt.timedelta(days=8)).isoformat()}"
                  end: "{(now - dt.timedelta(days=7)).isoformat()}"
        """
    )
    (tmp_path / "policy.yaml").write_text(policy)
    client = client_factory(tmp_path / "policy.yaml")
    for recording in scenarios():
        if recording.name not in ("c1-partial-reject-nodecache-false", "c1-partial-reject-nodecache-true"):
            continue
        answer = post(client, None, "filter", exchange(recording, 1).request).get_json()
        assert kept(answer) == ["node-c", "node-d"]
        until = (now + dt.timedelta(hours=1)).isoformat(timespec="seconds")
        message = f"NodeNameFilter: node is in maintenance 'upgrade' until {until}"
        assert answer["FailedAndUnresolvableNodes"] == {"node-a": message, "node-b": message}


def test_an_invalid_policy_stops_start_up_with_every_problem(client_factory, tmp_path):
    (tmp_path / "policy.yaml").write_text(
        POLICY.replace('values: ["2"]', "values: []").replace("weight: 2", "weight: 0")
    )
    with pytest.raises(SystemExit) as caught:
        client_factory(tmp_path / "policy.yaml")
    assert str(caught.value).splitlines() == [
        f"extender cannot start: invalid policy {tmp_path / 'policy.yaml'}:",
        ("  profiles[2].pluginConfig[0].args.rules[0].nodeSelector.matchExpressions[0].values: NotIn needs at least "
         "one value"),
        ("  profiles[3].plugins.score.enabled[0].weight: Must be greater than or equal to 1 and less than or equal to "
         "100."),
    ]
