"""The proxy's log lines: one JSON object per line in a pod, readable lines on a terminal.

GKE's logging agent turns a JSON line on a container's stdout or stderr into a
structured entry: ``severity`` becomes the entry's severity and every other key
a ``jsonPayload`` field, which log-based metrics can read (the
``identity_proxy_failures`` metric counts ``jsonPayload.event="extender.proxy"``).
A plain line would only be ``textPayload``.
"""

from __future__ import annotations

import logging

import orjson

JSON, TEXT = "json", "text"


def default_format(in_a_pod: bool) -> str:
    """JSON in a Kubernetes pod (``extender.settings.in_a_pod``), where the logging agent reads it, else text."""
    return JSON if in_a_pod else TEXT


class JsonLineFormatter(logging.Formatter):
    """``{"severity", "message", "logger", **json_fields}`` on one line; a traceback goes into the message."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        fields = getattr(record, "json_fields", None) or {}
        entry = {"severity": record.levelname, "message": message, "logger": record.name, **fields}
        return orjson.dumps(entry, default=str).decode()
