"""gunicorn's options for a function anyone may reach: what functions-framework leaves off.

functions-framework starts gunicorn with its request line unbounded and its
threaded worker; ``DefendedServer`` is its gunicorn application with:

- ``HeadFirstWorker`` (``extender.http.head_deadline``): a request head must
  arrive within a deadline, and only a complete one takes a serving thread;
- bounds on the request line (8,190 bytes: refused with 414 as soon as it is
  longer; unbounded, gunicorn read an 8 MB line for seconds before answering),
  the number of header fields (64) and each field (8,190 bytes);
- no request header sets the WSGI ``SCRIPT_NAME`` or ``PATH_INFO``
  (``forwarder_headers`` empty): the function is never mounted under a
  prefix, and gunicorn answered a ``SCRIPT_NAME`` the path does not start
  with with a 500.

``extender.http.server`` makes functions-framework build its server as one;
``python -m extender serve`` builds one with TLS.
"""

from __future__ import annotations

from functions_framework._http import gunicorn as functions_framework_gunicorn

# The kube-scheduler's longest request line is its urlPrefix (function name, token, profile) and a verb.
LIMITS = {"limit_request_line": 8190, "limit_request_fields": 64, "limit_request_field_size": 8190}
WORKER = "extender.http.head_deadline.HeadFirstWorker"
# functions-framework's worker with a per-request timeout (THREADED_TIMEOUT_ENABLED), and ours that keeps it.
TIMEOUT_WORKER = "functions_framework._http.gunicorn.GThreadWorkerWithTimeoutSupport"
HEAD_FIRST_TIMEOUT_WORKER = "extender.http.head_deadline.HeadFirstTimeoutWorker"


class DefendedServer(functions_framework_gunicorn.GunicornApplication):
    """functions-framework's gunicorn application with ``LIMITS``, ``WORKER`` and no forwarded path headers."""

    def load_config(self) -> None:
        keeps_timeout = self.options.get("worker_class") == TIMEOUT_WORKER
        self.options.update(LIMITS)
        self.options["worker_class"] = HEAD_FIRST_TIMEOUT_WORKER if keeps_timeout else WORKER
        self.options["forwarder_headers"] = ""
        super().load_config()

