"""The fast and the full decoder agree: the same body answers with the same status and the same answer, whether
the fast decoder may take it or EXTENDER_DECODER=full forces the full one (recorded, generated and hostile bodies,
through the function's HTTP handling)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.settings import DECODER_ENV
from tests.conftest import make_client
from tests.recordings import exchanges
from tests.test_hostile_input import FULL, hostile_bodies

RECORDED = [exchange for exchange in exchanges() if exchange.verb in ("filter", "prioritize")]


@pytest.fixture
def both(monkeypatch):
    """Answer a request twice, by an instance with the fast decoder allowed and by one with the full decoder forced:
    (status, answer) each."""
    clients = [make_client(monkeypatch, **{DECODER_ENV: decoder}) for decoder in ("fast", "full")]

    def answer(
        verb: str, body: bytes, headers: dict[str, str] | None = None, loads=orjson.loads
    ) -> list[tuple[int, Any]]:
        answers = []
        for client in clients:
            response = client.post(f"/{verb}", data=body, headers=headers or {"Content-Type": "application/json"})
            answers.append((response.status_code, loads(response.data)))
        return answers

    return answer


@pytest.mark.parametrize("exchange", RECORDED, ids=str)
def test_recorded_requests(both, exchange):
    fast, full = both(exchange.verb, exchange.body)
    assert fast == full and fast[0] == 200


INT64 = st.integers(-(2**63), 2**63 - 1)
LABELS = st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=8), INT64, st.none()), max_size=3)
ITEMS = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "metadata": st.fixed_dictionaries(
                    {"name": st.one_of(st.text(max_size=10), st.none(), INT64)},
                    optional={"labels": st.one_of(LABELS, st.none())},
                )
            },
            optional={"status": st.fixed_dictionaries({"images": st.lists(st.text(max_size=5), max_size=2)})},
        ),
        st.none(),
        INT64,
        st.text(max_size=4),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verb=st.sampled_from(["filter", "prioritize"]), items=ITEMS, extra=st.sampled_from([None, "NodeNames", "Other"]))
def test_generated_full_node_requests(both, verb, items, extra):
    request = {"Pod": FULL["Pod"], "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    if extra == "NodeNames":
        request["NodeNames"] = [item["metadata"]["name"] for item in items if isinstance(item, dict)]
    elif extra == "Other":
        request["Other"] = 1
    fast, full = both(verb, orjson.dumps(request))
    assert fast == full


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=hostile_bodies())
def test_hostile_bodies(both, case):
    verb, body, headers = case
    fast, full = both(verb, body, headers)
    assert fast == full
    assert fast[0] != 500


# The one kind of body the two decoders take differently (docs/architecture.md, Decoding): a number that does not
# fit a float64, in a node field nothing reads. The full decoder refuses the body; the fast one checks the number's
# JSON syntax, never reads its value, and echoes the node as it came.
UNREAD = [("status", "capacity", "cpu"), ("spec", "podCIDR"), ("metadata", "annotations", "note"), ("extra",)]
HUGE = st.sampled_from([b"1e400", b"-1e999", b"9" * 400, b"-" + b"9" * 330 + b".5"])


def _with_value(request: dict[str, Any], index: int, path: tuple[str, ...], value: bytes) -> bytes:
    document = orjson.loads(orjson.dumps(request))
    target = document["Nodes"]["items"][index]
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = "VALUE"
    return orjson.dumps(document).replace(b'"VALUE"', value, 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verb=st.sampled_from(["filter", "prioritize"]), data=st.data(), huge=HUGE, path=st.sampled_from(UNREAD))
def test_a_number_too_large_in_a_field_nothing_reads_never_changes_a_decision(both, verb, data, huge, path):
    exchange = data.draw(st.sampled_from([e for e in RECORDED if not e.node_cache_capable]))
    request = orjson.loads(exchange.body)
    index = data.draw(st.integers(0, len(request["Nodes"]["items"]) - 1))
    malformed, repaired = _with_value(request, index, path, huge), _with_value(request, index, path, b"0")
    # The echoed number as Python's json reads it (orjson would refuse the answer as the full decoder the request).
    (fast_status, fast_answer), (full_status, full_answer) = both(verb, malformed, loads=json.loads)
    assert full_status == 400 and "malformed JSON" in full_answer["Error"]
    # The fast path decides exactly as both decoders decide the same body with the number in range ...
    [(status, answer)] = {orjson.dumps(seen): seen for seen in both(verb, repaired)}.values()
    assert fast_status == status == 200
    if verb == "prioritize":
        assert fast_answer == answer
    else:
        assert _decision(fast_answer) == _decision(answer)
        # ... and echoes each node it keeps as it came, the number as sent.
        sent = {node["metadata"]["name"]: node for node in request["Nodes"]["items"]}
        kept = [node["metadata"]["name"] for node in fast_answer["Nodes"]["items"]]
        assert kept == [node["metadata"]["name"] for node in answer["Nodes"]["items"]]
        changed = request["Nodes"]["items"][index]["metadata"]["name"]
        for name, node in zip(kept, fast_answer["Nodes"]["items"], strict=True):
            assert node == (json.loads(malformed)["Nodes"]["items"][index] if name == changed else sent[name])


@pytest.mark.parametrize("field", [("metadata", "labels", "zone"), ("metadata", "name")])
def test_a_number_too_large_where_a_plugin_reads_is_refused_by_both(both, field):
    request = orjson.loads(next(e for e in RECORDED if not e.node_cache_capable).body)
    fast, full = both("filter", _with_value(request, 0, field, b"1e400"))
    assert fast == full and fast[0] == 400


def _decision(answer: dict[str, Any]) -> tuple[Any, ...]:
    names = [node["metadata"]["name"] for node in (answer.get("Nodes") or {}).get("items") or []]
    return names, answer.get("FailedNodes"), answer.get("FailedAndUnresolvableNodes"), answer.get("Error")
