"""Errors that end a request with a 4xx answer whose JSON body names the problem."""

from __future__ import annotations


class RequestError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
