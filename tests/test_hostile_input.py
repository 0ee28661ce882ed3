"""Hostile input against the real served function: nothing a caller sends gets a 5xx or an unclear answer.

Requests go over HTTP to a real ``functions-framework`` process. schemathesis
derives valid and invalid requests from ``docs/openapi.yaml`` and checks every
answer against it; hypothesis and plain loops make what no schema describes:
malformed and truncated JSON, non-UTF-8 bytes, deep nesting, huge strings and
arrays, gzip bodies, a wrong type in every field of real recorded requests,
duplicate and unknown node names, every method on every path, with and without
a caller token. Every answer must be under 500 and, unless it is
functions-framework's own HTML 404, JSON that names the problem. The number of
requests per suite and status is printed at the end of the module.

Example counts are fixed and hypothesis is derandomized: every run sends the
same number of requests, in about a minute on two cores.
"""

from __future__ import annotations

import copy
import gzip
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any
from urllib.parse import quote

import jsonschema
import orjson
import pytest
import requests
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from extender.wire.limits import MAX_DEPTH, MAX_NODES
from testkit.scheduler_checks import check_answer
from tests.conftest import ROOT, serving
from tests.recordings import exchanges
from tests.tally import Tally
from tests.test_limits import nested

OPENAPI = ROOT / "docs" / "openapi.yaml"
TOKEN = "fuzz-caller-token-0123456789"
VERBS = ("filter", "prioritize", "preempt", "bind", "healthz")
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND")
JSON = {"Content-Type": "application/json"}


def recorded(scenario: str, verb: str) -> dict[str, Any]:
    return next(e for e in exchanges() if e.scenario.startswith(scenario) and e.verb == verb).request


# One real request of each kind the scheduler sends: name -> (verb, request).
SAMPLES = {
    "filter, full nodes": ("filter", recorded("a-nodecache-false", "filter")),
    "prioritize, node names": ("prioritize", recorded("b-nodecache-true", "prioritize")),
    "preempt, victim pods": ("preempt", recorded("g-preempt-nodecache-false", "preempt")),
    "preempt, victim UIDs": ("preempt", recorded("g-preempt-nodecache-true", "preempt")),
    "bind": ("bind", recorded("i1-bind", "bind")),
}
NAMES = SAMPLES["prioritize, node names"][1]
FULL = SAMPLES["filter, full nodes"][1]


def settings_for(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


TALLY = Tally()


@pytest.fixture(scope="module", autouse=True)
def report_counts(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    TALLY.print_report(request)
    assert all(status < 500 for counts in TALLY.by_suite.values() for status in counts)


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as keep_alive:
        yield keep_alive


@pytest.fixture(scope="module")
def guarded_url() -> Iterator[str]:
    with serving(EXTENDER_CALLER_TOKEN=TOKEN) as url:
        yield url


def send(
    session: requests.Session,
    suite: str,
    method: str,
    url: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> requests.Response:
    response = session.request(method, url, data=body, headers=headers, timeout=60)
    TALLY.add(suite, response.status_code)
    check_clear(response, method)
    return response


def check_clear(response: requests.Response, method: str) -> None:
    """Under 500; JSON, and for errors a non-empty ``Error``, unless functions-framework answered itself."""
    assert response.status_code < 500, (response.status_code, response.text[:2000])
    if method == "HEAD":
        return
    content_type = response.headers.get("Content-Type", "")
    if content_type.startswith("text/html"):
        assert response.status_code == 404, "only functions-framework's own 404 is HTML"
        return
    assert content_type == "application/json", content_type
    answer = response.json()
    if response.status_code >= 400:
        assert isinstance(answer, dict) and isinstance(answer.get("Error"), str) and answer["Error"], answer


# --- schemathesis: requests the OpenAPI description allows, and requests it forbids --------------------------

SCHEMA = schemathesis.openapi.from_path(OPENAPI)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


def cases(operation: Any) -> list[tuple[Any, GenerationMode, int]]:
    # Profile-prefixed paths mostly reach an unknown profile (404): fewer examples buy the same coverage.
    examples = 20 if "{profile}" in operation.path else 100
    modes = [GenerationMode.POSITIVE]
    if operation.body or operation.path_parameters:
        modes.append(GenerationMode.NEGATIVE)
    return [(operation, mode, examples) for mode in modes]


@pytest.mark.parametrize(
    ("operation", "mode", "examples"),
    [case for operation in OPERATIONS for case in cases(operation)],
    ids=lambda value: f"{value.method.upper()} {value.path}" if hasattr(value, "path") else str(value),
)
def test_schemathesis_requests_get_documented_answers(served_url, session, operation, mode, examples):
    @settings_for(examples)
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call_and_validate(base_url=served_url, session=session, checks=CHECKS)
        TALLY.add(f"schemathesis {mode.value}", response.status_code)

    run()


WIRE_TYPES = {
    "filter": ("ExtenderArgs", "ExtenderFilterResult"),
    "prioritize": ("ExtenderArgs", "HostPriorityList"),
    "preempt": ("ExtenderPreemptionArgs", "ExtenderPreemptionResult"),
    "bind": ("ExtenderBindingArgs", "ExtenderBindingResult"),
}


@cache
def validator(component: str) -> jsonschema.Draft202012Validator:
    document = yaml.safe_load(OPENAPI.read_text())
    schema = {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("exchange", exchanges(), ids=lambda e: e.id)
def test_the_openapi_description_fits_real_scheduler_traffic(served_url, session, exchange):
    """What a real kube-scheduler sent fits the request types; our answers to it fit the answer types."""
    request_type, answer_type = WIRE_TYPES[exchange.verb]
    validator(request_type).validate(exchange.request)
    response = send(session, "recorded traffic", "POST", f"{served_url}/{exchange.verb}", exchange.body, JSON)
    assert response.status_code == 200
    validator(answer_type).validate(response.json())


# --- every method on every path ----------------------------------------------------------------------------

PATHS = [
    "/", "/filter", "/prioritize", "/preempt", "/bind", "/healthz", "/default/filter", "/default/healthz",
    "/gpu/filter", "/a/b/filter", "/filtre", "/filter/", "//filter", "/filter/extra", "/FILTER", "/robots.txt",
    "/favicon.ico", "/%00/filter", "/..%2F..%2Fetc%2Fpasswd", "/filter?x=1", "/" + "x" * 10_000 + "/filter",
]  # fmt: skip


@pytest.mark.parametrize("method", METHODS)
def test_every_method_on_every_path(served_url, session, method):
    body = orjson.dumps(NAMES)
    for path in PATHS:
        send(session, "methods x paths", method, served_url + path, body, JSON)
        send(session, "methods x paths", method, served_url + path)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_on_every_path_without_the_token_is_the_same_404(guarded_url, session, method):
    body = orjson.dumps(NAMES)
    for path in PATHS:
        if path in ("/robots.txt", "/favicon.ico"):
            continue  # answered by functions-framework itself, token or not
        response = send(session, "methods x paths, token guard", method, guarded_url + path, body, JSON)
        assert response.status_code == 404
        assert response.content == (b"" if method == "HEAD" else b'{"Error":"not found"}')
    for verb in VERBS:
        response = send(session, "methods x paths, token guard", method, f"{guarded_url}/{TOKEN}/{verb}", body, JSON)
        assert response.status_code != 404


# --- a wrong type in every field of real requests ----------------------------------------------------------

WRONG_VALUES = [None, False, 7, 1.5, "x", [], {}]


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from json_paths(child, (*path, key))


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    copied = copy.deepcopy(document)
    parent = copied
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return copied


@pytest.mark.parametrize("sample", SAMPLES)
def test_a_wrong_type_in_every_field(served_url, session, sample):
    verb, request = SAMPLES[sample]
    for path in list(json_paths(request))[1:]:
        original = request
        for key in path:
            original = original[key]
        for value in WRONG_VALUES:
            if type(value) is type(original):
                continue
            mutated = replaced(request, path, value)
            response = send(
                session, "wrong type in every field", "POST", f"{served_url}/{verb}", orjson.dumps(mutated), JSON
            )
            if response.status_code == 200:
                check_answer(verb, mutated, response.json())


# --- bytes no schema describes -----------------------------------------------------------------------------


@st.composite
def hostile_bodies(draw: st.DrawFn) -> tuple[str, bytes, dict[str, str]]:
    verb, request = SAMPLES[draw(st.sampled_from(sorted(SAMPLES)))]
    valid = orjson.dumps(request)
    kind = draw(
        st.sampled_from(["truncated", "flipped", "inserted", "random", "deep", "non-utf8", "gzip", "content-type"])
    )
    headers = dict(JSON)
    if kind == "truncated":
        body = valid[: draw(st.integers(0, len(valid) - 1))]
    elif kind == "flipped":
        at = draw(st.integers(0, len(valid) - 1))
        body = valid[:at] + bytes([valid[at] ^ draw(st.integers(1, 255))]) + valid[at + 1 :]
    elif kind == "inserted":
        at = draw(st.integers(0, len(valid)))
        body = valid[:at] + draw(st.binary(min_size=1, max_size=64)) + valid[at:]
    elif kind == "random":
        body = draw(st.binary(max_size=4096))
    elif kind == "deep":
        depth = draw(st.integers(MAX_DEPTH - 5, 5000))
        body = valid[:-1] + b',"Deep":' + nested(depth) + b"}"
    elif kind == "non-utf8":
        # Invalid UTF-8 inside a string value: a lone continuation byte, an overlong form, a surrogate.
        bad = draw(st.sampled_from([b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xff", b"\xfe\xfe"]))
        at = valid.index(b'"') + 1
        body = valid[:at] + bad + valid[at:]
    elif kind == "gzip":
        body = gzip.compress(valid)
        if draw(st.booleans()):
            headers["Content-Encoding"] = draw(st.sampled_from(["gzip", "GZIP", "x-gzip", "deflate, gzip"]))
    else:
        body = valid
        headers["Content-Type"] = draw(
            st.sampled_from(
                [
                    "text/plain",
                    "application/json-patch+json",
                    "application/x-www-form-urlencoded",
                    "",
                    "application/json; charset=latin-1",
                    "*/*",
                ]
            )
        )
    return verb, body, headers


@settings_for(400)
@given(case=hostile_bodies())
def test_hostile_bytes(served_url, session, case):
    verb, body, headers = case
    send(session, "hostile bytes", "POST", f"{served_url}/{verb}", body, headers)


# --- node names: duplicates, unknown, strange --------------------------------------------------------------

node_names = st.one_of(
    st.sampled_from(["node-a", "node-b", "node-c"]),  # small pool: duplicates are likely
    st.text(min_size=0, max_size=40),  # anything, including "" and control characters
    st.text(alphabet="abc-.", min_size=200, max_size=2000),  # long
)


@st.composite
def node_requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    names = draw(st.lists(node_names, max_size=30))
    pod = NAMES["Pod"]
    form = draw(st.sampled_from(["NodeNames", "Nodes", "NodeNameToMetaVictims", "NodeNameToVictims"]))
    if form == "NodeNames":
        return draw(st.sampled_from(["filter", "prioritize"])), {"Pod": pod, "Nodes": None, "NodeNames": names}
    if form == "Nodes":
        items = [
            {"metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "e2-standard-4"}}}
            for name in names
        ]
        return draw(st.sampled_from(["filter", "prioritize"])), {
            "Pod": pod,
            "Nodes": {"metadata": {}, "items": items},
            "NodeNames": None,
        }
    uids = draw(st.lists(st.sampled_from(["uid-1", "uid-2", "uid-3"]) | st.text(max_size=10), max_size=4))
    if form == "NodeNameToMetaVictims":
        victims = {
            name: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": draw(st.integers(-5, 5))}
            for name in names
        }
    else:
        victims = {
            name: {"Pods": [{"metadata": {"name": uid, "uid": uid}} for uid in uids], "NumPDBViolations": 0}
            for name in names
        }
    other = "NodeNameToVictims" if form == "NodeNameToMetaVictims" else "NodeNameToMetaVictims"
    return "preempt", {"Pod": pod, form: victims, other: None}


@settings_for(300)
@given(case=node_requests())
def test_duplicate_unknown_and_strange_node_names(served_url, session, case):
    verb, request = case
    response = send(session, "node names", "POST", f"{served_url}/{verb}", orjson.dumps(request), JSON)
    if response.status_code == 200:
        check_answer(verb, request, response.json())


# --- huge strings and arrays -------------------------------------------------------------------------------

HUGE = "x" * (4 * 1024 * 1024)

# (what, verb, body): bodies are built when their test runs, not when the module is collected.
HUGE_CASES: list[tuple[str, str, Callable[[], bytes]]] = [
    ("huge pod name", "filter", lambda: orjson.dumps(replaced(NAMES, ("Pod", "metadata", "name"), HUGE))),
    (
        "huge label value",
        "prioritize",
        lambda: orjson.dumps(replaced(NAMES, ("Pod", "metadata", "labels"), {"k": HUGE})),
    ),
    ("huge node name", "filter", lambda: orjson.dumps(replaced(NAMES, ("NodeNames",), [HUGE, "node-a"]))),
    ("huge duplicate node names", "filter", lambda: orjson.dumps(replaced(NAMES, ("NodeNames",), [HUGE, HUGE]))),
    ("huge unknown field", "filter", lambda: orjson.dumps(replaced(FULL, ("Nodes", "items", 0, "status"), [HUGE] * 4))),
    ("huge path segment", HUGE[:100_000], lambda: orjson.dumps(NAMES)),
    (
        "many labels",
        "filter",
        lambda: orjson.dumps(
            replaced(FULL, ("Nodes", "items", 0, "metadata", "labels"), {f"k{i}": "v" for i in range(200_000)})
        ),
    ),
    (
        "long array, ignored field",
        "filter",
        lambda: orjson.dumps(replaced(FULL, ("Pod", "spec", "containers"), list(range(1_000_000)))),
    ),
    (
        "nodes at the limit",
        "prioritize",
        lambda: orjson.dumps(replaced(NAMES, ("NodeNames",), [f"n{i}" for i in range(MAX_NODES)])),
    ),
    (
        "nodes over the limit",
        "prioritize",
        lambda: orjson.dumps(replaced(NAMES, ("NodeNames",), [f"n{i}" for i in range(MAX_NODES + 1)])),
    ),
    (
        "victims over the limit",
        "preempt",
        lambda: orjson.dumps(
            {"Pod": NAMES["Pod"], "NodeNameToMetaVictims": {f"n{i}": {} for i in range(MAX_NODES + 1)}}
        ),
    ),
    ("body over the size limit", "filter", lambda: b" " * (32 * 1024 * 1024) + orjson.dumps(NAMES)),
]


@pytest.mark.parametrize(("what", "verb", "build"), HUGE_CASES, ids=[what for what, _, _ in HUGE_CASES])
def test_huge_strings_and_arrays(served_url, session, what, verb, build):
    body = build()
    response = send(session, "huge inputs", "POST", f"{served_url}/{verb}", body, JSON)
    if response.status_code >= 400:
        # An error is shown in the pod's events and the log: it names the problem without repeating the input.
        assert len(response.content) < 4096, (what, len(response.content))
    elif verb in ("filter", "prioritize", "preempt"):
        check_answer(verb, orjson.loads(body), response.json())


# --- a caller token in front of everything -----------------------------------------------------------------

segments = st.one_of(
    st.sampled_from([*VERBS, "default", "gpu", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), "..", "%2F", "extender"]),
    st.text(min_size=1, max_size=30).map(lambda text: quote(text, safe="")),
)


@settings_for(300)
@given(
    method=st.sampled_from(METHODS),
    path=st.lists(segments, min_size=0, max_size=5).map(lambda parts: "/" + "/".join(parts)),
)
def test_without_the_token_every_request_gets_the_same_404(guarded_url, session, method, path):
    response = send(session, "token guard", method, guarded_url + path, orjson.dumps(NAMES), JSON)
    assert response.status_code == 404
    if method != "HEAD" and not response.headers["Content-Type"].startswith("text/html"):
        assert response.content == b'{"Error":"not found"}'
