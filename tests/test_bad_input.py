"""Bad input gets a 4xx (or a 200 with Error where the protocol expects it) that names the problem; never a 500."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import requests

from testkit.ports import free_port
from tests.conftest import ROOT, function_command, serving
from tests.recordings import exchanges

FULL = next(e for e in exchanges() if e.verb == "filter" and not e.node_cache_capable).request
NAMES = next(e for e in exchanges() if e.verb == "filter" and e.node_cache_capable).request


def post(client, path, payload, content_type="application/json"):
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return client.post(path, data=data, content_type=content_type)


def error_of(response, status):
    assert response.status_code == status, (response.status_code, response.data)
    assert response.mimetype == "application/json"
    return response.get_json()["Error"]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"{", "malformed JSON"),
        (b"", "empty body"),
        (b"\xff\xfe{}", "malformed JSON"),
        ([], "Invalid input type"),
        ({"Pod": None, "Nodes": None, "NodeNames": ["a"]}, "Pod: Missing data for required field"),
        ({**NAMES, "NodeNames": "node-a"}, "NodeNames: Not a valid list"),
        ({**NAMES, "NodeNames": ["node-a", 7]}, "NodeNames[1]: Not a valid string"),
        ({**NAMES, "NodeNames": ["node-a", ""]}, "NodeNames[1]"),
        ({**NAMES, "NodeNames": ["node-a", "node-a"]}, "duplicate node name 'node-a'"),
        ({**NAMES, "NodeNames": None}, "exactly one of Nodes and NodeNames"),
        ({**FULL, "NodeNames": ["node-a"]}, "exactly one of Nodes and NodeNames"),
        (
            {**NAMES, "Pod": {"metadata": {"labels": {"app": 1}}}},
            "Pod.metadata.labels: Not a valid map of strings: the value of 'app' is int",
        ),
        ({**NAMES, "Pod": {"metadata": {}, "spec": {"priority": "high"}}}, "Pod.spec.priority: Not a valid integer"),
        ({**FULL, "Nodes": {"items": [{"metadata": {"name": 5}}]}}, "Nodes.items[0].metadata.name: Not a valid string"),
        ({**FULL, "Nodes": {"items": [{}]}}, "Nodes.items[0].metadata: Missing data for required field"),
        ({**FULL, "Nodes": {"items": "x"}}, "Nodes.items: Not a valid list"),
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_malformed_requests_are_named(client, verb, payload, expected):
    assert expected in error_of(post(client, f"/{verb}", payload), 400)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            {
                "Pod": NAMES["Pod"],
                "NodeNameToVictims": None,
                "NodeNameToMetaVictims": {"node-a": {"Pods": [{"UID": ""}]}},
            },
            "NodeNameToMetaVictims.node-a.value.Pods[0].UID",
        ),
        (
            {"Pod": NAMES["Pod"], "NodeNameToMetaVictims": {"node-a": {"Pods": [{}], "NumPDBViolations": "1"}}},
            "Missing data for required field",
        ),
        (
            {"Pod": NAMES["Pod"], "NodeNameToVictims": {}, "NodeNameToMetaVictims": {}},
            "at most one of NodeNameToVictims and NodeNameToMetaVictims",
        ),
    ],
)
def test_malformed_preemption_requests_are_named(client, payload, expected):
    assert expected in error_of(post(client, "/preempt", payload), 400)


def test_malformed_binding_requests_are_named(client):
    message = error_of(post(client, "/bind", {"PodName": "p", "PodNamespace": None, "PodUID": 1, "Node": "n"}), 400)
    assert "PodNamespace: Missing data for required field" in message
    assert "PodUID: Not a valid string" in message


def test_unknown_verb_and_profile_are_404(client):
    assert "unknown verb 'filtre'" in error_of(post(client, "/filtre", NAMES), 404)
    assert "no verb in the path" in error_of(post(client, "/", NAMES), 404)
    assert "unknown profile 'gpu'" in error_of(post(client, "/gpu/filter", NAMES), 404)
    assert "unknown profile" in error_of(post(client, "/a/b/filter", NAMES), 404)


def test_wrong_method_is_405_with_allow(client):
    response = client.get("/filter")
    assert "filter answers POST, not GET" in error_of(response, 405)
    assert response.headers["Allow"] == "POST"
    response = client.post("/healthz", data=b"{}", content_type="application/json")
    assert error_of(response, 405)
    assert response.headers["Allow"] == "GET, HEAD"
    assert error_of(client.put("/prioritize", data=b"{}", content_type="application/json"), 405)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_other_content_types_are_415(client, content_type):
    assert "Content-Type must be application/json" in error_of(post(client, "/filter", NAMES, content_type), 415)


def test_compressed_bodies_are_415(client):
    response = client.post(
        "/filter", data=b"\x1f\x8b", content_type="application/json", headers={"Content-Encoding": "br"}
    )
    assert "Content-Encoding 'br' is not supported" in error_of(response, 415)


def test_body_over_the_limit_is_413(client_factory):
    client = client_factory(EXTENDER_MAX_BODY_BYTES="1000")
    body = json.dumps(FULL).encode()
    assert len(body) > 1000
    assert "body too large" in error_of(client.post("/filter", data=body, content_type="application/json"), 413)


def test_chunked_body_over_the_limit_is_413_from_a_served_process():
    body = json.dumps(FULL).encode()
    with serving(EXTENDER_MAX_BODY_BYTES="1000") as url:
        # A generator body is sent chunked: no Content-Length to check up front.
        response = requests.post(
            f"{url}/filter",
            data=iter([body[:500], body[500:]]),
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert response.status_code == 413, response.text
        assert "body too large" in response.json()["Error"]
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_invalid_body_limit_stops_start_up(client_factory, value):
    with pytest.raises(SystemExit, match="extender cannot start: EXTENDER_MAX_BODY_BYTES must be a positive integer"):
        client_factory(EXTENDER_MAX_BODY_BYTES=value)


def test_invalid_policy_stops_start_up(client_factory, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("profiles:\n- name: default\n  plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}\n")
    with pytest.raises(
        SystemExit, match=r"profiles\[0\]\.plugins\.filter\.enabled\[0\]\.name: unknown plugin 'NoSuchPlugin'"
    ):
        client_factory(policy)
    with pytest.raises(SystemExit, match="cannot read the file"):
        client_factory(tmp_path / "missing.yaml")


def test_a_served_function_with_a_bad_policy_exits_listing_the_problems(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "profiles:\n- name: Default\n- name: gpu\n  plugins: {score: {enabled: [{name: NodeNameFilter, weight: 1}]}}\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "EXTENDER_POLICY"} | {
        "EXTENDER_POLICY": str(policy)
    }
    command = function_command(free_port())
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert finished.returncode != 0
    assert f"extender cannot start: invalid policy {policy}:" in finished.stderr
    assert "profiles[0].name: must be a DNS label" in finished.stderr
    assert (
        "profiles[1].plugins.score.enabled[0].name: plugin NodeNameFilter does not implement the score extension point"
        in finished.stderr
    )
    assert "Traceback" not in finished.stderr


def test_error_headers_survive_any_node_name(tmp_path):
    # A prioritize error names the node; node names come from the caller and may hold newlines or any Unicode.
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "nodeCacheCapable: false\nprofiles:\n- name: default\n"
        "  plugins: {score: {enabled: [{name: InstanceCost, weight: 1}]}}\n"
        "  pluginConfig: [{name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}]\n"
    )
    pod = NAMES["Pod"]
    with serving(EXTENDER_POLICY=str(policy)) as url:
        for name in ["line\nbreak", "snow\u2603man", "x" * 10_000]:
            response = requests.post(
                f"{url}/prioritize", json={"Pod": pod, "Nodes": None, "NodeNames": [name]}, timeout=10
            )
            assert response.status_code == 200, response.text
            assert response.json() == [{"Host": name, "Score": 0}]
            header = response.headers["X-Extender-Error"]
            assert header.startswith("plugin InstanceCost needs node labels") and header.isascii()
            assert "\n" not in header and len(header) < 2_200
        assert "line\\nbreak" in requests.post(
            f"{url}/prioritize", json={"Pod": pod, "Nodes": None, "NodeNames": ["line\nbreak"]}, timeout=10
        ).headers["X-Extender-Error"]
