"""The fast ExtenderArgs decoder: same facts as the full decoder, node bytes echoed as sent, never more lenient."""

from __future__ import annotations

import copy
import json
import re

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from extender.wire.fast_decoder import decode_extender_args
from extender.wire.limits import MAX_DEPTH
from extender.wire.schemas import ExtenderArgsSchema
from testkit.scheduler_checks import check_answer
from tests.recordings import exchanges

ARGS = [e for e in exchanges() if e.verb in ("filter", "prioritize")]
FULL = next(e for e in ARGS if e.verb == "filter" and not e.node_cache_capable).request
SCHEMA = ExtenderArgsSchema()


@pytest.mark.parametrize("exchange", [e for e in ARGS if not e.node_cache_capable], ids=lambda e: e.id)
def test_recorded_requests_load_the_same_facts_as_the_full_decoder(exchange):
    lean_payload = decode_extender_args(exchange.body)
    assert lean_payload is not None, "a full-node request as the scheduler sends it must take the lean path"
    lean, full = SCHEMA.load(lean_payload), SCHEMA.load(orjson.loads(exchange.body))
    assert lean.pod == full.pod
    assert lean.node_names == full.node_names
    assert [(n.name, n.labels) for n in lean.nodes or []] == [(n.name, n.labels) for n in full.nodes or []]
    assert [orjson.loads(orjson.dumps(n.raw)) for n in lean.nodes or []] == [n.raw for n in full.nodes or []]


@pytest.mark.parametrize("exchange", [e for e in ARGS if e.node_cache_capable], ids=lambda e: e.id)
def test_node_name_requests_are_left_to_the_full_decoder(exchange):
    # No node objects to skip: decoding the whole body at once is quicker than in parts.
    assert decode_extender_args(exchange.body) is None


def test_node_objects_are_echoed_byte_for_byte(client):
    # Go escapes <, > and & in strings; re-encoding would change those bytes, echoing them must not.
    request = copy.deepcopy(FULL)
    request["Nodes"]["items"][0]["metadata"]["annotations"] = {"note": "MARK"}
    head, items = orjson.dumps(request).split(b'"items":[', 1)
    items = items.replace(b'"MARK"', b'"\\u003cb\\u003e \\u0026"', 1).replace(b'"metadata":{', b'"metadata" : {', 1)
    body = head + b'"items":[' + items
    response = client.post("/filter", data=body, content_type="application/json")
    assert response.status_code == 200, response.data
    check_answer("filter", orjson.loads(body), response.get_json())
    first_node = items[: items.index(b'},{"metadata"') + 1]
    assert b"\\u003cb\\u003e" in first_node and b'"metadata" : {' in first_node
    assert first_node in response.data


def _full_with(node_field: bytes) -> bytes:
    request = copy.deepcopy(FULL)
    request["Nodes"]["items"][0]["status"] = "FIELD"
    return orjson.dumps(request).replace(b'"FIELD"', node_field)


@pytest.mark.parametrize(
    "body",
    [
        _full_with(b'"\xff"'),  # not UTF-8, in a field nothing reads
        _full_with(b'"\xed\xa0\x80"'),  # an encoded surrogate
        _full_with(b'{"a":' * (MAX_DEPTH - 3) + b"1" + b"}" * (MAX_DEPTH - 3)),  # one level too deep
        _full_with(
            b'{"a":' * (MAX_DEPTH - 4) + b"[]" + b"}" * (MAX_DEPTH - 4)
        ),  # an empty container one level too deep
        _full_with(b"[" * 2000 + b"]" * 2000),
        _full_with(b'{"k:{\\"x\\":1}":' * (MAX_DEPTH - 3) + b"1" + b"}" * (MAX_DEPTH - 3)),  # brackets inside keys
        _full_with(b"1") + b"x",
        _full_with(b"NaN"),
    ],
)
def test_what_the_full_decoder_refuses_is_left_to_it(body):
    assert decode_extender_args(body) is None


def _with(path: tuple[str, ...], value: bytes) -> bytes:
    request = copy.deepcopy(FULL)
    target = request
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "VALUE"
    return orjson.dumps(request).replace(b'"VALUE"', value)


@pytest.mark.parametrize(
    ("path", "above"),
    [(("Pod", "spec", "x"), 3), (("Nodes", "metadata", "x"), 3), (("Extra",), 1), (("Nodes", "extra"), 2)],
    ids=["in the pod", "in the node list's metadata", "in an unknown field", "in an unknown node list field"],
)
def test_every_part_of_the_body_is_measured_for_depth(path, above):
    deepest = b'{"a":' * (MAX_DEPTH - above) + b"1" + b"}" * (MAX_DEPTH - above)
    too_deep = b'{"a":' * (MAX_DEPTH - above + 1) + b"1" + b"}" * (MAX_DEPTH - above + 1)
    assert decode_extender_args(_with(path, too_deep)) is None
    fits = decode_extender_args(_with(path, deepest))
    assert (fits is not None) == (path[-1] == "x")  # unknown fields are left to the full decoder, which measures them


def test_unknown_fields_are_left_to_the_full_decoder_even_when_their_names_are_not_utf8():
    assert decode_extender_args(_with(("Extra",), b"1")) is None
    assert decode_extender_args(_with(("Extra",), b"1").replace(b'"Extra"', b'"\xfeExtra"')) is None


@pytest.mark.parametrize(
    "node_field",
    [
        b'{"a":' * (MAX_DEPTH - 4) + b"1" + b"}" * (MAX_DEPTH - 4),  # exactly as deep as the limit
        b'{"a":' * (MAX_DEPTH - 5) + b"[]" + b"}" * (MAX_DEPTH - 5),
        b'"]]]]}}}}" ',  # brackets inside strings are not nesting
        '"é ☃"'.encode(),
    ],
)
def test_what_the_full_decoder_accepts_takes_the_lean_path(node_field):
    body = _full_with(node_field)
    orjson.loads(body)
    assert decode_extender_args(body) is not None


def test_facts_read_from_nodes_are_decoded_like_the_full_decoder():
    # Values are decoded by orjson exactly as the full decoder does: a big integer becomes the same float.
    request = copy.deepcopy(FULL)
    request["Nodes"]["items"][0]["metadata"]["labels"] = {"big": "BIG"}
    body = orjson.dumps(request).replace(b'"BIG"', b"18446744073709551616")
    node = decode_extender_args(body)["Nodes"]["items"][0]
    assert node["metadata"]["labels"] == orjson.loads(body)["Nodes"]["items"][0]["metadata"]["labels"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_any_json_in_a_node_field_takes_the_lean_path_with_the_same_facts(value):
    body = _full_with(json.dumps(value).encode())
    lean = decode_extender_args(body)
    assert lean is not None
    assert SCHEMA.load(lean).nodes[0].name == SCHEMA.load(orjson.loads(body)).nodes[0].name


@settings(max_examples=300, deadline=None)
@given(field=st.binary(max_size=40))
def test_bytes_the_full_decoder_refuses_never_take_the_lean_path(field):
    assume(not re.search(rb"[0-9][eE]", field))  # out-of-float64 numbers in unread fields: the documented difference
    body = _full_with(field)
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        assert decode_extender_args(body) is None
