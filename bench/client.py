"""One keep-alive HTTP/1.1 connection per server, sending exactly the headers kube-scheduler's Go client sends."""

from __future__ import annotations

import http.client
import time

# gunicorn closes a connection idle for 2 s (its keepalive); the scheduler's steady traffic keeps its own warm.
_IDLE_LIMIT = 1.5


class Connection:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host, self.port = host, port
        self._conn: http.client.HTTPConnection | None = None
        self._used = 0.0

    def post(self, path: str, body: bytes) -> tuple[float, int, bytes]:
        """(seconds from the first byte sent to the last byte of the answer read, status, answer)."""
        if self._conn is None or time.monotonic() - self._used > _IDLE_LIMIT:
            self.reconnect()
        assert self._conn is not None
        started = time.perf_counter()
        self._conn.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
        for name, value in (
            ("Host", f"{self.host}:{self.port}"),
            ("User-Agent", "Go-http-client/1.1"),
            ("Content-Length", str(len(body))),
            ("Content-Type", "application/json"),
            ("Accept-Encoding", "gzip"),
        ):
            self._conn.putheader(name, value)
        self._conn.endheaders(body)
        response = self._conn.getresponse()
        answer = response.read()
        seconds = time.perf_counter() - started
        self._used = time.monotonic()
        if response.will_close:
            self.close()
        return seconds, response.status, answer

    def reconnect(self) -> None:
        self.close()
        self._conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        self._conn.connect()
        self._used = time.monotonic()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
