"""The herding burst (tests/test_nodeload_herding.py) through three served instances of the function behind one
stand-in kube-scheduler, taking turns as a load balancer hands them requests: each instance assumes the pods it
answered for, and sees the others' only once the API stand-in's watch shows their bindings (20–150 ms after each
cycle). The burst still holds."""

from __future__ import annotations

import itertools
from contextlib import ExitStack
from typing import Any

import requests

from tests.conftest import serving
from tests.prometheus import METRIC
from tests.test_nodeload_herding import MEASURED, PODS, burst, policy, predicted

INSTANCES = 3


class RoundRobin:
    """Each pod's filter and prioritize go to the next instance (a load balancer spreads requests, not pods)."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = itertools.cycle(urls)
        self.session = requests.Session()

    def post(self, path: str, json: Any) -> Any:
        return Answer(self.session.post(f"{next(self.urls)}{path}", json=json, timeout=10))


class Answer:
    """The test client's answer interface, over a requests response."""

    def __init__(self, response: requests.Response) -> None:
        self.status_code = response.status_code
        self.response = response

    def get_json(self) -> Any:
        return self.response.json()

    def get_data(self, as_text: bool = False) -> Any:
        return self.response.text if as_text else self.response.content


def test_three_instances_hold_the_burst(prometheus, exporter, apiserver, tmp_path):
    exporter.set(MEASURED)
    prometheus.wait_until(METRIC, lambda values: values == MEASURED)
    path = policy(tmp_path, prometheus.url, True)
    environment = {"EXTENDER_POLICY": str(path), **apiserver.environment()}
    with ExitStack() as stack:
        urls = [stack.enter_context(serving(**environment)) for _ in range(INSTANCES)]
        placed = burst(RoundRobin(urls), apiserver, node_names=True, bind_verb=False)
    after = predicted(placed)
    print(f"pods per node {list(placed.values())}, predicted {list(after.values())}")
    assert sum(placed.values()) == PODS
    assert max(after.values()) <= 0.90, (placed, after)
