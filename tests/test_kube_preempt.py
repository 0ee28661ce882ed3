"""Node-name preemption: victim pods looked up in the API server when a preempt plugin reads them."""

from __future__ import annotations

import json
import logging
import re

import pytest

from testkit.fake_apiserver import pod
from testkit.ports import free_port

PREEMPTOR = {"metadata": {"name": "high-1", "namespace": "default", "uid": "u-high"}, "spec": {"priority": 1000}}

POLICY = """
failurePolicy: {failure_policy}
nodeSource:
  kubernetes: {{}}
profiles:
- name: default
  plugins:
    preempt: {{enabled: [{{name: ProtectedVictims}}]}}
  pluginConfig:
  - name: ProtectedVictims
    args:
      protect:
      - {{name: system, pods: {{namespaces: [kube-system]}}}}
      - {{name: databases, pods: {{labelSelector: {{matchLabels: {{app: db}}}}}}}}
"""

VICTIMS = [
    pod("dns-1", "u-dns", "node-a", namespace="kube-system"),
    pod("web-1", "u-web", "node-b", labels={"app": "web"}),
    pod("batch-1", "u-batch", "node-c"),
    pod("db-1", "u-db", "node-c", labels={"app": "db"}),
    pod("web-2", "u-web-2", "node-d"),
]


def meta_request(victims: dict[str, list[str]], full: bool = False) -> bytes:
    if full:
        by_uid = {victim["metadata"]["uid"]: victim for victim in VICTIMS}
        candidates = {
            node: {"Pods": [by_uid[uid] for uid in uids], "NumPDBViolations": 0} for node, uids in victims.items()
        }
        return json.dumps({"Pod": PREEMPTOR, "NodeNameToVictims": candidates, "NodeNameToMetaVictims": None}).encode()
    candidates = {
        node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 1} for node, uids in victims.items()
    }
    return json.dumps({"Pod": PREEMPTOR, "NodeNameToVictims": None, "NodeNameToMetaVictims": candidates}).encode()


def preempt(client, body: bytes):
    response = client.post("/preempt", data=body, content_type="application/json")
    assert response.status_code == 200, response.data
    return response.get_json()


@pytest.fixture
def make_client(client_factory, apiserver, tmp_path):
    apiserver.set_pods(VICTIMS)

    def make(failure_policy: str = "Fail", **env: str):
        path = tmp_path / f"policy-{failure_policy}.yaml"
        path.write_text(POLICY.format(failure_policy=failure_policy))
        return client_factory(path, **(apiserver.environment() | env))

    return make


def test_victims_are_looked_up_and_protected_ones_veto_their_node(make_client, apiserver):
    answer = preempt(
        make_client(),
        meta_request({"node-a": ["u-dns"], "node-b": ["u-web"], "node-c": ["u-batch", "u-db"], "node-d": ["u-web-2"]}),
    )
    assert answer == {
        "NodeNameToMetaVictims": {
            "node-b": {"Pods": [{"UID": "u-web"}], "NumPDBViolations": 1},
            "node-d": {"Pods": [{"UID": "u-web-2"}], "NumPDBViolations": 1},
        }
    }
    listed = sorted(
        request.query["fieldSelector"][0] for request in apiserver.requests if request.path == "/api/v1/pods"
    )
    assert listed == ["spec.nodeName=node-a", "spec.nodeName=node-b", "spec.nodeName=node-c", "spec.nodeName=node-d"]


def test_a_victim_no_longer_on_its_node_vetoes_that_node_only(make_client):
    answer = preempt(make_client(), meta_request({"node-b": ["u-web", "u-moved-away"], "node-d": ["u-web-2"]}))
    assert answer == {"NodeNameToMetaVictims": {"node-d": {"Pods": [{"UID": "u-web-2"}], "NumPDBViolations": 1}}}


def test_full_pod_requests_need_no_lookup(make_client, apiserver):
    answer = preempt(make_client(), meta_request({"node-a": ["u-dns"], "node-b": ["u-web"]}, full=True))
    assert list(answer["NodeNameToMetaVictims"]) == ["node-b"]
    assert apiserver.count("GET", "/api/v1/pods") == 0


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_api_down_follows_the_failure_policy(make_client, caplog, failure_policy):
    client = make_client(failure_policy, KUBERNETES_API_URL=f"https://127.0.0.1:{free_port()}")
    with caplog.at_level(logging.WARNING, logger="extender"):
        answer = preempt(client, meta_request({"node-a": ["u-dns"], "node-b": ["u-web"]}))
    logged = next(
        record.getMessage() for record in caplog.records if record.getMessage().startswith("victim pods unavailable")
    )
    assert "node-a (cannot reach the Kubernetes API" in logged
    [fields] = [
        record.json_fields
        for record in caplog.records
        if getattr(record, "json_fields", {}).get("event") == "extender.preempt"
    ]
    assert fields["source"] == "kubernetes"  # what the source_failures metric counts by
    assert fields["problem"].startswith("victim pods unavailable on node-a (cannot reach the Kubernetes API")
    if failure_policy == "Fail":
        assert answer["NodeNameToMetaVictims"] == {}  # evicting nothing is the safe side
        assert "plugin ProtectedVictims needs victim pod details, but only their UIDs are known" in answer["Error"]
        assert "plugin ProtectedVictims needs victim pod details, but only their UIDs are known" in answer["Error"]
    else:
        assert list(answer["NodeNameToMetaVictims"]) == ["node-a", "node-b"] and "Error" not in answer
    assert logged.endswith(
        f"each plugin's failurePolicy decides (policy default {failure_policy}): "
        "Fail vetoes these candidates, Ignore skips the plugins that read victims there"
    )


def test_a_policy_promised_full_pods_gets_uids_only(client_factory, tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_API_URL", raising=False)
    path = tmp_path / "policy.yaml"
    path.write_text(
        POLICY.format(failure_policy="Fail").replace("nodeSource:\n  kubernetes: {}\n", "nodeCacheCapable: false\n")
    )
    answer = preempt(client_factory(path), meta_request({"node-b": ["u-web"]}))
    assert answer["NodeNameToMetaVictims"] == {}
    assert answer["Error"].endswith(
        "node-name preempt requests (nodeCacheCapable: true) need the Kubernetes API (KUBERNETES_API_URL)"
    )


def test_plugins_that_read_uids_only_cause_no_lookup(client_factory, apiserver, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("profiles:\n- name: default\n  plugins:\n    filter: {enabled: [{name: NodeNameFilter}]}\n"
                    "  pluginConfig:\n  - name: NodeNameFilter\n    args: {deny: ['node-a']}\n")
    answer = preempt(
        client_factory(path, **apiserver.environment()), meta_request({"node-a": ["u-dns"], "node-b": ["u-web"]})
    )
    assert list(answer["NodeNameToMetaVictims"]) == ["node-b"]
    assert apiserver.requests == []


@pytest.mark.parametrize(
    "items",
    [
        [1, "x", None],
        "not a list",
        [[]],
        [{"metadata": "x"}],
        [{"metadata": {"uid": ["u-web"]}}],
        [{"metadata": {"name": "web-1"}}],
        [{"metadata": {"uid": "u-web", "labels": ["app"]}}],
        [{"metadata": {"uid": "u-web", "labels": {"app": 1}}}],
        [{"metadata": {"uid": "u-web"}, "spec": {"priority": "high"}}],
    ],
)
def test_pod_lists_of_the_wrong_shape_are_a_clear_answer_never_a_500(make_client, apiserver, caplog, items):
    apiserver.pod_items = items
    with caplog.at_level(logging.WARNING, logger="extender"):
        answer = preempt(make_client(), meta_request({"node-b": ["u-web"]}))
    assert answer["NodeNameToMetaVictims"] == {} and "only their UIDs are known" in answer["Error"]
    [warning] = [record.getMessage() for record in caplog.records if "victim pods unavailable" in record.getMessage()]
    where = r"(at `\$\.items|items\[0\]: |pod u-web: Expected)"
    assert re.search(rf"listed pods on node node-b in a form this extender cannot read: .*{where}", warning)
    assert "\n" not in warning


def test_thousands_of_made_up_candidates_cost_a_bounded_number_of_calls_and_a_small_log_entry(
    make_client, apiserver, caplog
):
    from extender.verbs.preempt import MAX_POD_LISTS

    candidates = {f"made-up-node-{index}-" + "x" * 50: ["u-web"] for index in range(20_000)}
    with caplog.at_level(logging.WARNING, logger="extender"):
        answer = preempt(make_client(), meta_request(candidates))
    assert apiserver.count("GET", "/api/v1/pods") == MAX_POD_LISTS
    assert answer["NodeNameToMetaVictims"] == {}
    logged = [record.getMessage() + json.dumps(getattr(record, "json_fields", {})) for record in caplog.records]
    assert max(map(len, logged)) < 64_000  # Cloud Logging refuses entries over 256 KB
    assert any(re.search(r"and 199\d\d more node\(s\)", message) for message in logged)
