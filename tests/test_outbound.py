"""Outbound calls (extender.outbound) against a raw server: one deadline in all, capped bytes, kept connections."""

from __future__ import annotations

import itertools
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from extender import outbound, read_deadline

# Scheduling on a loaded 2-core machine: how much later than its deadline a call may be seen to end.
MARGIN = 0.5
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


# What a server does with each request: given the connection, the request's head and its number on the connection,
# it answers (or not) and says whether to keep the connection open for the next one.
Script = Callable[[socket.socket, bytes, int], bool]


class Server:
    """A loopback server whose every connection runs ``script`` for each request on it."""

    def __init__(self, script: Script) -> None:
        self.connections = 0
        served = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                served.connections += 1
                buffered = b""
                for number in itertools.count():
                    while b"\r\n\r\n" not in buffered:
                        piece = self.request.recv(65536)
                        if not piece:
                            return
                        buffered += piece
                    request, _, buffered = buffered.partition(b"\r\n\r\n")
                    try:
                        if not script(self.request, request, number):
                            return
                    except OSError:
                        return

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/prefix"
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serving(script: Script) -> Iterator[Server]:
    server = Server(script)
    try:
        yield server
    finally:
        server.close()


def drip(data: bytes, pause: float = 0.05, hold: float = 0.0) -> Script:
    """Send ``data`` a byte every ``pause`` seconds, then keep the connection open ``hold`` seconds more."""

    def script(conn: socket.socket, request: bytes, number: int) -> bool:
        for at in range(len(data)):
            conn.sendall(data[at : at + 1])
            time.sleep(pause)
        time.sleep(hold)
        return False

    return script


def answer(data: bytes) -> Script:
    def script(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(data)
        return True

    return script


def call(
    server: Server,
    seconds: float = 5.0,
    endpoint: outbound.Endpoint | None = None,
    max_bytes: int = 1000,
    **kwargs: Any,
) -> outbound.Answer:
    endpoint = endpoint or outbound.Endpoint(server.url, None)
    return endpoint.call("GET", "/x", until=time.monotonic() + seconds, max_bytes=max_bytes, **kwargs)


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 " + b"O" * 1000,  # the status line
        b"HTTP/1.1 200 OK\r\nX-Drip: " + b"x" * 1000,  # a header
        b"HTTP/1.1 100 Continue\r\n\r\n" * 100,  # endless interim answers
        OK[:-2] + b"\x00" * 1000,  # the body, never complete
    ],
    ids=["status line", "headers", "100 Continue", "body"],
)
def test_a_server_that_drips_any_part_is_cut_off_at_the_deadline(data):
    with serving(drip(data)) as server:
        started = time.monotonic()
        with pytest.raises(outbound.TimedOut):
            call(server, seconds=0.4)
        assert time.monotonic() - started < 0.4 + read_deadline._SLACK + MARGIN


def test_what_arrives_before_the_deadline_shuts_the_socket_is_never_taken_for_an_answer():
    # A head without its end, then nothing: at the deadline the end of the stream must not read as the end of a
    # complete answer without a body.
    dripping = drip(b"HTTP/1.1 204 No Content\r\nX-Pad: x", pause=0.01, hold=2.0)
    with serving(dripping) as server, pytest.raises(outbound.TimedOut):
        call(server, seconds=0.4)


def test_kept_connections_carry_the_next_calls_and_one_the_server_closed_is_not_used():
    answered: list[bytes] = []

    def close_after_two(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(OK)
        answered.append(request)
        return len(answered) % 2 == 1

    with serving(close_after_two) as server:
        endpoint = outbound.Endpoint(server.url, None)
        for _ in range(6):
            assert bytes(call(server, endpoint=endpoint).body) == b"{}"
            time.sleep(0.02)  # the server's close has arrived before the next call looks
        assert server.connections == 3


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_kept_connection_closed_as_it_is_used_is_replaced_for_a_get_only(method):
    """The server keeps the connection after its first answer, then closes it on the next request without a word."""
    requests_seen: list[bytes] = []

    def once_per_connection(conn: socket.socket, request: bytes, number: int) -> bool:
        requests_seen.append(request)
        if number:
            return False
        conn.sendall(OK)
        return True

    with serving(once_per_connection) as server:
        endpoint = outbound.Endpoint(server.url, None)
        call(server, endpoint=endpoint)
        if method == "GET":
            assert bytes(call(server, endpoint=endpoint).body) == b"{}"
            assert server.connections == 2 and len(requests_seen) == 3
        else:
            with pytest.raises(outbound.BrokenAnswer, match="closed the connection without an answer"):
                endpoint.call("POST", "/x", until=time.monotonic() + 5, max_bytes=10, body=b"{}")
            assert server.connections == 1


def recording(seen: list[bytes]) -> Script:
    """Answer OK, keeping each request's head in ``seen``."""

    def script(conn: socket.socket, request: bytes, number: int) -> bool:
        seen.append(request)
        conn.sendall(OK)
        return True

    return script


def test_the_endpoint_path_prefix_and_headers_are_sent():
    seen: list[bytes] = []
    with serving(recording(seen)) as server:
        endpoint = outbound.Endpoint(server.url, None, {"User-Agent": "test"})
        call(server, endpoint=endpoint, headers={"Accept": "application/json"})
    assert seen[0].startswith(b"GET /prefix/x HTTP/1.1\r\n")
    assert b"User-Agent: test" in seen[0] and b"Accept: application/json" in seen[0]


def test_a_prefix_with_spaces_or_other_than_ascii_is_sent_percent_encoded():
    seen: list[bytes] = []
    with serving(recording(seen)) as server:
        call(server, endpoint=outbound.Endpoint(server.url + "/a b/\u00e9%20c:d@e", None))
    assert seen[0].startswith(b"GET /prefix/a%20b/%C3%A9%20c:d@e/x HTTP/1.1\r\n")


def test_an_answer_over_the_cap_is_refused_declared_or_not():
    declared = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n"
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"200\r\n" + b"x" * 512 + b"\r\n" + b"0\r\n\r\n"
    )
    refused = pytest.raises(outbound.TooLarge, match=r"more than 1000 bytes \(the cap of one answer; 5000 declared\)")
    with serving(answer(declared)) as server, refused:
        call(server)
    with serving(answer(chunked)) as server:
        assert len(call(server, max_bytes=512).body) == 512
        with pytest.raises(outbound.TooLarge, match=r"more than 511 bytes \(the cap of one answer\)"):
            call(server, max_bytes=511)


def test_calls_sharing_a_budget_read_its_bytes_in_all():
    body = b"x" * 600
    with serving(answer(b"HTTP/1.1 200 OK\r\nContent-Length: 600\r\n\r\n" + body)) as server:
        budget = outbound.ByteBudget(1000, "the test's calls")
        assert len(call(server, budget=budget).body) == 600
        with pytest.raises(outbound.TooLarge, match=r"more than 1000 bytes in all \(the test's calls\)"):
            call(server, budget=budget)


@pytest.mark.parametrize(
    ("data", "cause"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "does not start with an HTTP status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "ended 8 bytes short of its Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunked framing is broken"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 120 + b"\r\n", "more than 100 headers"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", "over 64 kB"),
        (b"", "closed the connection without an answer"),
    ],
)
def test_what_is_not_a_whole_http_answer_is_a_broken_answer_naming_why(data, cause):
    def once(conn: socket.socket, request: bytes, number: int) -> bool:
        conn.sendall(data)
        return False

    with serving(once) as server, pytest.raises(outbound.BrokenAnswer, match=cause):
        call(server)


def test_nobody_listening_is_unreachable_and_no_time_left_is_a_timeout():
    with serving(answer(OK)) as server:
        url = server.url
    with pytest.raises(outbound.Unreachable, match="refused"):
        outbound.Endpoint(url, None).call("GET", "/", until=time.monotonic() + 1, max_bytes=10)
    with pytest.raises(outbound.TimedOut):
        outbound.Endpoint(url, None).call("GET", "/", until=time.monotonic(), max_bytes=10)
