"""NodeLoad's kept answers under concurrency: 8 threads at once against one served function with the result cache
answer exactly as a served function without it (EXTENDER_RESULT_CACHE=off: Prometheus asked on every request,
nothing kept), both reading a real Prometheus whose per-node loads change between phases."""

from __future__ import annotations

import json
import math
import random
import time
from typing import Any

import orjson
import requests

from tests.conftest import serving
from tests.prometheus import METRIC
from tests.test_kept_equal_served import from_threads

NAMES = [f"node-{index}" for index in range(30)]
PHASES = 3
REQUESTS_PER_PHASE = 24
MEMORY = "node_memory_load"
ARGS = {
    "prometheus": {"url": "", "auth": "none"},
    "metrics": [
        {"name": "cpu", "query": METRIC, "nodeLabel": "node"},
        {"name": "memory", "query": MEMORY, "nodeLabel": "node"},
    ],
    "refreshInterval": "1s",
    "maxAge": "1m",
    "filter": [{"metric": "cpu", "above": 0.8}, {"metric": "memory", "above": 0.9}],
    "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 0.5},
}
VERBS = ["filter", "prioritize", "ignore/filter", "ignore/prioritize", "audit/filter", "audit/prioritize"]


def policy(url: str, nodeload_args: dict[str, Any] = ARGS) -> str:
    """Three profiles of NodeLoad with ``nodeload_args`` reading Prometheus at ``url``: enforced (Fail), Ignore and
    Audit."""
    args = {**nodeload_args, "prometheus": {"url": url, "auth": "none"}}

    def profile(name: str, **entry: str) -> dict[str, Any]:
        enabled = {"name": "NodeLoad", **entry}
        return {
            "name": name,
            "plugins": {"filter": {"enabled": [enabled]}, "score": {"enabled": [{**enabled, "weight": 1}]}},
            "pluginConfig": [{"name": "NodeLoad", "args": args}],
        }

    profiles = [profile("default"), profile("ignore", failurePolicy="Ignore"), profile("audit", enforcement="Audit")]
    return json.dumps({"nodeCacheCapable": True, "profiles": profiles})


def loads(rng: random.Random, phase: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per node cpu and memory: around the thresholds, some not a number, some nodes not reporting. Each phase has a
    marker node: a function that judges it has this phase's answers."""

    def value() -> float:
        return rng.choice([0.1, 0.5, 0.79, 0.8, 0.85, 0.9, 0.95, math.nan])

    cpu = {name: value() for name in NAMES if rng.random() < 0.85}
    memory = {name: value() for name in NAMES if rng.random() < 0.85}
    marker = f"marker-{phase}"
    cpu[marker] = memory[marker] = 0.2  # TargetLoad 0.5 scores it 70: 7 of 10
    return cpu, memory


def request(rng: random.Random) -> tuple[str, bytes]:
    pod = {"metadata": {"name": "p", "namespace": rng.choice(["default", "batch"]), "uid": "u"}, "spec": {}}
    names = rng.sample([*NAMES, "ghost"], rng.randint(1, len(NAMES)))
    return rng.choice(VERBS), orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def post(url: str, verb: str, data: bytes) -> tuple[int, bytes]:
    response = requests.post(f"{url}/{verb}", data=data, headers={"Content-Type": "application/json"}, timeout=30)
    return response.status_code, response.content


def judges(url: str, profile: str, marker: str) -> bool:
    """Whether the profile's NodeLoad (each profile has its own, with its own kept answers) has this phase's answers:
    it judges the marker (filter keeps it), or scores it (Ignore: a node without facts would pass, unscored)."""
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [marker]})
    if profile == "ignore":
        status, content = post(url, "ignore/prioritize", body)
        return status == 200 and orjson.loads(content) == [{"Host": marker, "Score": 7}]
    status, content = post(url, "filter", body)
    return status == 200 and orjson.loads(content)["NodeNames"] == [marker]


def wait_until_judged(url: str, marker: str) -> None:
    """Until every profile whose answers depend on the loads has this phase's (audited ones answer alike anyway)."""
    deadline = time.monotonic() + 20
    for profile in ("default", "ignore"):
        while not judges(url, profile, marker):
            assert time.monotonic() < deadline, f"{url} never judged {marker} in profile {profile}"
            time.sleep(0.2)


def test_eight_threads_against_a_cached_function_answer_as_an_uncached_one(prometheus, exporter, tmp_path):
    rng = random.Random(28)
    path = tmp_path / "policy.yaml"
    path.write_text(policy(prometheus.url))
    env = {"EXTENDER_POLICY": str(path)}
    with serving(EXTENDER_RESULT_CACHE="on", **env) as cached, serving(EXTENDER_RESULT_CACHE="off", **env) as plain:
        for phase in range(PHASES):
            cpu, memory = loads(rng, phase)
            exporter.set(cpu)
            exporter.set(memory, metric=MEMORY)
            prometheus.wait_until(METRIC, lambda values, cpu=cpu: set(values) == set(cpu))
            prometheus.wait_until(MEMORY, lambda values, memory=memory: set(values) == set(memory))
            for url in (cached, plain):
                wait_until_judged(url, f"marker-{phase}")
            requests_ = [request(rng) for _ in range(REQUESTS_PER_PHASE)]
            expected = [post(plain, verb, data) for verb, data in requests_]
            assert any(status == 200 and b"NodeLoad rule 'cpu': load above 0.8" in body for status, body in expected)
            assert any(status == 200 and b"could not judge the node" in body for status, body in expected)

            for index, answer in from_threads(lambda verb, data: post(cached, verb, data), requests_):
                assert answer == expected[index], requests_[index]
