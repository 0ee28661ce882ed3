"""Log output: structured and traced on Google Cloud, plain lines locally, google-cloud-logging only where used."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys

import pytest

import extender.logs
from extender.decision_log import EVENT, MESSAGE, REJECTION_EVENT
from extender.logs import setup_logging
from tests.conftest import ROOT
from tests.test_decision_log import BIND, FULL_FILTER, write_policy

# What Cloud Run sets in every instance (the values are made up).
CLOUD_RUN = {"K_SERVICE": "my-extender", "K_REVISION": "my-extender-00001-abc", "K_CONFIGURATION": "my-extender"}
PROJECT = "my-project"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_TOKEN = "caller-T0ken.that~must_never-be-logged"
KUBERNETES_TOKEN = "eyJhbGciOiJSUzI1NiJ9.kubernetes-token-that-must-never-be-logged"
# google-cloud-logging and what it pulls in (functions-framework imports google.cloud.functions of its own).
LIBRARY_MODULES = ("google.cloud.logging", "google.auth", "google.api_core", "grpc")


@pytest.fixture(autouse=True)
def restore_logging(monkeypatch):
    """Put back the root handlers (pytest's own included) that the Google Cloud setup replaces."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    monkeypatch.setattr(extender.logs, "_installed", None)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def import_main(env: dict[str, str], then: str = "") -> dict[str, object]:
    """Import main.py in a fresh interpreter with just ``env`` on top of PATH, run ``then``; report what it loaded."""
    probe = (
        f"import json, logging, sys; import main; {then + '; ' if then else ''}"
        f"print(json.dumps({{'modules': sorted(m for m in sys.modules if m.startswith({LIBRARY_MODULES})), "
        "'handlers': [type(h).__name__ for h in logging.getLogger().handlers]}))"
    )
    clean = {"PATH": os.environ["PATH"], **env}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=clean, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_importing_main_off_google_cloud_does_not_import_google_cloud_logging():
    loaded = import_main({"K_SERVICE": "my-extender"})  # a function name alone is not Google Cloud
    assert loaded["modules"] == []
    assert loaded["handlers"] == ["StreamHandler"]


def test_importing_main_on_google_cloud_installs_the_structured_handler_alone_once_there_is_an_entry():
    env = {**CLOUD_RUN, "GOOGLE_CLOUD_PROJECT": PROJECT, "LOG_EXECUTION_ID": "true"}
    loaded = import_main(env)
    # Not before the first answer: importing the library would make that answer later.
    assert loaded["modules"] == []
    assert loaded["handlers"] == ["DeferredCloudHandler"]
    loaded = import_main(
        env, then="logging.getLogger('extender').info('listed'); logging.getLogger().handlers[0].flush()"
    )
    assert "google.cloud.logging_v2.handlers.structured_log" in loaded["modules"]
    assert loaded["handlers"] == ["ExtenderLogHandler"]


def cloud_client(client_factory, tmp_path, monkeypatch, **env):
    for name, value in {**CLOUD_RUN, "GOOGLE_CLOUD_PROJECT": PROJECT}.items():
        monkeypatch.setenv(name, value)
    client = client_factory(write_policy(tmp_path), **env)
    stream = io.StringIO()
    setup_logging(stream)  # the same setup main.py ran, writing where the test can read
    return client, stream


def written(stream: io.StringIO) -> str:
    """What reached ``stream``, once entries held for Cloud Logging's handler are handed over."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    return stream.getvalue()


def entries(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in written(stream).splitlines()]


def decision_entries(stream: io.StringIO) -> list[dict]:
    return [entry for entry in entries(stream) if entry.get("event") == EVENT]


@pytest.mark.parametrize(
    ("header", "value", "span"),
    [
        ("traceparent", f"00-{TRACE_ID}-b7ad6b7169203331-01", "b7ad6b7169203331"),
        ("X-Cloud-Trace-Context", f"{TRACE_ID}/1;o=1", "0000000000000001"),
    ],
)
def test_on_google_cloud_each_decision_is_one_json_line_in_the_request_trace(
    client_factory, tmp_path, monkeypatch, header, value, span
):
    client, stream = cloud_client(client_factory, tmp_path, monkeypatch)
    path = f"/my-extender/{FULL_FILTER.verb}"
    response = client.post(path, data=FULL_FILTER.body, content_type="application/json", headers={header: value})
    assert response.status_code == 200
    [entry] = decision_entries(stream)
    assert entry["message"] == MESSAGE
    assert entry["severity"] == "INFO"
    assert entry["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{TRACE_ID}"
    assert entry["logging.googleapis.com/spanId"] == span
    assert entry["logging.googleapis.com/trace_sampled"] is True
    # The jsonPayload fields metrics read, at the top level of the line.
    assert (entry["verb"], entry["profile"], entry["nodesIn"], entry["nodesOut"]) == ("filter", "default", 4, 3)
    assert isinstance(entry["durationMs"], float) and entry["budgetMs"] == 5000
    assert entry["pod"]["name"] == FULL_FILTER.request["Pod"]["metadata"]["name"]
    # No request URL: it would carry the caller token.
    assert entry["httpRequest"] == {}


def test_every_entry_of_a_request_is_in_that_requests_trace_and_no_other(client_factory, tmp_path, monkeypatch):
    """The trace is read once per request (``RequestTraceFilter``): the decision entry and the rejection entry of each
    request carry its own, the next request's theirs, entries written once Cloud Logging's handler is in place too."""
    client, stream = cloud_client(client_factory, tmp_path, monkeypatch)
    path = f"/my-extender/{FULL_FILTER.verb}"
    client.post(path, data=FULL_FILTER.body, content_type="application/json")
    written(stream)  # Cloud Logging's handler in place from here on: entries are written as they are logged
    traces = ["4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"]
    for trace in traces:
        headers = {"traceparent": f"00-{trace}-00f067aa0ba902b7-01"}
        assert client.post(path, data=FULL_FILTER.body, content_type="application/json", headers=headers).status_code
    # The last two requests' entries (the first request's held no trace).
    written_entries = [entry for entry in entries(stream) if entry.get("event") in (EVENT, REJECTION_EVENT)][-4:]
    assert [entry["event"] for entry in written_entries] == [EVENT, REJECTION_EVENT] * 2
    assert [entry["logging.googleapis.com/trace"] for entry in written_entries] == [
        f"projects/{PROJECT}/traces/{trace}" for trace in traces for _ in range(2)
    ]
    assert all(entry["httpRequest"] == {} for entry in written_entries)
    loggers = [entry["logging.googleapis.com/labels"]["python_logger"] for entry in written_entries]
    assert loggers == ["extender.decision", "extender.rejection"] * 2


def test_the_payload_encoder_writes_what_the_json_module_would_and_only_json():
    """orjson encodes the entries' payload: the same values as json.dumps, a NaN as null rather than json's NaN (which
    no JSON reader takes: Cloud Logging would keep the line as text), an integer past 64 bits as json writes it."""
    from extender.logs.cloud import PayloadEncoder

    fields = {"node": "nœud-ü 🚀", "facts": {"cpu": {"value": 0.564, "ageSeconds": 3.7}}, "count": 764, 7: [None, True]}
    encoded = json.dumps(fields, ensure_ascii=False, cls=PayloadEncoder)
    assert json.loads(encoded) == json.loads(json.dumps(fields, ensure_ascii=False))
    assert json.loads(json.dumps({"value": float("nan")}, cls=PayloadEncoder)) == {"value": None}
    assert json.dumps({"uid": 2**70}, cls=PayloadEncoder) == json.dumps({"uid": 2**70})


def test_on_google_cloud_severity_follows_the_decision(client_factory, tmp_path, monkeypatch):
    client, stream = cloud_client(client_factory, tmp_path, monkeypatch)
    client.post("/filter", data=b"{", content_type="application/json")
    client.post("/bind", data=BIND.body, content_type="application/json")
    rejected, failed = decision_entries(stream)
    assert (rejected["severity"], rejected["status"]) == ("WARNING", 400)
    assert (failed["severity"], failed["status"]) == ("ERROR", 200)
    assert "malformed JSON" in rejected["error"] and "binding is not configured" in failed["error"]


def test_locally_each_decision_is_one_readable_line(client_factory, tmp_path):
    client = client_factory(write_policy(tmp_path))
    stream = io.StringIO()
    setup_logging(stream)
    client.post("/filter", data=FULL_FILTER.body, content_type="application/json")
    # The decision, then what its one rejecting plugin rejected (for the rejections metric).
    line, rejection = stream.getvalue().splitlines()
    assert " INFO extender.decision: extender decision event=extender.decision verb=filter profile=default " in line
    assert " nodesIn=4 nodesOut=3 " in line
    assert '"reason":"NodeNameFilter: ' in line or '"reason":"node name' in line
    assert " INFO extender.rejection: extender rejection event=extender.rejection verb=filter " in rejection
    assert rejection.endswith(' plugin=NodeNameFilter rule="" count=1'), rejection


def test_setting_up_again_replaces_the_handler_it_installed(monkeypatch):
    root = logging.getLogger()
    before = list(root.handlers)
    setup_logging(io.StringIO())
    setup_logging(io.StringIO())
    assert len(root.handlers) == len(before) + 1
    for name, value in {**CLOUD_RUN, "GOOGLE_CLOUD_PROJECT": PROJECT}.items():
        monkeypatch.setenv(name, value)
    setup_logging(io.StringIO())
    assert [type(handler).__name__ for handler in root.handlers] == ["DeferredCloudHandler"]


def make_every_kind_of_request(client) -> None:
    body, json_type = FULL_FILTER.body, "application/json"
    for path, data in [
        (f"/{CALLER_TOKEN}/filter", body),
        (f"/my-extender/{CALLER_TOKEN}/names/filter", body),
        (f"/{CALLER_TOKEN}/prioritize", body),
        (f"/{CALLER_TOKEN}/bind", BIND.body),
        (f"/{CALLER_TOKEN}/filter", b"{"),
        (f"/{CALLER_TOKEN}/no-such-profile/filter", body),
        (f"/{CALLER_TOKEN[:-1]}/filter", body),
        (f"/{CALLER_TOKEN}x/filter", body),
    ]:
        client.post(path, data=data, content_type=json_type)
    client.get(f"/{CALLER_TOKEN}/healthz")


@pytest.mark.parametrize("on_google_cloud", [False, True], ids=["local", "google-cloud"])
def test_no_token_ever_reaches_the_logs(client_factory, tmp_path, monkeypatch, caplog, capfd, on_google_cloud):
    caplog.set_level(logging.DEBUG)
    secrets = {
        "EXTENDER_CALLER_TOKEN": CALLER_TOKEN,
        "KUBERNETES_API_URL": "https://127.0.0.1:9",
        "KUBERNETES_TOKEN": KUBERNETES_TOKEN,
    }
    if on_google_cloud:
        client, stream = cloud_client(client_factory, tmp_path, monkeypatch, **secrets)
    else:
        client, stream = client_factory(write_policy(tmp_path), **secrets), io.StringIO()
        setup_logging(stream)

    def crash(*args):
        raise RuntimeError("boom")

    make_every_kind_of_request(client)
    monkeypatch.setattr("extender.verbs.filtering.handle", crash)
    client.post(f"/{CALLER_TOKEN}/filter", data=FULL_FILTER.body, content_type="application/json")

    captured = capfd.readouterr()
    logged = "\n".join([written(stream), caplog.text, captured.out, captured.err])
    assert logged.count("extender decision") >= 10  # the requests were logged ...
    for secret in (CALLER_TOKEN, CALLER_TOKEN[:-1], KUBERNETES_TOKEN, KUBERNETES_TOKEN.split(".")[1]):
        assert secret not in logged  # ... without the secrets, or pieces of them


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"},
        {"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-00"},
        {"traceparent": "ff-not-a-trace"},
        {"traceparent": f"00-{'0' * 32}-b7ad6b7169203331-01", "X-Cloud-Trace-Context": f"{TRACE_ID}/7;o=1"},
        {"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"},
        {"X-Cloud-Trace-Context": f"{TRACE_ID}"},
        {"X-Cloud-Trace-Context": f"{TRACE_ID}/{2**64};o=0"},
        {"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01", "X-Cloud-Trace-Context": "105445aa7843bc8b/1"},
    ],
)
@pytest.mark.parametrize("in_span", [False, True])
def test_an_entry_s_trace_is_the_one_the_library_reads_from_the_request(headers, in_span):
    """The trace is read as google-cloud-logging's get_request_data reads it (OpenTelemetry's span first, then the
    headers), without the request's URL and user agent it would work out too."""
    import flask
    import opentelemetry.trace as otel
    from google.cloud.logging_v2.handlers._helpers import get_request_data

    from extender.logs.cloud import _request_trace

    span = otel.NonRecordingSpan(
        otel.SpanContext(int("4bf92f3577b34da6a3ce929d0e0e4736", 16), 0x00F067AA0BA902B7, False, otel.TraceFlags(1))
    )
    headers = {**headers, "User-Agent": "kube-scheduler/v1.35.4 (linux/amd64) kubernetes/abcdef0"}
    with flask.Flask(__name__).test_request_context("/token/filter", method="POST", headers=headers):
        with otel.use_span(span) if in_span else contextlib.nullcontext():
            _, trace, span_id, sampled = get_request_data()
            assert _request_trace() == (trace, span_id, bool(sampled))
