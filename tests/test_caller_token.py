"""The caller token: the only way in when configured, never revealed, never logged."""

from __future__ import annotations

import logging

import pytest

from extender.verbs import filtering
from tests.recordings import exchanges

TOKEN = "s3cr3t-T0ken_with.every~kind"
FILTER = next(e for e in exchanges() if e.verb == "filter" and e.node_cache_capable)


@pytest.fixture
def guarded(client_factory):
    return client_factory(EXTENDER_CALLER_TOKEN=TOKEN, K_SERVICE="my-extender")


def post_filter(client, path, body=FILTER.body):
    return client.post(path, data=body, content_type="application/json")


@pytest.mark.parametrize(
    "path",
    [f"/{TOKEN}/filter", f"/{TOKEN}/default/filter", f"/my-extender/{TOKEN}/filter", f"/{TOKEN}//filter"],
)
def test_paths_with_the_token_are_served(guarded, path):
    response = post_filter(guarded, path)
    assert response.status_code == 200, response.data
    assert response.get_json()["NodeNames"]


def test_healthz_needs_the_token_too(guarded):
    assert guarded.get(f"/{TOKEN}/healthz").get_json()["status"] == "ok"
    assert guarded.get("/healthz").status_code == 404


WITHOUT_TOKEN = [
    "/filter",
    "/healthz",
    "/",
    "/default/filter",
    "/my-extender/filter",
    f"/{TOKEN[:-1]}/filter",
    f"/{TOKEN}x/filter",
    f"/{TOKEN.upper()}/filter",
    f"/x{TOKEN}/filter",
    f"/{TOKEN}",
    f"/filter/{TOKEN}/filter",
    f"/my-extender/my-extender/{TOKEN}/filter",
    "/nosuchverb",
    "/%C3%A9t%C3%A9/filter",
]


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_every_path_without_the_token_gets_the_same_bare_404(guarded, method):
    answers = set()
    for path in WITHOUT_TOKEN:
        response = guarded.open(path, method=method, data=FILTER.body, content_type="application/json")
        answers.add((response.status_code, response.data, tuple(sorted(response.headers.items()))))
    assert answers == {
        (404, b'{"Error":"not found"}', (("Content-Length", "21"), ("Content-Type", "application/json")))
    }


def test_authenticated_callers_get_detailed_errors(guarded):
    assert "unknown verb 'filtre'" in guarded.post(f"/{TOKEN}/filtre").get_json()["Error"]
    # The scheduler's own call, with an unknown profile in its urlPrefix: the reason in a 200, not the URL in an event.
    failed_with(post_filter(guarded, f"/{TOKEN}/gpu/filter"), "unknown profile 'gpu'")
    response = guarded.get(f"/{TOKEN}/filter")
    assert response.status_code == 405 and response.headers["Allow"] == "POST"


def test_without_a_token_configured_every_path_is_open(client):
    assert post_filter(client, "/filter").status_code == 200
    assert post_filter(client, f"/{TOKEN}/filter").status_code == 404


def failed_with(response, problem):
    """kube-scheduler's view: HTTP 200 (so its event quotes no URL), the problem in ``Error``."""
    assert response.status_code == 200, response.data
    assert problem in response.get_json()["Error"]
    assert problem in response.headers["X-Extender-Error"]


def test_the_token_is_never_logged(guarded, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    failed_with(post_filter(guarded, f"/{TOKEN}/filter", b"{"), "malformed JSON")
    failed_with(post_filter(guarded, f"/my-extender/{TOKEN}/default/filter", b"[]"), "invalid ExtenderArgs")
    assert post_filter(guarded, f"/{TOKEN[:-2]}/filter").status_code == 404

    def crash(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(filtering, "handle", crash)
    failed_with(post_filter(guarded, f"/{TOKEN}/filter"), "internal error: RuntimeError: boom")
    # Everything a record carries: message, arguments, structured fields, traceback.
    logged = "\n".join(f"{record.getMessage()} {vars(record)}" for record in caplog.records)
    assert TOKEN[:-2] not in logged
    paths = [record.json_fields["path"] for record in caplog.records if hasattr(record, "json_fields")]
    assert paths == [
        "/<redacted>/filter",
        "/my-extender/<redacted>/default/filter",
        "/<redacted>/filter",
        "/<redacted>/filter",
    ]
    assert "unexpected failure serving /<redacted>/filter" in logged


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        ("short", "at least 16 characters"),
        ("with/a/slash/in/the/middle", "at least 16 characters"),
        ("with spaces in the middle", "at least 16 characters"),
        ("%2Fpercent-encoded%2F", "at least 16 characters"),
        ("ünicode-ünicode-ünicode", "at least 16 characters"),
    ],
)
def test_a_malformed_token_stops_start_up_without_echoing_it(client_factory, token, problem):
    with pytest.raises(SystemExit, match=problem) as caught:
        client_factory(EXTENDER_CALLER_TOKEN=token)
    assert token not in str(caught.value)


def test_a_token_that_is_also_a_public_name_stops_start_up(client_factory):
    with pytest.raises(SystemExit, match="must not be a verb, profile or function name"):
        client_factory(EXTENDER_CALLER_TOKEN="my-extender-function", K_SERVICE="my-extender-function")


def test_surrounding_whitespace_from_a_secret_file_is_ignored(client_factory):
    client = client_factory(EXTENDER_CALLER_TOKEN=f"{TOKEN}\n")
    assert post_filter(client, f"/{TOKEN}/filter").status_code == 200


@pytest.mark.parametrize(
    ("verb", "shape"),
    [
        ("filter", {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}}),
        ("preempt", {"NodeNameToMetaVictims": {}}),
        ("bind", {}),
    ],
)
@pytest.mark.parametrize(
    ("body", "content_type", "problem"),
    [
        (b"{", "application/json", "malformed JSON"),
        (b"", "application/json", "empty body"),
        (b"{}", "text/plain", "Content-Type must be application/json"),
        (b"x" * 2048, "application/json", "body too large: 2048 bytes declared, over the 1024-byte limit"),
    ],
)
def test_failures_on_the_token_path_answer_200_with_error_never_a_status_that_shows_the_url(
    client_factory, verb, shape, body, content_type, problem
):
    """The scheduler quotes the URL (and so the token) in pod events for any status but 200; Error is shown instead."""
    client = client_factory(EXTENDER_CALLER_TOKEN=TOKEN, EXTENDER_MAX_BODY_BYTES="1024")
    response = client.post(f"/{TOKEN}/{verb}", data=body, content_type=content_type)
    failed_with(response, problem)
    assert response.get_json() == {**shape, "Error": response.get_json()["Error"]}


def test_a_failed_prioritize_on_the_token_path_is_a_valid_empty_score_list_with_the_reason_in_a_header(client_factory):
    client = client_factory(EXTENDER_CALLER_TOKEN=TOKEN)
    response = client.post(f"/{TOKEN}/prioritize", data=b"{", content_type="application/json")
    assert response.status_code == 200 and response.get_json() == []
    assert "malformed JSON" in response.headers["X-Extender-Error"]


def test_without_a_token_failures_keep_their_status(client):
    assert post_filter(client, "/filter", b"{").status_code == 400


def test_two_tokens_are_accepted_during_a_rotation(client_factory):
    previous = "previous-T0ken-0123456789"
    client = client_factory(EXTENDER_CALLER_TOKEN=TOKEN, EXTENDER_CALLER_TOKEN_PREVIOUS=previous)
    assert post_filter(client, f"/{TOKEN}/filter").status_code == 200
    assert post_filter(client, f"/{previous}/filter").status_code == 200
    assert post_filter(client, f"/{previous[:-1]}/filter").status_code == 404
    assert client.get(f"/{previous}/healthz").status_code == 200


def test_a_previous_token_alone_or_malformed_stops_start_up(client_factory, monkeypatch):
    monkeypatch.delenv("EXTENDER_CALLER_TOKEN", raising=False)
    with pytest.raises(SystemExit, match="EXTENDER_CALLER_TOKEN_PREVIOUS is set without EXTENDER_CALLER_TOKEN"):
        client_factory(EXTENDER_CALLER_TOKEN_PREVIOUS="previous-T0ken-0123456789")
    with pytest.raises(SystemExit, match="EXTENDER_CALLER_TOKEN_PREVIOUS must be at least 16 characters"):
        client_factory(EXTENDER_CALLER_TOKEN=TOKEN, EXTENDER_CALLER_TOKEN_PREVIOUS="short")


def test_the_extender_s_repr_shows_neither_token(monkeypatch):
    from extender.http.handler import Extender

    previous = "previous-T0ken-0123456789"
    monkeypatch.setenv("EXTENDER_CALLER_TOKEN", TOKEN)
    monkeypatch.setenv("EXTENDER_CALLER_TOKEN_PREVIOUS", previous)
    monkeypatch.setenv("KUBERNETES_TOKEN", "kube-s3cret-token")
    monkeypatch.setenv("KUBERNETES_API_URL", "https://127.0.0.1:6443")
    extender = Extender.from_environment()
    assert extender.settings.caller_token == TOKEN and extender.settings.previous_caller_token == previous
    shown = f"{extender!r} {extender!s} {extender.settings!r} {extender.settings!s}"
    assert "default" in shown and "caller_token='<set>'" in shown
    assert TOKEN not in shown and previous not in shown and "kube-s3cret-token" not in shown
