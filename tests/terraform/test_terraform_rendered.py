"""What users get from `terraform output -raw <name> > file.yaml`, checked by the tools that will read it.

A root module calling modules/scheduler-config for each deployment shape is applied for real (the submodule needs
no provider), with certificates generated at test time. The files it writes must parse, be configurations that
kube-scheduler of the version they name starts with and whose extender works (check-scheduler-config's verdict,
extender.cli.scheduler_config), hold only KubeSchedulerConfiguration v1 fields, and be manifests that the Kubernetes
API schemas accept strictly.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from extender.cli.scheduler_config.check import check
from extender.cli.scheduler_config.findings import Severity
from extender.cli.scheduler_config.versions import parse_kubernetes_version
from testkit.certs import CertificateAuthority, Issued
from tests.terraform.scenarios import CALLER_TOKEN, FUNCTION_URL, KUBERNETES_VERSION, SCENARIOS, SECOND_SCHEDULERS

# Fields of KubeSchedulerConfiguration v1 and of the component-base structs it embeds
# (k8s.io/kube-scheduler/config/v1/types.go, k8s.io/component-base/config/v1alpha1/types.go).
CONFIGURATION_FIELDS = {
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
    "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
    "profiles", "extenders", "delayCacheUntilActive",
}
LEADER_ELECTION_FIELDS = {
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
}
CLIENT_CONNECTION_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}


def _documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document is not None]


def _judged(text: str) -> list[tuple[Severity, str]]:
    """What check-scheduler-config says of ``text`` for the version the scenarios name, notes aside."""
    verdict = check(text, parse_kubernetes_version(KUBERNETES_VERSION))
    return [(finding.severity, finding.line) for finding in verdict.findings if finding.severity is not Severity.NOTE]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_extenders_entry_passes_check_scheduler_config(rendered: dict[str, dict[str, Path]], scenario: str) -> None:
    header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    assert _judged(header + rendered[scenario]["extenders_yaml"].read_text()) == []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_configuration_is_a_kube_scheduler_configuration(rendered: dict[str, dict[str, Path]], scenario: str) -> None:
    configuration = yaml.safe_load(rendered[scenario]["kube_scheduler_configuration"].read_text())
    assert (configuration["apiVersion"], configuration["kind"]) == (
        "kubescheduler.config.k8s.io/v1",
        "KubeSchedulerConfiguration",
    )
    assert set(configuration) <= CONFIGURATION_FIELDS
    assert set(configuration["leaderElection"]) <= LEADER_ELECTION_FIELDS
    assert set(configuration.get("clientConnection", {})) <= CLIENT_CONNECTION_FIELDS
    assert all(set(profile) <= PROFILE_FIELDS for profile in configuration["profiles"])
    # kube-scheduler only accepts lease-based leader election, with a lock that has a name.
    assert configuration["leaderElection"]["resourceLock"] == "leases"
    assert configuration["leaderElection"]["resourceName"]
    assert _judged(rendered[scenario]["kube_scheduler_configuration"].read_text()) == []
    assert configuration["extenders"] == yaml.safe_load(rendered[scenario]["extenders_yaml"].read_text())["extenders"]


@pytest.mark.parametrize("scenario", SECOND_SCHEDULERS)
def test_manifests_are_valid_kubernetes_objects(rendered: dict[str, dict[str, Path]], scenario: str) -> None:
    version = ".".join(KUBERNETES_VERSION.split(".")[:2]) + ".0"
    documents = _documents(rendered[scenario]["kubernetes_manifests"])
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
    configuration = rendered[scenario]["kube_scheduler_configuration"].read_text()
    [holder] = [document for document in documents if document["kind"] in ("ConfigMap", "Secret")]
    assert (holder.get("data") or holder.get("stringData"))["config.yaml"] == configuration


@pytest.mark.parametrize("scenario", SECOND_SCHEDULERS)
def test_the_second_scheduler_s_pod_has_every_file_its_configuration_names(
    rendered: dict[str, dict[str, Path]], scenario: str
) -> None:
    """kube-scheduler reads the files its configuration names as it starts, and exits without them: in the pod only
    the mounted configuration exists, and the API server is reached with the ServiceAccount's in-cluster token."""
    documents = _documents(rendered[scenario]["kubernetes_manifests"])
    [deployment] = [document for document in documents if document["kind"] == "Deployment"]
    [holder] = [document for document in documents if document["kind"] in ("ConfigMap", "Secret")]
    configuration = yaml.safe_load((holder.get("data") or holder.get("stringData"))["config.yaml"])
    pod = deployment["spec"]["template"]["spec"]
    [scheduler] = [container for container in pod["containers"] if container["name"] == "kube-scheduler"]
    mounted = [mount["mountPath"] for mount in scheduler["volumeMounts"]]
    [flag] = [argument for argument in scheduler["command"] if argument.startswith("--config=")]
    named = [flag.removeprefix("--config=")] + [
        value
        for extender in configuration["extenders"]
        for key, value in extender.get("tlsConfig", {}).items()
        if key.endswith("File")
    ]
    assert "kubeconfig" not in configuration.get("clientConnection", {})
    assert all(any(path.startswith(f"{mount}/") for mount in mounted) for path in named), (named, mounted)
    [account] = [document for document in documents if document["kind"] == "ServiceAccount"]
    assert pod["serviceAccountName"] == account["metadata"]["name"] and pod.get("automountServiceAccountToken", True)
    subject = {"kind": "ServiceAccount", **{key: account["metadata"][key] for key in ("name", "namespace")}}
    bound = {
        document["roleRef"]["name"]
        for document in documents
        if document["kind"] in ("ClusterRoleBinding", "RoleBinding") and subject in document["subjects"]
    }
    assert {"system:kube-scheduler", "system:volume-scheduler"} <= bound


def test_a_configuration_for_the_existing_scheduler_renders_no_second_scheduler(
    rendered: dict[str, dict[str, Path]],
) -> None:
    configuration = yaml.safe_load(rendered["control_plane"]["kube_scheduler_configuration"].read_text())
    assert configuration["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    assert "kubernetes_manifests" not in rendered["control_plane"]


def test_caller_token_never_sits_in_a_config_map(rendered: dict[str, dict[str, Path]]) -> None:
    for scenario in SECOND_SCHEDULERS:
        for document in _documents(rendered[scenario]["kubernetes_manifests"]):
            if document["kind"] == "ConfigMap":
                assert CALLER_TOKEN not in json.dumps(document), scenario


def test_public_entry_targets_token_and_profile(rendered: dict[str, dict[str, Path]]) -> None:
    [extender] = yaml.safe_load(rendered["public"]["extenders_yaml"].read_text())["extenders"]
    assert extender["urlPrefix"] == f"{FUNCTION_URL}/{CALLER_TOKEN}/gpu"
    # An https URL without a CA is verified against system roots only while enableHTTPS stays false.
    assert extender["enableHTTPS"] is False and "tlsConfig" not in extender


def test_identity_proxy_pod_wiring(rendered: dict[str, dict[str, Path]]) -> None:
    documents = _documents(rendered["identity_proxy"]["kubernetes_manifests"])
    [deployment] = [document for document in documents if document["kind"] == "Deployment"]
    [account] = [document for document in documents if document["kind"] == "ServiceAccount"]
    [extender] = yaml.safe_load(rendered["identity_proxy"]["extenders_yaml"].read_text())["extenders"]
    _, proxy = deployment["spec"]["template"]["spec"]["containers"]
    assert extender["urlPrefix"] == "http://127.0.0.1:8001"
    assert proxy["command"][:4] == ["python", "-m", "extender", "proxy"]
    assert proxy["command"][proxy["command"].index("--target") + 1] == FUNCTION_URL
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert (
        account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
        == "extender-proxy@acme.iam.gserviceaccount.com"
    )
    assert documents[0]["kind"] == "Namespace" and all(
        document["metadata"].get("namespace") in (None, "scheduling", "kube-system") for document in documents
    )


# --- The TLS settings work as kube-scheduler uses them: against a real TLS server -------------------------------------


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def tls_server(pki: dict[str, Any], tmp_path: Path) -> Iterator[Callable[..., int]]:
    servers: list[http.server.HTTPServer] = []

    def start(require_client_cert: bool) -> int:
        server = http.server.HTTPServer(("127.0.0.1", 0), _Ok)
        context = pki["ca"].server_context(pki["server"], tmp_path, require_client_cert=require_client_cert)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _client_context(tls_config: dict[str, str], directory: Path) -> ssl.SSLContext:
    """What client-go builds from tlsConfig: the CA from caData only, the client pair from certData/keyData."""
    context = ssl.create_default_context(cadata=base64.b64decode(tls_config["caData"]).decode())
    if "certData" in tls_config:
        pair = Issued(base64.b64decode(tls_config["certData"]), base64.b64decode(tls_config["keyData"]))
        context.load_cert_chain(*pair.write(directory, "client"))
    return context


def _get(port: int, context: ssl.SSLContext, server_name: str = "127.0.0.1") -> int:
    connection = http.client.HTTPSConnection(server_name, port, context=context, timeout=10)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status
    finally:
        connection.close()


def test_ca_bundle_verifies_the_server(
    rendered: dict[str, dict[str, Path]], tls_server: Callable[..., int], tmp_path: Path
) -> None:
    [extender] = yaml.safe_load(rendered["ca_bundle"]["extenders_yaml"].read_text())["extenders"]
    port = tls_server(require_client_cert=False)
    assert _get(port, _client_context(extender["tlsConfig"], tmp_path), extender["tlsConfig"]["serverName"]) == 200
    stranger = CertificateAuthority("some other CA")
    with pytest.raises(ssl.SSLCertVerificationError):
        _get(port, _client_context({"caData": base64.b64encode(stranger.cert_pem).decode()}, tmp_path))


def test_client_certificate_passes_mutual_tls(
    rendered: dict[str, dict[str, Path]], tls_server: Callable[..., int], tmp_path: Path
) -> None:
    [extender] = yaml.safe_load(rendered["mtls"]["extenders_yaml"].read_text())["extenders"]
    port = tls_server(require_client_cert=True)
    assert _get(port, _client_context(extender["tlsConfig"], tmp_path)) == 200
    without_certificate = {"caData": extender["tlsConfig"]["caData"]}
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _get(port, _client_context(without_certificate, tmp_path))
