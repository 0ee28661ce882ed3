"""What a hostile Kubernetes API server answers: broken transport, and lists of the wrong shape or size.

``FakeApiServer.hostile`` maps a resource (``nodes``, ``pods``, ``binding``)
to one of SHAPES; every answer for that resource then takes that shape,
whatever was asked. Drips send a byte every ``pace`` seconds without end
(a status line, headers, ``100 Continue`` heads, a body, chunks), stalls send
nothing more; both end when the client hangs up or the server stops. The
content shapes are valid HTTP with JSON of the wrong shape or size.
``FakeApiServer.stall_handshake`` holds new TLS connections before their
handshake.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import select
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

# Below the client's cap of one answer (16 MiB), so that decoding them is what is tried.
_LARGE = 15 * 1024 * 1024
# Over that cap.
_HUGE = 31 * 1024 * 1024


def _endless(head: bytes, unit: bytes) -> Iterator[bytes]:
    yield from (head[at : at + 1] for at in range(len(head)))
    while True:
        yield from (unit[at : at + 1] for at in range(len(unit)))


def _head(code: int, reason: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {code} {reason}", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _json_head(payload: bytes, code: int = 200, reason: str = "OK", **extra: str) -> bytes:
    return _head(code, reason, {"Content-Type": "application/json", "Content-Length": str(len(payload)), **extra})


class Answering:
    """One hostile answer being written: the handler's socket, and how to drip, stall and hang up on it."""

    def __init__(self, handler: Any, stopped: threading.Event, pace: float, token: str | None, resource: str) -> None:
        self.handler = handler
        self.stopped = stopped
        self.pace = pace
        self.token = token or ""
        self.resource = resource

    def send(self, data: bytes) -> bool:
        try:
            self.handler.wfile.write(data)
            self.handler.wfile.flush()
        except OSError:
            return False
        return True

    def drip(self, pieces: Iterator[bytes]) -> None:
        for piece in pieces:
            if self.stopped.wait(self.pace) or not self.send(piece):
                return

    def stall(self) -> None:
        """Send nothing more until the client hangs up (or the server stops); what it sends is read past TLS."""
        sock = self.handler.connection
        while not self.stopped.wait(0.05):
            try:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable and not socket.socket.recv(sock, 65536):
                    return
            except (OSError, ValueError):
                return

    def reset(self) -> None:
        try:
            self.handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass


def _drip_status_line(a: Answering, code: int, body: bytes) -> None:
    a.drip(_endless(b"HTTP/1.1 200 ", b"O"))


def _drip_headers(a: Answering, code: int, body: bytes) -> None:
    a.drip(_endless(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Drip: ", b"x"))


def _drip_continue(a: Answering, code: int, body: bytes) -> None:
    a.drip(_endless(b"", b"HTTP/1.1 100 Continue\r\n\r\n"))


def _drip_body(a: Answering, code: int, body: bytes) -> None:
    if a.send(_json_head(body, code)):
        a.drip(iter(body[at : at + 1] for at in range(len(body))))


def _drip_chunks(a: Answering, code: int, body: bytes) -> None:
    head = _head(code, "OK", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    if a.send(head):
        a.drip(_endless(b"", b"1\r\n \r\n"))


def _stall_before_head(a: Answering, code: int, body: bytes) -> None:
    a.stall()


def _stall_after_head(a: Answering, code: int, body: bytes) -> None:
    if a.send(_json_head(body, code)):
        a.stall()


def _stall_mid_body(a: Answering, code: int, body: bytes) -> None:
    if a.send(_json_head(body, code) + body[: len(body) // 2]):
        a.stall()


def _truncated_body(a: Answering, code: int, body: bytes) -> None:
    a.send(_json_head(body, code) + body[: len(body) // 2])


def _broken_chunks(a: Answering, code: int, body: bytes) -> None:
    a.send(_head(code, "OK", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}) + b"zz\r\n{}\r\n")


def _not_http(a: Answering, code: int, body: bytes) -> None:
    a.send(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")


def _many_headers(a: Answering, code: int, body: bytes) -> None:
    extra = {f"X-Header-{index}": "x" for index in range(150)}
    a.send(_json_head(body, code, **extra) + body)


def _long_header(a: Answering, code: int, body: bytes) -> None:
    a.send(_json_head(body, code, **{"X-Long": "x" * 70_000}) + body)


def _huge_declared(a: Answering, code: int, body: bytes) -> None:
    if a.send(_head(code, "OK", {"Content-Type": "application/json", "Content-Length": str(10**12)}) + b'{"items": ['):
        a.stall()


def _close(a: Answering, code: int, body: bytes) -> None:
    pass


def _reset(a: Answering, code: int, body: bytes) -> None:
    a.reset()


def _redirect(a: Answering, code: int, body: bytes) -> None:
    a.send(_head(307, "Temporary Redirect", {"Location": "https://127.0.0.1:1/api/v1/nodes", "Content-Length": "0"}))


def _early_hints(a: Answering, code: int, body: bytes) -> None:
    a.send(_head(103, "Early Hints", {"Link": "</x>; rel=preload"}))


def _html(a: Answering, code: int, body: bytes) -> None:
    page = b"<html><body>502 Bad Gateway</body></html>"
    a.send(_head(200, "OK", {"Content-Type": "text/html", "Content-Length": str(len(page))}) + page)


def _no_content_type(a: Answering, code: int, body: bytes) -> None:
    a.send(_head(code, "OK", {"Content-Length": str(len(body))}) + body)


def _gzip(a: Answering, code: int, body: bytes) -> None:
    packed = gzip.compress(body)
    a.send(_json_head(packed, code, **{"Content-Encoding": "gzip"}) + packed)


def _invalid_json(a: Answering, code: int, body: bytes) -> None:
    broken = body[: len(body) // 2] + b"\xff{"
    a.send(_json_head(broken, code) + broken)


def _not_an_object(a: Answering, code: int, body: bytes) -> None:
    payload = b"[1, 2, 3]"
    a.send(_json_head(payload, code) + payload)


def _echo_token(a: Answering, code: int, body: bytes) -> None:
    """A server that quotes the request's credentials back, in the reason phrase and the Status message."""
    encoded = base64.b64encode(a.token.encode()).decode()
    said = f"Bearer {a.token} {a.token[:16]} {a.token[-16:]} Basic {encoded}"
    status = {
        "kind": "Status",
        "status": "Failure",
        "code": 401,
        "reason": "Unauthorized",
        "message": f"bad credentials {said}",
    }
    payload = json.dumps(status).encode()
    a.send(_json_head(payload, 401, f"Unauthorized {a.token}") + payload)


def _echo_token_text(a: Answering, code: int, body: bytes) -> None:
    payload = f"forbidden: Authorization: Bearer {a.token}".encode()
    a.send(_head(403, "Forbidden", {"Content-Type": "text/plain", "Content-Length": str(len(payload))}) + payload)


def _content(make: Callable[[str], bytes], code: int = 200) -> Callable[[Answering, int, bytes], None]:
    def answer(a: Answering, _code: int, _body: bytes) -> None:
        payload = make(a.resource)
        a.send(_json_head(payload, code) + payload)

    return answer


def _chunked_content(make: Callable[[str], bytes]) -> Callable[[Answering, int, bytes], None]:
    def answer(a: Answering, _code: int, _body: bytes) -> None:
        payload = make(a.resource)
        if not a.send(_head(200, "OK", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})):
            return
        for at in range(0, len(payload), 1 << 20):
            piece = payload[at : at + (1 << 20)]
            if not a.send(b"%x\r\n%s\r\n" % (len(piece), piece)):
                return
        a.send(b"0\r\n\r\n")

    return answer


def _item(resource: str, index: int, pad: int = 0) -> dict[str, Any]:
    if resource == "nodes":
        return {
            "metadata": {"name": f"hostile-node-{index}", "labels": {"zone": "z"}, "annotations": {"pad": "x" * pad}}
        }
    return {
        "metadata": {"name": f"hostile-pod-{index}", "namespace": "default", "uid": f"hostile-uid-{index}",
                     "annotations": {"pad": "x" * pad}},
        "spec": {"nodeName": "node-a", "priority": 0, "containers": [{"name": "c", "image": "pause"}]},
    }  # fmt: skip


def _list(resource: str, items: list[Any] | bytes, metadata: dict[str, Any] | None = None) -> bytes:
    kind = "NodeList" if resource == "nodes" else "PodList"
    head = json.dumps({"kind": kind, "apiVersion": "v1", "metadata": metadata or {}})[:-1].encode()
    listed = items if isinstance(items, bytes) else json.dumps(items).encode()
    return head + b', "items": ' + listed + b"}"


@cache
def _filled(resource: str, size: int) -> bytes:
    """A list of ordinary items, ~``size`` bytes."""
    items = [_item(resource, index, pad=20_000) for index in range(size // 20_200 + 1)]
    return _list(resource, items)


@cache
def _tiny(resource: str) -> bytes:
    """As many of the smallest items the client accepts as fit under its cap: decoding cost per byte at its worst."""
    key = b'{"metadata":{"name":"n%d"}}' if resource == "nodes" else b'{"metadata":{"uid":"u%d"}}'
    count = _LARGE // (len(key) + 6)
    return _list(resource, b"[" + b",".join(key % index for index in range(count)) + b"]")


@cache
def _big_labels(resource: str) -> bytes:
    """One item whose labels fill the answer: a map far over what the client reads of one."""
    count = _LARGE // 16  # '"k123456": "v", ' is 16 bytes
    labels = b"{" + b",".join(b'"k%d": "v"' % index for index in range(count)) + b"}"
    plain = _item(resource, 0)
    del plain["metadata"]["annotations"]
    plain["metadata"].pop("labels", None)
    item = json.dumps(plain).encode()
    return _list(resource, b"[" + item.replace(b'"metadata": {', b'"metadata": {"labels": ' + labels + b", ", 1) + b"]")


_MALFORMED: list[Any] = [
    [1, "x", None],
    "not a list",
    {"an": "object"},
    [[]],
    [{"metadata": "x"}],
    [{"metadata": None}],
    [{"metadata": {"uid": ["u"], "name": ["n"]}}],
    [{"metadata": {"uid": 7, "name": 7}}],
    [{"metadata": {"name": "", "uid": ""}}],
    [{"metadata": {"name": "n", "uid": "u", "labels": ["zone"]}}],
    [{"metadata": {"name": "n", "uid": "u", "labels": {"zone": 1}}}],
    [{"metadata": {"name": "n", "uid": "u", "annotations": {"a": None}}, "spec": {"priority": "high"}}],
    [{"metadata": {"name": "n", "uid": "u"}, "spec": {"priority": 1e400}}],
    [{"metadata": {"name": "n", "uid": "u"}, "spec": {"priority": 2**70}}],
]


_MALFORMED_TURNS = itertools.count()
_PAGE_TOKENS = itertools.count()


def _malformed(resource: str) -> bytes:
    return _list(resource, json.dumps(_MALFORMED[next(_MALFORMED_TURNS) % len(_MALFORMED)]).encode())


def _wrong_uids(resource: str) -> bytes:
    return _list(resource, [_item(resource, index) for index in range(3)])


def _endless_pages(resource: str) -> bytes:
    """Empty pages, each with a new continue token (one the fake server reads as a position past the end)."""
    token = base64.b64encode(str(10**9 + next(_PAGE_TOKENS)).encode()).decode()
    return _list(resource, [], {"continue": token})


SHAPES: dict[str, Callable[[Answering, int, bytes], None]] = {
    "drip status line": _drip_status_line,
    "drip headers": _drip_headers,
    "drip 100 continue": _drip_continue,
    "drip body": _drip_body,
    "drip chunks": _drip_chunks,
    "stall before head": _stall_before_head,
    "stall after head": _stall_after_head,
    "stall mid-body": _stall_mid_body,
    "truncated body": _truncated_body,
    "broken chunked framing": _broken_chunks,
    "not HTTP": _not_http,
    "150 headers": _many_headers,
    "70 kB header line": _long_header,
    "absurd Content-Length": _huge_declared,
    "close without answer": _close,
    "reset": _reset,
    "redirect": _redirect,
    "103 as the answer": _early_hints,
    "HTML": _html,
    "no Content-Type": _no_content_type,
    "gzip unasked": _gzip,
    "invalid JSON": _invalid_json,
    "JSON not an object": _not_an_object,
    "token echoed in a Status": _echo_token,
    "token echoed as text": _echo_token_text,
    "31 MiB list": _content(lambda resource: _filled(resource, _HUGE)),
    "31 MiB list, chunked": _chunked_content(lambda resource: _filled(resource, _HUGE)),
    "15 MiB list": _content(lambda resource: _filled(resource, _LARGE)),
    "15 MiB of tiny items": _content(_tiny),
    "15 MiB of labels": _content(_big_labels),
    "malformed items": _content(_malformed),
    "other names and UIDs": _content(_wrong_uids),
    "endless empty pages": _content(_endless_pages),
}


def prepare() -> None:
    """Build the large bodies now (they are kept), so that the first answer of each is not slow to write."""
    for resource in ("nodes", "pods"):
        _filled(resource, _HUGE)
        _filled(resource, _LARGE)
        _tiny(resource)
        _big_labels(resource)


def answer(
    handler: Any,
    shape: str,
    code: int,
    body: bytes,
    stopped: threading.Event,
    pace: float,
    token: str | None,
    resource: str,
) -> None:
    """Write the ``shape`` of answer on ``handler``'s connection; the connection is not used again."""
    handler.close_connection = True
    SHAPES[shape](Answering(handler, stopped, pace, token, resource), code, body)
