"""NodeLoad's Google auth: the function's application default credentials as a bearer token, over real TLS.

A stand-in credential (a service account key file, generated here, whose token
endpoint is local) gets its access token from a local HTTPS server: it checks
the signed JWT grant against the key's public half, as Google's does. The same
server stands in for Cloud Monitoring's Prometheus API and answers only
queries that carry that token. Certificates and keys come from
``cryptography`` (testkit.certs).
"""

from __future__ import annotations

import base64
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from extender.framework.args import loading_for
from extender.framework.profile import Profile
from extender.plugins import NodeLoad
from extender.settings import Settings
from testkit.loopback import Loopback, QuietHandler
from tests.plugin_helpers import node, pod
from tests.prometheus import refreshes_landed

ACCESS_TOKEN = "ya29.stand-in-access-token"
SERVICE_ACCOUNT = "extender@acme.iam.gserviceaccount.com"
PROMETHEUS_PATH = "/v1/projects/acme/location/global/prometheus"
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def key_file(directory: Path, name: str, key: rsa.RSAPrivateKey, token_uri: str) -> Path:
    """A service account key file as IAM issues them, for ``key``."""
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path = directory / name
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "acme",
                "private_key_id": "stand-in-key",
                "private_key": pem.decode(),
                "client_email": SERVICE_ACCOUNT,
                "client_id": "100000000000000000001",
                "token_uri": token_uri,
            }
        )
    )
    return path


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class GoogleStandIn:
    """``POST /token`` (OAuth 2.0 refresh grant) and ``GET <PROMETHEUS_PATH>/api/v1/query`` (bearer token checked)."""

    def __init__(self, context: ssl.SSLContext, trusted: rsa.RSAPublicKey) -> None:
        self.token_requests: list[dict[str, Any]] = []
        self.queries: list[str | None] = []
        self.expires_in = 3600
        stand_in = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def reply(self, status: int, document: Any) -> None:
                self.answer(status, json.dumps(document).encode())

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
                if form.get("grant_type") != [JWT_GRANT]:
                    return self.reply(400, {"error": "unsupported_grant_type"})
                header, claims, signature = form["assertion"][0].split(".")
                try:
                    trusted.verify(_b64(signature), f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
                except InvalidSignature:
                    return self.reply(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
                stand_in.token_requests.append(json.loads(_b64(claims)))
                self.reply(
                    200, {"access_token": ACCESS_TOKEN, "expires_in": stand_in.expires_in, "token_type": "Bearer"}
                )

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                authorization = self.headers.get("Authorization")
                stand_in.queries.append(authorization)
                if url.path != f"{PROMETHEUS_PATH}/api/v1/query":
                    return self.reply(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
                if authorization != f"Bearer {ACCESS_TOKEN}":
                    unauthenticated = {
                        "status": "error",
                        "errorType": "unauthenticated",
                        "error": "Request had invalid authentication credentials.",
                    }
                    return self.reply(401, unauthenticated)
                [query] = parse_qs(url.query)["query"]
                # The load, and (no Kubernetes API configured) the nodes' allocatable cores.
                assert query in (
                    'kubernetes_io:node_cpu_allocatable_utilization{monitored_resource="k8s_node"}',
                    'kubernetes_io:node_cpu_allocatable_cores{monitored_resource="k8s_node"}',
                )
                capacity = "allocatable_cores" in query
                samples = [("gke-a", "4" if capacity else "0.35"), ("gke-b", "4" if capacity else "0.97")]
                result = [
                    {"metric": {"node_name": name, "monitored_resource": "k8s_node"}, "value": [time.time(), value]}
                    for name, value in samples
                ]
                self.reply(200, {"status": "success", "data": {"resultType": "vector", "result": result}})

        self.served = Loopback(Handler, context)
        self.url = self.served.url


@pytest.fixture
def google(test_ca, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GoogleStandIn]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    context = test_ca.server_context(test_ca.issue_server("127.0.0.1"), tmp_path)
    stand_in = GoogleStandIn(context, key.public_key())
    # What application default credentials read, and the CA google-auth's token requests and NodeLoad's queries trust.
    monkeypatch.setenv(
        "GOOGLE_APPLICATION_CREDENTIALS", str(key_file(tmp_path, "key.json", key, f"{stand_in.url}/token"))
    )
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(test_ca.write(tmp_path)))
    yield stand_in
    stand_in.served.close()


def profile(args: dict[str, Any], clock: list[float]) -> Profile:
    with loading_for(Settings(project="acme")):
        plugin = NodeLoad(NodeLoad.args_schema().load(args), clock=lambda: clock[0])
    return Profile("default", filters=[plugin])


def test_the_gke_preset_queries_with_the_function_s_own_google_token(google, caplog):
    clock = [time.time()]
    served = profile(
        {
            "preset": "gke",
            "prometheus": {"url": google.url + PROMETHEUS_PATH},
            "filter": [{"metric": "cpu", "above": 0.9}],
        },
        clock,
    )
    result = served.filter(pod(), [node("gke-a"), node("gke-b")])
    assert result.feasible == ["gke-a"] and result.rejected["gke-b"].reason == "NodeLoad rule 'cpu': load above 0.9"
    # The load and, without the Kubernetes API, the nodes' allocatable cores (the pod's own share needs them).
    assert google.queries == [f"Bearer {ACCESS_TOKEN}"] * 2
    [grant] = google.token_requests  # signed by the service account's key, for Cloud Monitoring read access
    assert grant["iss"] == SERVICE_ACCOUNT and grant["aud"] == "https://oauth2.googleapis.com/token"
    assert grant["scope"] == "https://www.googleapis.com/auth/monitoring.read"
    for _ in range(2):  # later refreshes (each on a thread of its own) reuse the token while it is valid
        clock[0] += 31
        assert served.filter(pod(), [node("gke-a")]).feasible == ["gke-a"]
        refreshes_landed()
    assert len(google.queries) == 6 and len(google.token_requests) == 1
    assert ACCESS_TOKEN not in caplog.text


def test_a_token_about_to_expire_is_refreshed_before_the_query(google):
    google.expires_in = 30  # inside google-auth's refresh margin: expired as soon as it is received
    clock = [time.time()]
    served = profile({"preset": "gke", "prometheus": {"url": google.url + PROMETHEUS_PATH}}, clock)
    served.filter(pod(), [node("gke-a")])
    clock[0] += 31
    served.filter(pod(), [node("gke-a")])
    refreshes_landed()
    # Each refresh asks two queries (the load, the allocatable cores), each with a token refreshed first.
    assert len(google.token_requests) == 4 and google.queries == [f"Bearer {ACCESS_TOKEN}"] * 4


def test_auth_none_sends_no_credential_and_the_refusal_is_a_warning(google, caplog):
    served = profile(
        {
            "preset": "gke",
            "prometheus": {"url": google.url + PROMETHEUS_PATH, "auth": "none"},
            "filter": [{"metric": "cpu", "above": 0.9}],
        },
        [time.time()],
    )
    result = served.filter(pod(), [node("gke-a")])
    assert google.queries == [None, None] and google.token_requests == []
    assert (
        "answered 401 Unauthorized: unauthenticated: Request had invalid authentication credentials."
        in result.error.reason
    )
    # One per query refused: the load's and the allocatable cores'.
    assert [record.levelname for record in caplog.records if record.name == "extender.nodeload"] == ["WARNING"] * 2


def test_credentials_that_cannot_be_refreshed_leave_the_nodes_without_facts_and_say_why(google, tmp_path, monkeypatch):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # a key Google does not know
    monkeypatch.setenv(
        "GOOGLE_APPLICATION_CREDENTIALS", str(key_file(tmp_path, "other.json", other, f"{google.url}/token"))
    )
    args = {
        "preset": "gke",
        "prometheus": {"url": google.url + PROMETHEUS_PATH},
        "filter": [{"metric": "cpu", "above": 0.9}],
    }
    answer = profile(args, [time.time()]).filter(pod(), [node("gke-a")])
    assert answer.error is not None and "no Google access token: RefreshError: " in answer.error.reason
    assert "Invalid JWT Signature." in answer.error.reason
    assert google.queries == []  # nothing is asked without a token


def test_looking_for_credentials_never_holds_a_request_past_its_deadline(google, monkeypatch):
    """Off Google Cloud, application default credentials may wait seconds on a metadata server that is not there: the
    refresh gives up at its deadline, and a later one takes what the search found."""
    import google.auth as google_auth

    found = google_auth.default

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.8)
        return found(*args, **kwargs)

    monkeypatch.setattr(google_auth, "default", slow)
    clock = [time.time()]
    args = {
        "preset": "gke",
        "prometheus": {"url": google.url + PROMETHEUS_PATH},
        "filter": [{"metric": "cpu", "above": 0.9}],
    }
    with loading_for(Settings(project="acme", http_timeout=1.0)):  # a refresh may take 0.4 s
        plugin = NodeLoad(NodeLoad.args_schema().load(args), clock=lambda: clock[0])
    served = Profile("default", filters=[plugin])
    started = time.monotonic()
    answer = served.filter(pod(), [node("gke-a")])
    assert time.monotonic() - started < 0.7
    # The load and the allocatable cores are asked at once: one waits for the search, the other for the first; both
    # give up at the refresh's deadline.
    assert "(its last refresh failed: no Google " in answer.error.reason
    assert all("within 0.4 s" in why for why in plugin.loads._current.failures.values())
    time.sleep(0.6)
    clock[0] += 31  # the next refresh, on a thread of its own: judged on once it lands
    served.filter(pod(), [node("gke-a")])
    refreshes_landed()
    assert served.filter(pod(), [node("gke-a")]).feasible == ["gke-a"]
    assert google.queries == [f"Bearer {ACCESS_TOKEN}"] * 2
