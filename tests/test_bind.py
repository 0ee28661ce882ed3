"""bind through the function: the Binding is created in the API server, or the answer's Error says why not."""

from __future__ import annotations

import json
import time

import pytest

from extender.verbs.bind import NOT_CONFIGURED
from testkit.fake_apiserver import TOKEN, pod
from testkit.ports import free_port
from tests.recordings import exchanges

RECORDED = next(exchange for exchange in exchanges() if exchange.verb == "bind")
ARGS = RECORDED.request  # pod-1 in default, to node-a


def bind(client, args=ARGS):
    response = client.post("/bind", data=json.dumps(args), content_type="application/json")
    assert response.status_code == 200, response.data
    return response.get_json()


@pytest.fixture
def client(client_factory, apiserver):
    apiserver.set_pods([pod(ARGS["PodName"], ARGS["PodUID"], node_name="", namespace=ARGS["PodNamespace"])])
    return client_factory(**apiserver.environment())


def test_the_recorded_bind_creates_the_binding(client, apiserver):
    assert bind(client) == {"Error": ""}
    [created] = [request for request in apiserver.requests if request.method == "POST"]
    assert created.path == "/api/v1/namespaces/default/pods/pod-1/binding"
    assert created.headers["authorization"] == f"Bearer {TOKEN}"
    assert created.body == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "pod-1", "namespace": "default", "uid": ARGS["PodUID"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
    }
    assert apiserver.pods[0]["spec"]["nodeName"] == "node-a"


def test_already_bound_is_a_conflict_with_the_api_servers_words(client, apiserver):
    apiserver.pods[0]["spec"]["nodeName"] = "node-b"
    assert bind(client) == {
        "Error": 'binding pod default/pod-1 to node node-a failed: the Kubernetes API answered 409 Conflict: '
        'Operation cannot be fulfilled on pods/binding "pod-1": pod pod-1 is already assigned to node "node-b"'
    }
    assert apiserver.pods[0]["spec"]["nodeName"] == "node-b"


def test_a_recreated_pod_is_not_bound_in_its_predecessors_place(client, apiserver):
    answer = bind(client, ARGS | {"PodUID": "uid-of-the-deleted-pod"})
    assert (
        "409 Conflict" in answer["Error"]
        and "Precondition failed: UID in precondition: uid-of-the-deleted-pod" in answer["Error"]
    )
    assert not apiserver.pods[0]["spec"]["nodeName"]


def test_a_deleted_pod_is_not_found(client):
    answer = bind(client, ARGS | {"PodName": "gone"})
    assert answer["Error"] == (
        "binding pod default/gone to node node-a failed: the Kubernetes API answered 404 Not Found: "
        'pods "gone" not found'
    )


def test_names_cannot_walk_out_of_the_binding_path(client, apiserver):
    answer = bind(client, ARGS | {"PodName": "../../../nodes"})
    assert "404 Not Found" in answer["Error"]
    assert [request.path for request in apiserver.requests] == [
        "/api/v1/namespaces/default/pods/..%2F..%2F..%2Fnodes/binding"
    ]


def test_forbidden_points_at_the_rbac(client, apiserver):
    apiserver.forbidden.add(("create", "pods/binding"))
    answer = bind(client)
    assert 'cannot create resource "pods/binding" in API group "" in the namespace "default"' in answer["Error"]
    assert answer["Error"].endswith("(grant the extender the RBAC in deploy/kubernetes/extender-rbac.yaml)")


def test_unauthorized_points_at_the_token(client_factory, apiserver):
    client = client_factory(**(apiserver.environment() | {"KUBERNETES_TOKEN": "revoked"}))
    assert bind(client)["Error"].endswith(
        "401 Unauthorized: Unauthorized (check KUBERNETES_TOKEN / KUBERNETES_TOKEN_FILE)"
    )


def test_api_down(client_factory):
    client = client_factory(KUBERNETES_API_URL=f"https://127.0.0.1:{free_port()}", KUBERNETES_TOKEN="t")
    answer = bind(client)
    assert answer["Error"].startswith(
        "binding pod default/pod-1 to node node-a failed: cannot reach the Kubernetes API at https://127.0.0.1:"
    )


def test_a_slow_api_answers_within_the_schedulers_timeout(client_factory, apiserver):
    apiserver.delay = 5.0
    client = client_factory(**apiserver.environment(), EXTENDER_HTTP_TIMEOUT="1s")
    began = time.monotonic()
    answer = bind(client)
    assert time.monotonic() - began < 1.0
    assert answer["Error"].endswith(
        "failed: the Kubernetes API did not answer POST /api/v1/namespaces/default/pods/pod-1/binding within 0.5 s"
    )


def test_without_the_api_bind_refuses_rather_than_pretend(client_factory, monkeypatch):
    monkeypatch.delenv("KUBERNETES_API_URL", raising=False)
    assert bind(client_factory()) == {"Error": NOT_CONFIGURED}
