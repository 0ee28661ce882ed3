"""Large requests served at once wait for room in the body budget; one alone always goes ahead; a long wait is a 503."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from extender.errors import RequestError
from extender.http.body_budget import BodyBudget
from tests.recordings import exchanges

FILTER = next(exchange for exchange in exchanges() if exchange.verb == "filter")


def hold(budget: BodyBudget, size: int) -> tuple[threading.Event, threading.Thread]:
    """A request holding ``size`` bytes of the budget until the returned event is set."""
    admitted, release = threading.Event(), threading.Event()

    def serve() -> None:
        with budget.hold(wait_seconds=5) as holding:
            holding.take(size)
            admitted.set()
            release.wait(5)

    thread = threading.Thread(target=serve)
    thread.start()
    assert admitted.wait(5)
    return release, thread


def test_requests_within_the_budget_go_ahead_together():
    budget = BodyBudget(100)
    release, thread = hold(budget, 60)
    with budget.hold(wait_seconds=0) as holding:
        holding.take(40)  # 100 in flight: within the budget, no wait
    release.set()
    thread.join()


def test_a_request_past_the_budget_waits_for_an_earlier_one_to_finish():
    budget = BodyBudget(100)
    release, thread = hold(budget, 60)
    threading.Timer(0.2, release.set).start()
    started = time.monotonic()
    with budget.hold(wait_seconds=5) as holding:
        holding.take(60)
        waited = time.monotonic() - started
    thread.join()
    assert 0.15 < waited < 4


def test_one_request_alone_goes_ahead_whatever_its_size():
    with BodyBudget(100).hold(wait_seconds=0) as holding:
        holding.take(10_000)


def test_the_oldest_request_never_waits_so_growing_requests_cannot_wait_on_each_other():
    budget = BodyBudget(100)
    with budget.hold(wait_seconds=0) as first, budget.hold(wait_seconds=0.05) as second:
        first.take(50)
        second.take(50)
        first.take(1_000)  # the oldest goes ahead past the budget
        with pytest.raises(RequestError):
            second.take(1)  # the younger waits for room, and gives up after its wait


def test_bytes_are_charged_as_they_arrive_not_as_declared():
    """A request that has sent little holds little, whatever it will send: others still fit beside it."""
    budget = BodyBudget(100)
    release, thread = hold(budget, 10)  # a slow upload, 10 bytes in so far
    with budget.hold(wait_seconds=0) as holding:
        holding.take(90)
    release.set()
    thread.join()


def test_no_room_within_the_wait_is_a_503_that_names_the_setting():
    budget = BodyBudget(100)
    release, thread = hold(budget, 60)
    with pytest.raises(RequestError) as raised, budget.hold(wait_seconds=0.05) as holding:
        holding.take(60)
    release.set()
    thread.join()
    assert raised.value.status == 503
    assert "1 other request(s) with 60 bytes of body in flight" in raised.value.message
    assert "EXTENDER_MAX_BODY_BYTES_IN_FLIGHT (100)" in raised.value.message
    with budget.hold(wait_seconds=0) as holding:  # the room is back once the other finished
        holding.take(60)


def test_the_function_answers_a_busy_request_with_json_and_then_serves_again(client_factory):
    client = client_factory(EXTENDER_MAX_BODY_BYTES_IN_FLIGHT=str(len(FILTER.body)), EXTENDER_HTTP_TIMEOUT="100ms")
    extender = sys.modules["main"]._extender
    release, thread = hold(extender.budget, len(FILTER.body))
    busy = client.post("/filter", data=FILTER.body, content_type="application/json")
    release.set()
    thread.join()
    assert busy.status_code == 503 and "busy: 1 other request(s)" in busy.get_json()["Error"]
    assert client.post("/filter", data=FILTER.body, content_type="application/json").status_code == 200


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_an_invalid_budget_stops_start_up(client_factory, value):
    with pytest.raises(SystemExit, match="EXTENDER_MAX_BODY_BYTES_IN_FLIGHT must be a positive integer"):
        client_factory(EXTENDER_MAX_BODY_BYTES_IN_FLIGHT=value)

