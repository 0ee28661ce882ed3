"""Errors with a message meant for people (start-up settings, requests answered with a 4xx), and what such a
message may not quote: a bearer token a server echoed."""

from __future__ import annotations

import base64
import re

# Messages quote what the caller sent (a node name, a path segment), which may be megabytes: an error names the
# problem, it does not repeat the input. The cap also keeps each decision log entry small.
MAX_MESSAGE_CHARS = 2048
# Pieces of a secret a message may not hold (nor the whole), looked for in each run of the characters of tokens.
_SECRET_PIECE = 16
_SECRET_RUN = re.compile(r"[A-Za-z0-9._~+/=-]+")


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


def redacted(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` (a bearer token) or any piece of it, as sent or base64-encoded: a server may echo
    the request's headers, and a message quoting its answer must not pass them on."""
    if not secret:
        return text
    pieces = {
        form[at : at + _SECRET_PIECE] for form in secret_forms(secret) for at in range(len(form) - _SECRET_PIECE + 1)
    }

    def hide(run: re.Match[str]) -> str:
        found = run.group()
        held = found == secret or any(
            found[at : at + _SECRET_PIECE] in pieces for at in range(len(found) - _SECRET_PIECE + 1)
        )
        return "<redacted>" if held else found

    return _SECRET_RUN.sub(hide, text)


def secret_forms(secret: str) -> list[str]:
    """``secret`` as sent, and base64-encoded at each of the three alignments it can have inside longer encoded data
    (``Bearer <token>`` encoded whole, say): the whole groups of three bytes that every such encoding holds."""
    data = secret.encode()
    whole_groups = (data[skip:][: (len(data) - skip) // 3 * 3] for skip in range(3))
    return [secret, *(base64.b64encode(groups).decode() for groups in whole_groups)]
