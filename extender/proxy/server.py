"""Forward each call to the function with an ID token and hand its answer back unchanged."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import google.auth.exceptions
import orjson
import requests

from extender.proxy.tokens import IdTokenSource
from extender.urls import credential_base_url

logger = logging.getLogger("extender.proxy")

# Cloud Functions' request cap: a larger body could never be served, so it is not even read.
MAX_BODY_BYTES = 32 * 1024 * 1024
# Headers about one connection (RFC 9110 7.6.1): they never cross a proxy.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Headers the proxy sets itself on the way out.
REPLACED = frozenset({"host", "content-length", "authorization"})


def check_target(target: str) -> str:
    """The function's URL without a trailing slash: the scheduler's paths are appended to it."""
    return credential_base_url(
        target, what="the target", example="https://my-extender-abc123-ew.a.run.app", credential="the ID token"
    )


def default_audience(target: str) -> str:
    """Cloud Run accepts ID tokens whose audience is the service URL: the target's scheme and host."""
    parts = urlsplit(target)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)


class Forwarder:
    def __init__(self, target: str, tokens: IdTokenSource, timeout: float) -> None:
        self.target = check_target(target)
        self.tokens = tokens
        self.timeout = timeout
        self._origin = default_audience(self.target)
        self._target_path = urlsplit(self.target).path
        # One session: connections to the function stay open between scheduling cycles.
        self._session = requests.Session()
        # Forward the caller's headers only, not requests' defaults (an Accept-Encoding it never sent, say).
        self._session.headers.clear()

    def forward(self, method: str, path: str, headers: Iterable[tuple[str, str]], body: bytes) -> Reply:
        try:
            token = self.tokens.token()
        except google.auth.exceptions.GoogleAuthError as exc:
            return failure(502, f"no ID token for audience {self.tokens.audience}: {exc}")
        outgoing = {name: value for name, value in headers if name.lower() not in HOP_BY_HOP | REPLACED}
        outgoing["Authorization"] = f"Bearer {token}"
        try:
            response = self._session.request(
                method, self.target + path, data=body, headers=outgoing,
                timeout=self.timeout, stream=True, allow_redirects=False,
            )  # fmt: skip
            with response:
                # Bytes as sent, still compressed if the function compressed them: the caller asked for that.
                content = response.raw.read(decode_content=False)
        except requests.Timeout:
            return failure(504, f"{self._origin} did not answer within {self.timeout:g} s")
        except requests.RequestException as exc:
            return failure(502, f"cannot reach {self._origin}: {self._redact(str(exc), path)}")
        if response.status_code in (401, 403):
            logger.warning(
                "%s refused the ID token (%d): does the proxy's service account have roles/run.invoker, "
                "and is %s the function's URL or one of its custom audiences?",
                self._origin, response.status_code, self.tokens.audience,
            )  # fmt: skip
        kept = [(name, value) for name, value in response.headers.items() if name.lower() not in HOP_BY_HOP]
        return Reply(response.status_code, content, kept)

    def _redact(self, text: str, path: str) -> str:
        """Errors name the host only: the target's path and the scheduler's may both carry a caller token."""
        for secret in sorted({self._target_path + path, path, self._target_path}, key=len, reverse=True):
            if secret.strip("/"):
                text = text.replace(secret, "/<path>")
        return text


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the scheduler reuses its connection
    server: ProxyServer

    def _serve(self) -> None:
        reply = self._read_and_forward()
        self.send_response_only(reply.status)
        length_sent = False
        for name, value in reply.headers:
            if name.lower() == "content-length":
                # A HEAD answer keeps the length of the body it does not carry.
                if self.command != "HEAD":
                    continue
                length_sent = True
            self.send_header(name, value)
        if not length_sent:
            self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _serve

    def _read_and_forward(self) -> Reply:
        if not self.path.startswith("/"):
            self.close_connection = True
            return failure(400, f"expected a path, got {self.path[:100]!r}")
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            return failure(411, "send a Content-Length: chunked bodies are not forwarded")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True  # the unread body would be taken for the next request
            return failure(413 if length > 0 else 400, f"Content-Length must be 0..{MAX_BODY_BYTES}")
        body = self.rfile.read(length)
        return self.server.forwarder.forward(self.command, self.path, self.headers.items(), body)

    def log_message(self, format: str, *args: object) -> None:
        """No access log: the scheduler calls for every pod, and failures are logged where they happen."""


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, forwarder: Forwarder) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.forwarder = forwarder
        super().__init__((host, port), _Handler)


def failure(status: int, problem: str) -> Reply:
    """The proxy's own errors, shaped like the function's: JSON ``{"Error": ...}``."""
    message = f"identity proxy: {problem}"
    logger.error("%s", message)
    return Reply(status, orjson.dumps({"Error": message}), [("Content-Type", "application/json")])
