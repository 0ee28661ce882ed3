"""A reverse proxy on loopback in front of a real Prometheus that demands credentials, as the proxies teams put in
front of theirs do: a bearer token (kube-rbac-proxy, Grafana Cloud), basic auth (an ingress), a client certificate
(mutual TLS, answered 403 without one as nginx's ``ssl_verify_client optional`` setups do) and a tenant header
(``X-Scope-OrgID``, Mimir and Cortex answer 401 without it).

    proxy = AuthProxy(prometheus.url, bearer="s3cret")
    proxy.url  # queries here with "Authorization: Bearer s3cret" reach Prometheus; others get 401
    proxy.close()

What each request carried is kept (``seen``) so that tests can check what was sent; ``echo`` puts the request's
headers into refusals' bodies, as some servers do, to check that no message passes them on.
"""

from __future__ import annotations

import base64
import json
import ssl
from typing import Any

import requests

from testkit.loopback import Loopback, QuietHandler


class AuthProxy:
    def __init__(
        self,
        upstream: str,
        *,
        bearer: str | None = None,
        basic: tuple[str, str] | None = None,
        tenant: str | None = None,
        context: ssl.SSLContext | None = None,
        client_cert: bool = False,
        echo: bool = False,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.bearer = bearer
        self.basic = basic
        self.tenant = tenant
        self.client_cert = client_cert
        self.echo = echo
        self.seen: list[dict[str, Any]] = []
        proxy = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def refuse(self, status: int, error: str) -> None:
                document = {"status": "error", "errorType": "unauthorized", "error": error}
                if proxy.echo:
                    document["request"] = dict(self.headers.items())
                self.answer(status, json.dumps(document).encode())

            def do_GET(self) -> None:
                peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
                proxy.seen.append({"headers": dict(self.headers.items()), "client_cert": bool(peer)})
                if proxy.client_cert and not peer:
                    return self.refuse(403, "no client certificate was presented")
                authorization = self.headers.get("Authorization", "")
                if proxy.bearer is not None and authorization != f"Bearer {proxy.bearer}":
                    return self.refuse(401, "missing or wrong bearer token")
                if proxy.basic is not None:
                    expected = base64.b64encode(":".join(proxy.basic).encode()).decode()
                    if authorization != f"Basic {expected}":
                        return self.refuse(401, "missing or wrong basic credentials")
                if proxy.tenant is not None and self.headers.get("X-Scope-OrgID") != proxy.tenant:
                    return self.refuse(401, "no org id")
                forwarded = requests.get(proxy.upstream + self.path, timeout=10)
                self.answer(forwarded.status_code, forwarded.content)

        self._served = Loopback(Handler, context)
        self.url = self._served.url

    def close(self) -> None:
        self._served.close()
