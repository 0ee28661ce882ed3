"""Every recorded kube-scheduler request, of every scheduler version recorded, replays through the function and gets
an answer the scheduler accepts."""

from __future__ import annotations

import json

import pytest
import requests

from testkit.scheduler_checks import check_answer
from tests.conftest import ROOT
from tests.recordings import exchanges

EXCHANGES = exchanges()
ANSWERED = [exchange for exchange in EXCHANGES if exchange.answered_200]


@pytest.mark.parametrize("exchange", ANSWERED, ids=lambda e: e.id)
def test_checks_accept_what_the_real_scheduler_accepted(exchange):
    # The recorded 200 answers were accepted by a real kube-scheduler: our checks must agree with it. (An answer with
    # another status, such as the v1.35 recording harness's failed binds, is a failed call whatever its body.)
    check_answer(exchange.verb, exchange.request, exchange.recorded_response)


@pytest.mark.parametrize("exchange", EXCHANGES, ids=lambda e: e.id)
def test_replay_in_process(client, exchange):
    response = client.post(
        f"/{exchange.verb}", data=exchange.body, headers=exchange.meta["headers"] | {"Host": "localhost"}
    )
    assert response.status_code == 200, response.data
    assert response.mimetype == "application/json"
    check_answer(exchange.verb, exchange.request, response.get_json())


@pytest.mark.parametrize("exchange", EXCHANGES, ids=lambda e: e.id)
def test_replay_through_a_served_process(served_url, exchange):
    headers = {
        name: value for name, value in exchange.meta["headers"].items() if name not in ("Host", "Content-Length")
    }
    response = requests.post(f"{served_url}//{exchange.verb}", data=exchange.body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    check_answer(exchange.verb, exchange.request, response.json())


def test_filter_answers_in_the_mode_of_the_request(client):
    for exchange in EXCHANGES:
        if exchange.verb != "filter":
            continue
        answer = client.post("/filter", data=exchange.body, content_type="application/json").get_json()
        assert ("Nodes" in answer) is (not exchange.node_cache_capable), exchange.id
        assert ("NodeNames" in answer) is exchange.node_cache_capable, exchange.id


def test_bind_never_claims_success_without_a_binding(client):
    bind = next(e for e in EXCHANGES if e.verb == "bind")
    answer = client.post("/bind", data=bind.body, content_type="application/json").get_json()
    assert "binding is not configured" in answer["Error"]


def test_function_name_prefix_is_accepted(client_factory):
    client = client_factory(K_SERVICE="my-extender")
    exchange = EXCHANGES[0]
    response = client.post(f"/my-extender/{exchange.verb}", data=exchange.body, content_type="application/json")
    assert response.status_code == 200


def test_healthz_names_version_and_policy(client):
    answer = client.get("/healthz").get_json()
    assert answer["status"] == "ok"
    assert answer["policy"]["source"] == "embedded default"
    assert answer["policy"]["profiles"] == ["default"]
    assert len(answer["policy"]["sha256"]) == 64


@pytest.mark.parametrize("example", sorted((ROOT / "examples" / "requests").glob("*.json")), ids=lambda p: p.name)
def test_readme_example_requests_answer(client, example):
    verb = example.name.split("-")[0]
    response = client.post(f"/{verb}", data=example.read_bytes(), content_type="application/json")
    assert response.status_code == 200, response.data
    check_answer(verb, json.loads(example.read_text()), response.get_json())
