"""What decoding a body costs is known, charged and bounded before any object is built (extender.wire.decode_cost)."""

from __future__ import annotations

import copy
import tracemalloc

import orjson
import pytest

from extender.errors import RequestError
from extender.wire.decode import decode_fast_or_full, decode_full
from extender.wire.decode_cost import Meter, value_cost
from extender.wire.fast_decoder import decode_extender_args
from extender.wire.limits import DECODE_FACTOR, PART_BYTES, RAW_ITEM_BYTES, WORST_BYTES_PER_BYTE
from tests.recordings import exchanges

FULL = next(e for e in exchanges() if e.verb == "filter" and not e.node_cache_capable).request
NAMES = next(e for e in exchanges() if e.verb == "filter" and e.node_cache_capable).request
MiB = 1024 * 1024

# Bodies of small values, the most objects per byte each shape makes.
UNITS = {
    "empty arrays": b"[],",
    "empty objects in objects": b'{"":{}},',
    "one-key objects": b'{"":0},',
    "objects of their own keys": None,  # distinct keys are not cached by orjson
    "short strings": b'"a",',
    "floats": b"0.5,",
    "nested arrays": b"[[[[0]]]],",
}


def node_name_body(size: int, unit: bytes | None) -> bytes:
    """A node-name filter body of about ``size`` bytes, the small values in a pod field nothing reads."""
    if unit is None:
        values = b",".join(b'{"k%d":0}' % number for number in range(size // 12))
    else:
        values = unit * (size // len(unit)) + b"0"
    request = copy.deepcopy(NAMES)
    request["Pod"]["spec"]["x"] = "VALUES"
    return orjson.dumps(request).replace(b'"VALUES"', b"[" + values.rstrip(b",") + b"]")


def built_by_decoding(body: bytes) -> int:
    """Peak bytes Python allocated decoding ``body`` fully."""
    tracemalloc.start()
    try:
        orjson.loads(body)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("unit", UNITS.values(), ids=UNITS)
@pytest.mark.parametrize("counted", [False, True], ids=["by size", "counted"])
def test_the_estimate_bounds_what_decoding_builds(unit, counted):
    body = node_name_body(MiB, unit)
    # The full decoder counts a body once its worst case by size could reach a quarter of the limit.
    meter = Meter(len(body) if counted else 25 * len(body))
    assert (value_cost(body, meter) == WORST_BYTES_PER_BYTE * len(body)) is not counted
    assert built_by_decoding(body) <= value_cost(body, meter)


@pytest.mark.parametrize("item", [b"1", b"{}", b'""', b"[]"])
@pytest.mark.parametrize("counted", [False, True], ids=["by size", "counted"])
def test_the_fast_decoder_s_estimate_bounds_the_node_items_it_keeps_as_bytes(item, counted):
    from extender.wire.fast_decoder import _decode_args

    body = full_node_body(b",".join([item] * (MiB // (len(item) + 1))))
    meter = Meter(len(body) if counted else 8 * len(body))
    estimate = value_cost(body, meter, RAW_ITEM_BYTES, containers=False)
    assert (estimate == RAW_ITEM_BYTES * (len(body) + 1) // 2) is not counted
    tracemalloc.start()
    try:
        _decode_args(body)
        built = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert built <= estimate


def test_a_body_whose_objects_would_pass_the_limit_is_refused_before_any_is_built():
    body = node_name_body(2 * MiB, b"[],")
    meter = Meter(len(body) // 8, charge=lambda size: pytest.fail("nothing is charged for a refused body"))
    tracemalloc.start()
    try:
        with pytest.raises(RequestError) as refused:
            decode_full(body, meter)
        built = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.status == 413
    assert refused.value.message.startswith("body too costly to decode: it can hold 1398")
    assert (
        f"over the {meter.limit // MiB} MiB limit ({DECODE_FACTOR} times EXTENDER_MAX_BODY_BYTES)"
        in refused.value.message
    )
    assert built < 64 * 1024


def test_what_decoding_may_build_is_charged_once_whichever_decoder_looks():
    charged: list[int] = []
    body = orjson.dumps(NAMES)
    meter = Meter(32 * MiB, charge=charged.append)
    decode_full(body, meter)
    assert charged == [WORST_BYTES_PER_BYTE * len(body)] and meter.objects == charged[0]
    # The fast decoder leaves a node-name body to the full one: charged as it is decoded, by the full decoder.
    charged.clear()
    decode_fast_or_full(body, Meter(32 * MiB, charge=charged.append))
    assert sum(charged) == WORST_BYTES_PER_BYTE * len(body)


def test_the_fast_decoder_charges_nodes_as_bytes_and_only_what_it_decodes_as_objects():
    charged: list[int] = []
    body = orjson.dumps(FULL)
    meter = Meter(32 * MiB, charge=charged.append)
    assert decode_fast_or_full(body, meter)["Nodes"]["items"]
    assert sum(charged) == meter.charged
    # The nodes' bytes are kept as they are, and their renderings dropped: objects are what is decoded of them.
    assert 0 < meter.objects <= WORST_BYTES_PER_BYTE * len(body) < meter.charged


def full_node_body(items: bytes) -> bytes:
    request = copy.deepcopy(FULL)
    request["Nodes"]["items"] = "ITEMS"
    return orjson.dumps(request).replace(b'"ITEMS"', b"[" + items + b"]")


def test_tiny_node_items_past_the_limit_are_refused_by_both_decoders_alike():
    """A Raw for each of millions of items would be the fast decoder's own bomb: it leaves the body to the full
    decoder, which refuses it as the full decoder alone would."""
    body = full_node_body(b",".join([b"{}"] * (MiB // 3)))
    limit = len(body) // 8
    with pytest.raises(RequestError) as fast:
        decode_fast_or_full(body, Meter(limit))
    with pytest.raises(RequestError) as full:
        decode_full(body, Meter(limit))
    assert fast.value.status == full.value.status == 413 and fast.value.message == full.value.message


def test_a_part_too_large_to_render_safely_is_left_to_the_full_decoder():
    node = copy.deepcopy(FULL["Nodes"]["items"][0])
    node["metadata"]["annotations"] = {"big": "x" * PART_BYTES}
    request = copy.deepcopy(FULL)
    request["Nodes"]["items"] = [node]
    body = orjson.dumps(request)
    assert decode_extender_args(body) is None
    assert decode_full(body, Meter(32 * MiB))["Nodes"]["items"][0]["metadata"]["annotations"]["big"]


def test_served_a_body_too_costly_to_decode_is_a_413_naming_the_limit(client_factory):
    client = client_factory(EXTENDER_MAX_BODY_BYTES=str(MiB))
    body = node_name_body(MiB - 4096, b"[],")
    response = client.post("/filter", data=body, content_type="application/json")
    assert response.status_code == 413
    assert "body too costly to decode" in response.get_json()["Error"]
    assert response.get_json()["Error"].endswith("over the 8 MiB limit (8 times EXTENDER_MAX_BODY_BYTES)")
