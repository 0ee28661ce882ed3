"""Small HTTP stand-ins on loopback for the tests and the bench: a quiet handler that answers in one call, and a
threaded server for it on a port of its own.

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.answer(200, b'{"status": "success"}')

    served = Loopback(Handler)
    requests.get(served.url)
    served.close()
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers a whole body at once, each write sent at once (TCP_NODELAY,
    as Go's servers, Prometheus among them, send theirs)."""

    disable_nagle_algorithm = True

    def answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class Loopback:
    """``handler`` served from a thread on a free loopback port (over TLS with ``context``) until ``close``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext | None = None) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if context is not None:
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.url = f"{'https' if context is not None else 'http'}://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

