"""``check-policy --probe``: each NodeLoad query asked once of the configured Prometheus, and what its answer says.

A policy can be valid and still judge on nothing: a metric's name misspelt (no
series), the node's name in another label than ``nodeLabel``, a query answering
percent for a ratio. The probe asks every metric's query (and the capacity
queries) once, through the plugin's own Prometheus client, so that it goes where
and as the function's would (its URL, its authentication), and says per query:
the series answered, the nodes matched (against the names given, if any) and on
which label, the labels present when none matched, the range of the values and
how old the samples are. A query that matches no node is a ``Finding`` marked
failed: check-policy exits 1.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from extender.plugins.nodeload.answers import (
    NODE_LABELS,
    AnswerError,
    MetricAnswer,
    counted,
    label_problem,
    parse_answer,
    quoted,
    unlabelled,
)
from extender.plugins.nodeload.args import Metric, capacity_query
from extender.plugins.nodeload.prometheus import QueryError

if TYPE_CHECKING:
    from extender.plugins.nodeload import NodeLoad

# Seconds each query may take: a person waits, not the scheduler.
PROBE_SECONDS = 15.0
# Node names listed as unmatched.
LISTED = 5


class Finding(NamedTuple):
    """What one query's answer says, in lines for the terminal; ``failed``: it names no node to judge."""

    lines: list[str]
    failed: bool


def probe(plugin: NodeLoad, nodes: Collection[str] | None, seconds: float = PROBE_SECONDS) -> Iterator[Finding]:
    """Ask each of the plugin's metrics, then each resource metric's capacity query, once; ``nodes`` are the names
    the answers should name (None: not known, only the labels are checked)."""
    config = plugin.config
    for metric in config.metrics:
        yield _probe_one(plugin, metric, nodes, seconds, f"metric {metric.name}", counts=True)
    for metric in config.metrics:
        if metric.resource and metric.capacity:
            used = config.kubernetes is None
            role = "" if used else " (not used: the Kubernetes API gives the allocatable)"
            yield _probe_one(
                plugin, capacity_query(metric), nodes, seconds, f"metric {metric.name}'s capacity{role}", counts=used
            )


def _probe_one(
    plugin: NodeLoad, metric: Metric, nodes: Collection[str] | None, seconds: float, title: str, counts: bool
) -> Finding:
    head = f"NodeLoad {title}: query {quoted(metric.query)}, nodeLabel {metric.node_label}"
    try:
        body = plugin.loads.querier.query(metric.query, seconds)
        answer, oddities = parse_answer(body, metric.node_label)
    except (QueryError, AnswerError) as exc:
        return Finding([head, f"  no answer: {exc}"], counts)
    lines = [head, f"  {counted(answer.series, 'series', 'series')} answered"]
    named = set(answer.values) | set(answer.not_finite)
    matched = named if nodes is None else named & set(nodes)
    if nodes is None:
        lines.append(
            f"  {counted(len(named), 'node')} named on label {metric.node_label} (not checked against the cluster's "
            "nodes: give --nodes FILE or set KUBERNETES_API_URL)"
        )
    else:
        missing = sorted(set(nodes) - named)
        left = f"; not matched: {_listed(missing)}" if missing else ""
        lines.append(f"  {len(matched)} of {counted(len(nodes), 'node')} matched on label {metric.node_label}{left}")
    if matched:
        problem = label_problem(answer, metric.query, metric.node_label)
        lines += [f"  {problem}"] if problem else []
        lines += [f"  {line}" for line in _values(answer.values, answer.sorted_times, metric, "node")]
        lines += [f"  Prometheus' answer: {oddity}" for oddity in oddities]
    else:
        # What the answer says per node is keyed by the wrong label: its series are shown as they are.
        lines.append(f"  {_no_match(answer, body, metric, nodes)}")
        values, times = _every_series(body)
        lines += [f"  {line}" for line in _values(values, times, metric, "series")]
    return Finding(lines, counts and not matched)


def _no_match(answer: MetricAnswer, body: bytes, metric: Metric, nodes: Collection[str] | None) -> str:
    """Why no node matched, with the labels present and the one that names the most nodes, if any."""
    if not answer.series:
        return label_problem(answer, metric.query, metric.node_label)
    if answer.unlabelled < answer.series:  # some name something, not the nodes
        named = sorted({*answer.values, *answer.not_finite})
        start = f"its series name {_listed(named)} on label {metric.node_label}, none of them a node's name"
    else:
        start = unlabelled(answer, metric.query, metric.node_label)
    labels, best = _labels(body, metric.node_label, nodes or ())
    if best is not None:
        return f"{start}; labels present: {', '.join(labels)}: did you mean {best[0]}? (it names {best[1]} nodes)"
    guess = next((name for name in NODE_LABELS if name in labels and name != metric.node_label), "")
    mean = f": did you mean {guess}?" if guess and nodes is None else ""
    return f"{start}; labels present: {', '.join(labels)}{mean}" if labels else f"{start}; they have no labels"


def _labels(body: bytes, node_label: str, nodes: Collection[str]) -> tuple[list[str], tuple[str, int] | None]:
    """The labels of the answer's series, and the one (not ``node_label``) whose values name the most of ``nodes``,
    with how many (None: none names any)."""
    wanted = set(nodes)
    labels: set[str] = set()
    named: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    result: list[Any] = orjson.loads(body)["data"]["result"]  # parse_answer read it as a vector already
    for item in result:
        for label, value in item["metric"].items():
            if label == "__name__":
                continue
            labels.add(label)
            if label != node_label and value in wanted and (label, value) not in seen:
                seen.add((label, value))
                named[label] += 1
    return sorted(labels), named.most_common(1)[0] if named else None


def _every_series(body: bytes) -> tuple[dict[str, float], list[float]]:
    """Every series' finite value (by its place: ``2``) and every sample's time, in order."""
    result: list[Any] = orjson.loads(body)["data"]["result"]  # parse_answer read it as a vector already
    values: dict[str, float] = {}
    for place, item in enumerate(result, 1):
        value = float(item["value"][1])
        if math.isfinite(value):
            values[str(place)] = value
    return values, sorted(float(item["value"][0]) for item in result)


def _values(values: Mapping[str, float], times: Sequence[float], metric: Metric, which: str) -> list[str]:
    """The range of ``values`` (by ``which``: node or series) with the metric's unit, and whether they lie far
    outside it; the samples' ages."""
    if not times:
        return []
    if not values:
        return ["no finite values"]
    low, high = min(values.values()), max(values.values())
    unit = metric.unit
    described = f" (the metric measures {unit.described})" if unit is not None else ""
    lines = [f"values {low:g} to {high:g}{described}"]
    if unit is not None:
        far, key, value = unit.far_outside(values)
        if far:
            lines.append(
                f"{far} of {counted(len(values), 'value')} far outside {unit.described}, such as {which} {key}: "
                f"{value:g}: is the query answering another unit (unit: percent for 0..100)?"
            )
    now = time.time()
    newest, oldest = now - times[-1], now - times[0]
    ages = f"{_age(newest)} to {_age(oldest)}" if oldest - newest >= 1 else _age(newest)
    lines.append(f"samples {ages} old")
    return lines


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(names[:LISTED]) + more
