"""The policy's nodeSource: validation with field paths, the source the function builds, and its use end to end."""

from __future__ import annotations

import json
import time

import pytest

from extender.http.handler import Extender
from extender.nodesource.base import NamesOnly
from extender.nodesource.gke_names import GkeNodeNames
from extender.nodesource.kubernetes import KubernetesNodes, KubernetesSettings
from extender.nodesource.static import StaticInventory
from extender.policy.loader import PolicyError, parse_policy
from testkit.fake_apiserver import node

PROFILES = """
profiles:
- name: default
  plugins:
    filter:
      enabled: [{name: NodeLabelPolicy}]
  pluginConfig:
  - name: NodeLabelPolicy
    args: {rules: [{name: zone-a, nodeSelector: {matchLabels: {zone: a}}}]}
"""


def policy(node_source: str, failure_policy: str = "Fail") -> str:
    return f"failurePolicy: {failure_policy}\nnodeSource:\n{node_source}{PROFILES}"


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as error:
        parse_policy(text, "test")
    return error.value.problems


def test_kubernetes_settings_are_durations():
    loaded = parse_policy(
        policy("  kubernetes: {cacheTTL: 2m, maxWait: 750ms, listTimeout: 20s, minRefreshInterval: 10s}\n"), "test"
    )
    assert loaded.node_source.kind == "kubernetes"
    assert loaded.node_source.settings == KubernetesSettings(
        cache_ttl=120.0, max_wait=0.75, list_timeout=20.0, min_refresh_interval=10.0
    )
    assert loaded.node_source.fail_open is False


def test_defaults_and_the_failure_policy_reach_the_source():
    loaded = parse_policy(policy("  kubernetes: {}\n", "Ignore"), "test")
    assert loaded.node_source.settings == KubernetesSettings()
    assert loaded.node_source.fail_open is True


def test_no_node_source_knows_names_only():
    loaded = parse_policy(PROFILES.replace("NodeLabelPolicy", "NodeNameFilter").replace(
        "args: {rules: [{name: zone-a, nodeSelector: {matchLabels: {zone: a}}}]}", "args: {deny: []}"), "test")
    assert isinstance(loaded.node_source.build(None), NamesOnly)


@pytest.mark.parametrize(
    ("node_source", "expected"),
    [
        ("  kubernetes: {cacheTtl: 5s}\n", ["nodeSource.kubernetes.cacheTtl: Unknown field. Did you mean cacheTTL?"]),
        (
            "  kubernetes: {maxWait: 5}\n",
            ["nodeSource.kubernetes.maxWait: Not a duration: write it like 500ms, 5s or 1m30s."],
        ),
        ("  kubernetes: {cacheTTL: 100ms}\n", ["nodeSource.kubernetes.cacheTTL: Must be at least 1s."]),
        (
            "  names: {cluster: prod}\n  static: {nodes: [{names: ['*'], labels: {}}]}\n",
            ["nodeSource: set exactly one of kubernetes, static, names (got static, names)"],
        ),
        ("  {}\n", ["nodeSource: set exactly one of kubernetes, static, names (got none)"]),
        ("  names: {nodePools: [a]}\n", ["nodeSource.names.cluster: Missing data for required field."]),
        ("  static: {nodes: []}\n", ["nodeSource.static.nodes: Shorter than minimum length 1."]),
        (
            "  static: {nodes: [{names: ['*'], labels: {zone: 'a b'}}]}\n",
            [
                (
                    "nodeSource.static.nodes[0].labels.zone: 'a b' is not a valid label value: at most 63 letters, "
                    "digits, '-', '_' or '.', starting and ending with a letter or digit"
                )
            ],
        ),
    ],
)
def test_problems_are_named_with_their_path(node_source, expected):
    assert problems(policy(node_source)) == expected


def test_each_kind_builds_its_source(apiserver):
    from extender.kube import client_from_settings
    from extender.settings import Settings

    kube = client_from_settings(Settings.from_environment(apiserver.environment()))
    static = parse_policy(policy("  static: {nodes: [{names: ['*'], labels: {zone: a}}]}\n"), "t").node_source.build(
        None
    )
    pool_rule = policy("  names: {cluster: prod, nodePools: [gpu]}\n").replace(
        "{zone: a}", "{cloud.google.com/gke-nodepool: gpu}"
    )  # the names source supplies the node-pool label only
    names = parse_policy(pool_rule, "t").node_source.build(None)
    kubernetes = parse_policy(policy("  kubernetes: {}\n"), "t").node_source.build(kube)
    assert (
        isinstance(static, StaticInventory)
        and isinstance(names, GkeNodeNames)
        and isinstance(kubernetes, KubernetesNodes)
    )


def test_kubernetes_without_the_api_stops_start_up(tmp_path, monkeypatch):
    path = tmp_path / "policy.yaml"
    path.write_text(policy("  kubernetes: {}\n"))
    monkeypatch.delenv("KUBERNETES_API_URL", raising=False)
    monkeypatch.delenv("KUBERNETES_TOKEN", raising=False)
    with pytest.raises(ValueError, match=r"^the policy needs variables the environment does not set:") as raised:
        Extender.from_environment(str(path))
    assert str(raised.value).splitlines()[1:] == [
        "  KUBERNETES_API_URL: the policy's kubernetes nodeSource lists the nodes from the API server",
        (
            "  KUBERNETES_TOKEN or KUBERNETES_TOKEN_FILE: the API server refuses to list nodes for an anonymous caller "
            "(only an http:// KUBERNETES_API_URL, kubectl proxy on the loopback, needs none)"
        ),
    ]


def test_check_policy_needs_no_cluster_access(tmp_path, capsys):
    from extender.__main__ import main

    path = tmp_path / "policy.yaml"
    path.write_text(policy("  kubernetes: {}\n"))
    assert main(["check-policy", str(path)]) == 0


def node_name_filter(names: list[str]) -> bytes:
    pod = {"metadata": {"name": "web-1", "namespace": "default", "uid": "u1"}, "spec": {}}
    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()


def test_the_function_uses_the_configured_static_source(client_factory, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(
        policy(
            "  static: {nodes: [{names: ['zone-a-*'], labels: {zone: a}}, {names: ['zone-b-*'], labels: {zone: b}}]}\n"
        )
    )
    client = client_factory(path)
    answer = client.post(
        "/filter", data=node_name_filter(["zone-a-1", "zone-b-1", "elsewhere"]), content_type="application/json"
    ).get_json()
    assert answer["NodeNames"] == ["zone-a-1"]
    assert set(answer["FailedAndUnresolvableNodes"]) == {"zone-b-1", "elsewhere"}
    assert (
        answer["FailedAndUnresolvableNodes"]["elsewhere"]
        == "node elsewhere matches no entry of the static nodeSource inventory"
    )
    assert answer["Error"] == ""


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_the_function_with_the_api_down(client_factory, tmp_path, failure_policy):
    from testkit.ports import free_port

    path = tmp_path / "policy.yaml"
    path.write_text(policy("  kubernetes: {maxWait: 2s}\n", failure_policy))
    client = client_factory(path, KUBERNETES_API_URL=f"https://127.0.0.1:{free_port()}", KUBERNETES_TOKEN="t")
    answer = client.post(
        "/filter", data=node_name_filter(["node-a", "node-b"]), content_type="application/json"
    ).get_json()
    if failure_policy == "Fail":
        assert answer["NodeNames"] == [] and "cannot reach the Kubernetes API" in answer["Error"]
    else:
        assert answer["NodeNames"] == ["node-a", "node-b"] and answer["Error"] == ""


def test_the_function_with_the_kubernetes_source(client_factory, tmp_path, apiserver):
    apiserver.set_nodes([node("node-a", {"zone": "a"}), node("node-b", {"zone": "b"})])
    path = tmp_path / "policy.yaml"
    path.write_text(policy("  kubernetes: {}\n"))
    client = client_factory(path, **apiserver.environment())
    answer = client.post(
        "/filter", data=node_name_filter(["node-a", "node-b"]), content_type="application/json"
    ).get_json()
    assert answer["NodeNames"] == ["node-a"]
    assert "NodeLabelPolicy rule 'zone-a'" in answer["FailedAndUnresolvableNodes"]["node-b"]


def test_a_served_function_lists_nodes_and_learns_new_ones(apiserver, tmp_path):
    """A real functions-framework process: the policy is loaded in gunicorn's master, requests served by its worker."""
    import requests

    from tests.conftest import serving

    apiserver.set_nodes([node("node-a", {"zone": "a"}), node("node-b", {"zone": "b"})])
    path = tmp_path / "policy.yaml"
    path.write_text(policy("  kubernetes: {minRefreshInterval: 1s}\n"))
    with serving(EXTENDER_POLICY=str(path), **apiserver.environment()) as url:
        def filter_names(names: list[str]) -> dict:
            response = requests.post(
                f"{url}/filter", data=node_name_filter(names), headers={"Content-Type": "application/json"}, timeout=10
            )
            return response.json()

        assert filter_names(["node-a", "node-b"])["NodeNames"] == ["node-a"]
        apiserver.add_node(node("node-c", {"zone": "a"}))
        time.sleep(1.0)  # past minRefreshInterval: an unknown name now refetches at once
        assert filter_names(["node-c", "node-b"])["NodeNames"] == ["node-c"]
