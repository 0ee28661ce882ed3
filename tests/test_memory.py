"""Serving threads share their heaps, whose freed memory the next request reuses without faulting it in again, and
hold little of it (the effect on peak RSS, one request and eight at once, is measured by the bench)."""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import pytest
import requests

from extender.http.memory import hold_malloc_thresholds
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
