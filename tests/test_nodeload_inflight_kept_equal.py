"""The in-flight index is a cache: a served function keeping it (EXTENDER_RESULT_CACHE=on: one LIST, then the WATCH
read on the request path, verdicts kept under its generation) answers 8 threads at once exactly as a served function
without it (off: a fresh LIST of the bound pods on every request, nothing kept), both reading one API stand-in and a
real Prometheus, while pods are bound, deleted and finish and the loads change between phases. The pods answered for
are not assumed (EXTENDER_ASSUME_PODS=off): where an answer sends a pod depends on which requests came first, which
eight threads change, and it is no cache (tests/test_nodeload_assumed.py)."""

from __future__ import annotations

import random
import time

import orjson

from testkit.fake_apiserver import FakeApiServer, node, pod
from tests.conftest import serving
from tests.prometheus import METRIC
from tests.test_kept_equal_served import from_threads
from tests.test_nodeload_kept_equal_served import policy, post

NODES = [f"node-{index}" for index in range(12)]
PHASES = 3
REQUESTS_PER_PHASE = 24
VERBS = ["filter", "prioritize", "ignore/filter", "ignore/prioritize", "audit/filter", "audit/prioritize"]
ARGS = {
    "metrics": [{"name": "cpu", "query": METRIC, "nodeLabel": "node"}],
    "refreshInterval": "1s",
    "maxAge": "1m",
    "filter": [
        {"metric": "cpu", "above": 0.8},
        {"metric": "cpu", "above": 0.6, "pods": {"namespaces": ["batch"]}},
    ],
    "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 0.5},
}


def change(rng: random.Random, apiserver: FakeApiServer, phase: int) -> tuple[dict[str, float], str]:
    """New loads, and bindings: some pods bound (by the API's binding, as a scheduler does), some deleted or finished.
    Returns the loads and the marker node, whose only in-flight pod pushes it over 0.8: judged once counted."""
    now = time.time()
    for index in range(rng.randint(3, 8)):
        name = f"p{phase}-{index}"
        cpu = rng.choice(["100m", "400m", "800m", "1500m"])
        apiserver.add_pod(pod(name, f"u-{name}", "", cpu=cpu))
        apiserver.bind("default", name, rng.choice(NODES), at=now - rng.choice([0, 5, 30]))
    for item in list(apiserver.pods):
        roll = rng.random()
        if item["spec"].get("nodeName") and roll < 0.15:
            apiserver.delete_pod(item["metadata"]["uid"])
        elif item["spec"].get("nodeName") and roll < 0.25:
            apiserver.update_pod(item["metadata"]["uid"], lambda changed: changed["status"].update(phase="Succeeded"))
    marker = f"marker-{phase}"
    apiserver.add_node(node(marker))
    apiserver.add_pod(pod(marker, f"u-{marker}", "", cpu="3300m"))  # 0.825 of 4 CPU: over 0.8 once counted
    apiserver.bind("default", marker, marker)
    loads = {name: rng.choice([0.05, 0.2, 0.4, 0.55, 0.7, 0.79]) for name in NODES if rng.random() < 0.9}
    loads[marker] = 0.0
    return loads, marker


def request(rng: random.Random, apiserver: FakeApiServer) -> tuple[str, bytes]:
    bound = [item for item in apiserver.pods if item["spec"].get("nodeName")]
    if bound and rng.random() < 0.3:  # a pod the index holds: it must not count twice
        chosen = bound[rng.randrange(len(bound))]
        the_pod = {**chosen, "spec": {**chosen["spec"], "nodeName": ""}}
    else:
        the_pod = pod("incoming", f"u-incoming-{rng.randrange(3)}", "", cpu=rng.choice(["50m", "400m", "1"]))
        the_pod["metadata"]["namespace"] = rng.choice(["default", "batch"])
        if rng.random() < 0.2:
            the_pod["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent", "uid": "ds"}]
    names = rng.sample([*NODES, "ghost"], rng.randint(1, len(NODES)))
    return rng.choice(VERBS), orjson.dumps({"Pod": the_pod, "Nodes": None, "NodeNames": names})


def judges(url: str, marker: str) -> bool:
    """Whether the function counts the marker's in-flight pod, in each profile whose answers depend on it (each has a
    NodeLoad of its own, with its own kept answers; audited ones answer alike anyway): the marker is rejected for a
    small pod."""
    small = pod("probe", "u-probe", "", cpu="10m")
    body = orjson.dumps({"Pod": small, "Nodes": None, "NodeNames": [marker]})
    for verb in ("filter", "ignore/filter"):
        status, content = post(url, verb, body)
        if status != 200 or marker not in orjson.loads(content)["FailedNodes"]:
            return False
    return True


def counted(marker: str, *urls: str) -> None:
    """Once each function at ``urls`` counts ``marker``'s pod (``judges``): what was bound before it is seen too."""
    deadline = time.monotonic() + 20
    for url in urls:
        while not judges(url, marker):
            assert time.monotonic() < deadline, f"{url} never counted {marker}'s pod"
            time.sleep(0.2)


def steady_loads(
    rng: random.Random, nodes: list[str], markers: list[str], apiserver, prometheus, exporter, tmp_path
) -> dict[str, str]:
    """Loads that stay (one snapshot throughout) on ``nodes``, none on the markers, and the served functions'
    environment: their policy reading them, the API stand-in's bound pods, nothing assumed."""
    args = {**ARGS, "refreshInterval": "5m", "maxAge": "10m"}
    path = tmp_path / "policy.json"
    path.write_text(policy(prometheus.url, args))
    apiserver.set_nodes([node(name) for name in [*nodes, *markers]])
    loads = {name: rng.choice([0.05, 0.2, 0.4, 0.55, 0.7, 0.79]) for name in nodes}
    loads.update(dict.fromkeys(markers, 0.0))
    exporter.set(loads)
    prometheus.wait_until(METRIC, lambda values: values == loads)
    return {"EXTENDER_POLICY": str(path), "EXTENDER_ASSUME_PODS": "off", **apiserver.environment()}


def answer_alike(
    cached: str, plain: str, marker: str, rng: random.Random, apiserver: FakeApiServer
) -> list[tuple[int, bytes]]:
    """Once both functions count ``marker``'s pod: a phase's requests, the cached function's answers (from eight
    threads) equal to the plain one's, which are returned."""
    counted(marker, cached, plain)
    requests_ = [request(rng, apiserver) for _ in range(REQUESTS_PER_PHASE)]
    expected = [post(plain, verb, data) for verb, data in requests_]
    for index, answer in from_threads(lambda verb, data: post(cached, verb, data), requests_):
        assert answer == expected[index], requests_[index]
    return expected


def test_eight_threads_against_a_cached_index_answer_as_lists_on_every_request(
    apiserver, prometheus, exporter, tmp_path
):
    rng = random.Random(32)
    path = tmp_path / "policy.json"
    path.write_text(policy(prometheus.url, ARGS))
    apiserver.set_nodes([node(name) for name in NODES])
    env = {"EXTENDER_POLICY": str(path), "EXTENDER_ASSUME_PODS": "off", **apiserver.environment()}
    with serving(EXTENDER_RESULT_CACHE="on", **env) as cached, serving(EXTENDER_RESULT_CACHE="off", **env) as plain:
        for phase in range(PHASES):
            loads, marker = change(rng, apiserver, phase)
            exporter.set(loads)
            prometheus.wait_until(METRIC, lambda values, loads=loads: values == loads)
            expected = answer_alike(cached, plain, marker, rng, apiserver)
            assert any(b"NodeLoad rule 'cpu': load above 0.8" in body for _, body in expected)


STEPS = 5


def test_bindings_on_unchanged_loads_re_judge_only_their_nodes_and_answer_as_lists_on_every_request(
    apiserver, prometheus, exporter, tmp_path
):
    """The loads stay (one snapshot throughout) while pods are bound between batches of requests: the cached
    function derives each new view's verdicts and scores from the last one's (only the nodes whose pods changed are
    judged again, ``Plugin.changed_nodes``), and answers 8 threads at once exactly as the uncached one."""
    rng = random.Random(38)
    markers = [f"marker-{step}" for step in range(STEPS)]
    env = steady_loads(rng, NODES, markers, apiserver, prometheus, exporter, tmp_path)
    with serving(EXTENDER_RESULT_CACHE="on", **env) as cached, serving(EXTENDER_RESULT_CACHE="off", **env) as plain:
        for step, marker in enumerate(markers):
            for index in range(rng.randint(1, 3)):
                name = f"s{step}-{index}"
                apiserver.add_pod(pod(name, f"u-{name}", "", cpu=rng.choice(["400m", "800m", "1500m"])))
                apiserver.bind("default", name, rng.choice(NODES))
            apiserver.add_pod(pod(marker, f"u-{marker}", "", cpu="3300m"))
            apiserver.bind("default", marker, marker)
            answer_alike(cached, plain, marker, rng, apiserver)


CLUSTER = [f"node-{index}" for index in range(40)]
SAMPLE = 12  # not a divisor of the cluster's size: each round of samples starts elsewhere
SAMPLES = 24
# Then requests about most of the cluster, a few nodes left out (as a few rejected since): bound there.
MOST = 6


def test_a_sample_moving_round_the_cluster_answers_as_lists_on_every_request(
    apiserver, prometheus, exporter, tmp_path
):
    """kube-scheduler asks a large cluster's extender about a sample of its nodes that moves round the cluster pod by
    pod (``percentageOfNodesToScore``; testkit.scheduling), so the nodes a binding changed are seldom in the next
    request: the cached function judges them beside the request, and keeps scores across samples (NodeLoad's are
    each node's own: ``ScorePlugin.scores_per_node``), adding the nodes a sample brings and scoring again those a
    binding changed; then requests about most of the nodes kept, each bound beside it, keep their part instead.
    Each filter, and the prioritize over the nodes it kept, answers exactly as the uncached one."""
    rng = random.Random(44)
    markers = [f"marker-{step}" for step in range(SAMPLES + MOST)]
    env = steady_loads(rng, CLUSTER, markers, apiserver, prometheus, exporter, tmp_path)
    rounds = range(SAMPLES)
    samples = [[CLUSTER[(turn * SAMPLE + offset) % len(CLUSTER)] for offset in range(SAMPLE)] for turn in rounds]
    samples += [rng.sample(CLUSTER, len(CLUSTER) - 3) for _ in range(MOST)]
    with serving(EXTENDER_RESULT_CACHE="on", **env) as cached, serving(EXTENDER_RESULT_CACHE="off", **env) as plain:
        for step, (sample, marker) in enumerate(zip(samples, markers, strict=True)):
            the_pod = pod(f"w{step}", f"u-w{step}", "", cpu=rng.choice(["50m", "400m", "1"]))
            body = orjson.dumps({"Pod": the_pod, "Nodes": None, "NodeNames": sample})
            filtered = post(plain, "filter", body)
            assert post(cached, "filter", body) == filtered, step
            kept = orjson.loads(filtered[1])["NodeNames"]
            if kept:
                body = orjson.dumps({"Pod": the_pod, "Nodes": None, "NodeNames": kept})
                assert post(cached, "prioritize", body) == post(plain, "prioritize", body), step
            # Bound where the next request does not look, beside a marker both functions are seen to count.
            upcoming = set(samples[step + 1]) if step + 1 < len(samples) else set()
            name = f"b{step}"
            apiserver.add_pod(pod(name, f"u-{name}", "", cpu=rng.choice(["800m", "1500m", "3300m"])))
            apiserver.bind("default", name, rng.choice([node for node in CLUSTER if node not in upcoming]))
            apiserver.add_pod(pod(marker, f"u-{marker}", "", cpu="3300m"))
            apiserver.bind("default", marker, marker)
            counted(marker, cached, plain)
