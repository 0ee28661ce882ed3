"""The API stand-in ends a watch as kube-apiserver closes its streams: ``end_watches()`` ends every watch asked for
before it, including one the stand-in has not started streaming yet (held by ``delay`` or ``hang``). Tests that end
the watch an instance is opening then see it end, whenever the request reached the stand-in."""

from __future__ import annotations

import threading
import time

from extender.kube import client_from_settings
from extender.settings import Settings
from testkit.fake_apiserver import FakeApiServer

# Far below the watch's own timeout: a watch that did not end would still be streaming after it.
ENDED_WITHIN = 10.0
WATCH_SECONDS = 300


def test_a_watch_asked_for_before_end_watches_ends_though_it_streams_only_after(apiserver: FakeApiServer) -> None:
    client = client_from_settings(Settings(kubernetes=apiserver.environment()))
    assert client is not None
    apiserver.delay = 0.5  # the watch request waits in the stand-in before its stream starts
    opened = []
    opener = threading.Thread(
        target=lambda: opened.append(client.watch_bound_pods("0", time.monotonic() + ENDED_WITHIN, WATCH_SECONDS))
    )
    opener.start()
    deadline = time.monotonic() + ENDED_WITHIN
    while not any("watch" in request.query for request in apiserver.requests):
        assert time.monotonic() < deadline, "the watch request never reached the stand-in"
        time.sleep(0.01)
    apiserver.end_watches()
    opener.join(ENDED_WITHIN)
    assert opened, "the watch was not opened"
    stream = opened[0]
    try:
        while not stream.ended and time.monotonic() < deadline:
            stream.read(time.monotonic() + 0.1, 64 * 1024)
        assert stream.ended and not stream.broken
    finally:
        stream.close()
