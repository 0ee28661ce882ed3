"""serve --cert --key [--client-ca]: the function over HTTPS, with mutual TLS when a client CA is given.

It runs what Cloud Functions runs (the functions-framework app of main.py
under the server main.py installs, ``extender.http.server_limits``), adding TLS, so
the scheduler's exact ``tlsConfig`` can be tried before anything is deployed.
The server's own limits hold here too: the TLS handshake is the first part of
a request head, which must arrive within a deadline without holding a
serving thread (``extender.http.head_deadline``).

A connection whose body stalls is answered (408) at the read deadline as over
plain HTTP: the deadline shuts the socket's reading side
(``extender.read_deadline``), and OpenSSL 3 takes the end of stream that
follows, without the client's close_notify, for a fatal error after which
nothing can be sent; ``OP_IGNORE_UNEXPECTED_EOF`` makes it an ordinary end of
the stream. Truncation cannot pass unnoticed for that: a body shorter than its
Content-Length or chunked framing is a 400.
"""

from __future__ import annotations

import argparse
import ssl
import sys
from pathlib import Path

# The function's entry point: serve runs in a checkout of the repository, where main.py sits beside the package (an
# installed package has no main.py, as only Cloud Functions' source directory needs one).
MAIN = Path(__file__).resolve().parents[2] / "main.py"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def run(args: argparse.Namespace) -> int:
    if not MAIN.is_file():
        print(
            f"serve: no main.py beside the installed package ({MAIN.parent}): serve runs the function of a checkout "
            "of the repository; run `python -m extender serve` at its root",
            file=sys.stderr,
        )
        return 2
    try:
        # Load everything once here: a wrong file fails now with its name, not at the first handshake.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        # Absent from Python built against OpenSSL before 3, where such an end of stream was not fatal.
        context.options |= getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
        context.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            context.load_verify_locations(args.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        print(f"serve: cannot use the certificate files: {exc}", file=sys.stderr)
        return 2

    import functions_framework

    from extender.http.server_limits import DefendedServer

    app = functions_framework.create_app(target="extender", source=str(MAIN))
    # certfile and keyfile tell gunicorn to serve TLS at all; the context is the one loaded above.
    tls: dict[str, object] = {
        "certfile": args.cert, "keyfile": args.key, "ssl_context": lambda config, default: context
    }
    clients = f", client certificates required (CA {args.client_ca})" if args.client_ca else ""
    print(f"serving https://{args.host}:{args.port}{clients}", file=sys.stderr, flush=True)
    DefendedServer(app, args.host, args.port, False, **tls).run()
    return 0
