"""The caller token's redaction from log records: every form, every string a record carries, every served logger."""

from __future__ import annotations

import base64
import logging
import sys
from urllib.parse import quote

import pytest

from extender.http.token_redaction import REDACTED, SERVED_LOGGERS, Redactor, RedactTokens, redact_tokens_in_logs
from tests.token_leaks import assert_no_leak, leaks, record_text, watch

TOKEN = "rEdAct-Me_0123.456~abcdefghijk"
OTHER = "previous-T0ken-0123456789xyz"


def percent(text: str, case: str = "upper") -> str:
    encoded = "".join(f"%{byte:02X}" for byte in text.encode())
    return encoded.lower() if case == "lower" else encoded


FORMS = {
    "whole": TOKEN,
    "in a path": f"GET /my-extender/{TOKEN}/gpu/filter HTTP/1.1",
    "quoted": f"unknown profile '{TOKEN}': this policy serves default",
    "a 12-character piece": f"x {TOKEN[5:17]} y",
    "the first piece": TOKEN[:12],
    "the last piece": TOKEN[-12:],
    "upper case": TOKEN.upper(),
    "percent-encoded": percent(TOKEN),
    "percent-encoded, lower case": percent(TOKEN, "lower"),
    "percent-encoded twice": quote(percent(TOKEN), safe=""),
    "percent-encoded three times": quote(quote(percent(TOKEN), safe=""), safe=""),
    "a percent-encoded piece": percent(TOKEN[3:19]),
    "base64": base64.b64encode(TOKEN.encode()).decode(),
    "base64 in Basic credentials": "Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode(),
    "base64 after two bytes": base64.b64encode(b"ab" + TOKEN.encode() + b"cd").decode(),
    "URL-safe base64": base64.urlsafe_b64encode(b"\xfb\xff" + TOKEN.encode()).decode(),
    "repr of bytes": repr(f"GET /{TOKEN}/filter".encode()),
}


@pytest.mark.parametrize("text", FORMS.values(), ids=FORMS)
def test_every_form_of_the_token_is_redacted(text):
    redacted = Redactor([TOKEN]).redact(text)
    assert REDACTED in redacted
    assert not leaks(redacted, [TOKEN])
    assert TOKEN[3:15].lower() not in redacted.lower()


def test_the_previous_token_is_redacted_too():
    redactor = Redactor([TOKEN, OTHER])
    assert redactor.redact(f"/{OTHER}/filter and /{TOKEN}/filter") == f"{REDACTED} and {REDACTED}"


@pytest.mark.parametrize(
    "text",
    [
        "extender decision",
        "node gke-cluster-default-pool-0123abcd-wxyz rejected by NodeLabelPolicy rule 'ml-on-gpu-pool'",
        TOKEN[:11],  # shorter than a piece
        f"{TOKEN[:8]} {TOKEN[8:16]}",  # pieces apart
        "Basic " + base64.b64encode(b"user:another-secret-altogether").decode(),
        "%41%42%43",
    ],
)
def test_text_without_a_piece_of_the_token_is_left_as_it_is(text):
    assert Redactor([TOKEN]).redact(text) == text


def test_fields_are_redacted_in_a_copy_keys_included_and_the_callers_objects_left_alone():
    fields = {"path": f"/{TOKEN}/filter", "nodes": [TOKEN, "node-a"], TOKEN: 1, "count": 3, "nested": {"e": TOKEN}}
    redactor = Redactor([TOKEN])
    redacted = redactor.redact_fields(fields)
    assert redacted == {
        "path": REDACTED,
        "nodes": [REDACTED, "node-a"],
        REDACTED: 1,
        "count": 3,
        "nested": {"e": REDACTED},
    }
    assert fields["nodes"][0] == TOKEN and TOKEN in fields
    clean = {"path": "/<redacted>/filter", "count": 3}
    assert redactor.redact_fields(clean) is clean


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    entry = logging.LogRecord("extender", logging.ERROR, __file__, 1, message, args or None, None)
    entry.__dict__.update(extra)
    return entry


def test_the_filter_rewrites_every_string_a_record_carries():
    redact = RedactTokens(Redactor([TOKEN]))
    try:
        raise RuntimeError(f"no route for /{TOKEN}/filter")
    except RuntimeError:
        failure = sys.exc_info()
    entries = [
        record("unexpected failure serving %s", f"/{TOKEN}/filter", json_fields={"error": f"profile '{TOKEN}'"}),
        record("Invalid request from ip=1.2.3.4: Invalid HTTP Version: 'GET /%s HTTP/1.1 x'", TOKEN),
        record("arguments that do not fit %s %s", TOKEN),
        record("with an exception", exc_info=failure),
        record("with a stack", stack_info=f'  File "x.py", line 1, in f\n    route("/{TOKEN}/filter")'),
    ]
    for entry in entries:
        assert redact.filter(entry) is True
        text = record_text(entry)
        assert not leaks(text, [TOKEN]) and REDACTED in text, text
    assert "RuntimeError: no route for <redacted>" in entries[3].exc_text


def test_the_filter_sits_on_every_served_logger_once_and_goes_with_the_token():
    try:
        redact_tokens_in_logs([TOKEN])
        redact_tokens_in_logs([TOKEN, None])
        for name in SERVED_LOGGERS:
            assert len([f for f in logging.getLogger(name).filters if isinstance(f, RedactTokens)]) == 1
        redact_tokens_in_logs([None, ""])
        for name in SERVED_LOGGERS:
            assert not [f for f in logging.getLogger(name).filters if isinstance(f, RedactTokens)]
    finally:
        redact_tokens_in_logs([])


def test_gunicorn_s_own_lines_pass_the_filter(caplog):
    """gunicorn logs through these two loggers, whatever handlers it sets up on them."""
    watch(TOKEN)
    try:
        redact_tokens_in_logs([TOKEN])
        with caplog.at_level(logging.DEBUG):
            logging.getLogger("gunicorn.error").warning(f"Invalid request from ip=127.0.0.1: 'GET /{TOKEN} HTTP/1.1 x'")
            logging.getLogger("gunicorn.access").info('"GET /%s/healthz HTTP/1.1" 200', TOKEN)
    finally:
        redact_tokens_in_logs([])
    assert len(caplog.records) == 2
    assert_no_leak("\n".join(record_text(entry) for entry in caplog.records), "gunicorn's lines", [TOKEN])


def test_a_path_with_the_token_twice_is_logged_redacted(client_factory, caplog):
    """The error of ``/<token>/<token>/filter`` quotes the second segment as an unknown profile."""
    client = client_factory(EXTENDER_CALLER_TOKEN=TOKEN)
    with caplog.at_level(logging.INFO):
        response = client.post(f"/{TOKEN}/{TOKEN}/filter", data=b"{}", content_type="application/json")
    assert response.status_code == 200 and "unknown profile" in response.get_json()["Error"]
    errors = [entry.json_fields.get("error", "") for entry in caplog.records if hasattr(entry, "json_fields")]
    assert errors == [f"unknown profile '{REDACTED}': this policy serves default"]
