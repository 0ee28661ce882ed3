"""Nesting depth, node count and compression: bounded, with answers that name the limit."""

from __future__ import annotations

import copy
import gzip
import json

import orjson
import pytest

from extender.wire.limits import MAX_DEPTH, MAX_NODES
from testkit.scheduler_checks import check_answer
from tests.recordings import exchanges

FULL = next(e for e in exchanges() if e.verb == "filter" and not e.node_cache_capable).request
NAMES = next(e for e in exchanges() if e.verb == "filter" and e.node_cache_capable).request
PREEMPT = next(e for e in exchanges() if e.verb == "preempt" and e.request.get("NodeNameToMetaVictims")).request


def post(client, payload, path="/filter", **headers):
    data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return client.post(path, data=data, content_type="application/json", headers=headers)


def nested(depth: int) -> bytes:
    """``depth`` levels of alternating objects and arrays, as text: JSON encoders stop far earlier."""
    opening = "".join('{"x":' if level % 2 == 0 else "[" for level in range(depth))
    closing = "".join("}" if level % 2 == 0 else "]" for level in reversed(range(depth)))
    return f'{opening}"leaf"{closing}'.encode()


def full_request_of_depth(depth: int) -> bytes:
    """A full-node filter request whose deepest point, inside a node the answer echoes, is ``depth``."""
    request = copy.deepcopy(FULL)
    # request{} -> Nodes{} -> items[] -> node{} -> status: the nested value
    request["Nodes"]["items"][0]["status"] = "DEEP"
    return orjson.dumps(request).replace(b'"DEEP"', nested(depth - 4))


def test_a_node_as_deep_as_the_limit_is_echoed_unchanged(client):
    body = full_request_of_depth(MAX_DEPTH)
    response = post(client, body)
    assert response.status_code == 200, response.data
    check_answer("filter", orjson.loads(body), response.get_json())


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300, 1100, 100_000])
def test_deeper_nesting_is_refused_with_a_400_naming_the_limit(client, depth):
    response = post(client, full_request_of_depth(depth))
    assert response.status_code == 400
    assert response.get_json() == {"Error": f"JSON nested deeper than {MAX_DEPTH} levels"}


@pytest.mark.parametrize("depth", [MAX_DEPTH - 2, MAX_DEPTH - 1])
def test_a_deep_value_among_thousands_of_node_names_is_measured_too(client, depth):
    # request{} -> NodeNames[] -> the nested value: one level over the limit is refused, the limit itself is not.
    names = [f"node-{index}" for index in range(5000)]
    request = {**NAMES, "NodeNames": [*names[:2500], "DEEP", *names[2500:]]}
    response = post(client, orjson.dumps(request).replace(b'"DEEP"', nested(depth)))
    if depth + 2 > MAX_DEPTH:
        assert response.status_code == 400
        assert response.get_json() == {"Error": f"JSON nested deeper than {MAX_DEPTH} levels"}
    else:
        assert response.status_code == 400 and "NodeNames" in response.get_json()["Error"]  # too shallow; not a name


def test_deep_nesting_as_the_whole_body_is_refused(client):
    response = post(client, nested(5000))
    assert response.status_code == 400 and "nested deeper" in response.get_json()["Error"]


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("NodeNames", lambda names: {**NAMES, "NodeNames": names}),
        (
            "Nodes.items",
            lambda names: {**FULL, "Nodes": {"metadata": {}, "items": [{"metadata": {"name": n}} for n in names]}},
        ),
        ("NodeNameToMetaVictims", lambda names: {**PREEMPT, "NodeNameToMetaVictims": {n: {"Pods": []} for n in names}}),
    ],
)
def test_more_nodes_than_the_limit_are_refused_with_a_413(client, field, build):
    path = "/preempt" if field.startswith("NodeNameTo") else "/filter"
    names = [f"n{i}" for i in range(MAX_NODES + 1)]
    response = post(client, build(names), path)
    assert response.status_code == 413
    assert response.get_json() == {
        "Error": f"too many nodes: {MAX_NODES + 1} in {field}, over the limit of {MAX_NODES}"
    }


def test_as_many_nodes_as_the_limit_are_served(client):
    names = [f"n{i}" for i in range(MAX_NODES)]
    response = post(client, {**NAMES, "NodeNames": names})
    assert response.status_code == 200
    assert response.get_json()["NodeNames"] == names


def test_gzip_bodies_are_refused_with_a_415_not_inflated(client):
    body = gzip.compress(json.dumps(NAMES).encode())
    response = post(client, body, **{"Content-Encoding": "gzip"})
    assert response.status_code == 415
    assert response.get_json() == {"Error": "Content-Encoding 'gzip' is not supported: send the JSON uncompressed"}
    # Without the header, gzip bytes are just malformed JSON.
    response = post(client, body)
    assert response.status_code == 400 and response.get_json()["Error"].startswith("malformed JSON")
