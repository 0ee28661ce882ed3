"""Cloud Logging's structured JSON lines, correlated with the request's trace.

Imported only on Google Cloud (see ``extender.logs``). On Cloud Run, and so on
Cloud Functions (2nd gen), a JSON line on stdout or stderr becomes a log entry:
the library's StructuredLogHandler writes ``severity``, the ``json_fields`` of a
record as ``jsonPayload`` and ``logging.googleapis.com/trace`` from the request's
``traceparent`` or ``X-Cloud-Trace-Context`` header, so every entry of a request
shows under that request in Logs Explorer and Cloud Trace.
"""

from __future__ import annotations

import logging
import os
from typing import TextIO

from google.cloud.logging.handlers import StructuredLogHandler

# Named by Terraform to save the metadata server lookup at start-up.
PROJECT_ENV = "GOOGLE_CLOUD_PROJECT"


class ExtenderLogHandler(StructuredLogHandler):
    """The library's handler without its ``httpRequest``: the request URL carries the caller token.

    Cloud Run's own request log already records the request; the trace links each entry to it.
    """

    def filter(self, record: logging.LogRecord) -> bool | logging.LogRecord:
        record.http_request = None
        return super().filter(record)


def structured_handler(stream: TextIO | None = None) -> logging.Handler:
    # The handler logs its one diagnostic entry through this logger with itself attached; propagating to the root
    # logger, where the handler is too, would write that entry twice.
    logging.getLogger(StructuredLogHandler.__module__).propagate = False
    return ExtenderLogHandler(project_id=project_id(), stream=stream)


def project_id() -> str | None:
    """The project trace ids belong to: Cloud Logging links ``projects/<project>/traces/<id>`` to the trace."""
    if os.environ.get(PROJECT_ENV):
        return os.environ[PROJECT_ENV]
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return google.auth.default()[1]
    except DefaultCredentialsError:
        return None
