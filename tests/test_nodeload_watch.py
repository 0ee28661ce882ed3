"""The index of bound pods (extender.kube.bound_pods) against the API stand-in's real LIST and WATCH: what it
counts, how it follows the stream (bindings, deletions, finished pods, status updates that change nothing), and how
it survives the API: a watch that ends, expires (410 Gone), goes silent or is cut; an API that is down; a backlog
larger than a request's budget; and the function's own answers and bindings, assumed at once."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from extender.kube import bound_pods as module
from extender.kube import client_from_settings
from extender.kube.bound_pods import PodWatch, list_bindings
from extender.kube.demand import demand_of
from extender.settings import Settings
from testkit.fake_apiserver import FakeApiServer, pod

HORIZON = 600.0


def watch_on(apiserver: FakeApiServer) -> PodWatch:
    client = client_from_settings(Settings(kubernetes=apiserver.environment()))
    assert client is not None
    return PodWatch(client, HORIZON)


def view(watch: PodWatch, seconds: float = 2.0, exclude: str = "", expecting: bool = False):
    bindings, own = watch.bindings(time.time(), time.monotonic() + seconds, exclude, expecting)
    return bindings, own


def uids(bindings) -> set[str]:
    return set(bindings.uids)


def settled(watch: PodWatch, holds, timeout: float = 3.0):
    """The view once ``holds(uids)``: events take a moment from the API to the stream."""
    return settled_view(watch, lambda bindings: holds(uids(bindings)), timeout)


def settled_view(watch: PodWatch, holds, timeout: float = 3.0):
    """The view once ``holds(view)``: the view tested is the one returned."""
    deadline = time.monotonic() + timeout
    while True:
        bindings = view(watch)[0]
        if holds(bindings) or time.monotonic() > deadline:
            return bindings
        time.sleep(0.02)


def test_it_lists_the_recent_bindings_then_follows_the_watch(apiserver):
    now = time.time()
    apiserver.set_pods(
        [
            pod("recent", "u-recent", "node-a", cpu="400m", bound_at=now - 30),
            pod("old", "u-old", "node-a", cpu="400m", bound_at=now - 2 * HORIZON),  # past the horizon: never counts
            pod("pending", "u-pending", "", cpu="400m"),
        ]
    )
    watch = watch_on(apiserver)
    first, own = view(watch, exclude="u-recent")
    assert first.known and first.problem == "" and uids(first) == {"u-recent"} and own
    [recent] = first.on("node-a")
    assert recent.demand == demand_of(pod("x", "x", "n", cpu="400m")) and abs(recent.bound_at - int(now - 30)) <= 1
    apiserver.bind("default", "pending", "node-b")
    assert uids(settled(watch, lambda found: "u-pending" in found)) == {"u-recent", "u-pending"}
    # A status update that changes nothing counted (the kubelet's) keeps the same view: kept verdicts stay valid.
    same = view(watch)[0]
    apiserver.update_pod("u-pending", lambda item: item["status"].update(phase="Running", podIP="10.0.0.9"))
    time.sleep(0.2)
    assert view(watch)[0] is same
    apiserver.update_pod("u-pending", lambda item: item["status"].update(phase="Succeeded"))
    apiserver.delete_pod("u-recent")
    assert uids(settled(watch, lambda found: not found)) == set()
    assert apiserver.count("GET", "/api/v1/pods") == 2  # one list, one watch


def test_uncached_lists_answer_as_the_watch(apiserver):
    now = time.time()
    apiserver.set_pods([pod(f"p{i}", f"u{i}", f"node-{i % 3}", cpu="100m", bound_at=now - i) for i in range(7)])
    watch = watch_on(apiserver)
    watched = view(watch)[0]
    listed = list_bindings(watch.client, HORIZON, time.time(), time.monotonic() + 2)
    assert listed.by_node == watched.by_node and listed.problem == watched.problem == ""


def test_a_watch_the_server_ends_is_opened_again_from_its_last_resource_version(apiserver):
    watch = watch_on(apiserver)
    view(watch)
    apiserver.end_watches()
    time.sleep(0.1)
    apiserver.add_pod(pod("late", "u-late", "node-a", cpu="100m"))
    assert "u-late" in uids(settled(watch, lambda found: "u-late" in found))
    lists = [r for r in apiserver.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
    assert len(lists) == 1  # no list again: the watch went on from where it was


def test_an_expired_watch_410_gone_lists_again_and_counts_what_happened_meanwhile(apiserver, caplog):
    watch = watch_on(apiserver)
    view(watch)
    apiserver.end_watches()
    apiserver.add_pod(pod("while-away", "u-away", "node-a", cpu="100m"))
    apiserver.compact()  # the watch's resourceVersion is gone
    caplog.set_level(logging.WARNING, "extender.nodeload")
    assert "u-away" in uids(settled(watch, lambda found: "u-away" in found))
    assert any("410 Gone" in record.getMessage() for record in caplog.records)
    lists = [r for r in apiserver.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
    assert len(lists) == 2


def test_a_silent_watch_is_taken_for_dead_and_opened_again(apiserver, monkeypatch):
    monkeypatch.setattr(module, "STALL_SECONDS", 0.3)
    watch = watch_on(apiserver)
    view(watch)
    apiserver.watch_silent = True
    apiserver.add_pod(pod("unseen", "u-unseen", "node-a", cpu="100m"))
    time.sleep(0.4)
    assert "u-unseen" not in uids(view(watch)[0])  # silent: this read finds it stalled and closes it
    apiserver.watch_silent = False
    apiserver.end_watches()
    assert "u-unseen" in uids(settled(watch, lambda found: "u-unseen" in found))
    watches = [r for r in apiserver.requests if r.path == "/api/v1/pods" and "watch" in r.query]
    assert len(watches) >= 2


def test_an_api_that_goes_down_costs_the_in_flight_term_never_an_error(apiserver, caplog, monkeypatch):
    monkeypatch.setattr(module, "RETRY_SECONDS", 0.0)
    apiserver.add_pod(pod("seen", "u-seen", "node-a", cpu="100m"))
    watch = watch_on(apiserver)
    assert uids(settled(watch, lambda found: "u-seen" in found)) == {"u-seen"}
    caplog.set_level(logging.WARNING, "extender.nodeload")
    apiserver.stop()
    started = time.monotonic()
    down, _ = view(watch, seconds=1.0)
    assert time.monotonic() - started < 1.5
    # What it saw still counts; the view says the rest may be missing.
    assert down.known and uids(down) == {"u-seen"}
    # Opened again off the request path: a later request says why it failed.
    deadline = time.monotonic() + 5
    while "counting the pods seen before" not in view(watch, seconds=0.5)[0].problem and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "counting the pods seen before" in view(watch, seconds=0.5)[0].problem
    assert any("bursts are not fully accounted for" in record.getMessage() for record in caplog.records)


def test_an_api_down_from_the_start_is_known_to_know_nothing(test_ca, tmp_path):
    with FakeApiServer.serving(test_ca, tmp_path) as apiserver:
        environment = apiserver.environment()
    client = client_from_settings(Settings(kubernetes=environment))
    assert client is not None
    bindings, _ = PodWatch(client, HORIZON).bindings(time.time(), time.monotonic() + 1.0)
    assert not bindings.known and "listing the pods bound to nodes failed: cannot reach" in bindings.problem


def test_a_backlog_larger_than_the_budget_is_read_on_at_the_next_request(apiserver, monkeypatch):
    watch = watch_on(apiserver)
    view(watch)
    monkeypatch.setattr(module, "_READ_BYTES", 2048)
    for index in range(300):
        apiserver.add_pod(pod(f"b{index}", f"u-b{index}", f"node-{index % 5}", cpu="10m"))
    time.sleep(0.3)
    behind, _ = watch.bindings(time.time(), time.monotonic())  # no time at all: one piece, then the deadline
    assert 0 < len(behind) < 300 and "behind" in behind.problem
    caught_up = view(watch, seconds=5.0)[0]
    assert len(caught_up) == 300 and caught_up.problem == ""


def test_own_bindings_count_at_once_until_the_watch_shows_them(apiserver):
    apiserver.set_pods([pod("mine", "u-mine", "", cpu="200m")])
    watch = watch_on(apiserver)
    view(watch)
    # bindVerb: NodeLoad noted the pod's demand when it judged it, the function bound it: it counts before the watch
    # could say so.
    watch.note_demand("u-mine", demand_of(pod("x", "x", "", cpu="200m")))
    watch.note_binding("u-mine", "node-a")
    assert [p.uid for p in view(watch)[0].on("node-a")] == ["u-mine"]
    apiserver.bind("default", "mine", "node-a")
    shown = settled(watch, lambda found: "u-mine" in found)
    assert [p.uid for p in shown.on("node-a")] == ["u-mine"] and len(shown) == 1


def test_a_bound_pod_that_finished_or_went_never_comes_back_from_the_functions_own_binding_note(apiserver):
    apiserver.set_pods([pod(name, f"u-{name}", "", cpu="200m") for name in ("short", "done")])
    watch = watch_on(apiserver)
    view(watch)
    for name in ("short", "done"):
        watch.note_demand(f"u-{name}", demand_of(pod("x", "x", "", cpu="200m")))
    # The watch shows the binding and the end before the bind verb's note of it is taken.
    apiserver.bind("default", "short", "node-a")
    apiserver.bind("default", "done", "node-a")
    apiserver.delete_pod("u-short")
    apiserver.update_pod("u-done", lambda item: item["status"].update(phase="Succeeded"))
    settled(watch, lambda found: False, timeout=0.5)
    watch.note_binding("u-short", "node-a")
    watch.note_binding("u-done", "node-a")
    assert uids(view(watch)[0]) == set()


def test_a_view_is_updated_not_rebuilt_unchanged_nodes_keep_their_pods_object(apiserver):
    now = time.time()
    apiserver.set_pods([pod(f"p{i}", f"u{i}", f"node-{i % 2}", cpu="10m", bound_at=now - i) for i in range(6)])
    watch = watch_on(apiserver)
    before = view(watch)[0]
    apiserver.add_pod(pod("new", "u-new", "node-0", cpu="10m"))
    after = settled(watch, lambda found: "u-new" in found)
    assert after is not before and after.on("node-1") is before.on("node-1")
    assert after.on("node-0") is not before.on("node-0") and len(after) == 7


def test_the_index_is_capped(apiserver, monkeypatch):
    monkeypatch.setattr(module, "MAX_PODS", 5)
    now = time.time()
    apiserver.set_pods([pod(f"p{i}", f"u{i}", "node-a", cpu="10m", bound_at=now - i) for i in range(8)])
    bindings = view(watch_on(apiserver))[0]
    assert uids(bindings) == {f"u{i}" for i in range(5)}  # the newest
    assert "only the newest are counted" in bindings.problem


@pytest.mark.parametrize("shape", ["garbage", "huge"])
def test_a_watch_line_that_is_not_an_event_breaks_only_the_stream(apiserver, monkeypatch, shape):
    monkeypatch.setattr(module, "MAX_LINE", 4096)
    watch = watch_on(apiserver)
    view(watch)
    stream = watch._stream
    assert stream is not None
    bad = b"not json\n" if shape == "garbage" else b"x" * 10_000
    watch._lines(bad, time.time())
    assert watch._stream is None and "watch" in watch._problem


def test_a_pod_placed_elsewhere_is_waited_for_and_one_that_never_comes_only_up_to_its_bound(apiserver, monkeypatch):
    monkeypatch.setattr(module, "EXPECT_SECONDS", 3.0)
    apiserver.set_pods([pod(name, f"u-{name}", "", cpu="200m") for name in ("theirs", "never")])
    watch = watch_on(apiserver)
    view(watch)
    # Another instance answered the pod's prioritize, and the scheduler binds it a little after the next pod's filter
    # arrived: the next prioritize here sees it (it waited for it), whatever the machine's pace.
    watch.expect("u-theirs")
    threading.Timer(0.2, apiserver.bind, args=("default", "theirs", "node-b")).start()
    assert "u-theirs" in uids(view(watch, seconds=10.0, exclude="u-next", expecting=True)[0])
    # One that never comes (another extender rejected it) is waited for EXPECT_SECONDS at most, then counted missed.
    watch.expect("u-never")
    started = time.monotonic()
    assert "u-never" not in uids(view(watch, seconds=10.0, exclude="u-next", expecting=True)[0])
    assert time.monotonic() - started < module.EXPECT_SECONDS + 2.0 and watch._misses == 1
    # The pod's own request does not wait for itself, nor for a pod this instance placed (its prioritize answered
    # here: assumed), nor for a pod the function bound itself (bindVerb: it counts at once).
    watch.note_demand("u-mine", demand_of(pod("x", "x", "", cpu="200m")))
    watch.note_demand("u-placed", demand_of(pod("y", "y", "", cpu="200m")))
    watch.expect("u-self")
    watch.expect("u-placed")
    watch.assume("u-placed", ["node-b"])
    watch.expect("u-mine")
    watch.note_binding("u-mine", "node-a")
    started = time.monotonic()
    assert "u-mine" in uids(view(watch, seconds=10.0, exclude="u-self", expecting=True)[0])
    assert time.monotonic() - started < module.EXPECT_SECONDS - 1.0 and watch._misses == 1
    assert "u-placed" in uids(view(watch, exclude="u-self")[0])


def test_filter_never_waits_for_a_binding_on_its_way(apiserver, monkeypatch):
    """Only prioritize waits for the bindings of pods placed elsewhere (``expecting_bindings``): a filter request
    answers at once from what the instance knows, and the binding counts from the request after the watch shows it."""
    monkeypatch.setattr(module, "EXPECT_SECONDS", 30.0)  # were it waited for, the request would take this long
    apiserver.set_pods([pod("later", "u-later", "", cpu="200m")])
    watch = watch_on(apiserver)
    view(watch)
    watch.expect("u-later")
    started = time.monotonic()
    assert "u-later" not in uids(view(watch, seconds=20.0, exclude="u-next")[0])
    assert time.monotonic() - started < 10.0
    apiserver.bind("default", "later", "node-a")
    assert "u-later" in uids(settled(watch, lambda found: "u-later" in found))


def test_waiting_stops_while_expected_bindings_do_not_come_and_resumes_when_one_does(apiserver, monkeypatch):
    monkeypatch.setattr(module, "EXPECT_SECONDS", 0.3)
    apiserver.set_pods([pod("comes", "u-comes", "", cpu="100m")])
    watch = watch_on(apiserver)
    view(watch)
    for index in range(module.MISSES_TO_STOP):  # a caller that filters and never binds (a dry run)
        watch.expect(f"u-dry-{index}")
        view(watch, exclude="u-next", expecting=True)
    assert watch._misses == module.MISSES_TO_STOP
    watch.expect("u-dry-more")
    monkeypatch.setattr(module, "EXPECT_SECONDS", 30.0)  # were it waited for, the request would take this long
    started = time.monotonic()
    view(watch, seconds=20.0, exclude="u-next", expecting=True)
    assert time.monotonic() - started < 10.0
    # A pod placed elsewhere is bound: bindings arrive again, and requests wait for them again.
    watch.expect("u-comes")
    apiserver.bind("default", "comes", "node-a")
    settled(watch, lambda found: "u-comes" in found)
    assert watch._misses == 0


def test_an_answered_pod_counts_where_assumed_until_its_binding_shows_where_it_went(apiserver):
    apiserver.set_pods([pod("busy", "u-busy", "node-a", cpu="200m"), pod("next", "u-next", "", cpu="200m")])
    watch = watch_on(apiserver)
    view(watch)
    watch.note_demand("u-next", demand_of(pod("next", "u-next", "", cpu="200m")))
    # Tied at the top of the answer: the one with the fewest pods bound lately, as LeastAllocated would.
    assert watch.assume("u-next", ["node-a", "node-b", "node-c"]) == "node-b"
    bindings, own = view(watch, exclude="u-next")
    assert own and [p.uid for p in bindings.on("node-b")] == ["u-next"]
    # The scheduler chose another node: once the watch shows it, the pod counts there only.
    apiserver.bind("default", "next", "node-c")
    after = settled_view(watch, lambda bindings: bool(bindings.on("node-c")))
    assert [p.uid for p in after.on("node-c")] == ["u-next"] and not after.on("node-b")
    assert not watch._own and not watch._assumed


def test_an_assumption_no_binding_follows_stops_counting(apiserver, monkeypatch):
    monkeypatch.setattr(module, "ASSUME_SECONDS", 0.3)
    watch = watch_on(apiserver)
    view(watch)
    for uid in ("u-dry", "u-refused"):
        watch.note_demand(uid, demand_of(pod("x", uid, "", cpu="200m")))
        watch.assume(uid, ["node-a"])
    assert {"u-dry", "u-refused"} <= uids(view(watch)[0])
    watch.assume("u-refused", [])  # filtered again with no feasible node: no binding follows
    assert "u-refused" not in uids(view(watch)[0]) and "u-dry" in uids(view(watch)[0])
    time.sleep(0.5)  # a dry run, or another extender refused it: never bound
    assert "u-dry" not in uids(view(watch)[0]) and not watch._own


def test_the_function_s_own_binding_replaces_the_assumption_and_stays(apiserver, monkeypatch):
    monkeypatch.setattr(module, "ASSUME_SECONDS", 0.3)
    watch = watch_on(apiserver)
    view(watch)
    watch.note_demand("u-mine", demand_of(pod("x", "u-mine", "", cpu="200m")))
    assert watch.assume("u-mine", ["node-a"]) == "node-a"
    watch.note_binding("u-mine", "node-b")  # bindVerb: exact
    assert watch.assume("u-mine", ["node-a"]) is None  # an answer after the binding changes nothing
    time.sleep(0.5)
    bindings = view(watch)[0]
    assert [p.uid for p in bindings.on("node-b")] == ["u-mine"] and not bindings.on("node-a")


def test_a_pod_not_judged_here_or_gone_is_not_assumed(apiserver):
    apiserver.set_pods([pod("gone", "u-gone", "node-a", cpu="200m")])
    watch = watch_on(apiserver)
    assert "u-gone" in uids(view(watch)[0])
    assert watch.assume("u-unknown", ["node-a"]) is None  # its demand was never noted
    watch.note_demand("u-gone", demand_of(pod("gone", "u-gone", "", cpu="200m")))
    apiserver.delete_pod("u-gone")
    settled(watch, lambda found: "u-gone" not in found)
    assert watch.assume("u-gone", ["node-b"]) is None and "u-gone" not in uids(view(watch)[0])
