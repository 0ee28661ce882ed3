"""A prioritize body naming a filter answer's nodes again is decoded from that answer (extender.wire.answered_names):
always to what the full decoder builds, and to the same status and message when the body is wrong; the answers of a
served function keeping them equal those of one keeping nothing (EXTENDER_RESULT_CACHE=off), from 8 threads at once."""

from __future__ import annotations

import random
from contextlib import closing
from functools import partial
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.errors import RequestError
from extender.wire import decode
from extender.wire.answered_names import MAX_ANSWERS, AnsweredNames
from extender.wire.decode_cost import Meter
from extender.wire.fields import BuiltNames
from extender.wire.limits import MAX_DEPTH, MAX_NODES
from extender.wire.schemas import ExtenderArgsSchema
from tests.conftest import make_client
from tests.test_kept_equal_served import NAMES as SERVED_NAMES
from tests.test_kept_equal_served import from_threads, post, served_phases

POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u", "labels": {"app": "web"}}, "spec": {}}
NAMES = [f"node-{index}" for index in range(12)]


def decoded(body: bytes | bytearray, answered: AnsweredNames | None) -> tuple[str, Any]:
    """What decoding ``body`` as a prioritize body gives: ("payload", it) or ("error", status and message)."""
    try:
        return "payload", decode.decoder_for("prioritize", answered=answered)(body, Meter(32 << 20))
    except RequestError as exc:
        return "error", (exc.status, exc.message)


def prioritize_body(names: list[str], pod: Any = POD) -> bytes:
    """As kube-scheduler writes it: compact, ``NodeNames`` last."""
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def answered_with(*answers: list[str]) -> AnsweredNames:
    """Answers kept, as after a first prioritize over node names."""
    answered = prioritizing()
    for names in answers:
        answered.remember(names)
    return answered


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(st.text(min_size=1, max_size=12), min_size=2, max_size=20, unique=True),
    labels=st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
)
def test_a_body_naming_an_answer_decodes_to_what_the_full_decoder_builds(names, labels):
    pod = {**POD, "metadata": {**POD["metadata"], "labels": labels}}
    body = prioritize_body(names, pod)
    answered = answered_with(names)
    assert decoded(body, answered) == decoded(body, None) == ("payload", orjson.loads(body))
    assert answered.take(body) is None  # taken by the decoding: the shortcut was the one taken


def test_each_answer_is_taken_once_and_as_a_copy():
    answered = answered_with(NAMES)
    body = prioritize_body(NAMES)
    assert decoded(body, answered) == ("payload", orjson.loads(body))
    assert answered.take(body) is None
    # A filter answered on another thread at once puts back the answers it read, the one taken among them: what a
    # request does with the names it took does not change the kept ones.
    answered.remember(NAMES)
    read_by_that_filter = answered._answers
    found = answered.take(body)
    assert found is not None
    answered._answers = read_by_that_filter
    found[1].append("changed by the request that took them")
    assert decoded(body, answered) == ("payload", orjson.loads(body))


def test_names_taken_from_an_answer_are_known_distinct_and_loaded_as_they_are():
    """Part of a filter request's names, which its schema checked: the prioritize's schema takes them unchecked."""
    answered = answered_with(NAMES)
    kind, payload = decoded(prioritize_body(NAMES), answered)
    assert kind == "payload" and type(payload["NodeNames"]) is BuiltNames and payload["NodeNames"].distinct
    args = ExtenderArgsSchema().load(payload)
    assert args.node_names == NAMES


def prioritizing() -> AnsweredNames:
    answered = AnsweredNames()
    assert answered.take(prioritize_body(["node-x", "node-y"])) is None
    return answered


def test_answers_are_kept_once_a_prioritize_over_node_names_came():
    answered = AnsweredNames()
    answered.remember(NAMES)  # a scheduler without prioritizeVerb: nothing kept
    assert answered.take(prioritize_body(NAMES)) is None
    answered.remember(NAMES)
    assert answered.take(prioritize_body(NAMES)) is not None


def test_only_the_newest_answers_are_kept():
    answers = [NAMES[index:] for index in range(MAX_ANSWERS + 1)]
    answered = answered_with(*answers)
    assert answered.take(prioritize_body(answers[0])) is None  # the oldest went when the newest came
    for names in answers[1:]:
        found = answered.take(prioritize_body(names))
        assert found is not None and found[1] == names


def test_a_name_orjson_cannot_encode_is_not_kept():
    answered = answered_with(["node-a", "\ud800"])
    assert answered.take(b'{"Pod":{},"Nodes":null,"NodeNames":["node-a","\\ud800"]}') is None


ANSWER = NAMES[:3]
# Bodies that end with the answer's bytes (NAMES) but are not a prioritize body naming them: each decodes (or fails)
# exactly as the full decoder has it.
ODD_BODIES = {
    "no member before the names": '{,"NodeNames":NAMES}',
    "the names inside a string": '{"Pod":{"metadata":{"name":"x,"NodeNames":NAMES}',
    "the names twice": '{"Pod":{},"NodeNames":["other"],"Nodes":null,"NodeNames":NAMES}',
    "a comma too many": '{"Pod":{},"Nodes":null,,"NodeNames":NAMES}',
    "a member left open": '{"Pod":{},"Nodes":,"NodeNames":NAMES}',
    "not an object": '[{"Pod":{}},"NodeNames":NAMES}',
    "nested too deep": '{"Pod":DEEP,"Nodes":null,"NodeNames":NAMES}',
    "another member's name": '{"Pod":{},"Nodes":null,"NodeNamez":NAMES}',
    "too many nodes beside the names": '{"Pod":{},"Nodes":{"items":[ITEMS]},"NodeNames":NAMES}',
    "spaces around the names": '{"Pod":{}, "NodeNames": NAMES}',
    "a line after the body": '{"Pod":{},"Nodes":null,"NodeNames":NAMES}\n',
    "another answer's names": '{"Pod":{},"Nodes":null,"NodeNames":REVERSED}',
    "invalid UTF-8 before the names": '{"Pod":{"metadata":{"name":"\udcff"}},"Nodes":null,"NodeNames":NAMES}',
    "a valid body": '{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":NAMES}',
}
PARTS = {
    "NAMES": orjson.dumps(ANSWER).decode(),
    "REVERSED": orjson.dumps(ANSWER[::-1]).decode(),
    "DEEP": "[" * MAX_DEPTH + "]" * MAX_DEPTH,
    "ITEMS": ",".join(["0"] * (MAX_NODES + 1)),
}


def odd_body(template: str) -> bytes:
    for part, text in PARTS.items():
        template = template.replace(part, text)
    return template.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("body", list(ODD_BODIES.values()), ids=list(ODD_BODIES))
@pytest.mark.parametrize("kind", [bytes, bytearray])
def test_odd_bodies_ending_with_an_answer_decode_as_the_full_decoder_has_them(body, kind):
    data = kind(odd_body(body))
    assert decoded(data, answered_with(ANSWER)) == decoded(data, None)


def test_a_served_cycle_decodes_its_prioritize_from_the_filter_answer(monkeypatch):
    """Through the function's HTTP handling: the prioritize body naming the filter's answer is not decoded whole,
    and answers as it does with nothing kept."""
    whole: list[bytes] = []
    decode_full = decode.decode_full

    def counted(body: bytes | bytearray, meter: Meter) -> Any:
        whole.append(bytes(body))
        return decode_full(body, meter)

    monkeypatch.setattr(decode, "decode_full", counted)
    answers = []
    for cache in ("on", "off"):
        client = make_client(monkeypatch, EXTENDER_RESULT_CACHE=cache)
        client.post("/prioritize", data=prioritize_body(NAMES), content_type="application/json")  # the first pod's
        filtered = client.post("/filter", json={"Pod": POD, "Nodes": None, "NodeNames": NAMES}).get_json()
        body = prioritize_body(filtered["NodeNames"])
        whole.clear()
        answers.append(client.post("/prioritize", data=body, content_type="application/json").get_json())
        assert (body in whole) == (cache == "off")
    assert answers[0] == answers[1] and len(answers[0]) == len(NAMES)


CYCLES_PER_PHASE = 16


def cycles(rng: random.Random) -> list[tuple[dict[str, Any], list[str]]]:
    """kube-scheduler's requests for a pod: its filter's pod and names."""
    pods = [
        {"metadata": {"name": "p", "namespace": namespace, "uid": f"u{index}"}, "spec": {"priority": priority}}
        for index, (namespace, priority) in enumerate([("default", 0), ("ml", 1000), ("web", 0)])
    ]
    return [
        (rng.choice(pods), rng.sample(SERVED_NAMES, rng.randint(2, len(SERVED_NAMES))))
        for _ in range(CYCLES_PER_PHASE)
    ]


def scheduled(url: str, change: str, request: bytes) -> tuple[tuple[int, bytes], ...]:
    """Filter ``request`` (a pod and its names), then prioritize over what it kept, as kube-scheduler does;
    ``change``: the prioritize body altered."""
    pod, names = orjson.loads(request)
    status, answer = post(url, "filter", orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}))
    kept = orjson.loads(answer)["NodeNames"] if status == 200 else None
    if not kept:
        return ((status, answer),)
    if change == "one fewer":
        kept = kept[1:]
    elif change == "another pod":
        pod = {**pod, "spec": {"priority": 7}}
    return (status, answer), post(url, "prioritize", prioritize_body(kept, pod))


def test_eight_threads_scheduling_through_a_keeping_function_answer_as_through_one_keeping_nothing(
    apiserver, tmp_path
):
    rng = random.Random(38)
    with closing(served_phases(apiserver, tmp_path, rng)) as phases:
        for kept, plain in phases:
            requests_ = [
                (change, orjson.dumps([pod, names]))
                for pod, names in cycles(rng)
                for change in ("as sent", "one fewer", "another pod")
            ]
            expected = [scheduled(plain, change, request) for change, request in requests_]
            assert any(len(answers) == 2 and answers[1][0] == 200 for answers in expected)

            for index, answers in from_threads(partial(scheduled, kept), requests_):
                assert answers == expected[index], requests_[index]
