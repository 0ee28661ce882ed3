"""Instant queries over the Prometheus HTTP API (``GET <url>/api/v1/query``): a self-run Prometheus, or Cloud
Monitoring's (Google Cloud Managed Service for Prometheus) with the function's own Google identity.

Prometheus is trusted with the load figures, not with this process: every query is one ``extender.outbound``
call, whose deadline covers the whole exchange (connect, TLS handshake, status line, headers, body) and whose answer
is capped, so a server that drips or floods holds a refresh no longer than its deadline. Redirects are not followed:
they would carry the bearer token elsewhere. No message quotes the token, even where the server echoes it. TLS
trusts what requests does (its CA bundle, or the one ``REQUESTS_CA_BUNDLE`` names), as google-auth's token requests
do: ``requests`` and ``google.auth`` are imported with the first query.
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
from extender.errors import bounded, redacted, secret_forms
from extender.plugins.nodeload.answers import error_text

if TYPE_CHECKING:
    import ssl

    from google.auth.credentials import Credentials

    from extender.outbound import Endpoint

# Largest answer read: a series of Cloud Monitoring's node metrics is about 300 bytes, so 5,000 nodes take 1.5 MB.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# Read-only access to Cloud Monitoring, what roles/monitoring.viewer grants.
MONITORING_READ = "https://www.googleapis.com/auth/monitoring.read"
# Connections kept open between refreshes (a refresh asks its metrics at once, on as many connections).
_KEPT_CONNECTIONS = 4


class QueryError(Exception):
    """The query got no usable answer; the message says why, for the refresh's WARNING (never a token)."""


class Querier(Protocol):
    def query(self, promql: str, seconds: float) -> bytes:
        """The answer's body to ``promql`` within ``seconds``; QueryError when there is none."""
        ...


def source_name(url: str) -> str:
    """What messages call the API at ``url``: Cloud Monitoring answers PromQL too, and a log line about it says so."""
    return "Cloud Monitoring" if urlsplit(url).hostname == "monitoring.googleapis.com" else "Prometheus"


class Prometheus:
    """The Prometheus HTTP API at ``url`` (its base, without ``/api/v1``), with ``auth`` if any.

    Thread-safe: one endpoint, and its kept connections, serves the queries of every refresh. It is made with the
    first query, in the serving process (gunicorn forks its worker before any); a process forked after that leaves
    the kept connections to its parent.
    """

    def __init__(self, url: str, auth: GoogleAuth | None = None) -> None:
        self.url = url
        self.auth = auth
        self._endpoint: Endpoint | None = None
        self._making = threading.Lock()
        _LIVE.add(self)

    def __repr__(self) -> str:
        return f"Prometheus({self.url!r}, auth={'google' if self.auth else 'none'})"

    def query(self, promql: str, seconds: float) -> bytes:
        from extender import outbound

        until = time.monotonic() + seconds
        headers = {"Accept": "application/json"}
        token = None
        if self.auth is not None:
            headers["Authorization"] = self.auth.authorization(seconds)
            token = headers["Authorization"].removeprefix("Bearer ")
        target = "/api/v1/query?" + urlencode({"query": promql, "timeout": f"{max(seconds, 0.001):.3f}"})
        try:
            answer = self._endpoint_made().call("GET", target, until=until, max_bytes=MAX_ANSWER_BYTES, headers=headers)
        except outbound.TimedOut:
            raise QueryError(f"no answer within {seconds:.1f} s") from None
        except outbound.TooLarge:
            raise QueryError(f"the answer is larger than {MAX_ANSWER_BYTES} bytes: not read") from None
        except outbound.Unreachable as exc:
            raise QueryError(redacted(f"cannot reach {self.url}: {exc}", token)) from None
        except outbound.BrokenAnswer as exc:
            raise QueryError(redacted(f"{self.url} gave a broken HTTP answer: {exc}", token)) from None
        if answer.status != 200:
            why = f"{self.url} answered {answer.status} {bounded(answer.reason, 200)}: {_why(answer.body)}"
            raise QueryError(redacted(why, token))
        if token and _quotes(answer.body, token):
            # Whatever is read from it may end up in a message: its values, Prometheus' warnings.
            raise QueryError(f"{self.url} answered with the request's bearer token in its body: not used")
        return bytes(answer.body)

    def _endpoint_made(self) -> Endpoint:
        """The endpoint, made with the first query: a failure to make it (an unreadable CA bundle) fails the query,
        and the next one tries again."""
        with self._making:
            if self._endpoint is None:
                from extender import outbound

                context = _trusted(self.url) if self.url.startswith("https:") else None
                user_agent = {"User-Agent": f"gcf-scheduler-extender/{__version__}"}
                self._endpoint = outbound.Endpoint(self.url, context, user_agent, idle=_KEPT_CONNECTIONS)
            return self._endpoint

    def _after_fork_in_child(self) -> None:
        self._making = threading.Lock()
        if self._endpoint is not None:
            self._endpoint.forget_connections()


def _trusted(url: str) -> ssl.SSLContext:
    """What requests trusts for ``url``: the bundle ``REQUESTS_CA_BUNDLE`` (else ``CURL_CA_BUNDLE``) names, else its own
    (certifi's). google-auth's token requests, made with requests, trust the same."""
    import ssl

    import certifi
    import requests

    verify = requests.Session().merge_environment_settings(url, {}, None, True, None)["verify"]
    # A path the environment names, else requests' own bundle (certifi's).
    bundle: str = verify if isinstance(verify, str) else certifi.where()
    try:
        if os.path.isdir(bundle):
            return ssl.create_default_context(capath=bundle)
        return ssl.create_default_context(cafile=bundle)
    except OSError as exc:  # ssl.SSLError included
        raise QueryError(
            f"the CA bundle {bundle} (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) cannot be loaded: {exc}"
        ) from None


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

    def authorization(self, seconds: float) -> str:
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
            return f"Bearer {credentials.token}"
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
            self._finding.start()
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
