"""Forward each call to the function with an ID token and hand its answer back unchanged.

The proxy lends its identity to whoever reaches its port, so it forwards
only what is unambiguous and stays under the target: no cookies, kept or
passed back (it has no sessions; one caller's must not become another's), no
path that leaves the target's prefix (on a ``cloudfunctions.net`` host the ID
token would reach other functions): a dot-segment, plain or percent-encoded,
or a fragment is refused, and the URL is checked again as ``requests`` will
send it, normalised, before it is sent. No hop-by-hop headers nor those the
caller names in ``Connection``, no header line HTTP does not allow or the
outgoing client cannot send (``extender.proxy.headers``), and no body whose
length is in doubt (duplicate Content-Length, any Transfer-Encoding, a body
shorter than declared).

Its own failures never reach the function (Cloud Run sees no call, so none of
its metrics counts them): each is an ERROR entry with ``event``
``extender.proxy``, ``failure`` (what kind) and ``status``, which the
``identity_proxy_failures`` log-based metric counts. ``READY_PATH`` answers
the kubelet's readiness probe: 200 while an ID token can be had, else 503.
"""

from __future__ import annotations

import io
import logging
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookiejar import DefaultCookiePolicy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote, urlsplit

import google.auth.exceptions
import orjson
import requests

from extender.proxy.headers import head_problem, unsendable
from extender.proxy.tokens import IdTokenSource
from extender.urls import credential_base_url, failure_cause

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
# Headers of the function's answers that are never passed back: the proxy has no sessions to keep.
DROPPED = frozenset({"set-cookie", "set-cookie2"})
# Path segments that climb out of where they are: ".", "..", once percent-decoded (as often as it takes).
_DOT_SEGMENT = re.compile(r"^\.{1,2}$")
# Rounds of percent-decoding looked through: %252e%252e is ".." after two.
_DECODING_ROUNDS = 4
# Answered by the proxy itself (GET or HEAD), never forwarded: no scheduler call ends this way (they end in a verb).
READY_PATH = "/identity-proxy/ready"
# The ``event`` of the proxy's structured entries, and its kinds of ``failure``.
EVENT = "extender.proxy"
REQUEST, NO_ID_TOKEN, UNREACHABLE, TIMEOUT, REFUSED = "request", "no_id_token", "unreachable", "timeout", "refused"


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
        # No cookie jar shared by every caller: a Set-Cookie from the target is neither kept nor passed back.
        self._session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        # The target's path as requests sends it (percent-encoded): what every forwarded path must start with.
        self._sent_prefix = _path_of(self._session.prepare_request(requests.Request("GET", self.target)))

    def forward(self, method: str, path: str, headers: Iterable[tuple[str, str]], body: bytes) -> Reply:
        headers = list(headers)
        outgoing = {name: value for name, value in headers if name.lower() not in _per_hop(headers) | REPLACED}
        if problem := unsendable(outgoing.items()):
            return failure(400, problem)
        try:
            token = self.tokens.token()
        except google.auth.exceptions.GoogleAuthError as exc:
            return failure(502, f"no ID token for audience {self.tokens.audience}: {exc}", NO_ID_TOKEN)
        outgoing["Authorization"] = f"Bearer {token}"
        # Checked as it will be sent: requests normalises dot-segments away and drops what follows a "#".
        request = requests.Request(method, self.target + path, data=body, headers=outgoing)
        prepared = self._session.prepare_request(request)
        if not self._inside(_path_of(prepared)):
            return failure(400, "the path leaves the target once normalised as it would be sent: not forwarded")
        settings = self._session.merge_environment_settings(prepared.url, {}, True, None, None)
        try:
            response = self._session.send(prepared, timeout=self.timeout, allow_redirects=False, **settings)
            with response:
                # Bytes as sent, still compressed if the function compressed them: the caller asked for that.
                content = response.raw.read(decode_content=False)
        except requests.Timeout:
            return failure(504, f"{self._origin} did not answer within {self.timeout:g} s", TIMEOUT)
        except requests.RequestException as exc:
            return failure(502, f"cannot reach {self._origin}: {self._redact(failure_cause(exc), path)}", UNREACHABLE)
        if response.status_code in (401, 403):
            problem = (
                f"{self._origin} refused the ID token ({response.status_code}): does the proxy's service account "
                f"have roles/run.invoker, and is {self.tokens.audience} the function's URL or one of its custom "
                "audiences?"
            )
            fields = {"event": EVENT, "failure": REFUSED, "status": response.status_code, "problem": problem}
            logger.warning("%s", problem, extra={"json_fields": fields})
        answered = list(response.headers.items())
        kept = [(name, value) for name, value in answered if name.lower() not in _per_hop(answered) | DROPPED]
        return Reply(response.status_code, content, kept)

    def ready(self) -> Reply:
        """The readiness probe's answer: 503 while no ID token can be had (a cached one that is still valid counts),
        so that the pod shows what every forwarded call would meet."""
        try:
            self.tokens.token()
        except google.auth.exceptions.GoogleAuthError as exc:
            return failure(503, f"not ready: no ID token for audience {self.tokens.audience}: {exc}", NO_ID_TOKEN)
        return Reply(200, orjson.dumps({"status": "ok"}), [("Content-Type", "application/json")])

    def _inside(self, path: str) -> bool:
        """Whether ``path`` (as it will be sent) is the target's path or under it, with no dot-segment in any form."""
        prefix = self._sent_prefix.rstrip("/")
        under = not prefix or path == prefix or path.startswith(prefix + "/")
        return under and not leaves_prefix(path)

    def _redact(self, text: str, path: str) -> str:
        """Errors name the host only: the target's path and the scheduler's may both carry a caller token.

        Each path is looked for as sent and as requests or urllib3 may have re-encoded it.
        """
        paths = {self._target_path + path, path, self._target_path}
        encodings = (requests.utils.requote_uri, quote, lambda each: quote(unquote(each)))
        forms = paths | {encode(each) for each in paths for encode in encodings}
        for secret in sorted(forms, key=len, reverse=True):
            if secret.strip("/"):
                text = text.replace(secret, "/<path>")
        return text


def _path_of(prepared: requests.PreparedRequest) -> str:
    """The path of a prepared request's URL, as requests will send it (a prepared request always has a URL)."""
    return urlsplit(prepared.url or "").path


def _per_hop(headers: list[tuple[str, str]]) -> frozenset[str]:
    """Hop-by-hop header names, lower-case: the standard ones and every one the message names in Connection."""
    named = {
        option.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for option in value.split(",")
    }
    return HOP_BY_HOP | named


def leaves_prefix(path: str) -> bool:
    """Whether the path part of ``path`` holds a dot-segment, plainly or percent-encoded (any depth up to a few),
    also with path parameters (``..;x``, which some servers read as ``..``)."""
    target = path.split("?", 1)[0]
    for _ in range(_DECODING_ROUNDS):
        if any(_DOT_SEGMENT.match(segment.split(";", 1)[0]) for segment in re.split(r"[/\\]", target)):
            return True
        decoded = unquote(target)
        if decoded == target:
            return False
        target = decoded
    return True  # still encoded after every round: too deep to tell, so refused


class _LineRecorder(io.BufferedIOBase):
    """A connection's reader that keeps every line read with ``readline`` (a request line and its head's lines), as
    they arrived; what is read with ``read`` (a body) is not kept.

    The parsed head cannot show what was wrong with a line: a line it cannot read ends the head, a CR alone splits
    one in two.
    """

    def __init__(self, stream: io.BufferedIOBase) -> None:
        super().__init__()
        self._stream = stream
        self.lines: list[bytes] = []

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> bytes:
        line = self._stream.readline(size)
        self.lines.append(line)
        return line

    def read(self, size: int | None = -1) -> bytes:
        return self._stream.read(size)

    def close(self) -> None:
        self._stream.close()
        super().close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the scheduler reuses its connection
    server: ProxyServer
    # Seconds each read of a request may wait: a caller that stops sending frees its thread.
    timeout = 30

    def setup(self) -> None:
        super().setup()
        self._recorder = _LineRecorder(self.rfile)
        self.rfile = self._recorder

    def handle_one_request(self) -> None:
        self._recorder.lines.clear()  # the lines of this request only, on a connection kept alive
        super().handle_one_request()

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
        if self.close_connection:
            self.send_header("Connection", "close")  # the caller learns it cannot send a next request on it
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _serve

    def _read_and_forward(self) -> Reply:
        if problem := head_problem(self._recorder.lines[1:]):
            self.close_connection = True  # the server stopped reading the head there: the rest is not a next request
            return failure(400, problem)
        if not self.path.startswith("/"):
            self.close_connection = True
            return failure(400, f"expected a path, got {self.path[:100]!r}")
        if "#" in self.path:
            self.close_connection = True
            return failure(400, "the path holds a fragment (#): clients never send one, and it would be cut off")
        if leaves_prefix(self.path):
            self.close_connection = True
            return failure(400, "the path holds a dot-segment (. or .., maybe encoded): it would leave the target")
        if self.path == READY_PATH and self.command in ("GET", "HEAD"):
            return self.server.forwarder.ready()
        if self.headers.get_all("Transfer-Encoding"):
            self.close_connection = True
            return failure(411, "send a Content-Length: bodies with a Transfer-Encoding are not forwarded")
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1:
            self.close_connection = True  # which one frames the body is ambiguous
            return failure(400, "more than one Content-Length")
        declared = lengths[0].strip() if lengths else "0"
        length = int(declared) if declared.isascii() and declared.isdigit() else -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True  # the unread body would be taken for the next request
            return failure(413 if length > 0 else 400, f"Content-Length must be 0..{MAX_BODY_BYTES}")
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            return failure(400, f"the body ended after {len(body)} of the {length} bytes declared: not forwarded")
        return self.server.forwarder.forward(self.command, self.path, self.headers.items(), body)

    def log_message(self, format: str, *args: object) -> None:
        """No access log: the scheduler calls for every pod, and failures are logged where they happen."""


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, forwarder: Forwarder) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.forwarder = forwarder
        super().__init__((host, port), _Handler)


def failure(status: int, problem: str, kind: str = REQUEST) -> Reply:
    """The proxy's own errors, shaped like the function's: JSON ``{"Error": ...}``; each logged with its ``kind``
    (``REQUEST``: the caller's request could not be forwarded as sent) for the identity_proxy_failures metric."""
    message = f"identity proxy: {problem}"
    fields = {"event": EVENT, "failure": kind, "status": status, "problem": message}
    logger.error("%s", message, extra={"json_fields": fields})
    return Reply(status, orjson.dumps({"Error": message}), [("Content-Type", "application/json")])
