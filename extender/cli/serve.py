"""serve --cert --key [--client-ca]: the function over HTTPS, with mutual TLS when a client CA is given.

It runs what Cloud Functions runs (the functions-framework app of main.py
under functions-framework's gunicorn server), adding only TLS, so the
scheduler's exact ``tlsConfig`` can be tried before anything is deployed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MAIN = Path(__file__).resolve().parents[2] / "main.py"


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


def run(args: argparse.Namespace) -> int:
    import ssl

    try:
        # Load everything once here: a wrong file fails now with its name, not at the first handshake.
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            context.load_verify_locations(args.client_ca)
    except (OSError, ssl.SSLError) as exc:
        print(f"serve: cannot use the certificate files: {exc}", file=sys.stderr)
        return 2

    import functions_framework
    from functions_framework._http import create_server

    app = functions_framework.create_app(target="extender", source=str(MAIN))
    tls: dict[str, object] = {"certfile": args.cert, "keyfile": args.key}
    if args.client_ca:
        tls |= {"ca_certs": args.client_ca, "cert_reqs": ssl.CERT_REQUIRED}
    clients = f", client certificates required (CA {args.client_ca})" if args.client_ca else ""
    print(f"serving https://{args.host}:{args.port}{clients}", file=sys.stderr, flush=True)
    create_server(app, False, **tls).run(args.host, args.port)
    return 0
