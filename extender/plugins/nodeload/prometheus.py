"""Instant queries over the Prometheus HTTP API (``GET <url>/api/v1/query``): a self-run Prometheus, or Cloud
Monitoring's (Google Cloud Managed Service for Prometheus) with the function's own Google identity.

Every query has a deadline for the whole call, answer included, and a cap on the answer's size: Prometheus is
trusted with the load figures, not with this process (``extender.bounded_read``). Redirects are not followed:
they would carry the bearer token elsewhere. ``requests`` and ``google.auth`` are imported with the first query.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from extender import __version__
from extender.plugins.nodeload.answers import error_text

if TYPE_CHECKING:
    import requests
    from google.auth.credentials import Credentials

# Largest answer read: a series of Cloud Monitoring's node metrics is about 300 bytes, so 5,000 nodes take 1.5 MB.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# Read-only access to Cloud Monitoring, what roles/monitoring.viewer grants.
MONITORING_READ = "https://www.googleapis.com/auth/monitoring.read"


class QueryError(Exception):
    """The query got no usable answer; the message says why, for the refresh's WARNING (never a token)."""


class Querier(Protocol):
    def query(self, promql: str, seconds: float) -> bytes:
        """The answer's body to ``promql`` within ``seconds``; QueryError when there is none."""
        ...


class Prometheus:
    """The Prometheus HTTP API at ``url`` (its base, without ``/api/v1``), with ``auth`` if any.

    Thread-safe: one pooled session serves the queries of every refresh.
    """

    def __init__(self, url: str, auth: GoogleAuth | None = None) -> None:
        self.url = url
        self.auth = auth
        self._session: requests.Session | None = None

    def __repr__(self) -> str:
        return f"Prometheus({self.url!r}, auth={'google' if self.auth else 'none'})"

    def query(self, promql: str, seconds: float) -> bytes:
        import requests

        from extender.bounded_read import AnswerTooLarge, read_within
        from extender.urls import failure_cause

        deadline = time.monotonic() + seconds
        headers = {"Accept": "application/json"}
        if self.auth is not None:
            headers["Authorization"] = self.auth.authorization(seconds)
        params = {"query": promql, "timeout": f"{max(seconds, 0.001):.3f}"}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise QueryError(f"no answer within {seconds:.1f} s")
        try:
            response = self._sessions().get(
                f"{self.url}/api/v1/query",
                params=params,
                headers=headers,
                timeout=remaining,
                allow_redirects=False,
                stream=True,
            )
            with response:
                body = read_within(response, deadline - time.monotonic(), MAX_ANSWER_BYTES)
        except requests.Timeout:
            raise QueryError(f"no answer within {seconds:.1f} s") from None
        except AnswerTooLarge as exc:
            raise QueryError(f"the answer is larger than {exc.limit} bytes: not read") from None
        except requests.RequestException as exc:
            raise QueryError(f"cannot reach {self.url}: {failure_cause(exc)}") from None
        if response.status_code != 200:
            raise QueryError(f"{self.url} answered {response.status_code} {response.reason or ''}: {_why(body)}")
        return body

    def _sessions(self) -> requests.Session:
        """Made with the first query (in the serving process, after gunicorn forked it); two metrics' first queries
        may both make one, and one is then dropped."""
        if self._session is None:
            import requests

            session = requests.Session()
            session.headers["User-Agent"] = f"gcf-scheduler-extender/{__version__}"
            # No retries: a retry would break the deadline; the next refresh asks again.
            pooled = requests.adapters.HTTPAdapter(pool_maxsize=4, max_retries=0)
            session.mount("https://", pooled)
            session.mount("http://", pooled)
            self._session = session
        return self._session


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
            credentials = self._credentials or self._find(deadline - time.monotonic())
            if not credentials.valid:
                credentials.refresh(_token_request(max(0.001, deadline - time.monotonic())))
            return f"Bearer {credentials.token}"
        except google.auth.exceptions.GoogleAuthError as exc:
            raise QueryError(f"no Google access token: {type(exc).__name__}: {exc}") from None
        finally:
            self._lock.release()

    def _find(self, seconds: float) -> Credentials:
        """Application default credentials, looked for on a thread of their own (under ``_lock``)."""
        if self._finding is None:
            self._found = None
            self._finding = threading.Thread(target=self._look, name="nodeload-credentials", daemon=True)
            self._finding.start()
        self._finding.join(max(0.0, seconds))
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
        except Exception as exc:  # reported by the query that waits for it
            self._found = exc


def _token_request(seconds: float) -> Any:
    """google-auth's transport for refreshing a token, bounded by ``seconds`` (its own default waits two minutes)."""
    import google.auth.transport.requests

    class Bounded(google.auth.transport.requests.Request):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["timeout"] = seconds
            return super().__call__(*args, **kwargs)

    return Bounded()


def _why(body: bytes) -> str:
    """What an error answer says: Prometheus' ``errorType: error``, else the start of the body."""
    try:
        return error_text(orjson.loads(body))
    except orjson.JSONDecodeError:
        return body[:200].decode(errors="replace").strip() or "(no body)"
