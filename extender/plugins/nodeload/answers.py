"""A Prometheus ``/api/v1/query`` answer read as one sample per node: what NodeLoad judges nodes on.

The answer must be an instant vector (``resultType: vector``). Each series
names its node in one label (the metric's ``nodeLabel``); a series without it
names no node and is left out. Where several series name one node, the
highest finite value counts. A value that is not a finite number (``NaN``,
``±Inf``) is not a fact: its node has none unless another of its series has
one. Whatever else is wrong with the answer (not JSON, another shape, an
error status, more series than ``MAX_SERIES``) makes the whole answer unusable:
half an answer would judge some nodes on facts others lack.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from extender.errors import bounded

# Series read from one answer: past any cluster's node count (the request decoder's limit of nodes, 65,536).
MAX_SERIES = 65_536
# Nodes named in one warning.
NAMED = 5
# Characters of a query quoted in a message.
QUOTED = 160
# Labels that usually carry a node's name, most likely first: what "did you mean" suggests.
NODE_LABELS = ("node", "node_name", "nodename", "kubernetes_node", "instance", "hostname", "host")


class AnswerError(Exception):
    """The answer cannot be used; the message says why, for the refresh's WARNING."""


class MetricAnswer:
    """One metric's samples by node name; never changed once built (requests read it on several threads)."""

    __slots__ = ("labels", "not_finite", "series", "sorted_times", "times", "unlabelled", "values")

    def __init__(
        self,
        values: dict[str, float],
        not_finite: dict[str, str],
        times: dict[str, float],
        series: int,
        unlabelled: int,
        labels: tuple[str, ...],
    ) -> None:
        # Nodes with a finite value, and nodes whose only samples are NaN or infinite (as Prometheus writes them).
        self.values = values
        self.not_finite = not_finite
        # The time (Unix seconds) of the sample that counts, for every node of either.
        self.times = times
        # Every node's sample time in order: how many are older than an instant is one bisection.
        self.sorted_times = sorted(times.values())
        # The series answered, how many lack the node label, and the labels those carry (what it might be instead).
        self.series = series
        self.unlabelled = unlabelled
        self.labels = labels


def parse_answer(body: bytes, node_label: str) -> tuple[MetricAnswer, list[str]]:
    """The samples of an answer, and what is odd in it but leaves it usable (for a WARNING): Prometheus' own
    warnings, nodes with several series or values that are not finite numbers. An empty answer and series without
    ``node_label`` are said with the query (``label_problem``)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise AnswerError(f"the answer is not JSON: {_start(body)}") from None
    if not isinstance(document, dict):
        raise AnswerError("the answer is not a JSON object")
    if document.get("status") != "success":
        raise AnswerError(f"the query failed: {error_text(document)}")
    data = document.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise AnswerError("the answer has no data.result list")
    if data.get("resultType") != "vector":
        raise AnswerError(
            f"the query returns a {_text(data.get('resultType'))}, not an instant vector (one sample per series)"
        )
    series = data["result"]
    if len(series) > MAX_SERIES:
        raise AnswerError(f"the answer has {len(series)} series, more than {MAX_SERIES}")
    values: dict[str, float] = {}
    not_finite: dict[str, str] = {}
    times: dict[str, float] = {}
    seen: set[str] = set()
    several: list[str] = []
    unlabelled = 0
    labels: set[str] = set()
    for item in series:
        node, time, value, text = _sample(item, node_label)
        if node is None:
            unlabelled += 1
            labels.update(name for name in item["metric"] if isinstance(name, str) and name != "__name__")
            continue
        if node in seen:
            several.append(node)
        seen.add(node)
        if math.isfinite(value):
            if node not in values or value > values[node]:
                values[node], times[node] = value, time
                not_finite.pop(node, None)
        elif node not in values and node not in not_finite:
            not_finite[node], times[node] = text, time
    warnings = [f"Prometheus warns: {bounded(_text(warning), 500)}" for warning in _list(document.get("warnings"))]
    if several:
        distinct = list(dict.fromkeys(several))
        warnings.append(
            f"{counted(len(distinct), 'node')} with several series, the highest value counts: {_named(distinct)}"
        )
    if not_finite:
        warnings.append(
            f"{counted(len(not_finite), 'node')} with no value but NaN or infinity, so no facts: "
            f"{_named(list(not_finite))}"
        )
    return MetricAnswer(values, not_finite, times, len(series), unlabelled, tuple(sorted(labels))), warnings


def label_problem(answer: MetricAnswer, query: str, node_label: str) -> str:
    """What keeps an answer's series from naming nodes, in words that name the query and the label ("" if
    nothing): no series at all, or series without ``node_label`` (with the labels they have instead)."""
    if not answer.series:
        return (
            f"query {quoted(query)} returned no series (is the metric's name right, and "
            "does Prometheus scrape it?)"
        )
    if not answer.unlabelled:
        return ""
    return f"{unlabelled(answer, query, node_label)}; {labels_present(answer, node_label)}"


def unlabelled(answer: MetricAnswer, query: str, node_label: str) -> str:
    """``the 3 series of query `q` have no `node` label, so they name no node``."""
    has = "has" if answer.unlabelled == 1 else "have"
    if answer.unlabelled < answer.series:
        which = f"{answer.unlabelled} of the {answer.series} series of query {quoted(query)} {has}"
        left = " (left out)"
    else:
        which = f"the {counted(answer.series, 'series', 'series')} of query {quoted(query)} {has}"
        left = ""
    name = "it names" if answer.unlabelled == 1 else "they name"
    return f"{which} no `{node_label}` label, so {name} no node{left}"


def labels_present(answer: MetricAnswer, node_label: str) -> str:
    """``labels present: node, job: did you mean node?``"""
    if not answer.labels:
        return "they have no labels at all"
    guess = next((name for name in NODE_LABELS if name in answer.labels and name != node_label), "")
    mean = f": did you mean {guess}?" if guess else ""
    return f"labels present: {bounded(', '.join(answer.labels), 300)}{mean}"


def quoted(query: str) -> str:
    """A query in backquotes, cut short to fit a message."""
    return f"`{bounded(query, QUOTED)}`"


def error_text(document: Any) -> str:
    """The error a Prometheus answer states (``errorType: error``), or what the document is instead."""
    if isinstance(document, dict) and ("error" in document or "errorType" in document):
        kind, error = _text(document.get("errorType", "")), _text(document.get("error", ""))
        return bounded(f"{kind}: {error}" if kind and error else kind or error, 500)
    return f"status {_text(document.get('status')) if isinstance(document, dict) else 'missing'}"


def _sample(item: Any, node_label: str) -> tuple[str | None, float, float, str]:
    """(node or None, time, value, value as written) of one series; AnswerError when it is not a vector sample."""
    if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
        raise AnswerError("a series has no metric labels")
    sample = item.get("value")
    if not isinstance(sample, list) or len(sample) != 2:
        raise AnswerError("a series has no [time, value] sample")
    time, text = sample
    if isinstance(time, bool) or not isinstance(time, (int, float)) or not math.isfinite(time):
        raise AnswerError(f"a sample's time is not a number: {_text(time)}")
    if not isinstance(text, str):
        raise AnswerError(f"a sample's value is not a string as Prometheus writes them: {_text(text)}")
    try:
        value = float(text)
    except ValueError:
        raise AnswerError(f"a sample's value is not a number: {_text(text)}") from None
    node = item["metric"].get(node_label)
    return (node if isinstance(node, str) and node else None), float(time), value, text


def counted(count: int, one: str, several: str = "") -> str:
    return f"{count} {one if count == 1 else several or one + 's'}"


def _named(nodes: list[str]) -> str:
    more = f" and {len(nodes) - NAMED} more" if len(nodes) > NAMED else ""
    return ", ".join(bounded(node, 256) for node in nodes[:NAMED]) + more


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    return bounded(value if isinstance(value, str) else orjson.dumps(value).decode(), 200)


def _start(body: bytes) -> str:
    return bounded(body[:200].decode(errors="replace"), 200)
