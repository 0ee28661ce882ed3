"""The deployment shapes the rendering tests apply modules/scheduler-config for, with their fixed inputs."""

from __future__ import annotations

import base64
from typing import Any

from tests.terraform.support import SCHEDULER_CONFIG

KUBERNETES_VERSION = "1.31.4"
FUNCTION_URL = "https://scheduler-extender-x7k2p9q4ra-uc.a.run.app"
CALLER_TOKEN = "q8ZrT2vLw5NcY7bK1mXf4HsJ9dGp3aEu6QoVt0iRyB2nMcL"
OUTPUTS = ("extenders_yaml", "kube_scheduler_configuration", "kubernetes_manifests")
SCENARIOS = ("public", "ca_bundle", "mtls", "identity_proxy", "control_plane")
# The scenarios that run a second scheduler from kubernetes_manifests; control_plane gives its configuration to the
# cluster's own kube-scheduler (scheduler_deployment = "existing-scheduler"), so it renders none.
SECOND_SCHEDULERS = tuple(scenario for scenario in SCENARIOS if scenario != "control_plane")


def _b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def module_arguments(pki: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Module arguments for each shape a user deploys."""
    common = {"source": str(SCHEDULER_CONFIG), "url": FUNCTION_URL, "kubernetes_version": KUBERNETES_VERSION}
    return {
        "public": {
            **common,
            "caller_token": CALLER_TOKEN,
            "profile": "gpu",
            "verbs": ["filter", "prioritize", "preempt", "bind"],
            "weight": 5,
            "managed_resources": [{"name": "example.com/gpu", "ignored_by_scheduler": True}],
        },
        "ca_bundle": {
            **common,
            "caller_token": CALLER_TOKEN,
            "tls": {"ca_data": _b64(pki["ca"].cert_pem), "server_name": "localhost"},
        },
        "mtls": {
            **common,
            "tls": {"ca_data": _b64(pki["ca"].cert_pem), "cert_data": _b64(pki["client"].cert_pem)},
            "tls_key_data": _b64(pki["client"].key_pem),
        },
        "identity_proxy": {
            **common,
            "namespace": "scheduling",
            "node_cache_capable": False,
            "ignorable": True,
            "identity_proxy": {
                "image": "europe-docker.pkg.dev/acme/tools/extender:0.1.0",
                "google_service_account": "extender-proxy@acme.iam.gserviceaccount.com",
            },
        },
        "control_plane": {
            **common,
            "scheduler_deployment": "existing-scheduler",
            "scheduler_name": "default-scheduler",
            "leader_election_lease_name": "kube-scheduler",
            "kubeconfig": "/etc/kubernetes/scheduler.conf",
            "percentage_of_nodes_to_score": None,
            "http_timeout": "2500ms",
        },
    }
