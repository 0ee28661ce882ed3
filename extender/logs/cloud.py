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

import flask
import orjson
from google.cloud.logging.handlers import CloudLoggingFilter, StructuredLogHandler


class ExtenderLogHandler(StructuredLogHandler):
    """The library's handler, its filter replaced by ``RequestTraceFilter``."""

    def __init__(self, *, project_id: str | None = None, stream: TextIO | None = None) -> None:
        super().__init__(project_id=project_id, stream=stream, json_encoder_cls=PayloadEncoder)
        self.filters = [RequestTraceFilter(project=project_id)]


class RequestTraceFilter(CloudLoggingFilter):
    """The library's filter (the fields its handler's format reads), with two differences:

    - no ``httpRequest``: the request URL carries the caller token (Cloud Run's own request log records the request;
      the trace links each entry to it);
    - the request's trace read once per request, however many entries it logs (a filter request logs its decision
      and an entry per rule that rejected nodes): the library works out the request's data again for every entry,
      its URL built and its headers parsed, a tenth of a millisecond each time;
    - the source location and labels encoded by orjson.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        trace, span, sampled = _request_trace()
        if trace is not None and self.project is not None:
            trace = f"projects/{self.project}/traces/{trace}"
        fields: Any = record  # the library's attributes, set as its filter sets them
        fields._resource = getattr(record, "resource", None)
        fields._trace = getattr(record, "trace", trace) or None
        fields._span_id = getattr(record, "span_id", span) or None
        fields._trace_sampled = bool(getattr(record, "trace_sampled", sampled))
        fields._http_request = None
        fields._source_location = CloudLoggingFilter._infer_source_location(record)
        labels = {"python_logger": record.name} if record.name else {}
        fields._labels = {**labels, **self.default_labels, **getattr(record, "labels", {})} or None
        fields._trace_str = fields._trace or ""
        fields._span_id_str = fields._span_id or ""
        fields._trace_sampled_str = "true" if fields._trace_sampled else "false"
        fields._http_request_str = "{}"
        # As the library's ``json.dumps(..., ensure_ascii=False)``, which makes an encoder on every call.
        fields._source_location_str = orjson.dumps(fields._source_location or {}).decode()
        fields._labels_str = orjson.dumps(fields._labels or {}).decode()
        return True


# Where a request's trace is kept in its application context.
_TRACE = "extender_log_trace"


def _request_trace() -> tuple[str | None, str | None, bool]:
    """The trace id, span id and sampled flag of the request being served (Nones outside one), worked out on its
    first entry as the library's ``get_request_data`` works them out (OpenTelemetry's current span, else the
    ``traceparent`` header, else ``X-Cloud-Trace-Context``, each read by the library's own parser) and kept in the
    request's application context (``flask.g``), which lives as long as the request. ``get_request_data`` would also
    build the request's URL and parse its user agent, for the ``httpRequest`` field these entries leave out: several
    times the cost of the trace, on every request."""
    from google.cloud.logging_v2.handlers import _helpers

    if not flask.has_request_context():
        return None, None, False
    found: tuple[str | None, str | None, bool] | None = flask.g.get(_TRACE)
    if found is None:
        trace, span, sampled = _helpers._retrieve_current_open_telemetry_span()
        if not trace:
            headers = flask.request.headers
            trace, span, sampled = _helpers._parse_trace_parent(headers.get("traceparent"))
            if trace is None:
                trace, span, sampled = _helpers._parse_xcloud_trace(headers.get("X-Cloud-Trace-Context"))
        found = (trace, span, bool(sampled))
        setattr(flask.g, _TRACE, found)
    return found


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
    return ExtenderLogHandler(project_id=project or _default_project(), stream=stream)


def _default_project() -> str | None:
    """The project trace ids belong to (Cloud Logging links ``projects/<project>/traces/<id>`` to the trace), from
    Application Default Credentials when GOOGLE_CLOUD_PROJECT does not name it."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return google.auth.default()[1]
    except DefaultCredentialsError:
        return None
