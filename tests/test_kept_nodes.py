"""Full-node requests' decoded nodes kept by their bytes (extender/wire/kept_nodes.py): a function keeping them
answers exactly as one that keeps nothing (EXTENDER_RESULT_CACHE=off), alone and from 8 threads at once, while nodes
change, repeat, turn malformed or nest too deep; and what is kept stays within its bound."""

from __future__ import annotations

import copy
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.wire.kept_nodes import KEY_BYTES, KeptNodes
from extender.wire.limits import MAX_DEPTH
from extender.wire.schemas import EncodedNode
from tests.conftest import make_client, serving
from tests.test_limits import nested
from tests.test_reuse import POLICY

POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"priority": 0}}
NAMES = [f"node-{index}" for index in range(12)]


def a_node(name: str, rng: random.Random) -> dict[str, Any]:
    labels = {
        "pool": rng.choice(["gpu", "web"]),
        "zone": rng.choice("abc"),
        "node.kubernetes.io/instance-type": rng.choice(["small", "large"]),
    }
    return {
        "metadata": {"name": name, "labels": labels, "resourceVersion": str(rng.randint(1, 3))},
        "status": {"images": [{"names": [f"image-{rng.randint(1, 3)}"], "sizeBytes": 10}]},
    }


# What a changed node may be: its labels or name, a field nothing reads, or something the fast decoder leaves to the
# full decoder (too deep, not UTF-8), or a broken node in a field the schema reads.
CHANGES = ["labels", "unread", "too deep", "not utf-8", "name not a string", "same bytes, another place"]


def body_of(nodes: list[dict[str, Any]], change: str | None, rng: random.Random) -> bytes:
    """A full-node request for ``nodes`` in a shuffled order, one node changed as ``change`` says."""
    nodes = copy.deepcopy(nodes)
    rng.shuffle(nodes)
    marker = None
    if change and nodes:
        target = nodes[0]
        if change == "labels":
            target["metadata"]["labels"]["zone"] = rng.choice("xyz")
        elif change == "unread":
            target["status"]["note"] = rng.random()
        elif change in ("too deep", "not utf-8"):
            target["status"]["note"] = marker = "MARK"
        elif change == "name not a string":
            target["metadata"]["name"] = 7
        else:
            nodes.append(copy.deepcopy(nodes[-1]))  # a duplicate: refused, whether its bytes are kept or not
    body = orjson.dumps({"Pod": POD, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})
    if marker:
        value = nested(MAX_DEPTH) if change == "too deep" else b'"\xff"'
        body = body.replace(b'"MARK"', value)
    return body


def both(monkeypatch, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return [make_client(monkeypatch, path, EXTENDER_RESULT_CACHE=cache) for cache in ("on", "off")]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), steps=st.lists(st.sampled_from([None, *CHANGES]), min_size=1, max_size=10))
def test_a_function_keeping_decoded_nodes_answers_as_one_keeping_nothing(monkeypatch, tmp_path, seed, steps):
    rng = random.Random(seed)
    cached, plain = both(monkeypatch, tmp_path)
    cluster = [a_node(name, rng) for name in NAMES]
    for change in steps:
        if rng.random() < 0.3:  # a node of the cluster changes for good: its older bytes are never sent again
            cluster[rng.randrange(len(cluster))] = a_node(rng.choice(NAMES), rng)
        nodes = rng.sample(cluster, rng.randint(0, len(cluster)))
        data = body_of(nodes, change, rng)
        for verb in ("filter", "prioritize"):
            answers = [
                client.post(f"/{verb}", data=data, content_type="application/json") for client in (cached, plain)
            ]
            assert answers[0].status_code == answers[1].status_code, (change, answers[0].data, answers[1].data)
            assert answers[0].data == answers[1].data, change
            assert answers[0].headers.get("X-Extender-Error") == answers[1].headers.get("X-Extender-Error")


def test_eight_threads_against_a_function_keeping_decoded_nodes_answer_as_one_keeping_nothing(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    rng = random.Random(29)
    cluster = [a_node(name, rng) for name in NAMES]
    bodies = []
    for _ in range(48):
        if rng.random() < 0.3:
            cluster[rng.randrange(len(cluster))] = a_node(rng.choice(NAMES), rng)
        bodies.append(
            (rng.choice(["filter", "prioritize"]), body_of(rng.sample(cluster, 8), rng.choice([None, *CHANGES]), rng))
        )

    def post(url: str, verb: str, data: bytes) -> tuple[int, bytes]:
        response = requests.post(f"{url}/{verb}", data=data, headers={"Content-Type": "application/json"}, timeout=30)
        return response.status_code, response.content

    env = {"EXTENDER_POLICY": str(path)}
    with serving(EXTENDER_RESULT_CACHE="on", **env) as cached, serving(EXTENDER_RESULT_CACHE="off", **env) as plain:
        with ThreadPoolExecutor(max_workers=8) as pool:
            kept = list(pool.map(lambda request: post(cached, *request), bodies))
        expected = [post(plain, *request) for request in bodies]
    assert kept == expected
    assert {status for status, _ in kept} == {200, 400}  # answers and refusals both went through the kept nodes


def _encoded(name: str, size: int) -> tuple[bytes, EncodedNode]:
    encoded = orjson.dumps({"metadata": {"name": name}, "pad": "x" * size})
    return encoded, EncodedNode({"metadata": {"name": name}}, orjson.Fragment(encoded))


def test_kept_nodes_are_taken_only_for_the_same_bytes_and_stay_within_their_bound():
    kept = KeptNodes(limit=10_000)
    first = [_encoded(f"n{index}", 2_000) for index in range(3)]
    kept.keep(first)
    assert all(kept.get(encoded) is node for encoded, node in first)
    changed = first[0][0][:-2] + b'y"}'  # the same first bytes, another node
    assert changed[:KEY_BYTES] == first[0][0][:KEY_BYTES] and kept.get(changed) is None
    assert kept.get(first[0][0] + b" ") is None  # the same bytes and more
    # A changed node replaces its older bytes.
    replacement = (changed, EncodedNode({"metadata": {"name": "n0"}}, orjson.Fragment(changed)))
    kept.keep([replacement])
    assert kept.get(changed) is replacement[1] and kept.get(first[0][0]) is None
    # Past the limit, only the request's new nodes are kept.
    more = [_encoded(f"m{index}", 2_000) for index in range(3)]
    kept.keep(more)
    assert all(kept.get(encoded) is node for encoded, node in more)
    assert kept.get(first[1][0]) is None
    # New nodes that alone pass the limit leave nothing kept.
    huge = [_encoded("h", 20_000)]
    kept.keep(huge)
    assert kept.get(huge[0][0]) is None and kept.get(more[0][0]) is None
