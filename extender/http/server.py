"""Where the function's server comes from: functions-framework builds it, with ``extender.http.server_limits``.

``functions-framework --target extender`` (how Cloud Functions, the README and
the tests serve the function) loads main.py and then builds its server, in
the same process (gunicorn's master, before it forks the worker), with
options of its own that a function cannot change. So ``install`` (called by
``start()`` while main.py loads) has it build the server through
``DefendedHTTPServer``, which serves with ``DefendedServer`` where
functions-framework would serve with its plain gunicorn application.
functions-framework's development server (``--debug``) is left as it is.

gunicorn is imported only when the server is built, as functions-framework
does: importing main.py elsewhere (tests, tools) does not pay for it.
"""

from __future__ import annotations

from typing import Any

import functions_framework._http as functions_framework_http


class DefendedHTTPServer(functions_framework_http.HTTPServer):
    def __init__(self, app: Any, debug: bool, **options: Any) -> None:
        super().__init__(app, debug, **options)
        from functions_framework._http.gunicorn import GunicornApplication

        if self.server_class is GunicornApplication:
            from extender.http.server_limits import DefendedServer

            self.server_class = DefendedServer


def install() -> None:
    """Make functions-framework build its servers as ``DefendedHTTPServer`` in this process (idempotent)."""
    functions_framework_http.HTTPServer = DefendedHTTPServer  # type: ignore[misc]  # replacing the class is the point
