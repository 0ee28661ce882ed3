"""Errors with a message meant for people: start-up settings, and requests answered with a 4xx."""

from __future__ import annotations

# Messages quote what the caller sent (a node name, a path segment), which may be megabytes: an error names the
# problem, it does not repeat the input. The cap also keeps each decision log entry small.
MAX_MESSAGE_CHARS = 2048


class ConfigError(ValueError):
    """A setting the function cannot start with; the message names the variable and what is wrong."""


class RequestError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        message = bounded(message)
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def bounded(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message) - limit} more characters)"
