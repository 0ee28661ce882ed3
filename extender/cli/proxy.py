"""proxy --target URL: the identity proxy beside kube-scheduler, for functions that keep IAM authentication on.

The scheduler's ``urlPrefix`` points at the proxy (``http://127.0.0.1:8001``);
the proxy adds a Google ID token for the function to every call.
"""

from __future__ import annotations

import argparse
import logging
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "proxy",
        help="forward the scheduler's calls to the function with a Google ID token",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--target", required=True, help="the function's URL (service_config uri, https://...run.app)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8001, help="port to listen on (default: 8001)")
    parser.add_argument(
        "--audience",
        help="ID token audience (default: the target's scheme and host; set it for a custom audience "
        "or a cloudfunctions.net URL, whose audience is the full function URL)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the function (default: 30)")
    parser.add_argument(
        "--log-format",
        choices=["json", "text"],
        help="json: one JSON object a line, which GKE's logging agent turns into a structured entry; text: readable "
        "lines (default: json in a Kubernetes pod, text elsewhere)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: other commands need neither google-auth nor an HTTP server.
    import google.auth.exceptions

    from extender.logs import PlainFormatter
    from extender.proxy.logs import JSON, JsonLineFormatter, default_format
    from extender.proxy.server import Forwarder, ProxyServer, check_target, default_audience
    from extender.proxy.tokens import IdTokenSource
    from extender.settings import in_a_pod

    handler = logging.StreamHandler(sys.stderr)
    log_format = args.log_format or default_format(in_a_pod())
    handler.setFormatter(JsonLineFormatter() if log_format == JSON else PlainFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    log = logging.getLogger("extender.proxy")
    try:
        target = check_target(args.target)
    except ValueError as exc:
        print(f"proxy: {exc}", file=sys.stderr)
        return 2
    tokens = IdTokenSource(args.audience or default_audience(target))
    try:
        tokens.token()
    except google.auth.exceptions.GoogleAuthError as exc:
        # Not fatal: the metadata server may come up after the sidecar; every call retries and answers 502 meanwhile.
        log.warning("no ID token for audience %s yet: %s", tokens.audience, exc)
    server = ProxyServer(args.host, args.port, Forwarder(target, tokens, args.timeout))
    log.info(
        "identity proxy listening on %s:%d for %s (audience %s)",
        args.host,
        args.port,
        default_audience(target),
        tokens.audience,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
