"""Calls this function makes to other servers, each bounded in total: one deadline, a cap on the bytes kept.

A socket timeout bounds each read, not the call: a server that drips its
status line, its headers, endless ``100 Continue`` heads or its body, a byte
just inside every read's timeout, holds the calling thread as long as it
likes (``requests`` and urllib3 have no other timeout). Here one deadline
covers the whole exchange. The TCP connect gets what is left of it; from the
moment the socket exists, an alarm (``read_deadline``, no thread of its own)
shuts it down at the deadline, which ends a TLS handshake, the request's
sending, the head and the body alike. So a thread in a call is free again at
the deadline (the watchdog's slack later at most): calls never pile up threads
behind a server that drips, and a caller waiting on several calls may leave
them to end on their own. Name resolution is the system resolver's, with its
own timeouts: give servers by address where that matters.

The answer's body is read in pieces, charged to a cap of its own and to an
optional ``ByteBudget`` several calls share, and refused as soon as the next
piece would pass either (a declared ``Content-Length`` over the cap is
refused before a byte of the body is read). The head is bounded by
``http.client`` (a line of 64 kB, 100 headers). Redirects are never followed.
Errors never quote the URL's path or query, which may carry a secret.

A stream (``Endpoint.open_stream``: a Kubernetes watch) is a call whose answer does not end: its head is read
within one deadline as above, then its body is read in pieces by whoever holds the stream, each read within a
deadline of its own and a cap of bytes, never waiting past it (``Stream.read``). Its connection is its own, never
kept for another call.

Connections are kept alive between calls (a few per endpoint); one is reused
only if it was read to the end of a complete answer within its deadline and
the server has not closed it since. If the server closes it just as it is
taken, a GET goes again on a new connection, within the same deadline; other
methods fail (the server may have acted on them). Not for use across
``fork``: call ``forget_connections`` in the child.
"""

from __future__ import annotations

import functools
import http.client
import io
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

from extender import read_deadline

# Pieces the body is read in: few calls for answers of megabytes, and the cap checked between them.
_PIECE = 1 << 20
# Requests sent again on a new connection when a kept one turns out closed by the server before it answered.
_IDEMPOTENT = frozenset({"GET", "HEAD"})
# Characters a path may hold as they are (RFC 3986's pchar and "/"), and "%" of what is already percent-encoded.
_PATH_SAFE = "/%!$&'()*+,;=:@"
# How a kept connection the server closed meanwhile fails.
_CLOSED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class CallFailed(Exception):
    """A call that did not produce an answer; the message says why without the URL."""


class TimedOut(CallFailed):
    """The deadline passed before the answer was complete."""


class Unreachable(CallFailed):
    """No connection: refused, unresolvable, or the TLS handshake failed (an untrusted certificate)."""


class BrokenAnswer(CallFailed):
    """The server answered something that is not HTTP, or stopped in the middle of its answer."""


class TooLarge(CallFailed):
    """The answer is larger than the call's cap, or (``shared``) than what a budget shared with other calls has left."""

    def __init__(self, message: str, status: int, shared: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.shared = shared


class ByteBudget:
    """The bytes several calls (one request's) may read in all; thread-safe."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self._used = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Charge ``size`` bytes; False, charging nothing, when they would pass the limit."""
        with self._lock:
            if self._used + size > self.limit:
                return False
            self._used += size
            return True


class _ClosedWhileKept(Exception):
    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class Answer:
    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: http.client.HTTPMessage, body: bytearray) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    @property
    def media_type(self) -> str:
        """The Content-Type without its parameters, lower-case; empty when there is none."""
        return (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()


class Endpoint:
    """One server (scheme, host, port and a path prefix), called from any number of threads."""

    def __init__(
        self, url: str, context: ssl.SSLContext | None, headers: Mapping[str, str] | None = None, idle: int = 4
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an http:// or https:// URL with a host")
        https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if https else 80)
        # Percent-encoded where it is not already, as requests sends a URL: http.client refuses spaces and non-ASCII.
        self._prefix = quote(parts.path.rstrip("/"), safe=_PATH_SAFE)
        self._context = (context or ssl.create_default_context()) if https else None
        self._headers = dict(headers or {})
        self._idle_max = idle
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def forget_connections(self) -> None:
        """In a forked child: the kept connections are the parent's too, so they are left to it, not closed."""
        self._lock = threading.Lock()
        self._idle = []

    def call(
        self,
        method: str,
        target: str,
        *,
        until: float,
        max_bytes: int,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        budget: ByteBudget | None = None,
    ) -> Answer:
        """``method`` on ``target`` (the path after the endpoint's prefix, with its query), answered by ``until``
        (a ``time.monotonic()`` instant) with a body of at most ``max_bytes``, or a ``CallFailed``."""
        if until - time.monotonic() <= 0:
            raise TimedOut("no time was left for the call")
        request = (method, self._prefix + target, body, self._headers | dict(headers or {}))
        kept = self._kept()
        if kept is not None:
            try:
                return self._exchange(kept, request, until, max_bytes, budget)
            except _ClosedWhileKept as closed:
                # The server closed it just as it was taken: a request that can be repeated is, on a new one.
                if method not in _IDEMPOTENT:
                    raise BrokenAnswer(closed.cause) from None
        return self._exchange(None, request, until, max_bytes, budget)

    def _exchange(
        self,
        connection: http.client.HTTPConnection | None,
        request: tuple[str, str, bytes | None, dict[str, str]],
        until: float,
        max_bytes: int,
        budget: ByteBudget | None,
    ) -> Answer:
        """One request and its answer, on ``connection`` (kept) or a new one."""
        kept = connection is not None
        alarm: int | None = None
        connected = answered = False
        method, target, body, headers = request
        try:
            if connection is None:
                connection = self._connection(self._open(until))
                # Armed on the socket the TLS layer reads and writes: a handshake that drips ends at the deadline too.
                alarm = _arm(connection.sock, until)
                if isinstance(connection.sock, ssl.SSLSocket):
                    connection.sock.do_handshake()
            else:
                alarm = _arm(connection.sock, until)
            connected = True
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            answered = True
            content = _read_body(response, max_bytes, budget)
        except BaseException as exc:  # a connection that failed (or answered too much) is not used again
            fired = alarm is not None and read_deadline.disarm(alarm)
            if connection is not None:
                connection.close()
            if kept and not answered and not fired and isinstance(exc, _CLOSED):
                raise _ClosedWhileKept(_cause(exc)) from None
            if isinstance(exc, (OSError, http.client.HTTPException)):
                raise _failure(exc, fired, connected) from None
            raise
        if read_deadline.disarm(alarm):
            # The socket was shut down at the deadline: what looked like the end of the answer may be that.
            connection.close()
            raise TimedOut("the deadline passed")
        if response.will_close or response.status < 200:  # a 1xx taken for the answer: what follows is unknown
            connection.close()
        else:
            self._put_back(connection)
        return Answer(response.status, response.reason, response.headers, content)

    def open_stream(self, target: str, *, until: float, headers: Mapping[str, str] | None = None) -> Stream:
        """``GET target`` on a connection of its own, its head read by ``until``: the Stream whose body the caller
        reads as it arrives (whatever the status: an answer other than 2xx has a body that ends, read it whole)."""
        if until - time.monotonic() <= 0:
            raise TimedOut("no time was left for the call")
        sock = self._open(until)
        if self._context is not None:
            try:
                sock = self._context.wrap_socket(sock, server_hostname=self._host, do_handshake_on_connect=False)
            except BaseException:
                sock.close()
                raise
        alarm = _arm(sock, until)
        connected = False
        try:
            if isinstance(sock, ssl.SSLSocket):
                sock.do_handshake()
            connected = True
            lines = [f"GET {self._prefix + target} HTTP/1.1", f"Host: {self._host_header()}"]
            lines += [f"{name}: {value}" for name, value in (self._headers | dict(headers or {})).items()]
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head, rest = _read_head(sock)
        except BaseException as exc:
            fired = read_deadline.disarm(alarm)
            sock.close()
            if isinstance(exc, (OSError, http.client.HTTPException)):
                raise _failure(exc, fired, connected) from None
            raise
        if read_deadline.disarm(alarm):
            sock.close()
            raise TimedOut("the deadline passed")
        try:
            return Stream(sock, head, rest)
        except http.client.HTTPException as exc:
            sock.close()
            raise BrokenAnswer(_cause(exc)) from None

    def _host_header(self) -> str:
        default = 443 if self._context is not None else 80
        host = f"[{self._host}]" if ":" in self._host else self._host
        return host if self._port == default else f"{host}:{self._port}"

    def _kept(self) -> http.client.HTTPConnection | None:
        """A kept connection the server has not closed, if any."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if _still_open(connection.sock):
                return connection
            connection.close()

    def _put_back(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._idle_max:
                self._idle.append(connection)
                return
        connection.close()

    def _open(self, until: float) -> socket.socket:
        """A TCP connection, each address tried within what is left of the time."""
        failure: OSError | None = None
        try:
            addresses = socket.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise Unreachable(str(exc)) from None
        for family, kind, protocol, _, address in addresses:
            left = until - time.monotonic()
            if left <= 0:
                break
            sock = socket.socket(family, kind, protocol)
            try:
                sock.settimeout(left)
                sock.connect(address)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as exc:
                sock.close()
                failure = exc
        if failure is None or isinstance(failure, TimeoutError):
            raise TimedOut("no connection within the time left")
        raise Unreachable(str(failure))

    def _connection(self, sock: socket.socket) -> http.client.HTTPConnection:
        """A connection over ``sock``; for https wrapped for TLS, the handshake still to come."""
        if self._context is None:
            connection = http.client.HTTPConnection(self._host, self._port)
            connection.sock = sock
            return connection
        connection = http.client.HTTPSConnection(self._host, self._port, context=self._context)
        try:
            connection.sock = self._context.wrap_socket(sock, server_hostname=self._host, do_handshake_on_connect=False)
        except BaseException:
            sock.close()
            raise
        return connection


# Largest head of a streamed answer, as http.client bounds a line of one.
_MAX_HEAD = 64 * 1024
# Bytes asked of the socket at a time while a stream is read.
_RECV = 256 * 1024
# A chunk's size line: hexadecimal digits only (int() would also take a sign, spaces and underscores).
_HEX = re.compile(rb"[0-9a-fA-F]{1,16}")


class Stream:
    """A streamed answer: its status and headers, then its body read as it arrives, with HTTP/1.1's chunked framing
    (or a Content-Length, or the connection's end) taken off. One reader at a time: the holder serialises its reads.
    """

    def __init__(self, sock: socket.socket, head: bytes, rest: bytes) -> None:
        self._sock = sock
        status_line, _, header_lines = head.partition(b"\r\n")
        version, _, status_reason = status_line.decode("latin-1").partition(" ")
        code, _, self.reason = status_reason.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit() or len(code) != 3:
            raise http.client.BadStatusLine(status_line.decode("latin-1"))
        self.status = int(code)
        self.headers = http.client.parse_headers(io.BytesIO(header_lines + b"\r\n"))
        self._chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        length = self.headers.get("Content-Length")
        # Body bytes still to come without chunked framing; None: until the connection ends.
        self._left: int | None = None if self._chunked or length is None or not length.isdigit() else int(length)
        # Bytes received and not yet taken apart, and (chunked) what is left of the chunk being read.
        self._raw = bytearray(rest)
        self._chunk_left = 0
        self._crlf_due = False
        # The body ended (its last chunk, its length, or the connection's end), or its framing is broken.
        self.ended = self._left == 0
        self.broken = ""

    @property
    def media_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()

    def read(self, until: float, max_bytes: int) -> bytes:
        """The body bytes that arrived, waiting until ``until`` (monotonic) only while none has: at most about
        ``max_bytes`` (a piece more), and nothing once ``ended``. Never raises for what the server does: a broken
        framing, a reset or the end of the connection sets ``ended`` (with ``broken`` saying why, if it was not the
        body's own end)."""
        out = bytearray(self._take())
        while not self.ended and len(out) < max_bytes:
            wait = 0.0 if out else until - time.monotonic()
            if not self._readable(max(0.0, wait)):
                break
            try:
                self._sock.settimeout(max(0.001, until - time.monotonic()) if not out else 0.001)
                data = self._sock.recv(_RECV)
            except (TimeoutError, ssl.SSLWantReadError, BlockingIOError):
                break
            except OSError as exc:
                self._end(f"the connection failed: {exc}")
                break
            if not data:
                self._end("" if self._left is None and not self._chunked else "the connection ended mid-answer")
                break
            self._raw += data
            out += self._take()
        return bytes(out)

    def read_rest(self, until: float, max_bytes: int) -> bytes:
        """The rest of a body that ends (an error's), within ``until`` and ``max_bytes``; TooLarge past the cap."""
        body = bytearray()
        while not self.ended and time.monotonic() < until:
            body += self.read(until, max_bytes - len(body) + 1)
            if len(body) > max_bytes:
                raise TooLarge(f"more than {max_bytes} bytes (the cap of one answer)", self.status)
        return bytes(body)

    def close(self) -> None:
        self.ended = True
        try:
            self._sock.close()
        except OSError:
            pass

    def _readable(self, seconds: float) -> bool:
        if isinstance(self._sock, ssl.SSLSocket) and self._sock.pending():
            return True
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        return bool(poller.poll(seconds * 1000))

    def _end(self, why: str) -> None:
        self.ended = True
        self.broken = why

    def _take(self) -> bytes:
        """The body bytes in what was received, framing taken off."""
        raw = self._raw
        if not self._chunked:
            if self._left is None:
                taken = bytes(raw)
            else:
                taken = bytes(raw[: self._left])
                self._left -= len(taken)
                self.ended = self._left == 0
            raw.clear()
            return taken
        out = bytearray()
        while raw and not self.ended:
            if self._chunk_left > 0:  # the chunk's data
                piece = raw[: self._chunk_left]
                out += piece
                del raw[: len(piece)]
                self._chunk_left -= len(piece)
                self._crlf_due = self._chunk_left == 0
                continue
            if self._crlf_due:  # the CRLF after a chunk's data
                if len(raw) < 2:
                    break
                if raw[:2] != b"\r\n":
                    self._end("the answer's chunked framing is broken")
                    break
                del raw[:2]
                self._crlf_due = False
                continue
            line_end = raw.find(b"\r\n")
            if line_end < 0:
                if len(raw) > 1024:
                    self._end("the answer's chunked framing is broken")
                break
            size_text = bytes(raw[:line_end]).split(b";", 1)[0].strip()
            size = int(size_text, 16) if _HEX.fullmatch(size_text) else -1
            if size < 0:
                self._end("the answer's chunked framing is broken")
                break
            del raw[: line_end + 2]
            if size == 0:
                self.ended = True  # trailers, if any, are not read: the stream is done
                break
            self._chunk_left = size
        return bytes(out)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The head of an answer (up to its blank line) and the bytes received after it."""
    received = bytearray()
    while True:
        end = received.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(received[:end]), bytes(received[end + 4 :])
        if len(received) > _MAX_HEAD:
            raise http.client.LineTooLong("header")
        data = sock.recv(_RECV)
        if not data:
            raise http.client.RemoteDisconnected("the server closed the connection without an answer")
        received += data


def _arm(sock: socket.socket, until: float) -> int:
    """Shut ``sock`` down at ``until``; its reads and writes wait at most that long each as well."""
    left = max(until - time.monotonic(), 0.001)
    sock.settimeout(left)
    return read_deadline.arm_action(functools.partial(read_deadline.hang_up, sock), left)


def _read_body(response: http.client.HTTPResponse, max_bytes: int, budget: ByteBudget | None) -> bytearray:
    """The whole body, within the cap and the budget: a declared length is charged before a byte is read (answers
    read side by side then complete in turn, instead of all failing halfway), one that is not as it arrives."""
    declared = response.length
    if declared is not None and declared > max_bytes:
        raise TooLarge(f"more than {max_bytes} bytes (the cap of one answer; {declared} declared)", response.status)
    if declared is not None and budget is not None:
        _charge(budget, declared, response.status)
    content = bytearray()
    while piece := response.read1(_PIECE):
        if len(content) + len(piece) > max_bytes:
            raise TooLarge(f"more than {max_bytes} bytes (the cap of one answer)", response.status)
        if declared is None and budget is not None:
            _charge(budget, len(piece), response.status)
        content += piece
    if response.length:  # the connection ended before the declared length
        raise http.client.IncompleteRead(b"", response.length)
    response.close()  # complete: the connection may carry the next call
    return content


def _charge(budget: ByteBudget, size: int, status: int) -> None:
    if not budget.take(size):
        raise TooLarge(f"more than {budget.limit} bytes in all ({budget.what})", status, shared=True)


def _still_open(sock: socket.socket | None) -> bool:
    """Whether a kept connection can carry a call: nothing to read on it (no early data, no end of stream)."""
    if sock is None or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
        return False
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return not poller.poll(0)


def _failure(exc: BaseException, fired: bool, connected: bool) -> CallFailed:
    if fired or isinstance(exc, TimeoutError):
        return TimedOut("the deadline passed")
    if not connected:  # connecting or the TLS handshake failed
        return Unreachable(_cause(exc))
    return BrokenAnswer(_cause(exc))


def _cause(exc: BaseException) -> str:
    if isinstance(exc, http.client.IncompleteRead):
        if exc.expected is None:
            return "the answer's chunked framing is broken or cut off"
        return f"the answer ended {exc.expected} bytes short of its Content-Length"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer"
    if isinstance(exc, http.client.BadStatusLine):
        return "the answer does not start with an HTTP status line"
    if isinstance(exc, http.client.LineTooLong):
        return "a line of the answer's head over 64 kB"
    return str(exc) or type(exc).__name__
