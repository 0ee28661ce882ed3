"""The caller token reaches no log line, whoever writes it.

The token is a segment of every path the scheduler sends, and much can quote
a path or what a caller chose: gunicorn's ``Invalid request from ip=...``
lines quote the request line, an error quotes a path segment, a node name is
whatever the body says, an exception's text is anyone's. So every record the
loggers of the served function create (the package's, Flask's, werkzeug's,
gunicorn's error and access logs) passes ``RedactTokens`` before any handler
sees it: every string it carries (the message, the JSON fields, exception and
stack text) is rewritten. A run of characters that URLs, percent-encoding and
base64 are made of which holds ``PIECE`` or more of a token's characters in
order (in any case), also after percent-decoding (at any depth), or a token's
base64 encoding (at any of the three alignments it can have inside longer
data, in either alphabet), is replaced whole by ``REDACTED``.

A filter on the loggers, not on handlers: it rewrites a record once, before
whichever handlers take it (Cloud Logging's, a terminal's, a test's capture),
and gunicorn's handler setup (at start and on reload) leaves it in place.

Looking is cheap: every piece of a token (or of its base64 forms) contains
one of a few short anchors, looked for at C speed; only a string holding an
anchor is read run by run.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

import orjson

from extender.errors import secret_forms

REDACTED = "<redacted>"
# Characters of a token in order that count as a piece of it. Tokens have at least 16.
PIECE = 12
_ANCHOR = 8
# Every logger a served function's records are created on. The package logs through "extender" (which is also the
# name of Flask's logger for the functions-framework target "extender") and "extender.decision".
SERVED_LOGGERS = ("extender", "extender.decision", "werkzeug", "gunicorn.error", "gunicorn.access")
# The characters of URLs (unreserved and "/"), percent-encoding and both base64 alphabets: a token in any of these
# forms sits inside one run of them.
_RUN = re.compile(r"[A-Za-z0-9._~+/=%-]+")
_PERCENT_DEPTH = 4


class Redactor:
    """Finds the pieces of ``tokens`` in text and redacts the runs that hold them."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self._pieces: set[str] = set()
        self._b64_forms: set[str] = set()
        anchors: set[str] = set()
        for token in tokens:
            folded = token.lower()
            self._pieces |= {folded[at : at + PIECE] for at in range(len(folded) - PIECE + 1)}
            anchors |= _anchors(folded)
            self._b64_forms |= {
                form for encoded in secret_forms(token)[1:] for form in (encoded, _url_safe(encoded))
            }
        self._anchors = tuple(anchors)
        # Any string that holds a base64 form holds its middle.
        self._b64_anchors = tuple({form[len(form) // 2 - _ANCHOR // 2 :][:_ANCHOR] for form in self._b64_forms})

    def __repr__(self) -> str:
        return "Redactor(<tokens>)"

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def may_hold(self, text: str) -> bool:
        """False when ``text`` certainly holds no piece of a token (the common case, decided at C speed)."""
        folded = text.lower()
        if any(anchor in folded for anchor in self._anchors) or any(anchor in text for anchor in self._b64_anchors):
            return True
        return "%" in text and any(anchor in _percent_decoded(text) for anchor in self._anchors)

    def redact(self, text: str) -> str:
        if not self.may_hold(text):
            return text
        return _RUN.sub(lambda run: REDACTED if self._holds(run.group()) else run.group(), text)

    def redact_fields(self, value: Any) -> Any:
        """``value`` (JSON fields: dicts, lists, strings, numbers) with every string and key redacted; ``value``
        itself when it holds nothing to redact, else a copy: the caller's objects are never changed."""
        if not self.may_hold(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()):
            return value
        return self._copy_redacted(value)

    def _copy_redacted(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self._copy_redacted(key): self._copy_redacted(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._copy_redacted(item) for item in value]
        return value

    def _holds(self, run: str) -> bool:
        if len(run) < PIECE:
            return False
        views = [run.lower()]
        if "%" in run:
            views.append(_percent_decoded(run))
        for view in views:
            if any(view[at : at + PIECE] in self._pieces for at in range(len(view) - PIECE + 1)):
                return True
        return any(form in run for form in self._b64_forms)


class RedactTokens(logging.Filter):
    """Rewrites a record's strings with ``Redactor.redact``; never drops a record."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = self.redactor
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 — a logging filter: args that do not fit, or whose str() fails, are printed as is
            message = f"{record.msg!s} {record.args!r}"
        redacted = redactor.redact(message)
        if redacted is not message:
            record.msg, record.args = redacted, None
        fields = getattr(record, "json_fields", None)
        if fields:
            record.json_fields = redactor.redact_fields(fields)
        if record.exc_info:
            # Formatted here, so that no handler formats the exception (and its message) again unredacted.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.redact(record.stack_info)
        return True


def redact_tokens_in_logs(tokens: Iterable[str]) -> None:
    """Put a ``RedactTokens`` for ``tokens`` on every logger of ``SERVED_LOGGERS``, in place of one put there
    before; with no token, take it away."""
    redactor = Redactor([token for token in tokens if token])
    for name in SERVED_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, RedactTokens)]:
            logger.removeFilter(old)
        if redactor:
            logger.addFilter(RedactTokens(redactor))


def _anchors(text: str) -> set[str]:
    """Substrings of ``text`` such that every ``PIECE``-long substring of it contains one."""
    step = PIECE - _ANCHOR + 1
    return {text[at : at + _ANCHOR] for at in range(0, len(text) - _ANCHOR + 1, step)}


def _url_safe(encoded: str) -> str:
    return encoded.replace("+", "-").replace("/", "_")


def _percent_decoded(text: str) -> str:
    """``text`` percent-decoded until nothing changes (at most ``_PERCENT_DEPTH`` times), in lower case."""
    for _ in range(_PERCENT_DEPTH):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return text.lower()
