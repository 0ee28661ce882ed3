"""Node names kept as one string each (extender/wire/kept_names.py): the names a request is given equal those it
sent, in order, whatever else the body holds; the strings are the kept ones from the second request on, also from
8 threads at once; what is kept stays within its bound; and the function answers node-name requests exactly as one
keeping nothing, and as one with the full decoder."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from marshmallow import EXCLUDE, ValidationError

from extender.wire.fields import BuiltNames
from extender.wire.kept_names import MAX_NAME_CHARS, KeptNames
from extender.wire.schemas import ExtenderArgsSchema
from tests.conftest import make_client
from tests.test_kept_nodes import POD


def fresh(names: list[str]) -> list[str]:
    """Equal strings that are new objects, as decoding a body makes them."""
    return orjson.loads(orjson.dumps(names))


@given(st.lists(st.text(max_size=12), max_size=30), st.lists(st.text(max_size=12), max_size=30))
def test_names_are_given_back_equal_in_order_and_as_the_first_strings_they_came_as(first, second):
    kept = KeptNames(limit=1000)
    strings = kept.kept(fresh(first))
    assert strings == first
    by_name = dict(zip(strings, strings, strict=True))
    sent = fresh(second)
    again = kept.kept(sent)
    assert again == second
    assert all(string is by_name.setdefault(new, new) for string, new in zip(again, sent, strict=True))


def test_what_is_kept_stays_within_its_bound():
    kept = KeptNames(limit=4)
    first = kept.kept(fresh(["node-a", "node-b", "node-c"]))
    assert all(x is y for x, y in zip(kept.kept(fresh(["node-a", "node-b", "node-c"])), first, strict=True))
    # Two more pass the bound: only this request's names stay kept.
    kept.kept(fresh(["node-d", "node-e"]))
    assert kept.kept(fresh(["node-a"]))[0] is not first[0]
    assert len(kept._kept) <= kept.limit


@pytest.mark.parametrize(
    "payload",
    [
        {"Pod": POD, "NodeNames": ["a", 7]},
        {"Pod": POD, "NodeNames": ["a", ["b"]]},
        {"Pod": POD, "NodeNames": ["a", {"b": 1}]},
        {"Pod": POD, "NodeNames": []},
        {"Pod": POD, "NodeNames": None},
        {"Pod": POD, "NodeNames": "a"},
        {"Pod": POD},
        ["a", "b"],
        "a",
    ],
)
def test_only_a_plain_list_of_strings_is_replaced(payload):
    kept = KeptNames(limit=100)
    names = payload.get("NodeNames") if isinstance(payload, dict) else None
    assert kept.replace_in(payload) is payload
    if isinstance(payload, dict):
        assert payload.get("NodeNames") is names
    assert kept._kept == {}


def test_names_longer_than_a_node_name_can_be_are_not_kept():
    kept = KeptNames(limit=100)
    longest = ["node-a", "b" * MAX_NAME_CHARS]
    first = kept.kept(fresh(longest))
    assert all(x is y for x, y in zip(kept.kept(fresh(longest)), first, strict=True))
    # A request adding a longer one leaves nothing kept (its names are given back equal, as always).
    longer = ["node-a", "c" * (MAX_NAME_CHARS + 1)]
    assert kept.kept(fresh(longer)) == longer
    assert kept._kept == {}
    assert kept.kept(fresh(["node-a"]))[0] is not first[0]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["node-a", "node-b", "node-a"], "duplicate node name 'node-a'"),
        (["node-a", ""], "Shorter than minimum length 1."),
    ],
)
@pytest.mark.parametrize("fields", [False, True], ids=["one pass", "fields"])
def test_kept_names_are_still_checked_distinct_and_non_empty(names, message, fields):
    """Kept names are known strings, not known distinct: the schema checks that, in its one-pass load and in its
    fields alike (which an ``unknown`` option sends the body to)."""
    payload = KeptNames(8).replace_in({"Pod": POD, "Nodes": None, "NodeNames": fresh(names)})
    assert type(payload["NodeNames"]) is BuiltNames and not payload["NodeNames"].distinct
    with pytest.raises(ValidationError) as refused:
        ExtenderArgsSchema().load(payload, unknown=EXCLUDE if fields else None)
    assert message in str(refused.value.messages)


def test_eight_threads_keep_each_name_once():
    kept = KeptNames(limit=10_000)
    names = [f"node-{index}" for index in range(2000)]
    rng = random.Random(7)
    requests = [rng.sample(names, rng.randint(1, len(names))) for _ in range(64)]
    with ThreadPoolExecutor(8) as pool:
        given_back = list(pool.map(lambda request: (request, kept.kept(fresh(request))), requests))
    first: dict[str, str] = {}
    for request, strings in given_back:
        assert strings == request
        for string in strings:
            assert first.setdefault(string, string) is string


def answers(client: Any, rng: random.Random) -> list[tuple[int, bytes]]:
    """A node-name filter then prioritize per pod, names in another order each time, some odd bodies between."""
    names = [f"node-{index}" for index in range(12)] + ["nœud-ü", "node.with.dots"]
    out = []
    for index in range(12):
        pod = {**POD, "metadata": {**POD["metadata"], "uid": f"u{index}"}}
        rng.shuffle(names)
        sent = names[: rng.randint(2, len(names))]
        for verb in ("filter", "prioritize"):
            reply = client.post(f"/{verb}", json={"Pod": pod, "Nodes": None, "NodeNames": sent})
            out.append((reply.status_code, reply.data))
        for odd in ([*sent, sent[0]], [*sent, 7], [*sent, ""]):
            reply = client.post("/filter", json={"Pod": pod, "Nodes": None, "NodeNames": odd})
            out.append((reply.status_code, reply.data))
    return out


def test_a_function_keeping_names_answers_as_one_keeping_nothing_and_as_the_full_decoder(monkeypatch):
    calls: list[int] = []
    keep = KeptNames.kept

    def counted(self: KeptNames, names: list[str]) -> list[str]:
        calls.append(len(names))
        return keep(self, names)

    monkeypatch.setattr(KeptNames, "kept", counted)
    served = {}
    for variables in ({"EXTENDER_RESULT_CACHE": "on"}, {"EXTENDER_RESULT_CACHE": "off"}, {"EXTENDER_DECODER": "full"}):
        calls.clear()
        served[str(variables)] = answers(make_client(monkeypatch, **variables), random.Random(3))
        assert bool(calls) == (variables == {"EXTENDER_RESULT_CACHE": "on"}), variables
    first, *others = served.values()
    assert all(other == first for other in others)
    assert any(status == 200 and b'"NodeNames":["' in body for status, body in first)
