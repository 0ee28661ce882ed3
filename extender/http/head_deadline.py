"""Request heads arrive within a deadline, and only a complete head takes a serving thread.

gunicorn's threaded worker hands a connection to a serving thread as soon as
a byte arrives, and that thread then reads the request line and headers with
no deadline: a client that sends one byte and waits holds it for good, and a
dozen such clients hold every thread (the function then answers nothing). A
TLS handshake, run on the same thread, holds it the same way.

``HeadFirstWorker`` reads heads itself, on the worker's event loop, without
blocking: the TLS handshake, then the request line and headers of each
request (a connection kept alive waits for its next head the same way). A
connection reaches a serving thread only once its head is complete, or once
gunicorn's parser can refuse it from the bytes at hand (a bare LF): the
parser then never waits on the client. A head must be complete within
``HEAD_SECONDS`` of its first chance to arrive (the TLS handshake included),
or it gets a 408 (a connection that sent nothing is just closed); a request
line longer than ``limit_request_line`` gets a 414, a head over
``HEAD_BYTES`` a 431, as soon as the bytes show it. At most ``MAX_HEADS``
heads are awaited at once (the oldest is dropped for a new one), so clients
that never finish one hold neither a thread nor more than
``MAX_HEADS * HEAD_BYTES`` of memory.

A serving thread that answered a request on a kept-alive connection waits
there, at most ``NEXT_HEAD_SECONDS``, for the connection's next head, and
serves it if it is complete by then; anything else (no byte, part of a head, a
head to refuse) goes back to the event loop with the bytes read, as any
kept-alive connection does, and a head still arriving has its deadline from
then on. kube-scheduler sends a pod's prioritize right after its filter, and
the next pod's filter once its cycle is done: in a burst the next head comes
within milliseconds, and serving it on the thread that waits saves the
hand-over through the event loop and back (another thread woken twice, the
poller's registrations, the interpreter lock passed between them). A thread
waits only while the worker holds no more connections than threads: it then
keeps no other connection waiting.

The body is another matter: it is read by the serving thread, within
``EXTENDER_HTTP_TIMEOUT`` (``extender.read_deadline``).

Built on gunicorn's ``ThreadWorker`` (requirements.txt pins the gunicorn
releases it is written for): every connection it would hand to its pool goes
through ``enqueue_req``, which here waits for the head first.
"""

from __future__ import annotations

import errno
import re
import select
import selectors
import ssl
import time
from functools import partial
from typing import Any

from functions_framework._http.gunicorn import GThreadWorkerWithTimeoutSupport
from gunicorn import http
from gunicorn import sock as gunicorn_sock
from gunicorn.workers.gthread import TConn, ThreadWorker

HEAD_SECONDS = 5.0
# The request line and headers together; gunicorn's own limits (extender.http.server_limits) refuse less within this.
HEAD_BYTES = 64 * 1024
MAX_HEADS = 256
# How long a serving thread waits for its connection's next head (module docstring); a thread held that long at most.
NEXT_HEAD_SECONDS = 0.05
# What one non-blocking read takes at most: a head and the start of a body usually arrive in one.
_RECV_BYTES = 64 * 1024
# A line feed that ends no CRLF: gunicorn's parser refuses it as soon as it sees it.
_BARE_LF = re.compile(rb"(?<!\r)\n")

# What a head's bytes so far call for.
_WAIT = "wait"  # more bytes
_READY = "ready"  # the parser: the head is complete, or the parser can refuse it without reading more
_LINE_TOO_LONG = "line too long"  # a 414
_TOO_LARGE = "too large"  # a 431
_GONE = "gone"  # closing: the client left, reset, or failed its TLS handshake


class HeadConn(TConn):
    """A gunicorn connection with the head being read on the event loop."""

    def __init__(self, cfg: Any, sock: Any, client: Any, server: Any) -> None:
        super().__init__(cfg, sock, client, server)
        self.head = bytearray()
        # How much of the head has been looked at, and where its request line ends (-1: not seen yet).
        self.scanned = 0
        self.line_end = -1
        self.head_deadline = 0.0
        # Whether enqueue_req hands it to a serving thread (its head is complete) or waits for a head.
        self.head_ready = False
        self.handshaken = not cfg.is_ssl
        self.events = selectors.EVENT_READ

    def start_head(self, read_ahead: bytes) -> None:
        self.head = bytearray(read_ahead)
        self.scanned = 0
        self.line_end = -1

    def head_state(self, line_limit: int) -> str:
        """What the head's bytes so far call for, read as gunicorn's parser reads them (one empty line may come
        before the request line); each byte is looked at about once, however the head trickles in."""
        head = self.head
        start = max(self.scanned - 3, 0)
        self.scanned = len(head)
        line_starts = 2 if head.startswith(b"\r\n") else 0
        if self.line_end < 0:
            self.line_end = head.find(b"\r\n", max(start, line_starts))
        line = (self.line_end if self.line_end >= 0 else len(head)) - line_starts
        if 0 < line_limit < line:
            return _LINE_TOO_LONG
        if head.find(b"\r\n\r\n", start) >= 0 or _BARE_LF.search(head, start):
            return _READY
        return _TOO_LARGE if len(head) >= HEAD_BYTES else _WAIT


class HeadFirstWorker(ThreadWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Connections whose head is awaited, oldest first: their deadlines come in this order.
        self.heads: dict[HeadConn, None] = {}

    def accept(self, listener: Any) -> None:
        try:
            client, address = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = HeadConn(self.cfg, client, address, listener.getsockname())
        if self.cfg.is_ssl:
            # The handshake is the head's first part, on the event loop: never on connect.
            conn.sock = gunicorn_sock.ssl_context(self.cfg).wrap_socket(
                conn.sock,
                server_side=True,
                suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
                do_handshake_on_connect=False,
            )
        self.enqueue_req(conn)

    def enqueue_req(self, conn: HeadConn) -> None:
        """To a serving thread once the head is in (gunicorn calls this for new, kept-alive and pipelining
        connections alike)."""
        if conn.head_ready:
            conn.head_ready = False
            super().enqueue_req(conn)
        else:
            self._await_head(conn)

    def handle(self, conn: HeadConn) -> Any:
        """gunicorn's, and then the connection's next requests, while each head is complete within
        ``NEXT_HEAD_SECONDS`` (module docstring)."""
        keep = super().handle(conn)
        while keep is True and self.alive and self.nr_conns <= self.cfg.threads:
            state = self._next_head(conn)
            if state == _GONE:
                return False
            if state != _READY:
                break
            keep = super().handle(conn)
        return keep

    def _next_head(self, conn: HeadConn) -> str:
        """Read the connection's next head on this thread for at most ``NEXT_HEAD_SECONDS``; what was read goes back
        to its parser, for this thread (a ready head) or the event loop (the head wanted or refused there)."""
        deadline = time.monotonic() + NEXT_HEAD_SECONDS
        conn.start_head(conn.parser.unreader.take_buffered())
        ready = select.poll()  # a poll: select() refuses descriptors past 1023
        ready.register(conn.sock, select.POLLIN)
        try:
            conn.sock.setblocking(False)
            state = self._read_head(conn)
            while state == _WAIT and (left := deadline - time.monotonic()) > 0 and ready.poll(left * 1000):
                state = self._read_head(conn)
        except OSError:  # a reset
            state = _GONE
        conn.parser.unreader.unread(bytes(conn.head))
        conn.start_head(b"")
        return state

    def murder_pending(self) -> None:
        """gunicorn's sweep of its waiting connections, every turn of the event loop: heads past their deadline
        too (all of them once the worker stops)."""
        super().murder_pending()
        now = time.monotonic()
        while self.heads:
            conn = next(iter(self.heads))
            if self.alive and conn.head_deadline > now:
                break
            self._drop(conn, _answer(408, f"request head not complete within {HEAD_SECONDS:g} s") if conn.head else b"")

    def _await_head(self, conn: HeadConn) -> None:
        conn.head_deadline = time.monotonic() + HEAD_SECONDS
        # What the client sent after its last request was read ahead with it.
        conn.start_head(conn.parser.unreader.take_buffered() if conn.parser is not None else b"")
        conn.sock.setblocking(False)
        conn.events = selectors.EVENT_READ
        self.heads[conn] = None
        self.poller.register(conn.sock, conn.events, partial(self._on_event, conn))
        if len(self.heads) > MAX_HEADS:
            self._drop(next(iter(self.heads)), b"")
        if conn in self.heads:
            self._on_event(conn, None)  # read-ahead may hold the head already; a read finds nothing otherwise

    def _on_event(self, conn: HeadConn, _fileobj: Any) -> None:
        try:
            state = self._read_head(conn)
        except OSError:  # a reset, a failed TLS handshake (ssl.SSLError is an OSError)
            state = _GONE
        if state == _WAIT:
            return
        if state == _READY:
            self._hand_over(conn)
        elif state == _LINE_TOO_LONG:
            self._refuse(conn, 414, f"request line over {self.cfg.limit_request_line} bytes")
        elif state == _TOO_LARGE:
            self._refuse(conn, 431, f"request head over {HEAD_BYTES} bytes")
        else:
            self._drop(conn, b"")

    def _read_head(self, conn: HeadConn) -> str:
        if not conn.handshaken:
            try:
                conn.sock.do_handshake()
            except ssl.SSLWantReadError:
                return self._wait_for(conn, selectors.EVENT_READ)
            except ssl.SSLWantWriteError:
                return self._wait_for(conn, selectors.EVENT_WRITE)
            conn.handshaken = True
            self._wait_for(conn, selectors.EVENT_READ)
        state = conn.head_state(self.cfg.limit_request_line)
        while state == _WAIT:
            try:
                data = conn.sock.recv(_RECV_BYTES)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return _WAIT
            if not data:
                return _GONE
            conn.head += data
            state = conn.head_state(self.cfg.limit_request_line)
        return state

    def _wait_for(self, conn: HeadConn, events: int) -> str:
        if events != conn.events:
            conn.events = events
            self.poller.modify(conn.sock, events, partial(self._on_event, conn))
        return _WAIT

    def _hand_over(self, conn: HeadConn) -> None:
        self._forget(conn)
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.parser.unreader.unread(bytes(conn.head))
        conn.start_head(b"")
        # gunicorn's handle() neither waits for data nor sets the connection up again: both are done.
        conn.initialized = True
        conn.data_ready = True
        conn.head_ready = True
        self.enqueue_req(conn)

    def _refuse(self, conn: HeadConn, status: int, reason: str) -> None:
        """As gunicorn refuses a malformed head: a warning without what the client sent, and an answer."""
        self.log.warning("Invalid request from ip=%s: %s", conn.client[0] if conn.client else "", reason)
        self._drop(conn, _answer(status, reason))

    def _drop(self, conn: HeadConn, answer: bytes) -> None:
        """Disconnect, after ``answer`` if the socket takes it at once (it never blocks the event loop)."""
        self._forget(conn)
        if answer and conn.handshaken:
            try:
                conn.sock.send(answer)
            except (OSError, ValueError):
                pass
        self.nr_conns -= 1
        conn.close()

    def _forget(self, conn: HeadConn) -> None:
        self.heads.pop(conn, None)
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError):
            pass


class HeadFirstTimeoutWorker(HeadFirstWorker, GThreadWorkerWithTimeoutSupport):
    """``HeadFirstWorker`` with functions-framework's per-request timeout (``THREADED_TIMEOUT_ENABLED``)."""


def _answer(status: int, reason: str) -> bytes:
    body = b'{"Error":"%s"}' % reason.encode()
    titles = {408: "Request Timeout", 414: "URI Too Long", 431: "Request Header Fields Too Large"}
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
        % (status, titles[status].encode(), len(body), body)
    )
