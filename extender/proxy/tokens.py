"""Google ID tokens for one audience, cached and refreshed ahead of expiry.

Credentials come from google-auth's chain for ID tokens: the service-account
(or impersonated service-account) key file named by
``GOOGLE_APPLICATION_CREDENTIALS``, else the metadata server (GKE Workload
Identity, Compute Engine). User credentials from ``gcloud auth
application-default login`` cannot mint ID tokens for another audience.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import google.auth.exceptions
import google.auth.jwt
import google.auth.transport.requests
import google.oauth2.id_token

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

logger = logging.getLogger("extender.proxy")

# Google ID tokens live an hour; renewing 5 minutes early keeps every forwarded call on a token with time to spare.
REFRESH_MARGIN_SECONDS = 300.0


class IdTokenSource:
    def __init__(
        self,
        audience: str,
        refresh_margin: float = REFRESH_MARGIN_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.audience = audience
        self._margin = refresh_margin
        self._clock = clock
        self._request = google.auth.transport.requests.Request()
        self._credentials: Credentials | None = None
        self._token: str | None = None
        self._expires_at = 0.0
        # One refresh at a time; concurrent callers wait for it instead of minting tokens of their own.
        self._lock = threading.Lock()

    def token(self) -> str:
        """A token valid for at least the refresh margin, or the old one while it lasts if renewing fails."""
        with self._lock:
            now = self._clock()
            current = self._token
            if current is not None and now < self._expires_at - self._margin:
                return current
            try:
                return self._refresh()
            except google.auth.exceptions.GoogleAuthError as exc:
                if current is None or now >= self._expires_at:
                    raise
                logger.warning(
                    "renewing the ID token for %s failed, the current one lasts %.0f s more: %s",
                    self.audience,
                    self._expires_at - now,
                    exc,
                )
                return current

    def _refresh(self) -> str:
        if self._credentials is None:
            self._credentials = google.oauth2.id_token.fetch_id_token_credentials(self.audience, request=self._request)
        self._credentials.refresh(self._request)
        token = self._credentials.token
        if not isinstance(token, str) or not token:
            raise google.auth.exceptions.RefreshError(f"the credentials gave no ID token for {self.audience}")
        # The token's own claim, whatever kind of credentials minted it.
        self._expires_at = float(google.auth.jwt.decode(token, verify=False)["exp"])
        self._token = token
        return token
