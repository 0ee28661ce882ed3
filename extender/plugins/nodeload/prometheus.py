"""Instant queries over the Prometheus HTTP API (``GET <url>/api/v1/query``): a self-run Prometheus with the
credentials the policy names (``extender.plugins.nodeload.auth``: a bearer token, basic auth, a client certificate,
a CA bundle, extra headers), or Cloud Monitoring's (Google Cloud Managed Service for Prometheus) with the function's
own Google identity.

Prometheus is trusted with the load figures, not with this process: every query is one ``extender.outbound``
call, whose deadline covers the whole exchange (connect, TLS handshake, status line, headers, body) and whose answer
is capped, so a server that drips or floods holds a refresh no longer than its deadline. Redirects are not followed:
they would carry the credentials elsewhere. No message quotes a secret (the token, the password, the encoded
credentials), even where the server echoes it; a refusal (401, 403) names the auth kind and where its secret comes
from, and has it read afresh. TLS trusts the policy's CA bundle (``tls.caFile``), else what requests does (its CA
bundle, or the one ``REQUESTS_CA_BUNDLE`` names), as google-auth's token requests do: ``requests`` and
``google.auth`` are imported with the first query.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlencode, urlsplit

import orjson

from extender import __version__
from extender.background import started
from extender.errors import bounded, redacted, secret_forms
from extender.plugins.nodeload.answers import error_text
from extender.plugins.nodeload.auth import Credential, PrometheusAuth, TlsFiles, tls_context
from extender.plugins.nodeload.auth import QueryError as QueryError  # where the transport's callers look for it

if TYPE_CHECKING:
    import ssl

    from google.auth.credentials import Credentials

    from extender.outbound import Endpoint

# Largest answer read: a series of Cloud Monitoring's node metrics is about 300 bytes, so 5,000 nodes take 1.5 MB.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# Read-only access to Cloud Monitoring, what roles/monitoring.viewer grants.
MONITORING_READ = "https://www.googleapis.com/auth/monitoring.read"
# Secrets shorter than this are not looked for in an answer's body: a short password may well be a label's value.
_QUOTED_MIN = 8
# Connections kept open between refreshes (a refresh asks its metrics at once, on as many connections).
_KEPT_CONNECTIONS = 4


class Authorizer(Protocol):
    """Where a query's ``Authorization`` header comes from: the function's Google identity (``GoogleAuth``), a bearer
    token or basic auth (``extender.plugins.nodeload.auth.Credentials``)."""

    @property
    def described(self) -> str:
        """What the credential is and where it comes from, for the message of a refusal (never the secret)."""
        ...

    def authorization(self, seconds: float) -> Credential:
        """The header's value within ``seconds``; QueryError when there is none."""
        ...

    def refused(self) -> None:
        """Prometheus refused the credential (401, 403): the next query gets it afresh."""
        ...


class Querier(Protocol):
    def query(self, promql: str, seconds: float) -> bytes:
        """The answer's body to ``promql`` within ``seconds``; QueryError when there is none."""
        ...


def source_name(url: str) -> str:
    """What messages call the API at ``url``: Cloud Monitoring answers PromQL too, and a log line about it says so."""
    return "Cloud Monitoring" if urlsplit(url).hostname == "monitoring.googleapis.com" else "Prometheus"


class Prometheus:
    """The Prometheus HTTP API at ``url`` (its base, without ``/api/v1``), with ``auth`` if any, the TLS files and
    extra headers of ``spec``.

    Thread-safe: one endpoint, and its kept connections, serves the queries of every refresh. It is made with the
    first query, in the serving process (gunicorn forks its worker before any), and made again when the client
    certificate, its key or the CA bundle change; a process forked after that leaves the kept connections to its
    parent.
    """

    def __init__(self, url: str, auth: Authorizer | None = None, spec: PrometheusAuth | None = None) -> None:
        self.url = url
        self.auth = auth
        self.spec = spec or PrometheusAuth()
        self._tls = TlsFiles(self.spec) if self.spec.ca_file or self.spec.cert_file else None
        self._made_from: tuple[bytes, ...] = ()
        self._endpoint: Endpoint | None = None
        self._making = threading.Lock()
        _LIVE.add(self)

    def __repr__(self) -> str:
        return f"Prometheus({self.url!r}, auth={self.spec.kind!r})"

    def query(self, promql: str, seconds: float) -> bytes:
        from extender import outbound

        until = time.monotonic() + seconds
        headers = {**self.spec.headers, "Accept": "application/json"}
        secrets: tuple[str, ...] = ()
        if self.auth is not None:
            credential = self.auth.authorization(seconds)
            headers["Authorization"] = credential.header
            secrets = credential.secrets
        target = "/api/v1/query?" + urlencode({"query": promql, "timeout": f"{max(seconds, 0.001):.3f}"})
        endpoint = self._endpoint_made(until - time.monotonic())
        try:
            answer = endpoint.call("GET", target, until=until, max_bytes=MAX_ANSWER_BYTES, headers=headers)
        except outbound.TimedOut:
            raise QueryError(f"no answer within {seconds:.1f} s") from None
        except outbound.TooLarge:
            raise QueryError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes: not read") from None
        except outbound.Unreachable as exc:
            self._tls_refused()
            raise QueryError(_redacted(f"cannot reach {self.url}: {exc}{self._presented()}", secrets)) from None
        except outbound.BrokenAnswer as exc:
            # With TLS 1.3 a server refuses a client certificate after the client's handshake: an alert, or the
            # connection's end, where the answer should be.
            self._tls_refused()
            what = "refused the TLS connection" if "[SSL" in str(exc) else "gave a broken HTTP answer"
            raise QueryError(_redacted(f"{self.url} {what}: {exc}{self._presented()}", secrets)) from None
        if answer.status != 200:
            why = f"{self.url} answered {answer.status} {bounded(answer.reason, 200)}: {_why(answer.body)}"
            if answer.status in (401, 403):
                why += f" ({self._refused()})"
            raise QueryError(_redacted(why, secrets))
        if any(_quotes(answer.body, secret) for secret in secrets if len(secret) >= _QUOTED_MIN):
            # Whatever is read from it may end up in a message: its values, Prometheus' warnings.
            what = "basic auth credentials" if headers["Authorization"].startswith("Basic ") else "bearer token"
            raise QueryError(f"{self.url} answered with the request's {what} in its body: not used")
        return bytes(answer.body)

    def _refused(self) -> str:
        """What was refused, for the message; the credentials are read afresh for the next query."""
        if self.auth is None:
            presented = self._presented()
            return f"no credentials were sent: prometheus.auth is none{presented}"
        self.auth.refused()
        return f"{self.auth.described} was refused{self._presented()}"

    def _tls_refused(self) -> None:
        """A TLS failure: the certificate, key and CA bundle are read again before the next query (a rotation)."""
        if self._tls is not None:
            self._tls.refused()

    def _presented(self) -> str:
        if self.spec.cert_file:
            return f"; client certificate prometheus.tls.certFile {self.spec.cert_file}"
        return ""

    def _endpoint_made(self, seconds: float) -> Endpoint:
        """The endpoint, made with the first query and again when the TLS files change: a failure to make it (an
        unreadable CA bundle) fails the query, and the next one tries again."""
        made_from = self._tls.current(seconds) if self._tls is not None else ()
        with self._making:
            if self._endpoint is None or made_from != self._made_from:
                from extender import outbound

                context = _trusted(self.url, self.spec) if self.url.startswith("https:") else None
                user_agent = {"User-Agent": f"gcf-scheduler-extender/{__version__}"}
                self._endpoint = outbound.Endpoint(self.url, context, user_agent, idle=_KEPT_CONNECTIONS)
                self._made_from = made_from
            return self._endpoint

    def _after_fork_in_child(self) -> None:
        self._making = threading.Lock()
        if self._endpoint is not None:
            self._endpoint.forget_connections()


def _trusted(url: str, spec: PrometheusAuth) -> ssl.SSLContext:
    """The policy's CA bundle (``tls.caFile``), else what requests trusts for ``url``: the bundle
    ``REQUESTS_CA_BUNDLE`` (else ``CURL_CA_BUNDLE``) names, else its own (certifi's), as google-auth's token requests
    do; with the policy's client certificate, if any."""
    if spec.ca_file:
        return tls_context(spec)
    import certifi
    import requests

    verify = requests.Session().merge_environment_settings(url, {}, None, True, None)["verify"]
    # A path the environment names, else requests' own bundle (certifi's).
    return tls_context(spec, verify if isinstance(verify, str) else certifi.where())


def _redacted(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = redacted(text, secret)
    return text


def _quotes(body: bytearray, token: str) -> bool:
    """Whether ``body`` holds ``token``, as sent or base64-encoded."""
    return any(form.encode() in body for form in secret_forms(token))


class GoogleAuth:
    """The function's own identity (application default credentials) as a bearer token, refreshed before it expires.

    The credentials are found with the first query, not at start-up: ``check-policy`` and ``explain --metrics`` need
    none. Finding them may ask the metadata server, which off Google Cloud answers nothing for seconds: it runs on a
    thread of its own that the query waits for only within its deadline (a later refresh takes its result). One
    thread refreshes the token at a time.
    """

    def __init__(self) -> None:
        self._credentials: Credentials | None = None
        self._lock = threading.Lock()
        self._finding: threading.Thread | None = None
        self._found: Credentials | Exception | None = None

    described = "the function's Google access token (prometheus.auth: google)"

    def refused(self) -> None:
        """Cloud Monitoring refused a valid token (a missing role): google-auth refreshes it when it expires."""

    def authorization(self, seconds: float) -> Credential:
        """``Bearer <token>``; QueryError when no token can be had within ``seconds``."""
        import google.auth.exceptions

        deadline = time.monotonic() + seconds
        if not self._lock.acquire(timeout=seconds):
            raise QueryError(f"no Google access token within {seconds:.1f} s")
        try:
            credentials = self._credentials or self._find(deadline, seconds)
            if not credentials.valid:
                # google-auth's credentials are untyped.
                cast(Any, credentials).refresh(_token_request(max(0.001, deadline - time.monotonic())))
            token = str(credentials.token)
            return Credential(f"Bearer {token}", (token,))
        except google.auth.exceptions.GoogleAuthError as exc:
            raise QueryError(f"no Google access token: {type(exc).__name__}: {exc}") from None
        finally:
            self._lock.release()

    def _find(self, deadline: float, seconds: float) -> Credentials:
        """Application default credentials, looked for on a thread of their own (under ``_lock``) until ``deadline``
        (monotonic), the end of the query's ``seconds``."""
        if self._finding is None:
            self._found = None
            self._finding = threading.Thread(target=self._look, name="nodeload-credentials", daemon=True)
            if not started(self._finding):
                self._finding = None
                raise QueryError("no Google credentials: no thread could be started to look for them")
        self._finding.join(max(0.0, deadline - time.monotonic()))
        if self._finding.is_alive():
            raise QueryError(f"no Google credentials found within {seconds:.1f} s (still looking)")
        self._finding, found = None, self._found
        if isinstance(found, Exception):
            raise found  # the next refresh looks again
        assert found is not None
        self._credentials = found
        return found

    def _look(self) -> None:
        import google.auth

        try:
            self._found, _ = google.auth.default(scopes=[MONITORING_READ])
        except Exception as exc:  # noqa: BLE001  (whatever google.auth raises is reported by the query waiting for it)
            self._found = exc


def _token_request(seconds: float) -> Any:
    """google-auth's transport for refreshing a token, bounded by ``seconds`` (its own default waits two minutes)."""
    import google.auth.transport.requests

    class Bounded(google.auth.transport.requests.Request):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["timeout"] = seconds
            return cast(Any, super()).__call__(*args, **kwargs)  # google-auth's transport is untyped

    return Bounded()


def _why(body: bytes | bytearray) -> str:
    """What an error answer says: Prometheus' ``errorType: error``, else the start of the body."""
    try:
        return error_text(orjson.loads(body))
    except orjson.JSONDecodeError:
        return body[:200].decode(errors="replace").strip() or "(no body)"


_LIVE: weakref.WeakSet[Prometheus] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_LIVE):
        client._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
