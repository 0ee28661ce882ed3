"""A caller token in a log, in every form a reader could recognise it: whole, any 16-character piece of it,
percent-encoded (either case of hex digits) and base64-encoded (either alphabet).

Every test's log records are looked through for every token the test configured (``tests/conftest.py``: the
fixtures that start the function register the tokens of its environment, ``watch`` any other), and every served
function's output for the tokens of its environment. A token string used against a function that was not given it
is no secret of that function, and may be logged.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable

import orjson

PIECE = 16
TOKEN_VARIABLES = ("EXTENDER_CALLER_TOKEN", "EXTENDER_CALLER_TOKEN_PREVIOUS")

WATCHED: set[str] = set()


def watch(*tokens: str) -> None:
    WATCHED.update(token.strip() for token in tokens if token and token.strip())


def watch_environment(environment: dict[str, str]) -> None:
    watch(*(environment.get(name, "") for name in TOKEN_VARIABLES))


def forms(token: str) -> dict[str, str]:
    """What to look for, by what it is."""
    found = {f"piece {at}": token[at : at + PIECE] for at in range(len(token) - PIECE + 1)}
    raw = token.encode()
    found["percent-encoded"] = "".join(f"%{byte:02X}" for byte in raw)
    found["percent-encoded, lower case"] = found["percent-encoded"].lower()
    found["base64"] = base64.b64encode(raw).decode().rstrip("=")
    found["base64, URL-safe"] = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return found


def leaks(text: str, tokens: Iterable[str] | None = None) -> list[str]:
    """Each form of each token that ``text`` holds."""
    return [
        f"{what} of a {len(token)}-character token"
        for token in (WATCHED if tokens is None else tokens)
        for what, form in forms(token).items()
        if form in text
    ]


def assert_no_leak(text: str, where: str, tokens: Iterable[str] | None = None) -> None:
    found = leaks(text, tokens)
    assert not found, f"{where} holds a caller token: {', '.join(found[:5])}"


def record_text(record: logging.LogRecord) -> str:
    """Everything a handler could write of ``record``."""
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 — as logging: args that do not fit, or whose str() fails, are printed as is
        message = f"{record.msg!s} {record.args!r}"
    fields = getattr(record, "json_fields", None)
    parts = [message, orjson.dumps(fields, default=str).decode() if fields else ""]
    if record.exc_info:
        parts.append(logging.Formatter().formatException(record.exc_info))
    parts += [record.exc_text or "", record.stack_info or ""]
    return "\n".join(parts)


class RecordKeeper(logging.Handler):
    """Keeps every record that reaches it, as a handler of the root logger would write it."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record_text(record))
