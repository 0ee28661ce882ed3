"""Request bytes to the payload the verb schemas load: the one decode entry, with the limits in one place.

Two strategies sit behind ``decode``:

- the fast decoder (``extender.wire.fast_decoder``), for filter and prioritize bodies
  that carry full node objects: it decodes only what the schemas read and
  keeps each node's bytes to echo;
- the full decoder here: orjson, then the nesting depth and node count limits.

Which bodies carry node objects is read from their last bytes: kube-scheduler
writes ``NodeNames`` last, and null when it sends node objects. A node-name
body thus goes straight to the full decoder, which reads it in one pass, and a
cold instance's first answer does not wait for the fast decoder's import. The
hint decides only which decoder looks first: a body it misjudges is answered
alike, by the full decoder.

A node-name prioritize body that ends with names this instance's filter just
answered (``extender.wire.answered_names``) has only its rest decoded, the
names taken from that answer: the same payload the full decoder builds, within
the same limits; anything else about such a body sends it to the full decoder.

The fast decoder returns None for anything unusual, and the full one then
answers it, so the two must agree on every body: the same status and the
same answer (tests/test_decoders_agree.py), but for the two leniencies
``extender.wire.fast_decoder`` names. ``EXTENDER_DECODER=full`` forces
the full decoder for every request (``Settings.full_decoder``).

Each decoder first affords what it will build (``extender.wire.decode_cost``):
the full decoder refuses a body whose objects would pass the limit (413); the
fast decoder, which builds objects for a small part of the body, leaves such a
body to the full one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from extender.errors import RequestError
from extender.wire.decode_cost import Meter, too_costly, value_cost
from extender.wire.limits import MAX_DEPTH, MAX_NODES, RAW_ITEM_BYTES
from extender.wire.nesting import deeper_than

if TYPE_CHECKING:
    from extender.wire.answered_names import AnsweredNames
    from extender.wire.kept_names import KeptNames
    from extender.wire.kept_nodes import KeptNodes

# Verbs whose ExtenderArgs body can carry thousands of full node objects.
FAST_VERBS = ("filter", "prioritize")

# How a body carrying node objects ends (see above); looked for in its last bytes only.
_ENDS_AS_NODE_OBJECTS = re.compile(rb'"NodeNames"\s*:\s*null\s*\}\s*\Z')
_TAIL = 64

_TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


def decoder_for(
    verb: str,
    full_decoder: bool = False,
    kept: KeptNodes | None = None,
    answered: AnsweredNames | None = None,
    names: KeptNames | None = None,
) -> Callable[[bytes | bytearray, Meter], Any]:
    """How ``verb``'s body is decoded: fast where it can carry node objects, unless ``full_decoder`` forces the
    full one; the fast decoder takes the nodes ``kept`` holds from it (``extender.wire.kept_nodes``), a
    prioritize body the names of a filter answer ``answered`` holds, and a node-name body the name strings
    ``names`` holds (``extender.wire.kept_names``)."""
    if verb in FAST_VERBS and not full_decoder:
        answered = answered if verb == "prioritize" else None
        return partial(decode_fast_or_full, kept=kept, answered=answered, names=names)
    return decode_full


def decode_fast_or_full(
    body: bytes | bytearray,
    meter: Meter,
    kept: KeptNodes | None = None,
    answered: AnsweredNames | None = None,
    names: KeptNames | None = None,
) -> Any:
    if answered is not None:
        payload = _decode_answered(body, meter, answered)
        if payload is not None:
            return payload  # its names are an answer's, which were kept ones
    if _ENDS_AS_NODE_OBJECTS.search(body, max(0, len(body) - _TAIL)) is None:
        payload = decode_full(body, meter)
        return names.replace_in(payload) if names is not None else payload
    # A Raw for each node item, kept as bytes: an item per comma at most.
    if not meter.afford(value_cost(body, meter, RAW_ITEM_BYTES, containers=False)):
        return decode_full(body, meter)
    from extender.wire.fast_decoder import decode_extender_args

    payload = decode_extender_args(body, kept, meter)
    return payload if payload is not None else decode_full(body, meter)


def _decode_answered(body: bytes | bytearray, meter: Meter, answered: AnsweredNames) -> dict[str, Any] | None:
    """What the full decoder builds from a body ending with a filter answer's names (``AnsweredNames.take``): the
    rest decoded, the names that answer's; None for anything else, which the full decoder then reads whole."""
    found = answered.take(body)
    if found is None:
        return None
    start, names = found
    cost = value_cost(body, meter)
    if not meter.afford(cost):
        return None
    # The members before the names, closed: an object with at least one member, so the body is that object with
    # one more member (anything else does not decode here, or is left to the full decoder). A ``NodeNames`` among
    # them is replaced, as orjson keeps a repeated key's last value in its first place.
    try:
        payload = orjson.loads(body[:start] + b"}")
    except orjson.JSONDecodeError:
        return None
    # The names are two levels deep, far within the limit: the whole is too deep exactly when the rest is.
    if type(payload) is not dict or not payload or deeper_than(payload, MAX_DEPTH):
        return None
    meter.built(cost)
    payload["NodeNames"] = names
    _check_node_count(payload)
    return payload


def decode_full(body: bytes | bytearray, meter: Meter) -> Any:
    """The whole body decoded, within the limits; a RequestError (400, 413) names what is wrong."""
    cost = value_cost(body, meter)
    if not meter.afford(cost):
        raise too_costly(cost, meter)
    meter.built(cost)
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        # orjson stops at its own depth limit before ours can look: same problem, same message.
        message = _TOO_DEEP if "depth limit" in str(exc) else f"malformed JSON: {exc}"
        raise RequestError(400, message) from None
    if deeper_than(payload, MAX_DEPTH):
        raise RequestError(400, _TOO_DEEP)
    _check_node_count(payload)
    return payload


def _check_node_count(payload: Any) -> None:
    if not isinstance(payload, dict):
        return
    nodes = payload.get("Nodes")
    # Where ExtenderArgs and ExtenderPreemptionArgs carry nodes.
    carriers = {
        "Nodes.items": nodes.get("items") if isinstance(nodes, dict) else None,
        "NodeNames": payload.get("NodeNames"),
        "NodeNameToVictims": payload.get("NodeNameToVictims"),
        "NodeNameToMetaVictims": payload.get("NodeNameToMetaVictims"),
    }
    for field, carried in carriers.items():
        if isinstance(carried, (list, dict)) and len(carried) > MAX_NODES:
            raise RequestError(413, f"too many nodes: {len(carried)} in {field}, over the limit of {MAX_NODES}")
