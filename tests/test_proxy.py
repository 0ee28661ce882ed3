"""``python -m extender proxy``: every call reaches the function with a Google ID token; answers come back unchanged.

google-auth runs unmodified: only Google's token endpoint is replaced, by a
local one named in the service-account key file (``token_uri``). It checks the
key's signed assertion and mints ID tokens signed by a key of its own, which
the local function verifies the way Cloud Run does before letting a call in.
"""

from __future__ import annotations

import json
import posixpath
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
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from extender.proxy.tokens import IdTokenSource
from testkit.ports import free_port
from tests.conftest import ROOT, wait_until_up
from tests.recordings import exchanges

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
def running_proxy(target: str, credentials: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    # A file, not a pipe: the proxy logs every refusal, and a full pipe nobody reads would stall it.
    with tempfile.TemporaryFile() as log:
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
    """A target that records each request line's target exactly as it arrived, and whether it carried a token."""

    def __init__(self) -> None:
        self.arrived: list[tuple[str, bool]] = []
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                target.arrived.append((self.path, self.headers.get("Authorization", "").startswith("Bearer ")))
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
