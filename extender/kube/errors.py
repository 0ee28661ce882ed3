"""The one error the Kubernetes API client raises; importable without the client."""

from __future__ import annotations


class KubeError(Exception):
    """A failed API call; ``code`` is the HTTP status, 0 when the API server did not answer at all."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
