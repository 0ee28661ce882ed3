"""The fast and the full decoder agree: the same body answers with the same status and the same answer, whether
the fast decoder may take it or EXTENDER_DECODER=full forces the full one (recorded, generated and hostile bodies,
through the function's HTTP handling)."""

from __future__ import annotations

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

    def answer(verb: str, body: bytes, headers: dict[str, str] | None = None) -> list[tuple[int, Any]]:
        answers = []
        for client in clients:
            response = client.post(f"/{verb}", data=body, headers=headers or {"Content-Type": "application/json"})
            answers.append((response.status_code, orjson.loads(response.data)))
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
