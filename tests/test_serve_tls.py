"""``python -m extender serve``: the real function over verified TLS and mutual TLS, certificates made at test time."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
import requests

from extender.http.head_deadline import HEAD_SECONDS, NEXT_HEAD_SECONDS
from testkit.certs import CertificateAuthority
from testkit.ports import free_port
from testkit.scheduler_checks import check_answer
from tests.conftest import ROOT, logged_process
from tests.rawhttp import Reply, head, next_heads, read_reply
from tests.recordings import exchanges

FILTER = next(e for e in exchanges() if e.verb == "filter")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    directory = tmp_path_factory.mktemp("pki")
    ca, other_ca = CertificateAuthority(), CertificateAuthority("another CA")
    # Only the IP address as SAN: https://localhost must then fail hostname verification.
    server_cert, server_key = ca.issue_server("127.0.0.1").write(directory, "server")
    return SimpleNamespace(
        ca=ca.write(directory, "ca"),
        other_ca=other_ca.write(directory, "other-ca"),
        server_cert=server_cert,
        server_key=server_key,
        client=ca.issue_client("kube-scheduler").write(directory, "client"),
        rogue_client=other_ca.issue_client("kube-scheduler").write(directory, "rogue-client"),
    )


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """TCP only: a TLS request cannot tell "not up yet" from "refused my certificate"."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"serve exited with {process.returncode}: {process.stderr.read().decode() if process.stderr else ''}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"port {port} did not open within {timeout} s")


@contextmanager
def serving(pki: SimpleNamespace, *extra: str, **env: str) -> Iterator[str]:
    """``serve`` on a free port, with ``extra`` arguments and ``env`` added to the environment; its output must hold
    no caller token of that environment in any form."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "extender",
        "serve",
        "--cert",
        str(pki.server_cert),
        "--key",
        str(pki.server_key),
        "--port",
        str(port),
        *extra,
    ]
    with logged_process(command, dict(os.environ) | env) as (process, _):
        try:
            wait_for_port(port, process)
            yield f"https://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def tls_url(pki: SimpleNamespace) -> Iterator[str]:
    with serving(pki) as url:
        yield url


@pytest.fixture(scope="module")
def mtls_url(pki: SimpleNamespace) -> Iterator[str]:
    with serving(pki, "--client-ca", str(pki.ca)) as url:
        yield url


def post_filter(url: str, **tls: object) -> requests.Response:
    return requests.post(
        f"{url}/filter", data=FILTER.body, headers={"Content-Type": "application/json"}, timeout=10, **tls
    )


def test_verified_tls_serves_the_function(tls_url, pki):
    response = post_filter(tls_url, verify=str(pki.ca))
    assert response.status_code == 200
    check_answer("filter", FILTER.request, response.json())
    assert requests.get(f"{tls_url}/healthz", verify=str(pki.ca), timeout=10).json()["status"] == "ok"


def test_a_server_certificate_from_another_ca_is_rejected(tls_url, pki):
    with pytest.raises(requests.exceptions.SSLError, match="certificate verify failed"):
        post_filter(tls_url, verify=str(pki.other_ca))


def test_a_host_the_certificate_does_not_name_is_rejected(tls_url, pki):
    with pytest.raises(requests.exceptions.SSLError, match=r"match|mismatch"):
        post_filter(tls_url.replace("127.0.0.1", "localhost"), verify=str(pki.ca))


def test_mutual_tls_serves_a_client_with_a_certificate_from_the_client_ca(mtls_url, pki):
    response = post_filter(mtls_url, verify=str(pki.ca), cert=tuple(map(str, pki.client)))
    assert response.status_code == 200
    check_answer("filter", FILTER.request, response.json())


# Under TLS 1.3 the server's alert arrives after the client's handshake is done; a client that is already
# writing may see the connection reset instead. Either way it gets no answer.
RESET = "Connection reset|Broken pipe|EOF occurred"


def test_mutual_tls_refuses_a_client_without_a_certificate(mtls_url, pki):
    with pytest.raises(requests.exceptions.ConnectionError, match=f"certificate required|{RESET}"):
        post_filter(mtls_url, verify=str(pki.ca))
    assert post_filter(mtls_url, verify=str(pki.ca), cert=tuple(map(str, pki.client))).status_code == 200


def test_mutual_tls_refuses_a_client_certificate_from_another_ca(mtls_url, pki):
    with pytest.raises(requests.exceptions.ConnectionError, match=f"unknown ca|{RESET}"):
        post_filter(mtls_url, verify=str(pki.ca), cert=tuple(map(str, pki.rogue_client)))


def test_unusable_certificate_files_stop_serve_with_their_problem(pki, tmp_path: Path):
    missing = tmp_path / "missing.key"
    result = subprocess.run(
        [sys.executable, "-m", "extender", "serve", "--cert", str(pki.server_cert), "--key", str(missing)],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "serve: cannot use the certificate files" in result.stderr


def test_partial_tls_handshakes_do_not_freeze_serve(pki):
    """Clients that send 6 bytes of a ClientHello and wait, more of them than serving threads: handshakes are
    awaited on the event loop, never on a serving thread."""
    with serving(pki) as url:
        port = int(url.rsplit(":", 1)[1])
        stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(12)]
        try:
            for sock in stalled:
                sock.sendall(b"\x16\x03\x01\x02\x00\x01")
            time.sleep(0.3)
            started = time.monotonic()
            assert requests.get(f"{url}/healthz", verify=str(pki.ca), timeout=30).status_code == 200
            assert time.monotonic() - started < 1.0
        finally:
            for sock in stalled:
                sock.close()


def test_serve_bounds_the_request_line_and_headers(tls_url, pki):
    long_path = requests.get(f"{tls_url}/{'x' * 20_000}/healthz", verify=str(pki.ca), timeout=10)
    assert long_path.status_code == 414
    huge_header = requests.get(f"{tls_url}/healthz", headers={"X-Big": "y" * 20_000}, verify=str(pki.ca), timeout=10)
    assert huge_header.status_code in (400, 431)
    assert requests.get(f"{tls_url}/healthz", verify=str(pki.ca), timeout=10).status_code == 200


# --- hostile transport over TLS --------------------------------------------------------------------------------

TOKEN = "tls-caller-token-0123456789abcdef"
DEADLINE = 1.0


@pytest.fixture(scope="module")
def guarded_tls_url(pki: SimpleNamespace) -> Iterator[str]:
    env = {"EXTENDER_CALLER_TOKEN": TOKEN, "EXTENDER_HTTP_TIMEOUT": f"{DEADLINE:g}s", "GUNICORN_LOG_LEVEL": "debug"}
    with serving(pki, **env) as url:
        yield url


def tls_connect(url: str, pki: SimpleNamespace) -> ssl.SSLSocket:
    """A connection whose TLS handshake is done, verified against the test CA."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    raw = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=HEAD_SECONDS * 3)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def read_tls_reply(sock: ssl.SSLSocket) -> Reply:
    try:
        return read_reply(sock)
    except ssl.SSLError:  # the server closed without TLS's close_notify
        return Reply(None, b"", b"", 0.0)


def test_slow_heads_over_tls_hold_no_serving_thread(guarded_tls_url, pki):
    """Handshaken connections, more than serving threads, that send one byte of a head: the function still answers
    at once, and each slow head gets its 408 at the head deadline."""
    slow = [tls_connect(guarded_tls_url, pki) for _ in range(14)]
    try:
        for sock in slow:
            sock.sendall(b"G")
        time.sleep(0.2)
        started = time.monotonic()
        answer = requests.get(f"{guarded_tls_url}/{TOKEN}/healthz", verify=str(pki.ca), timeout=30)
        assert answer.status_code == 200 and time.monotonic() - started < 1.0
        assert all(read_tls_reply(sock).status == 408 for sock in slow)
    finally:
        for sock in slow:
            sock.close()


def test_a_kept_alive_tls_connection_has_its_next_requests_answered_however_their_heads_come(guarded_tls_url, pki):
    """As over plain HTTP (the thread that answered reads the next head from the TLS connection for a moment)."""
    request = head("GET", f"/{TOKEN}/healthz")
    with tls_connect(guarded_tls_url, pki) as sock:
        sock.sendall(request)
        assert read_tls_reply(sock).status == 200
        replies = next_heads(sock, request, NEXT_HEAD_SECONDS)
    assert [reply.status for reply in replies] == [200] * 4, replies


def test_a_stalled_upload_over_tls_is_answered_at_the_read_deadline(guarded_tls_url, pki):
    """As over plain HTTP: the verb's answer with the reason, not a reset connection."""
    with tls_connect(guarded_tls_url, pki) as sock:
        sock.sendall(head("POST", f"/{TOKEN}/filter", "Content-Type: application/json", "Content-Length: 1000") + b"{")
        started = time.monotonic()
        reply = read_tls_reply(sock)
    assert reply.status == 200, reply
    assert orjson.loads(reply.body)["Error"].startswith(f"body not received within {DEADLINE:g} s")
    assert time.monotonic() - started < DEADLINE + 1.0


TLS_MALFORMED = [
    f"GET /{TOKEN}/healthz HTTP/1.1 x\r\nHost: e\r\n\r\n",
    f"GET /{TOKEN}/healthz HTTP/1.1\r\nBad {TOKEN}: x\r\n\r\n",
    f"GET /{TOKEN}/healthz HTTP/1.1\r\nSCRIPT_NAME: /{TOKEN}x\r\n\r\n",
    f"GET /{TOKEN * 300}/healthz HTTP/1.1\r\nHost: e\r\n\r\n",
    f"POST /{TOKEN}/{TOKEN}/filter HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
    f"GET /{TOKEN}/healthz HTTP/1.1\r\nHost: e\r\n",  # never ends: the 408 at the head deadline
]


@pytest.mark.parametrize("raw", TLS_MALFORMED)
def test_the_token_in_malformed_heads_over_tls_is_answered_and_never_logged(guarded_tls_url, pki, raw):
    """The served function's whole output is looked through for the token when the module ends."""
    with tls_connect(guarded_tls_url, pki) as sock:
        sock.sendall(raw.encode())
        reply = read_tls_reply(sock)
    assert reply.status is not None and reply.status < 500, reply
