"""The RBAC manifest grants what the extender's API calls need, and nothing more."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from extender.kube import client_from_settings
from extender.kube.client import KubeClient
from extender.kube.errors import KubeError
from extender.settings import Settings
from testkit.fake_apiserver import USER
from tests.conftest import ROOT

MANIFEST = ROOT / "deploy" / "kubernetes" / "extender-rbac.yaml"

# Every call the client makes, with the permission the API server checks for it.
CALLS: dict[tuple[str, str], Callable[[KubeClient], Any]] = {
    ("list", "nodes"): lambda kube: kube.list_nodes(),
    ("list", "pods"): lambda kube: kube.pods_on_node("node-a", {"u1"}),
    ("create", "pods/binding"): lambda kube: kube.bind("default", "web-1", "u1", "node-a"),
    ("watch", "pods"): lambda kube: kube.watch_bound_pods("1", time.monotonic() + 5, 1),
}


def documents(path: Path = MANIFEST) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def granted() -> set[tuple[str, str]]:
    [role] = [document for document in documents() if document["kind"] == "ClusterRole"]
    for rule in role["rules"]:
        assert rule["apiGroups"] == [""], rule
    return {(verb, resource) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]}


def test_the_manifest_is_valid_kubernetes():
    for document in documents():
        kubernetes_validate.validate(document, "1.31.0", strict=True)


def test_only_reads_and_binding_are_granted():
    assert granted() == {
        ("get", "nodes"),
        ("list", "nodes"),
        ("get", "pods"),
        ("list", "pods"),
        ("watch", "pods"),
        ("create", "pods/binding"),
    }


@pytest.mark.parametrize("permission", list(CALLS), ids=lambda permission: " ".join(permission))
def test_each_call_needs_exactly_a_granted_permission(apiserver, permission):
    kube = client_from_settings(Settings.from_environment(apiserver.environment()))
    apiserver.forbidden = {permission}
    with pytest.raises(KubeError) as refused:
        CALLS[permission](kube)
    assert refused.value.code == 403
    assert permission in granted()


def test_the_role_is_bound_to_the_service_account_whose_token_the_function_uses():
    by_kind = {document["kind"]: document for document in documents()}
    account = by_kind["ServiceAccount"]["metadata"]
    assert by_kind["ClusterRoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    assert by_kind["ClusterRoleBinding"]["roleRef"]["name"] == by_kind["ClusterRole"]["metadata"]["name"]
    token = by_kind["Secret"]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == account["name"]
    assert USER == f"system:serviceaccount:{account['namespace']}:{account['name']}"
