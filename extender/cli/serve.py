"""serve --cert --key [--client-ca]: the function over HTTPS, with mutual TLS when a client CA is given.

It runs what Cloud Functions runs (the functions-framework app of main.py
under functions-framework's gunicorn server), adding TLS, so the scheduler's
exact ``tlsConfig`` can be tried before anything is deployed, and the limits
an exposed server needs, which functions-framework leaves off (Cloud Run's
front end stands before a deployed function): a TLS handshake must finish
within HANDSHAKE_SECONDS (a client that sends part of a ClientHello and waits
would otherwise hold a serving thread for good), and the request line and
header fields are bounded (gunicorn parses an unbounded line in quadratic
time).
"""

from __future__ import annotations

import argparse
import errno
import socket
import ssl
import sys
from pathlib import Path
from typing import Any

MAIN = Path(__file__).resolve().parents[2] / "main.py"
# kube-scheduler completes a handshake in milliseconds; this bounds what a stalled one costs.
HANDSHAKE_SECONDS = 3.0
# The longest path the scheduler sends is urlPrefix (function name, token, profile) plus a verb: far below this.
LIMITS = {"limit_request_line": 8190, "limit_request_fields": 64, "limit_request_field_size": 8190}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "serve",
        help="run the function locally over HTTPS (mutual TLS with --client-ca)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cert", required=True, help="server certificate chain (PEM)")
    parser.add_argument("--key", required=True, help="server private key (PEM)")
    parser.add_argument("--client-ca", help="CA bundle (PEM) for client certificates; makes them mandatory")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8443, help="port to listen on (default: 8443)")
    parser.set_defaults(run=run)


class HandshakeDeadlineContext(ssl.SSLContext):
    """Server-side TLS whose handshake ends within HANDSHAKE_SECONDS; then the socket blocks as gunicorn expects."""

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:  # type: ignore[override]
        sock.settimeout(HANDSHAKE_SECONDS)
        try:
            wrapped = super().wrap_socket(sock, *args, **kwargs)
            # gunicorn asks for the handshake later (do_handshake_on_connect is off by default): it is done here, in
            # time; its own call then finds it complete.
            wrapped.do_handshake()
        except TimeoutError:
            sock.close()
            # gunicorn logs a reset at debug level; any other socket error would be an ERROR with a traceback.
            problem = f"TLS handshake not complete within {HANDSHAKE_SECONDS:g} s"
            raise ConnectionResetError(errno.ECONNRESET, problem) from None
        wrapped.settimeout(None)
        return wrapped


def run(args: argparse.Namespace) -> int:
    try:
        # Load everything once here: a wrong file fails now with its name, not at the first handshake.
        context = HandshakeDeadlineContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            context.load_verify_locations(args.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        print(f"serve: cannot use the certificate files: {exc}", file=sys.stderr)
        return 2

    import functions_framework
    from functions_framework._http import create_server

    app = functions_framework.create_app(target="extender", source=str(MAIN))
    # certfile and keyfile tell gunicorn to serve TLS at all; the context is the one loaded above.
    tls: dict[str, object] = {
        "certfile": args.cert, "keyfile": args.key, "ssl_context": lambda config, default: context
    }
    clients = f", client certificates required (CA {args.client_ca})" if args.client_ca else ""
    print(f"serving https://{args.host}:{args.port}{clients}", file=sys.stderr, flush=True)
    create_server(app, False, **tls, **LIMITS).run(args.host, args.port)
    return 0
