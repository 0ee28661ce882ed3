"""A raw-socket HTTP/1.1 client for tests that must send exact bytes: broken framing, lies, stalls, aborts.

``requests`` and Flask's test client always frame a request correctly; the
transport's failures only show with the bytes written by hand.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from dataclasses import dataclass

_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)\s*$")
_STATUS = re.compile(rb"^HTTP/1\.[01] (\d{3}) ")


@dataclass
class Reply:
    # None when the connection ended without an answer.
    status: int | None
    head: bytes
    body: bytes
    seconds: float


def head(method: str, path: str, *headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: extender", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def connect(port: int, timeout: float = 15.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def exchange(port: int, *pieces: bytes, pause: float = 0.0, timeout: float = 15.0) -> Reply:
    """Send ``pieces`` (``pause`` seconds apart) on a new connection and read one answer."""
    started = time.monotonic()
    with connect(port, timeout) as sock:
        for number, piece in enumerate(pieces):
            if number and pause:
                time.sleep(pause)
            try:
                sock.sendall(piece)
            except OSError:
                break  # the server may answer and close before taking everything: read what it said
        return read_reply(sock, started)


def read_reply(sock: socket.socket, started: float | None = None) -> Reply:
    """One answer, up to its Content-Length; what arrived when the connection ends or times out."""
    started = time.monotonic() if started is None else started
    data = b""
    try:
        while True:
            if b"\r\n\r\n" in data:
                top, _, body = data.partition(b"\r\n\r\n")
                length = _LENGTH.search(top)
                if length and len(body) >= int(length.group(1)):
                    break
            piece = sock.recv(1 << 16)
            if not piece:
                break
            data += piece
    except (TimeoutError, ConnectionResetError):
        pass
    top, _, body = data.partition(b"\r\n\r\n")
    if length := _LENGTH.search(top):
        body = body[: int(length.group(1))]  # what follows belongs to a next answer
    status = _STATUS.match(top)
    return Reply(int(status.group(1)) if status else None, top, body, time.monotonic() - started)


def next_heads(sock: socket.socket, request: bytes, wait: float) -> list[Reply]:
    """``request`` sent again and again on one kept-alive connection, its head coming each way a server that waits
    ``wait`` seconds for a connection's next head must take: at once, in two parts within the wait, its first part
    within the wait and the rest after it, and only after the wait. The replies, one per request."""
    replies = []
    for first, pause in ((len(request), 0.0), (5, wait / 5), (20, wait * 4), (0, wait * 4)):
        sock.sendall(request[:first])
        time.sleep(pause)
        sock.sendall(request[first:])
        replies.append(read_reply(sock))
    return replies


def abort(sock: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0), as a client killed mid-upload does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def chunked(*chunks: bytes) -> bytes:
    """Well-formed chunked framing of ``chunks``, with the terminating empty chunk."""
    return b"".join(b"%x\r\n%b\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
