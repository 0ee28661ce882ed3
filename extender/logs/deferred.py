"""Cloud Logging's handler, imported off the path to a cold instance's first answer.

google-cloud-logging pulls in gRPC, protobuf and google-auth: about 0.2 s of
importing, as long as the rest of start-up together. So on Google Cloud the
entries wait here until the answer of the first request that logged one (the
first decision) has been sent, ``HOLD_SECONDS`` after the first entry, or a
``flush()`` (``logging.shutdown`` calls it at exit), whichever comes first:
an import under way would hold the interpreter lock while that answer is
still being written. A background thread then imports the library, writes the held
entries in order, each within the trace of the request that logged it, and
puts the library's handler in this one's place.

gunicorn forks its worker right after loading the function, and a module
half-imported by another thread would stay broken in the child. So a fork
waits for an import under way; one not yet begun is left to the child, which
takes the held entries along (the parent forgets them: each is written once).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable

import flask

from extender.http.after_answer import after_this_answer

# Longest an entry waits for the import when no request comes.
HOLD_SECONDS = 2.0
# Entries held at most; start-up logs a handful, so more would mean a burst before any request: the oldest go.
MAX_HELD = 1000
# The request headers Cloud Logging reads a request's trace from.
TRACE_HEADERS = ("traceparent", "X-Cloud-Trace-Context")
# Longest ``flush()`` waits for the import.
FLUSH_SECONDS = 10.0


class DeferredCloudHandler(logging.Handler):
    """Holds entries until ``make_target`` (which imports the library) has built the handler that writes them.

    ``on_ready`` is called with that handler once every held entry went to it, to install it in this one's place.
    """

    def __init__(self, make_target: Callable[[], logging.Handler], on_ready: Callable[[logging.Handler], None]) -> None:
        super().__init__()
        self._make_target = make_target
        self._on_ready = on_ready
        self.target: logging.Handler | None = None
        self._held: list[logging.LogRecord] = []
        self._reset_threads()
        _LIVE.add(self)

    def _reset_threads(self) -> None:
        self._state = threading.Lock()
        self._due = threading.Event()
        self._importer: threading.Thread | None = None
        self._importing = False  # the import began: a fork must wait for it
        self._cancelled = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            in_request = flask.has_request_context()
            if in_request:
                headers = flask.request.headers
                record.held_headers = {name: headers[name] for name in TRACE_HEADERS if name in headers}
            # Held entries are written later: their message must not change with the objects it names.
            record.msg, record.args = record.getMessage(), None
        except Exception:  # noqa: BLE001 — a logging handler: the standard library's handleError reports anything
            self.handleError(record)
            return
        with self._state:
            target = self.target
            if target is None:
                self._held.append(record)
                del self._held[:-MAX_HELD]
                self._start_importer()
        if target is None:
            if in_request:
                after_this_answer(self._due.set)
            return
        target.handle(record)  # an entry that raced the hand-over

    def flush(self) -> None:
        """Write the held entries now, importing the library if that has not happened yet."""
        with self._state:
            if self.target is None and self._held:
                self._start_importer()
                self._due.set()
            importer = self._importer
        if importer is not None:
            importer.join(FLUSH_SECONDS)
        if self.target is not None:
            self.target.flush()

    def _start_importer(self) -> None:
        """With ``_state`` held."""
        if self._importer is None:
            self._importer = threading.Thread(target=self._import_when_due, name="extender-cloud-logging", daemon=True)
            try:
                self._importer.start()
            except RuntimeError:
                # No thread to spare: the entries stay held until one starts. Not warned about: the warning would come
                # back to this handler, whose lock is held here.
                self._importer = None

    def _import_when_due(self) -> None:
        self._due.wait(HOLD_SECONDS)
        with self._state:
            if self._cancelled:
                return
            self._importing = True
        try:
            target = self._make_target()
        except Exception as exc:  # noqa: BLE001 — a broken install (any error) must not swallow the held entries
            target = logging.StreamHandler()
            target.handle(
                logging.makeLogRecord(
                    {
                        "name": __name__,
                        "levelno": logging.ERROR,
                        "levelname": "ERROR",
                        "msg": f"google-cloud-logging unavailable: {exc!r}",
                    }
                )
            )
        self._hand_over(target)

    def _hand_over(self, target: logging.Handler) -> None:
        while True:
            with self._state:
                batch, self._held = self._held, []
                if not batch:
                    self.target = target
                    break
            for record in batch:
                _write(target, record)
        self._on_ready(target)

    def _before_fork(self) -> None:
        with self._state:
            importer = self._importer
            if importer is not None and not self._importing:
                self._cancelled = True  # the child imports, if it has entries to write
                self._due.set()
        if importer is not None:
            importer.join()

    def _after_fork_in_parent(self) -> None:
        if self.target is None:
            self._held = []  # the child writes them
            self._reset_threads()

    def _after_fork_in_child(self) -> None:
        self._reset_threads()
        if self.target is None and self._held:
            self._start_importer()


def _write(target: logging.Handler, record: logging.LogRecord) -> None:
    """Write a held entry as it would have been written at once: within its request, for the trace."""
    headers = getattr(record, "held_headers", None)
    if not headers:
        target.handle(record)
        return
    with _trace_app().test_request_context(headers=headers):
        target.handle(record)


_app: flask.Flask | None = None


def _trace_app() -> flask.Flask:
    global _app
    if _app is None:
        _app = flask.Flask(__name__)
    return _app


_LIVE: weakref.WeakSet[DeferredCloudHandler] = weakref.WeakSet()


def _for_each(method: Callable[[DeferredCloudHandler], None]) -> Callable[[], None]:
    def run() -> None:
        for handler in list(_LIVE):
            method(handler)

    return run


os.register_at_fork(
    before=_for_each(DeferredCloudHandler._before_fork),
    after_in_parent=_for_each(DeferredCloudHandler._after_fork_in_parent),
    after_in_child=_for_each(DeferredCloudHandler._after_fork_in_child),
)
