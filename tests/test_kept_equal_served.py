"""Kept results under concurrency: 8 threads at once against one served function with the result cache answer
exactly as a served function without it (EXTENDER_RESULT_CACHE=off), while the cluster's labels change."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import requests

from testkit.fake_apiserver import node
from tests.conftest import serving
from tests.test_kept_equal import POLICY, VERBS

_LIST_AGE = re.compile(rb"fetched \d+\.\d s ago")
THREADS = 8
NAMES = [f"node-{index}" for index in range(40)]
PHASES = 3
REQUESTS_PER_PHASE = 24
# Kubernetes node source (refetching at once for a name it lacks); no daily window, which real time could cross.
SERVED_POLICY = POLICY.replace(
    "nodeCacheCapable: false  # the tests hand the extender a node source of their own",
    "nodeSource:\n  kubernetes: {minRefreshInterval: 1s}",
).replace(
    'windows: [{from: "13:30", to: "14:30"}]', 'windows: [{start: "2026-03-01T13:30:00Z", end: "2026-03-01T14:30:00Z"}]'
)


def cluster(rng: random.Random, phase: int) -> list[dict[str, Any]]:
    def labels() -> dict[str, str]:
        chosen = {
            "pool": rng.choice(["gpu", "web"]),
            "zone": rng.choice("abc"),
            "node.kubernetes.io/instance-type": rng.choice(["small", "large", "huge"]),
            "cloud.google.com/gke-spot": rng.choice(["true", "false"]),
        }
        return {key: value for key, value in chosen.items() if rng.random() < 0.8}

    # Each phase lists a marker node: a function that knows it has listed this phase's labels.
    return [node(name, labels()) for name in NAMES if rng.random() < 0.9] + [node(f"marker-{phase}", {"pool": "web"})]


def request(rng: random.Random) -> tuple[str, bytes]:
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": rng.choice(["default", "ml", "web"]), "uid": "u"}}
    pod["spec"] = {"priority": rng.choice([0, 1000])}
    names = rng.sample(NAMES, rng.randint(1, len(NAMES)))
    return rng.choice(VERBS), orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def post(url: str, verb: str, data: bytes) -> tuple[int, bytes]:
    """The status and the answer, with the age of the node list (which the messages on unlisted nodes quote, and
    which grows between one function's answer and the other's) left out."""
    response = requests.post(f"{url}/{verb}", data=data, headers={"Content-Type": "application/json"}, timeout=30)
    return response.status_code, _LIST_AGE.sub(b"fetched _ s ago", response.content)


def knows(url: str, name: str) -> bool:
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    status, content = post(url, "filter", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [name]}))
    return status == 200 and orjson.loads(content)["NodeNames"] == [name]


def wait_until_listed(url: str, name: str) -> None:
    deadline = time.monotonic() + 20
    while not knows(url, name):
        assert time.monotonic() < deadline, f"{url} never listed {name}"
        time.sleep(0.3)


def from_threads(
    send: Callable[[str, bytes], tuple[int, bytes]], requests_: list[tuple[str, bytes]]
) -> list[tuple[int, tuple[int, bytes]]]:
    """Every request sent by each of THREADS threads at once, each thread in an order of its own: (index, answer)."""

    def send_all(seed: int) -> list[tuple[int, tuple[int, bytes]]]:
        order = list(range(len(requests_)))
        random.Random(seed).shuffle(order)
        return [(index, send(*requests_[index])) for index in order]

    with ThreadPoolExecutor(THREADS) as pool:
        return [answer for answers in pool.map(send_all, range(THREADS)) for answer in answers]


def served_phases(apiserver: Any, tmp_path: Path, rng: random.Random) -> Iterator[tuple[str, str]]:
    """A function keeping results and one keeping nothing (their URLs), both served on SERVED_POLICY, through
    PHASES phases of the cluster: each phase given once both have listed it. Close it (``contextlib.closing``) to
    stop them."""
    path = tmp_path / "policy.yaml"
    path.write_text(SERVED_POLICY)
    env = {"EXTENDER_POLICY": str(path), **apiserver.environment()}
    apiserver.set_nodes(cluster(rng, 0))
    with serving(EXTENDER_RESULT_CACHE="on", **env) as cached, serving(EXTENDER_RESULT_CACHE="off", **env) as plain:
        for phase in range(PHASES):
            if phase:
                apiserver.set_nodes(cluster(rng, phase))  # labels change between refreshes, nodes come and go
            for url in (cached, plain):
                wait_until_listed(url, f"marker-{phase}")
            yield cached, plain


def test_eight_threads_against_a_cached_function_answer_as_an_uncached_one(apiserver, tmp_path):
    rng = random.Random(14)
    with closing(served_phases(apiserver, tmp_path, rng)) as phases:
        for cached, plain in phases:
            requests_ = [request(rng) for _ in range(REQUESTS_PER_PHASE)]
            expected = [post(plain, verb, data) for verb, data in requests_]
            assert any(status == 200 and b"FailedAndUnresolvableNodes" in body for status, body in expected)

            for index, answer in from_threads(partial(post, cached), requests_):
                assert answer == expected[index], requests_[index]
