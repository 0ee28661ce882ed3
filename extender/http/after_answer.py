"""Work that waits until an answer is sent, off the path the scheduler waits on.

The WSGI server closes a response once it has written it; callbacks given to
``Response.call_on_close`` run then, on the thread that served the request.
A cold instance's first answer is what the scheduler waits for longest, so
start-up work that answer does not need (importing Cloud Logging's client)
runs after it, and so does giving memory back after a costly request.
"""

from __future__ import annotations

from collections.abc import Callable

import flask


def after_this_answer(callback: Callable[[], object]) -> None:
    """Call ``callback`` once the current request's answer is sent; at once outside a request. A request context
    that makes no response (a test's) never calls it."""

    def on_response(response: flask.Response) -> flask.Response:
        response.call_on_close(callback)
        return response

    try:
        flask.after_this_request(on_response)
    except RuntimeError:
        callback()
