"""Work that waits until an answer is sent, off the path the scheduler waits on.

The WSGI server closes a response once it has written it; callbacks given to
``Response.call_on_close`` run then, on the thread that served the request.
A cold instance's first answer is what the scheduler waits for longest, so
start-up work that answer does not need (importing ctypes to tune the
allocator, Cloud Logging's client) runs after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import flask

_after_first: list[Callable[[], object]] = []
_lock = threading.Lock()


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


def after_first_answer(callback: Callable[[], object]) -> None:
    """Call ``callback`` once the next answer this process gives (``answered``) is sent."""
    with _lock:
        _after_first.append(callback)


def answered(response: flask.Response) -> None:
    """Hand the work waiting for an answer to ``response``: each callback runs once, after the first answer."""
    if not _after_first:
        return
    with _lock:
        waiting = _after_first[:]
        _after_first.clear()
    for callback in waiting:
        response.call_on_close(callback)
