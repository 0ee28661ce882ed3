"""Where log entries go: structured JSON for Cloud Logging on Google Cloud, readable lines elsewhere.

Importing google-cloud-logging about doubles the function's start-up time, so
only instances on Google Cloud, whose entries need its severity, JSON payload
and trace correlation, import it, and only once their first answer has been
sent (``extender.logs.deferred``); local runs and tools never pay for it.
"""

from __future__ import annotations

import logging
from typing import Any, TextIO

import orjson

from extender.settings import Settings

# The package's loggers ("extender", "extender.decision", ...) log from INFO up.
LOGGER = "extender"

_installed: logging.Handler | None = None


def setup_logging(stream: TextIO | None = None, settings: Settings | None = None) -> None:
    """Install on the root logger the handler for where the instance runs, as ``settings`` (the environment's when
    None) tell; it writes to stderr unless ``stream``.

    Calling it again replaces the handler it installed before. Elsewhere than on
    Google Cloud, a root logger that already has handlers (pytest, a host
    application) is left as it is unless ``stream`` is given.
    """
    global _installed
    root = logging.getLogger()
    if _installed is not None:
        root.removeHandler(_installed)
        _installed = None
    logging.getLogger(LOGGER).setLevel(logging.INFO)
    settings = Settings.from_environment() if settings is None else settings
    handler: logging.Handler
    if settings.on_google_cloud:
        from extender.logs.deferred import DeferredCloudHandler

        project = settings.project
        handler = DeferredCloudHandler(lambda: _structured_handler(stream, project), _put_in_place)
        # Cloud Run turns every output line into an entry: a second root handler (functions-framework installs one
        # with LOG_EXECUTION_ID) would write each entry twice, once without its JSON fields.
        for other in list(root.handlers):
            root.removeHandler(other)
    elif stream is not None or not root.handlers:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(PlainFormatter())
    else:
        return
    root.addHandler(handler)
    _installed = handler


def _structured_handler(stream: TextIO | None, project: str | None) -> logging.Handler:
    from extender.logs.cloud import structured_handler

    return structured_handler(stream, project)


def _put_in_place(handler: logging.Handler) -> None:
    """Cloud Logging's handler is ready: it replaces the one holding entries for it, unless set up again since."""
    global _installed
    root = logging.getLogger()
    if _installed is not None and getattr(_installed, "target", None) is handler:
        root.removeHandler(_installed)
        root.addHandler(handler)
        _installed = handler


class PlainFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...``: structured fields stay greppable on a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields: dict[str, Any] = getattr(record, "json_fields", None) or {}
        return line + "".join(f" {key}={_plain(value)}" for key, value in fields.items())


def _plain(value: Any) -> str:
    if isinstance(value, str) and value and not any(char.isspace() or char in '"=' for char in value):
        return value
    return orjson.dumps(value).decode()
