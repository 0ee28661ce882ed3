"""Cloud Logging's structured JSON lines, correlated with the request's trace.

Imported only on Google Cloud (see ``extender.logs``). On Cloud Run, and so on
Cloud Functions (2nd gen), a JSON line on stdout or stderr becomes a log entry:
the library's StructuredLogHandler writes ``severity``, the ``json_fields`` of a
record as ``jsonPayload`` and ``logging.googleapis.com/trace`` from the request's
``traceparent`` or ``X-Cloud-Trace-Context`` header, so every entry of a request
shows under that request in Logs Explorer and Cloud Trace.
"""

from __future__ import annotations

import json
import logging
from typing import Any, TextIO

import orjson
from google.cloud.logging.handlers import StructuredLogHandler


class ExtenderLogHandler(StructuredLogHandler):
    """The library's handler without its ``httpRequest``: the request URL carries the caller token.

    Cloud Run's own request log already records the request; the trace links each entry to it.
    """

    # From Python 3.12 on, a filter answers the record itself (or its replacement); 3.11's answers a bool.
    def filter(self, record: logging.LogRecord) -> bool | logging.LogRecord:  # type: ignore[override]  # as 3.12
        record.http_request = None
        return super().filter(record)


class PayloadEncoder(json.JSONEncoder):
    """The entries' JSON payload encoded by orjson: a decision entry with its nodes' facts takes microseconds, where
    the json module takes a tenth of a millisecond, on every request. What orjson refuses (an integer past 64 bits)
    is encoded as the json module would."""

    def encode(self, o: Any) -> str:
        try:
            return orjson.dumps(o, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            return super().encode(o)


def structured_handler(stream: TextIO | None = None, project: str | None = None) -> logging.Handler:
    """``project``: GOOGLE_CLOUD_PROJECT, which Terraform sets to save the metadata server lookup."""
    # The handler logs its one diagnostic entry through this logger with itself attached; propagating to the root
    # logger, where the handler is too, would write that entry twice.
    logging.getLogger(StructuredLogHandler.__module__).propagate = False
    return ExtenderLogHandler(project_id=project or _default_project(), stream=stream, json_encoder_cls=PayloadEncoder)


def _default_project() -> str | None:
    """The project trace ids belong to (Cloud Logging links ``projects/<project>/traces/<id>`` to the trace), from
    Application Default Credentials when GOOGLE_CLOUD_PROJECT does not name it."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return google.auth.default()[1]
    except DefaultCredentialsError:
        return None
