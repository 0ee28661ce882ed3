"""``python -m extender proxy``: every call reaches the function with a Google ID token; answers come back unchanged.

google-auth runs unmodified: only Google's token endpoint is replaced, by a
local one named in the service-account key file (``token_uri``). It checks the
key's signed assertion and mints ID tokens signed by a key of its own, which
the local function verifies the way Cloud Run does before letting a call in.

Header lines HTTP does not allow, or the outgoing client cannot send, go over
raw sockets: each shape once, then randomly drawn ones, with a fixed seed by
default so CI is repeatable; to run longer with a new seed each time:

    EXTENDER_HOSTILE_SEED=random EXTENDER_HOSTILE_PROXY_ROUNDS=15000 \\
        python -m pytest -q -p no:cacheprovider tests/test_proxy.py -k randomly_drawn_headers

The seed is printed with the counts per kind and status at the end of the module.
"""

from __future__ import annotations

import json
import os
import posixpath
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import functions_framework
import google.auth.crypt
import google.auth.exceptions
import google.auth.jwt
import google.oauth2.id_token
import orjson
import pytest
import requests
import urllib3.connection
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from urllib3.util import SKIP_HEADER
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from extender.proxy.headers import head_problem, unsendable
from extender.proxy.tokens import IdTokenSource
from testkit.ports import free_port
from tests.conftest import ROOT, wait_until_up
from tests.rawhttp import connect, exchange, head, read_reply
from tests.recordings import exchanges
from tests.tally import Tally

SERVICE_ACCOUNT = "scheduler-proxy@my-project.iam.gserviceaccount.com"
# A service account's signed assertion names Google's token endpoint, wherever it is sent.
ASSERTION_AUDIENCE = "https://oauth2.googleapis.com/token"


def rsa_key_pem() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


class FakeGoogle:
    """Google's OAuth token endpoint, as far as ID tokens for a service account go."""

    def __init__(self, directory: Path, lifetime: int = 3600) -> None:
        self.lifetime = lifetime
        self.minted: list[str] = []
        self.refuse = False
        self._account_private, self._account_public = rsa_key_pem()
        self._google_private, self.public_pem = rsa_key_pem()
        self._signer = google.auth.crypt.RSASigner.from_string(self._google_private, "google-key-1")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.token_uri = f"http://127.0.0.1:{self._server.server_port}/token"
        self.key_file = directory / "service-account.json"
        self.key_file.write_text(json.dumps({
            "type": "service_account",
            "project_id": "my-project",
            "private_key_id": "account-key-1",
            "private_key": self._account_private.decode(),
            "client_email": SERVICE_ACCOUNT,
            "client_id": "1234567890",
            "token_uri": self.token_uri,
        }))  # fmt: skip
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def verify(self, token: str, audience: str) -> dict[str, Any]:
        """What Cloud Run checks: Google's signature, the audience, the expiry."""
        return google.auth.jwt.decode(token, certs={"google-key-1": self.public_pem}, audience=audience)

    def _mint(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        if self.refuse or form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return 400, {"error": "invalid_grant", "error_description": "refused"}
        assertion = google.auth.jwt.decode(
            form["assertion"][0], certs=self._account_public, audience=ASSERTION_AUDIENCE
        )
        now = int(time.time())
        claims = {
            "iss": "https://accounts.google.com", "aud": assertion["target_audience"], "sub": "1234567890",
            "email": assertion["iss"], "iat": now, "exp": now + self.lifetime, "serial": len(self.minted),
        }  # fmt: skip
        token = google.auth.jwt.encode(self._signer, claims).decode()
        self.minted.append(token)
        return 200, {"id_token": token}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                status, body = fake._mint(form)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@pytest.fixture(scope="module")
def fake_google(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGoogle]:
    fake = FakeGoogle(tmp_path_factory.mktemp("google"))
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def extender_app() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXTENDER_PROCESS_TUNING", "off")  # leave the test process's collector and allocator alone
        return functions_framework.create_app(target="extender", source=str(ROOT / "main.py"))


class GuardedFunction:
    """The extender behind Cloud Run's IAM check: no valid ID token for its URL, no call."""

    def __init__(self, app: Any, google: FakeGoogle) -> None:
        self.app = app
        self.google = google
        self.seen: list[dict[str, Any]] = []
        self._server = make_server("127.0.0.1", 0, self, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        try:
            claims = self.google.verify(token, audience=self.url) if scheme == "Bearer" else None
        except ValueError:
            claims = None
        if claims is None:
            return Response("<html><body>401 Unauthorized</body></html>", 401, mimetype="text/html")(
                environ, start_response
            )
        self.seen.append(claims)
        return self.app(environ, start_response)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def function(extender_app: Any, fake_google: FakeGoogle) -> Iterator[GuardedFunction]:
    guarded = GuardedFunction(extender_app, fake_google)
    yield guarded
    guarded.close()


@contextmanager
def running_proxy(target: str, credentials: Path, *extra: str, log_path: Path | None = None) -> Iterator[str]:
    """The proxy as a process; what it writes goes to ``log_path`` when given."""
    port = free_port()
    # A file, not a pipe: the proxy logs every refusal, and a full pipe nobody reads would stall it.
    with log_path.open("w+b") if log_path else tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "extender", "proxy", "--target", target, "--port", str(port), *extra],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "GOOGLE_APPLICATION_CREDENTIALS": str(credentials)},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_until_up(url, process)
            except RuntimeError as exc:
                log.seek(0)
                raise RuntimeError(f"{exc}{log.read().decode(errors='replace')}") from None
            yield url
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def proxy(function: GuardedFunction, fake_google: FakeGoogle) -> Iterator[str]:
    with running_proxy(function.url, fake_google.key_file) as url:
        yield url


@pytest.mark.parametrize("exchange", exchanges(), ids=lambda e: e.id)
def test_calls_reach_the_function_with_an_id_token_and_come_back_unchanged(proxy, function, extender_app, exchange):
    headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip", "User-Agent": "Go-http-client/1.1"}
    seen = len(function.seen)
    # A token the caller sends itself is replaced, never passed on.
    through = requests.post(
        f"{proxy}/{exchange.verb}", data=exchange.body, headers=headers | {"Authorization": "Bearer forged"}, timeout=10
    )
    direct = extender_app.test_client().post(f"/{exchange.verb}", data=exchange.body, headers=headers)
    assert (through.status_code, through.headers["Content-Type"], through.content) == (
        direct.status_code,
        direct.content_type,
        direct.data,
    )
    assert len(function.seen) == seen + 1
    assert function.seen[-1]["email"] == SERVICE_ACCOUNT


def test_one_token_serves_every_call_while_it_is_fresh(proxy, function, fake_google):
    for _ in range(5):
        assert requests.get(f"{proxy}/healthz", timeout=10).json()["status"] == "ok"
    assert len(fake_google.minted) == 1, "the proxy minted its token at start-up and reused it"
    assert len(function.seen) >= 5


def test_errors_and_other_methods_pass_through(proxy):
    response = requests.get(f"{proxy}/filter", timeout=10)
    assert response.status_code == 405 and response.headers["Allow"] == "POST"
    assert "filter answers POST, not GET" in response.json()["Error"]
    response = requests.head(f"{proxy}/healthz", timeout=10)
    assert response.status_code == 200 and response.content == b"" and int(response.headers["Content-Length"]) > 0
    response = requests.post(
        f"{proxy}/nosuchverb", data=b"{}", headers={"Content-Type": "application/json"}, timeout=10
    )
    assert response.status_code == 404 and "unknown verb 'nosuchverb'" in response.json()["Error"]


def test_a_chunked_body_is_refused_with_411(proxy):
    response = requests.post(
        f"{proxy}/filter", data=iter([b"{}"]), headers={"Content-Type": "application/json"}, timeout=10
    )
    assert response.status_code == 411 and "Content-Length" in response.json()["Error"]


def test_a_refused_token_comes_back_as_the_function_answered(function, fake_google):
    with running_proxy(function.url, fake_google.key_file, "--audience", "https://someone-else.a.run.app") as url:
        response = requests.get(f"{url}/healthz", timeout=10)
    assert response.status_code == 401
    assert response.headers["Content-Type"].startswith("text/html") and b"401 Unauthorized" in response.content


def test_without_credentials_calls_fail_with_a_502_naming_the_problem(function, tmp_path):
    with running_proxy(function.url, tmp_path / "no-such-key.json") as url:
        response = requests.get(f"{url}/healthz", timeout=10)
    assert response.status_code == 502
    assert response.json()["Error"].startswith(f"identity proxy: no ID token for audience {function.url}: ")
    assert "GOOGLE_APPLICATION_CREDENTIALS" in response.json()["Error"]


def logged_entries(log_path: Path) -> list[dict[str, Any]]:
    """The proxy's log lines with --log-format json, each a JSON object as GKE's logging agent reads it."""
    return [json.loads(line) for line in log_path.read_text().splitlines()]


def test_without_credentials_it_is_not_ready_and_each_failure_is_an_entry_the_module_counts(function, tmp_path):
    """The proxy answers 502 itself, so Cloud Run never sees the call: its own entries and readiness must say so."""
    log_path = tmp_path / "proxy.log"
    with running_proxy(function.url, tmp_path / "no-such-key.json", "--log-format", "json", log_path=log_path) as url:
        seen = len(function.seen)
        ready = requests.get(f"{url}/identity-proxy/ready", timeout=10)
        called = requests.post(f"{url}/filter", data=b"{}", headers={"Content-Type": "application/json"}, timeout=10)
        assert len(function.seen) == seen, "neither reached the function"
    assert ready.status_code == 503
    assert ready.json()["Error"].startswith(f"identity proxy: not ready: no ID token for audience {function.url}: ")
    assert called.status_code == 502
    failures = [entry for entry in logged_entries(log_path) if entry.get("event") == "extender.proxy"]
    # The last two: the probe's and the call's (waiting for the proxy to start called it too).
    assert [(entry["severity"], entry["failure"], entry["status"]) for entry in failures[-2:]] == [
        ("ERROR", "no_id_token", 503),
        ("ERROR", "no_id_token", 502),
    ]
    assert failures[-1]["problem"] == called.json()["Error"] and failures[-1]["logger"] == "extender.proxy"


def test_ready_while_it_has_a_token_and_the_probe_is_never_forwarded(proxy, function):
    seen = len(function.seen)
    response = requests.get(f"{proxy}/identity-proxy/ready", timeout=10)
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert requests.head(f"{proxy}/identity-proxy/ready", timeout=10).status_code == 200
    assert len(function.seen) == seen


def test_a_refused_token_is_a_warning_entry_with_its_status(function, fake_google, tmp_path):
    log_path = tmp_path / "proxy.log"
    audience = ("--audience", "https://someone-else.a.run.app", "--log-format", "json")
    with running_proxy(function.url, fake_google.key_file, *audience, log_path=log_path) as url:
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 401
    refused = [entry for entry in logged_entries(log_path) if entry.get("event") == "extender.proxy"][-1]
    assert (refused["severity"], refused["failure"], refused["status"]) == ("WARNING", "refused", 401)
    assert "roles/run.invoker" in refused["problem"]


def readiness_probe(url: str) -> list[str]:
    """The identity-proxy container's readinessProbe command as modules/scheduler-config renders it, for ``url``."""
    manifests = (ROOT / "terraform" / "modules" / "scheduler-config" / "manifests.tf").read_text()
    block = manifests.split("identity_proxy_ready_probe = ", 1)[1]
    command = json.loads(block.split("command = ", 1)[1].split("\n", 1)[0])
    port = url.rsplit(":", 1)[1]
    return [part.replace("${var.identity_proxy.port}", port) for part in command]


def test_the_rendered_readiness_probe_fails_exactly_while_no_token_can_be_had(function, fake_google, tmp_path):
    for credentials, ready in ((fake_google.key_file, True), (tmp_path / "no-such-key.json", False)):
        with running_proxy(function.url, credentials) as url:
            command = readiness_probe(url)
            assert command[0] == "python"
            probe = subprocess.run([sys.executable, *command[1:]], capture_output=True, timeout=30, check=False)
        assert (probe.returncode == 0) is ready, probe.stderr


def test_logs_are_json_lines_in_a_pod_and_readable_lines_elsewhere():
    from extender.proxy.logs import default_format
    from extender.settings import in_a_pod

    assert default_format(in_a_pod({"KUBERNETES_SERVICE_HOST": "10.0.0.1"})) == "json"
    assert default_format(in_a_pod({})) == "text"


def test_an_unreachable_function_is_a_502_that_names_the_host_only(fake_google):
    target = f"http://127.0.0.1:{free_port()}/my-extender"
    # Both the target's path and the scheduler's (urlPrefix) may carry a caller token.
    with running_proxy(target, fake_google.key_file) as url:
        response = requests.get(f"{url}/secret-caller-token-123/healthz", timeout=10)
    assert response.status_code == 502
    error = response.json()["Error"]
    assert error.startswith(f"identity proxy: cannot reach {target.removesuffix('/my-extender')}: ")
    assert "my-extender" not in error and "secret-caller-token" not in error, error


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("http://my-extender.a.run.app", "must use https"),
        ("ftp://my-extender.a.run.app", "must be an https:// URL"),
        ("https://my-extender.a.run.app/?token=x", "must not have a query"),
    ],
)
def test_unsafe_targets_are_refused_at_start(target, problem):
    result = subprocess.run(
        [sys.executable, "-m", "extender", "proxy", "--target", target],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and problem in result.stderr
    assert "token=x" not in result.stderr


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def token_source(fake_google: FakeGoogle, monkeypatch: pytest.MonkeyPatch) -> tuple[IdTokenSource, Clock]:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(fake_google.key_file))
    clock = Clock()
    return IdTokenSource("https://my-extender.a.run.app", refresh_margin=300, clock=clock), clock


def test_tokens_are_renewed_ahead_of_expiry(token_source, fake_google):
    source, clock = token_source
    first = source.token()
    expiry = fake_google.verify(first, "https://my-extender.a.run.app")["exp"]
    minted = len(fake_google.minted)
    clock.now = expiry - 301
    assert source.token() == first and len(fake_google.minted) == minted
    clock.now = expiry - 299
    second = source.token()
    assert second != first and len(fake_google.minted) == minted + 1
    assert fake_google.verify(second, "https://my-extender.a.run.app")["email"] == SERVICE_ACCOUNT


def test_a_failed_renewal_keeps_the_current_token_until_it_expires(token_source, fake_google, monkeypatch):
    source, clock = token_source
    first = source.token()
    expiry = fake_google.verify(first, "https://my-extender.a.run.app")["exp"]
    monkeypatch.setattr(fake_google, "refuse", True)
    clock.now = expiry - 60
    assert source.token() == first
    clock.now = expiry + 1
    with pytest.raises(google.auth.exceptions.RefreshError, match="invalid_grant"):
        source.token()


def test_credentials_that_give_no_token_are_a_refresh_error(monkeypatch):
    class Tokenless:
        token = None

        def refresh(self, request: Any) -> None:
            pass

    monkeypatch.setattr(google.oauth2.id_token, "fetch_id_token_credentials", lambda audience, request: Tokenless())
    source = IdTokenSource("https://my-extender.a.run.app")
    with pytest.raises(google.auth.exceptions.RefreshError, match=r"no ID token for https://my-extender\.a\.run\.app"):
        source.token()


# --- a proxy that lends its identity only for what is unambiguous ---------------------------------------


class EchoTarget:
    """A target that answers with what reached it (path, headers, cookies) and sets a cookie each time."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

        @Request.application
        def app(request: Request) -> Response:
            self.seen.append({"path": request.path, "headers": dict(request.headers), "cookies": dict(request.cookies)})
            response = Response(json.dumps({"path": request.path}), mimetype="application/json")
            response.set_cookie("session", f"caller-{len(self.seen)}")
            return response

        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}/fn-a"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def echo(fake_google: FakeGoogle) -> Iterator[tuple[EchoTarget, str]]:
    target = EchoTarget()
    with running_proxy(target.url, fake_google.key_file) as url:
        yield target, url
    target.close()


def raw_call(proxy_url: str, request: bytes) -> bytes:
    import socket

    host, port = proxy_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while piece := sock.recv(65536):
            answer += piece
    return answer


def test_cookies_the_target_sets_are_neither_passed_back_nor_sent_for_another_caller(echo):
    target, url = echo
    first = requests.get(f"{url}/healthz", timeout=10)
    assert first.status_code == 200 and "Set-Cookie" not in first.headers  # the proxy has no sessions
    requests.get(f"{url}/healthz", timeout=10)
    assert target.seen[-1]["cookies"] == {}


@pytest.mark.parametrize(
    ("path", "problem"),
    [(path, b"dot-segment") for path in
     ["/../fn-b/healthz", "/a/../../fn-b", "/%2e%2e/fn-b", "/%2E%2e/fn-b", "/.%2e/fn-b", "/%252e%252e/fn-b",
      "/..%2ffn-b", "/..\\fn-b", "/./healthz", "/%25252e%25252e/x", "/%252525252e%252525252e/x", "/..;x/fn-b"]]
    # requests cuts a path at "#", then removes the dot-segment left at its end: /fn-a/a/..#x/b would go to /.
    + [(path, b"fragment") for path in ["/a/..#x/b", "/..#/fn-b/healthz", "/healthz#x", "/a/b#", "/#/../fn-b"]],
)  # fmt: skip
def test_paths_that_could_leave_the_target_prefix_are_refused(echo, path, problem):
    target, url = echo
    before = len(target.seen)
    answer = raw_call(url, f"GET {path} HTTP/1.1\r\nHost: proxy\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 400 ") and problem in answer
    assert len(target.seen) == before


def test_dots_inside_segments_are_not_dot_segments(echo):
    _target, url = echo
    assert requests.get(f"{url}/v1.2/..x/healthz", timeout=10).json() == {"path": "/fn-a/v1.2/..x/healthz"}


def test_hop_by_hop_headers_and_those_named_in_connection_are_not_forwarded(echo):
    target, url = echo
    answer = raw_call(
        url,
        b"GET /healthz HTTP/1.1\r\nHost: proxy\r\nConnection: close, X-Internal-Secret\r\n"
        b"X-Internal-Secret: 42\r\nKeep-Alive: timeout=5\r\nX-Kept: yes\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200 ")
    headers = {name.lower() for name in target.seen[-1]["headers"]}
    assert "x-kept" in headers
    assert not headers & {"x-internal-secret", "keep-alive"}


@pytest.mark.parametrize(
    ("framing", "problem"),
    [
        (b"Content-Length: 5\r\nContent-Length: 5\r\n\r\n{}{}{", b"more than one Content-Length"),
        (b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n{}{}{}", b"more than one Content-Length"),
        (b"Content-Length: 100\r\n\r\n{\"short\": 1}", b"the body ended after 12 of the 100 bytes declared"),
        (b"Transfer-Encoding: gzip\r\n\r\n{}", b"Transfer-Encoding"),
        (b"Content-Length: +5\r\n\r\n{}{}{", b"Content-Length must be"),
    ],
)
def test_ambiguous_or_truncated_framing_is_refused_and_not_forwarded(echo, framing, problem):
    target, url = echo
    before = len(target.seen)
    answer = raw_call(url, b"POST /filter HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n" + framing)
    assert answer.split(b" ", 2)[1] in (b"400", b"411") and problem in answer, answer
    assert len(target.seen) == before


def test_errors_redact_the_path_also_as_re_encoded(fake_google):
    target = f"http://127.0.0.1:{free_port()}/my extender/ünïcode"
    with running_proxy(target, fake_google.key_file) as url:
        response = requests.get(f"{url}/secret token ü/healthz", timeout=10)
    assert response.status_code == 502
    error = response.json()["Error"]
    for fragment in ("my extender", "my%20extender", "secret", "%C3%BC", "ünïcode"):
        assert fragment not in error, error


# --- no forwarded path leaves the target, whatever the caller sends (checked where the requests arrive) -------------


class RawTarget:
    """A target that records each request line's target exactly as it arrived, and whether it carried a token (and,
    in ``heads``, its headers)."""

    def __init__(self) -> None:
        self.arrived: list[tuple[str, bool]] = []
        self.heads: list[list[tuple[str, str]]] = []
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                target.arrived.append((self.path, self.headers.get("Authorization", "").startswith("Bearer ")))
                target.heads.append(self.headers.items())
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_HEAD = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/fn-a"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def inside_target(arrived: str, prefix: str = "/fn-a") -> bool:
    """Whether a request target stays under ``prefix`` however a server may read it: percent-decoded (as often as
    it takes), backslashes as slashes, path parameters cut, dot-segments resolved."""
    path = arrived.split("?", 1)[0]
    for _ in range(6):
        path = unquote(path)
    segments = [segment.split(";", 1)[0] for segment in path.replace("\\", "/").split("/")]
    resolved = posixpath.normpath("/".join(segments) or "/")
    return resolved == prefix or resolved.startswith(prefix + "/")


@pytest.fixture(scope="module")
def raw_target(fake_google: FakeGoogle) -> Iterator[tuple[RawTarget, str]]:
    target = RawTarget()
    with running_proxy(target.url, fake_google.key_file) as url:
        yield target, url
    target.close()


_PIECES = st.sampled_from(
    [".", "..", "%2e", "%2E", "%252e", "%2e%2e", ".%2e", "#", "#x", "?", "/", "//", "\\", "%2f", "%2F", "%5c", "%25",
     "%", ";", ";x", "a", "fn-b", "fn-a", "healthz", "%00", "%23", "%3f", "%3F", "~", "-", "_", "%7e", "%252f"]
)  # fmt: skip


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_PIECES, min_size=1, max_size=12))
def test_no_forwarded_request_leaves_the_target(raw_target, pieces):
    target, url = raw_target
    path = "/" + "".join(pieces)
    before = len(target.arrived)
    answer = raw_call(url, f"GET {path} HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n".encode())
    forwarded = target.arrived[before:]
    assert answer.startswith((b"HTTP/1.1 204 ", b"HTTP/1.1 400 ")), answer[:200]
    for arrived, with_token in forwarded:
        assert with_token and inside_target(arrived), (path, arrived)


# --- headers HTTP does not allow, or the outgoing client cannot send ---------------------------------------------

# In every header value sent below: no answer and no line of the proxy's log may hold it.
SECRET = "hdr-value-5f0c2a9e"
HEADER_ROUNDS = int(os.environ.get("EXTENDER_HOSTILE_PROXY_ROUNDS", "400"))
SEED = os.environ.get("EXTENDER_HOSTILE_SEED", "17")
TALLY = Tally("hostile proxy headers")


@pytest.fixture(scope="module")
def header_proxy(
    fake_google: FakeGoogle, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[RawTarget, int]]:
    """A proxy before a raw target, its port; when the module ends, its log holds no traceback and no value sent."""
    target = RawTarget()
    log_path = tmp_path_factory.mktemp("proxy") / "proxy.log"
    with running_proxy(target.url, fake_google.key_file, log_path=log_path) as url:
        yield target, int(url.rsplit(":", 1)[1])
    target.close()
    log = log_path.read_text(encoding="latin-1")
    assert "Traceback" not in log and SECRET not in log, log[-3000:]
    TALLY.print_report(request)


def client_sends(name: str, value: str) -> bool:
    """Whether requests prepares the header and urllib3 (over http.client) puts it in a request head."""
    try:
        requests.Request("GET", "http://127.0.0.1/", headers={name: value}).prepare()
        connection = urllib3.connection.HTTPConnection("127.0.0.1")
        connection.putrequest("GET", "/")
        connection.putheader(name, value)
    except (ValueError, UnicodeEncodeError):  # requests' InvalidHeader is a ValueError
        return False
    return value != SKIP_HEADER  # urllib3 leaves a header with this value out, where it does not refuse it


_HEADER_TEXT = st.text(
    st.sampled_from(["a", "Z", "-", ":", " ", "\t", "\r", "\n", "\x00", "\x01", "\x0b", "\x0c", "\x1c", "\x1f",
                     "\x7f", "\x80", "\x85", "\xa0", "\xe9", "\xff", "\u0100", "\u2028", "\u3000"]),
    max_size=5,
)  # fmt: skip


@settings(max_examples=4000, derandomize=True, database=None, deadline=None)
@given(name=_HEADER_TEXT | st.just("User-Agent"), value=_HEADER_TEXT | st.just(SKIP_HEADER))
def test_the_headers_refused_as_unsendable_are_exactly_those_the_client_refuses(name, value):
    assert (unsendable([(name, value)]) is None) == client_sends(name, value), (name, value)


# Each shape of the randomised audit that found the proxy dropping connections, one header line each ("{}" stands
# for the value sent), and what the 400's error names.
HEADER_SHAPES = {
    "byte 0x80-0xFF in a name": ("X-\xe9t\xe9: {}", r"header 'X-\xe9t\xe9'"),
    "control character in a name": ("X-\x01A: {}", r"header 'X-\x01A'"),
    "DEL in a name": ("X\x7f: {}", r"header 'X\x7f'"),
    "space in a name": ("X Y: {}", "header 'X Y'"),
    "whitespace before the colon": ("X-A\t: {}", r"header 'X-A\t'"),
    "a name longer than shown": ("X" * 60 + "\xff: {}", "header '" + "X" * 40 + "'…"),
    "empty name": (": {}", "line 3 of the request head has an empty header name"),
    "no colon": ("{}", "line 3 of the request head has no colon"),
    "control character in a value": ("X-A: a\x01{}", "the value of header 'X-A' holds a control character"),
    "NUL in a value": ("X-A: {}\x00", "the value of header 'X-A' holds a control character"),
    "CR alone in a value": ("X-A: a\r{}: b", "the value of header 'X-A' holds a control character"),
    "0x1C at the start of a value": ("X-A: \x1c{}", "the value of header 'X-A' holds a control character"),
    # HTTP allows these (obs-text); requests refuses them at the start of a value.
    "NBSP at the start of a value": ("X-A: \xa0{}", "the value of header 'X-A' cannot be sent on"),
    "NEL at the start of a value": ("X-A: \x85{}", "the value of header 'X-A' cannot be sent on"),
    "obs-fold": ("X-A: a\r\n {}", "header 'X-A' is folded onto line 4 of the request head (obs-fold)"),
    "obs-fold with a tab": ("X-A: a\r\n\t{}", "header 'X-A' is folded onto line 4"),
    "obs-fold of Host (which is not forwarded)": ("\t{}", "header 'Host' is folded onto line 3"),
    "urllib3's marker": ("X-A: " + SKIP_HEADER, "the value of header 'X-A' cannot be sent on"),
    "urllib3's marker for a skippable header": ("User-Agent: " + SKIP_HEADER, "header 'User-Agent'"),
}


def header_head(method: str, *lines: str, body: bytes = b"") -> bytes:
    return head(method, "/healthz", *lines, f"Content-Length: {len(body)}") + body


@pytest.mark.parametrize("shape", HEADER_SHAPES)
def test_a_header_http_does_not_allow_or_the_client_cannot_send_is_a_400_naming_it(header_proxy, shape):
    target, port = header_proxy
    line, named = HEADER_SHAPES[shape]
    before = len(target.arrived)
    reply = exchange(port, header_head("POST", line.format(SECRET), body=b"{}"))  # line 3, after Host
    TALLY.add(f"shape: {shape}", reply.status or "none")
    assert reply.status == 400, reply
    error = orjson.loads(reply.body)["Error"]
    assert error.startswith("identity proxy: ") and named in error, error
    assert SECRET not in (reply.head + reply.body).decode("latin-1")
    assert len(target.arrived) == before


def test_a_head_whose_first_header_line_begins_with_whitespace_is_refused():
    lines = [b"\tX-A: 1\r\n", b"Host: proxy\r\n", b"\r\n"]
    assert head_problem(lines) == (
        "line 2 of the request head begins with whitespace: a header line starts with its name"
    )
    assert head_problem(lines[1:]) is None


def test_what_follows_a_header_line_http_does_not_allow_is_never_a_next_request(header_proxy):
    """The server stops reading a head at a line it cannot read: the Content-Length after it would be lost, and the
    body read as the next request. The connection is answered and closed instead."""
    target, port = header_proxy
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: proxy\r\n\r\n"
    with connect(port, timeout=5) as sock:
        sock.sendall(head("POST", "/healthz", "X-\xe9: 1", f"Content-Length: {len(smuggled)}") + smuggled)
        first, second = read_reply(sock), read_reply(sock)
    assert first.status == 400 and b"Connection: close" in first.head, first
    assert second.status is None and not second.head
    assert all("smuggled" not in path for path, _ in target.arrived)


def test_values_http_allows_arrive_as_they_were_sent(header_proxy):
    target, port = header_proxy
    sent = [("X-Latin", "caf\xe9 \xa0\x85\xff"), ("X-Tab", "a\tb"), ("X-Empty", ""), ("X-Marks", '!"#:;<>@[]{}~')]
    reply = exchange(port, header_head("GET", *[f"{name}: \t {value}" for name, value in sent]))
    assert reply.status == 204, reply
    assert set(sent) <= set(target.heads[-1])


def field_values(headers: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Each header with its value without the whitespace around it, which is not part of it (RFC 9110 5.5)."""
    return {(name, value.strip(" \t")) for name, value in headers}


# Characters of a drawn header line, by what HTTP makes of them.
CONTROLS = "".join(map(chr, [*range(0x0A), *range(0x0B, 0x20), 0x7F]))  # every one but LF, which ends a line
HIGH = "".join(map(chr, range(0x80, 0x100)))  # obs-text: allowed in a value, not in a name
TOKEN = "!#$%&'*+-.^_`|~abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
SEPARATORS = ' "(),/;<=>?@[\\]{}'
HEADER_KINDS = [
    "allowed by HTTP", "control characters in a name", "bytes 0x80-0xFF in a name", "separators in a name",
    "empty name", "no colon", "control characters in a value", "bytes 0x80-0xFF in a value",
    "a value that begins with whitespace other than SP or HTAB", "obs-fold", "urllib3's marker",
]  # fmt: skip


def draw_header_line(rng: random.Random) -> tuple[str, str]:
    """(kind, a header line of that kind with ``SECRET`` in its value, unless the kind says otherwise)."""

    def pick(alphabet: str, most: int = 3) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, most + 1)))

    def spliced(text: str, alphabet: str) -> str:
        at = rng.randrange(len(text) + 1)
        return text[:at] + pick(alphabet) + text[at:]

    name = "X-" + pick(TOKEN, 8)
    # The secret whole, with what HTTP allows in a value around it.
    value = pick(TOKEN + HIGH + SEPARATORS + "\t") * rng.randrange(2) + SECRET + pick(TOKEN + ":") * rng.randrange(2)
    kind = rng.choice(HEADER_KINDS)
    if kind.endswith("in a name"):
        name = spliced(name, CONTROLS if kind.startswith("control") else HIGH if "0x80" in kind else SEPARATORS)
    elif kind == "empty name":
        name = ""
    elif kind == "no colon":
        return kind, value.replace(":", "")
    elif kind.endswith("in a value"):
        extra = pick(CONTROLS if kind.startswith("control") else HIGH)
        value = rng.choice([extra + value, value + extra])
    elif kind.startswith("a value that begins"):
        value = rng.choice("\x85\xa0\x0b\x0c\x1c\x1d\x1e\x1f") + value
    elif kind == "obs-fold":
        value = "a" + rng.choice(["\r\n", "\n"]) + rng.choice([" ", "\t"]) + value
    elif kind == "urllib3's marker":
        name, value = rng.choice(["User-Agent", "Host", "Accept-Encoding", name]), SKIP_HEADER
    return kind, name + ":" + rng.choice(["", " ", "  ", "\t"]) + value


def test_randomly_drawn_headers_are_forwarded_as_sent_or_refused_with_a_400(header_proxy):
    """Each request carries a drawn header line (its Content-Length before or after it), a normal request follows it
    on the same connection: every request is answered, by the target (204, its headers arrived with their values) or
    by the proxy (400); none is dropped or a 5xx, no answer holds a value, and a connection the proxy keeps open stays
    in step."""
    target, port = header_proxy
    seed = random.randrange(1 << 32) if SEED == "random" else int(SEED)
    TALLY.title = f"hostile proxy headers (seed {seed}, {HEADER_ROUNDS} random rounds)"
    rng = random.Random(seed)
    for _ in range(HEADER_ROUNDS):
        kind, line = draw_header_line(rng)
        body = b"{}"[: rng.randrange(3)]
        lines = [line, f"Content-Length: {len(body)}", *["X-Also: " + SECRET] * rng.randrange(2)]
        rng.shuffle(lines)  # the framing before or after the drawn line
        before = len(target.arrived)
        with connect(port, timeout=10) as sock:
            sock.sendall(head(rng.choice(["GET", "POST"]), "/healthz", *lines) + body)
            reply = read_reply(sock)
            try:
                sock.sendall(head("GET", "/next"))
            except OSError:
                pass  # closed, as the answer said
            following = read_reply(sock)
        TALLY.add(kind, reply.status or "none")
        assert reply.status in (204, 400), (line, reply)
        assert SECRET not in (reply.head + reply.body).decode("latin-1"), (line, reply)
        if reply.status == 204:
            fields = [each.partition(":") for each in lines]
            # All but the two the proxy sets itself.
            sent = field_values([(name, value) for name, _, value in fields if name not in ("Host", "Content-Length")])
            assert sent <= field_values(target.heads[before]), (line, target.heads[before])
        else:
            assert orjson.loads(reply.body)["Error"].startswith("identity proxy: "), reply
        if b"Connection: close" in reply.head:
            assert following.status is None and len(target.arrived) == before + (reply.status == 204)
        else:
            assert following.status == 204 and target.arrived[-1][0] == "/fn-a/next", (line, following)
    assert exchange(port, head("GET", "/healthz")).status == 204
