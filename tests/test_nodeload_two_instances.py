"""Two served instances of the function (functions-framework processes), one API stand-in, a real Prometheus: every
instance sees every binding, the one it made (bindVerb: at once), the other instance's and another scheduler's."""

from __future__ import annotations

import json
import time

import orjson
import requests

from testkit.fake_apiserver import node, pod
from tests.conftest import serving
from tests.prometheus import METRIC

OVER = "NodeLoad rule 'cpu': load above 0.8"


def policy(url: str) -> str:
    args = {
        "prometheus": {"url": url, "auth": "none"},
        "metrics": [{"name": "cpu", "query": METRIC, "nodeLabel": "node"}],
        "refreshInterval": "1s",
        "filter": [{"metric": "cpu", "above": 0.8}],
    }
    profile = {
        "name": "default",
        "plugins": {"filter": {"enabled": [{"name": "NodeLoad"}]}},
        "pluginConfig": [{"name": "NodeLoad", "args": args}],
    }
    return json.dumps({"nodeCacheCapable": True, "profiles": [profile]})


def rejected(url: str) -> set[str]:
    """The nodes a small pod is refused on: those whose in-flight pods the instance counts (0.825 of 4 CPU each)."""
    probe = pod("probe", "u-probe", "", cpu="10m")
    answer = requests.post(
        f"{url}/filter", json={"Pod": probe, "Nodes": None, "NodeNames": ["node-a", "node-b"]}, timeout=30
    )
    assert answer.status_code == 200
    failed = answer.json()["FailedNodes"]
    assert all(reason == OVER for reason in failed.values()), failed
    return set(failed)


def eventually(url: str, expected: set[str], timeout: float = 10.0) -> set[str]:
    deadline = time.monotonic() + timeout
    while (found := rejected(url)) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def test_both_instances_see_every_binding(apiserver, prometheus, exporter, tmp_path):
    exporter.set({"node-a": 0.0, "node-b": 0.0})
    prometheus.wait_until(METRIC, lambda values: values == {"node-a": 0.0, "node-b": 0.0})
    apiserver.set_nodes([node("node-a"), node("node-b")])
    big = pod("big", "u-big", "", cpu="3300m")
    other = pod("other", "u-other", "", cpu="3300m")
    apiserver.set_pods([big, other])
    path = tmp_path / "policy.json"
    path.write_text(policy(prometheus.url))
    env = {"EXTENDER_POLICY": str(path), **apiserver.environment()}
    with serving(**env) as first, serving(**env) as second:
        assert rejected(first) == rejected(second) == set()
        # The first instance judges the big pod and binds it (bindVerb): it counts there at once.
        body = orjson.dumps({"Pod": big, "Nodes": None, "NodeNames": ["node-a", "node-b"]})
        assert requests.post(f"{first}/filter", data=body, headers={"Content-Type": "application/json"}, timeout=30).ok
        binding = {"PodName": "big", "PodNamespace": "default", "PodUID": "u-big", "Node": "node-a"}
        assert requests.post(f"{first}/bind", json=binding, timeout=30).json() == {"Error": ""}
        assert rejected(first) == {"node-a"}
        # The second instance sees it through the API.
        assert eventually(second, {"node-a"}) == {"node-a"}
        # Another scheduler binds a pod: both see it.
        apiserver.bind("default", "other", "node-b")
        assert eventually(first, {"node-a", "node-b"}) == {"node-a", "node-b"}
        assert eventually(second, {"node-a", "node-b"}) == {"node-a", "node-b"}
        # A pod deleted no longer counts anywhere.
        apiserver.delete_pod("u-big")
        assert eventually(first, {"node-b"}) == eventually(second, {"node-b"}) == {"node-b"}
