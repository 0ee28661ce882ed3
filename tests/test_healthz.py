"""healthz tells the truth about the node source: its last successful list, its age and its last error, and 503
while it has no recent list, so that an uptime check catches a rotated-out token."""

from __future__ import annotations

import pytest
from flask import Request
from werkzeug.test import EnvironBuilder

from extender.errors import ConfigError
from extender.http.handler import Extender
from extender.kube import client_from_settings
from extender.nodesource.kubernetes import KubernetesNodes, KubernetesSettings
from extender.policy.loader import parse_policy
from extender.settings import Settings
from testkit.fake_apiserver import node, wait_for
from tests.test_nodesource_kubernetes import Clock

POLICY = """
nodeSource: {kubernetes: {}}
profiles:
- name: default
  plugins: {filter: {enabled: [{name: NodeLabelPolicy}]}}
  pluginConfig:
  - {name: NodeLabelPolicy, args: {rules: [{name: a, nodeSelector: {matchLabels: {zone: a}}}]}}
"""


@pytest.fixture
def policy(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def test_a_listing_source_is_healthy_and_says_so(apiserver, policy, client_factory):
    apiserver.set_nodes([node("node-a", {"zone": "a"}), node("node-b", {"zone": "b"})])
    response = client_factory(policy, **apiserver.environment()).get("/healthz")
    assert response.status_code == 200
    body = response.get_json()
    assert body["status"] == "ok"
    source = body["nodeSource"]
    assert (source["kind"], source["healthy"], source["nodes"], source["lastError"]) == ("kubernetes", True, 2, "")
    assert source["ageSeconds"] < 60 and source["maxAgeSeconds"] == 300
    assert source["lastSuccessfulList"].endswith("Z")


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [({"KUBERNETES_TOKEN": "rotated-out"}, "401 Unauthorized"), (None, 'cannot list resource "nodes"')],
    ids=["401", "403"],
)
def test_refused_credentials_make_healthz_503_with_the_api_servers_answer(
    apiserver, policy, client_factory, breakage, expected
):
    """The function used to start and answer healthz 200 with a token the API server refuses."""
    apiserver.set_nodes([node("node-a", {"zone": "a"})])
    if breakage is None:
        apiserver.forbidden.add(("list", "nodes"))
    response = client_factory(policy, **(apiserver.environment() | (breakage or {}))).get("/healthz")
    assert response.status_code == 503
    body = response.get_json()
    assert body["status"] == "unavailable"
    source = body["nodeSource"]
    assert source["healthy"] is False and source["lastSuccessfulList"] is None and source["ageSeconds"] is None
    assert source["lastError"].startswith("listing nodes failed: ") and expected in source["lastError"]


def healthz(extender: Extender) -> tuple[int, dict]:
    answer = extender.decide(Request(EnvironBuilder(path="/healthz", method="GET").get_environ()))[1]
    return answer.status, answer.json()


def test_a_list_older_than_the_bound_is_unhealthy_until_a_refresh_succeeds(apiserver):
    apiserver.set_nodes([node("node-a", {"zone": "a"})])
    clock = Clock()
    kube = client_from_settings(Settings.from_environment(apiserver.environment()))
    source = KubernetesNodes(kube, KubernetesSettings(cache_ttl=30), False, clock, max_age=120)
    source.start().result(timeout=5)
    extender = Extender(policy=parse_policy(POLICY, "test"), source=source)
    assert healthz(extender)[0] == 200
    apiserver.forbidden.add(("list", "nodes"))  # RBAC revoked: refreshes fail from now on
    clock.now += 100
    # Starts a refresh (the list is older than cacheTTL), answers from the list at hand.
    status, body = healthz(extender)
    assert status == 200 and body["nodeSource"]["ageSeconds"] == 100
    assert list_failed(source)
    clock.now += 21
    status, body = healthz(extender)
    assert status == 503
    assert body["nodeSource"]["ageSeconds"] == 121 and "cannot list resource" in body["nodeSource"]["lastError"]
    apiserver.forbidden.clear()
    clock.now += 10  # past minRefreshInterval: a probe starts a refresh, which succeeds
    assert wait_for(lambda: healthz(extender)[0] == 200)
    assert healthz(extender)[1]["nodeSource"]["lastError"] == ""


def list_failed(source: KubernetesNodes) -> bool:
    return wait_for(lambda: source.health().last_error != "")


def test_sources_that_do_not_list_are_always_healthy(client):
    body = client.get("/healthz").get_json()
    assert body["status"] == "ok" and body["nodeSource"] == {"kind": "none", "healthy": True}


@pytest.mark.parametrize("value", ["5", "-1m", "0s"])
def test_a_bad_bound_stops_start_up(apiserver, policy, monkeypatch, value):
    monkeypatch.setenv("EXTENDER_NODE_SOURCE_MAX_AGE", value)
    for name, setting in apiserver.environment().items():
        monkeypatch.setenv(name, setting)
    with pytest.raises(ConfigError, match="EXTENDER_NODE_SOURCE_MAX_AGE"):
        Extender.from_environment(str(policy))
