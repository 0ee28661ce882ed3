"""Serving threads share their heaps, whose freed memory the next request reuses without faulting it in again, and
hold little of it (the effect on peak RSS, one request and eight at once, is measured by the bench); the memory of
bodies costly to decode comes back once they are answered."""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import pytest
import requests

from extender.http.memory import LARGE_BODY_BYTES, hold_malloc_thresholds
from extender.wire.limits import (
    DECODE_FACTOR,
    GIVE_BACK_SHARE,
    MAX_NODES,
    RAW_ITEM_BYTES,
    VALUE_BYTES,
    WORST_BYTES_PER_BYTE,
)
from tests.conftest import served_process

JSON = {"Content-Type": "application/json"}

PAGE = resource.getpagesize()


def minor_faults_allocating(size: int, rounds: int) -> int:
    """Page faults while allocating, touching and freeing ``size`` bytes ``rounds`` times."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):
        buffer = bytearray(size)
        buffer[::PAGE] = b"x" * len(range(0, size, PAGE))
        del buffer
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_thresholds_are_held_on_glibc():
    assert hold_malloc_thresholds() is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_freed_megabyte_is_reused_without_faulting_its_pages_in_again():
    # A node-name request's buffers (names, sets, answers) are about this size: the heap keeps them for the next one.
    assert hold_malloc_thresholds() is True
    size, rounds = 1 << 20, 20
    minor_faults_allocating(size, 1)
    trimmed_each_time = rounds * size // PAGE
    assert minor_faults_allocating(size, rounds) < trimmed_each_time // 4


# Most of the worker's page faults per full-node request: a hundred nodes (6 MB of buffers at once) trimmed back to
# 128 kB after each request faulted 450 to 830 pages in again, in some processes; a thousand nodes (about 60 MB) in
# fresh mappings for each of its large buffers, 14,000: every one a page zeroed, 2 and 15 ms a request. With the heap's
# top kept, a few dozen; a thousand nodes served from the heap the first request's thread made (which glibc gives
# back when it empties) up to 4,600 (one 18.6 MB buffer).
MAX_FAULTS_PER_REQUEST = {100: 200, 1000: 7_000}


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, /proc")
@pytest.mark.parametrize("nodes", sorted(MAX_FAULTS_PER_REQUEST))
def test_a_served_worker_does_not_fault_a_full_node_request_s_memory_in_again_each_time(nodes):
    from bench.workload import Workload

    workload = Workload(nodes)
    bodies = [workload.body(nodes, full_nodes=True, pod=pod) for pod in range(10 if nodes <= 100 else 2)]
    # As on Cloud Run: logging as there, with the process tuned as there.
    cloud_run = {"K_SERVICE": "extender", "K_REVISION": "extender-00001-abc", "GOOGLE_CLOUD_PROJECT": "p"}
    for _ in range(2):  # two launches: where the heap's top falls differs from one process to the next
        with served_process(**cloud_run, EXTENDER_PROCESS_TUNING="on") as (url, process), requests.Session() as session:
            for body in (bodies * 3)[:3]:  # the first answers: the thresholds are held once the first one is sent
                assert session.post(f"{url}/filter", data=body, headers=JSON).status_code == 200
            time.sleep(1.0)  # the first answer's after-work: Cloud Logging's import, in the background
            worker = int(Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()[0])
            before, rounds = _minor_faults(worker), 40 if nodes <= 100 else 10
            for index in range(rounds):
                answer = session.post(f"{url}/filter", data=bodies[index % len(bodies)], headers=JSON)
                assert answer.status_code == 200
            assert (_minor_faults(worker) - before) / rounds < MAX_FAULTS_PER_REQUEST[nodes]


# --- the worst bodies the function accepts, served over and over ------------------------------------------------

MiB = 1024 * 1024


def _pod_field_body(unit: bytes, size: int) -> bytes:
    """A node-name filter body of ``size`` bytes, small values repeated in a pod field nothing reads."""
    head, tail = b'{"Pod":{"metadata":{"name":"p","namespace":"d","uid":"u"},"spec":{"x":[', b'0]}},"NodeNames":["n"]}'
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def worst_bodies(max_body_bytes: int) -> dict[str, tuple[bytes, int]]:
    """What costs the most to decode at each step of the limits (``extender.wire.decode_cost``), with the status
    each gets: the largest body charged by its size alone, bodies just within the limit once counted (the values
    that cost the most each, and the most values), bodies past it (the full decoder's and the fast decoder's), and
    the most nodes a full-node body may carry (in proportion to the limit: their names and labels are decoded)."""
    limit = DECODE_FACTOR * max_body_bytes
    uncounted = limit // (GIVE_BACK_SHARE * WORST_BYTES_PER_BYTE) - 64
    values = limit // VALUE_BYTES - 4096
    own_keys = b",".join(b'{"k%d":0}' % number for number in range(values // 2))
    node_count = MAX_NODES * max_body_bytes // (32 * MiB)
    nodes = b",".join(b'{"metadata":{"name":"n%d","labels":{"a":"b"}}}' % number for number in range(node_count))
    return {
        "objects in objects, uncounted": (_pod_field_body(b'{"":{}},', uncounted), 200),
        "objects of their own keys, counted": (_pod_field_body(own_keys + b",", len(own_keys) + 200), 200),
        "empty arrays, counted": (_pod_field_body(b"[],", 3 * (values // 2)), 200),
        "empty arrays, past the limit": (_pod_field_body(b"[],", 3 * values), 413),
        "tiny node items, past the limit": (
            b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[' + b"{}," * (limit // RAW_ITEM_BYTES) + b"{}]},"
            b'"NodeNames":null}',
            413,
        ),
        "many nodes": (
            b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[' + nodes + b']},"NodeNames":null}',
            200,
        ),
    }


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) / 1024


COSTLIEST = "objects of their own keys, counted"


# A request of every verb, each small: what an instance has imported and built once it has answered each kind.
SMALL = {
    "filter": b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}}]},'
    b'"NodeNames":null}',
    "prioritize": b'{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["a","b"]}',
    "preempt": b'{"Pod":{"metadata":{"name":"p"}},"NodeNameToVictims":null,"NodeNameToMetaVictims":{}}',
    "bind": b'{"PodName":"p","PodNamespace":"d","PodUID":"u","Node":"a"}',
}


def _warm(url: str, session: requests.Session) -> None:
    for verb, body in SMALL.items():
        assert session.post(f"{url}/{verb}", data=body, headers=JSON, timeout=10).status_code == 200


def serve_worst_bodies_in_rounds(rounds: int, **env: str) -> tuple[float, list[float], float]:
    """Four clients at once send every worst body (EXTENDER_MAX_BODY_BYTES = 8 MiB: decoding may take 64 MiB, the
    limits scale with it, the suite stays quick), ``rounds`` times, the costliest body then once alone (its answer
    is the last: memory is given back after it). The worker's RSS in MB once it has answered a small request of
    every verb, after each round, and its peak."""
    import threading

    max_body = 8 * MiB
    bodies = worst_bodies(max_body)
    env = {"EXTENDER_MAX_BODY_BYTES": str(max_body), "EXTENDER_PROCESS_TUNING": "on", "THREADS": "4", **env}
    with served_process(**env) as (url, process), requests.Session() as alone:
        worker = int(Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()[0])
        _warm(url, alone)
        time.sleep(0.5)  # the first answers' after-work
        started = _rss_mb(worker)

        def send_all(failures: list[str]) -> None:
            with requests.Session() as session:
                for name, (body, status) in bodies.items():
                    got = session.post(f"{url}/filter", data=body, headers=JSON, timeout=60).status_code
                    if got != status:
                        failures.append(f"{name}: {got}, not {status}")

        after_rounds = []
        for _ in range(rounds):
            failures: list[str] = []
            clients = [threading.Thread(target=send_all, args=(failures,)) for _ in range(4)]
            for client in clients:
                client.start()
            for client in clients:
                client.join()
            assert not failures, failures
            assert alone.post(f"{url}/filter", data=bodies[COSTLIEST][0], headers=JSON, timeout=60).status_code == 200
            time.sleep(0.3)  # the answer's after-work: memory given back
            after_rounds.append(_rss_mb(worker))
        return started, after_rounds, _rss_mb(worker, "VmHWM")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, /proc")
def test_the_memory_of_the_worst_accepted_bodies_comes_back_after_every_round():
    """Served as deployed (every object from glibc, which returns free pages by the page, no per-thread cache), the
    worst bodies stay within their budget and the worker's RSS comes back to within 20 % of where it started once
    the last costly request is answered, round after round."""
    started, after_rounds, peak = serve_worst_bodies_in_rounds(4)
    assert peak < 384, f"peak {peak:.0f} MB"
    assert max(after_rounds) <= 1.2 * started, f"{started:.0f} MB at the start, then {after_rounds} MB"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, /proc")
def test_what_large_requests_leave_behind_goes_back_once_the_instance_is_quiet():
    """Full-node requests keep their nodes' decodings and the heap's top for the requests that follow (a burst of
    pods); once the instance is quiet (EXTENDER_MEMORY_IDLE, shortened here) they go back."""
    from bench.workload import Workload

    nodes = 200
    workload = Workload(nodes)
    bodies = [workload.body(nodes, full_nodes=True, pod=pod) for pod in range(4)]
    assert len(bodies[0]) > LARGE_BODY_BYTES
    idle = 1.0
    environment = {"EXTENDER_PROCESS_TUNING": "on", "EXTENDER_MEMORY_IDLE": f"{idle}s"}
    with served_process(**environment) as (url, process), requests.Session() as session:
        worker = int(Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()[0])
        _warm(url, session)
        time.sleep(0.5)
        started = _rss_mb(worker)
        for body in bodies * 3:
            assert session.post(f"{url}/filter", data=body, headers=JSON, timeout=30).status_code == 200
        busy = _rss_mb(worker)
        time.sleep(idle + 0.6)
        quiet = _rss_mb(worker)
    assert busy > started + 5, f"{started:.0f} MB at the start, {busy:.0f} MB while busy"
    assert quiet <= 1.2 * started, f"{started:.0f} MB at the start, {busy:.0f} MB while busy, {quiet:.0f} MB quiet"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, /proc")
def test_the_costliest_body_accepted_by_default_fits_a_512_mib_instance():
    body, status = worst_bodies(32 * MiB)["objects of their own keys, counted"]
    with served_process(EXTENDER_PROCESS_TUNING="on") as (url, process):
        worker = int(Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()[0])
        assert requests.post(f"{url}/filter", data=body, headers=JSON, timeout=60).status_code == status
        peak = _rss_mb(worker, "VmHWM")
    assert peak < 400, f"peak {peak:.0f} MB"


# --- when memory is given back ---------------------------------------------------------------------------------


class _Quiet:
    """What a ``Release`` sees of an extender: whether a request is in flight, and each time it forgets."""

    def __init__(self) -> None:
        import threading

        self.busy = False
        self.forgotten = threading.Event()
        self.times: list[float] = []

    def idle(self) -> bool:
        return not self.busy

    def forget(self) -> None:
        self.times.append(time.monotonic())
        self.forgotten.set()


def test_a_small_request_leaves_nothing_to_give_back():
    from extender.http.memory import Release

    quiet = _Quiet()
    Release(quiet.forget, quiet.idle, seconds=0.1).after(LARGE_BODY_BYTES - 1, costly=False)
    assert not quiet.forgotten.wait(0.4)


def test_a_large_request_s_memory_goes_back_once_no_request_came_for_the_quiet_time():
    from extender.http.memory import Release

    quiet = _Quiet()
    release = Release(quiet.forget, quiet.idle, seconds=0.3)
    started = time.monotonic()
    for _ in range(4):  # a burst: each request moves the quiet time on
        release.after(LARGE_BODY_BYTES, costly=False)
        time.sleep(0.15)
    last = time.monotonic() - 0.15
    assert quiet.forgotten.wait(2)
    assert quiet.times[0] - last >= 0.3, "given back before the instance was quiet"
    assert quiet.times[0] - started < 0.3 * 2 + 0.45 + 0.5, "given back long after"
    time.sleep(0.5)
    assert len(quiet.times) == 1, "given back once"


def test_nothing_goes_back_while_a_request_is_in_flight():
    from extender.http.memory import Release

    quiet = _Quiet()
    release = Release(quiet.forget, quiet.idle, seconds=0.1)
    quiet.busy = True
    release.after(LARGE_BODY_BYTES, costly=False)
    assert not quiet.forgotten.wait(0.5)
    quiet.busy = False
    assert quiet.forgotten.wait(1)


def test_a_costly_request_s_memory_goes_back_after_its_answer_when_no_other_is_in_flight():
    from extender.http.memory import Release

    quiet = _Quiet()
    # Outside a request, "after the answer" is at once.
    Release(quiet.forget, quiet.idle, seconds=60).after(0, costly=True)
    assert quiet.forgotten.is_set()
    # With another request in flight, once the instance is quiet.
    quiet = _Quiet()
    quiet.busy = True
    Release(quiet.forget, quiet.idle, seconds=0.1).after(0, costly=True)
    assert not quiet.forgotten.is_set()
    quiet.busy = False
    assert quiet.forgotten.wait(1)
