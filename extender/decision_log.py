"""The one log entry per request that says what the extender decided, and why.

kube-scheduler drops prioritize errors silently and shows only aggregated
messages in a rejected pod's events, so the extender tells its own story here.
Log-based metrics and alerts read these fields: their names are stable. Per-node
detail is bounded however large the cluster: rejections are grouped by plugin and
reason, scores and accepted candidates cut to the top ``TOP_N``, with counts.
Nothing secret or bulky is logged: the path only as the router redacts it (it
carries the caller token), no Kubernetes objects.
"""

from __future__ import annotations

import heapq
import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any

from extender.errors import bounded
from extender.framework.kept import Derived
from extender.framework.profile import FilterResult, PreemptResult, ScoreResult
from extender.framework.status import Code, Status
from extender.framework.types import Pod
from extender.http.routing import Route
from extender.verbs import Answer

EVENT = "extender.decision"
MESSAGE = "extender decision"
# What an audited plugin would have done, one entry per plugin and reason, for the would-reject metric.
AUDIT_EVENT = "extender.audit"
AUDIT_MESSAGE = "extender audit"
TOP_N = 10
# Node names shown per rejection reason.
NODES_PER_REASON = 5
# Longest text copied from a request (names are at most 253 in Kubernetes; a hostile caller's may be megabytes),
# so that an entry stays far below Cloud Logging's 256 KB limit.
MAX_NAME_CHARS = 256

logger = logging.getLogger("extender.decision")


def log_decision(
    where: Route | None, answer: Answer, seconds: float, budget_seconds: float, *, method: str, path: str
) -> None:
    """``path`` as ``Router.redact`` gives it: the raw path carries the caller token."""
    fields = decision_fields(where, answer, seconds, budget_seconds, method=method, path=path)
    logger.log(severity(answer, seconds, budget_seconds), MESSAGE, extra={"json_fields": fields})
    for audit in audit_entries(fields):
        logger.info(AUDIT_MESSAGE, extra={"json_fields": audit})


def severity(answer: Answer, seconds: float, budget_seconds: float) -> int:
    """ERROR when the scheduler gets a failed or ignored answer from us, WARNING for bad requests, slow answers and
    plugins that did not judge a node (``skipped``: never silent).

    A request over half the budget warns before the scheduler's httpTimeout turns it into a failure.
    """
    if answer.status >= 500 or (answer.error and answer.status < 400):
        return logging.ERROR
    if answer.status >= 400 or seconds > budget_seconds / 2:
        return logging.WARNING
    if answer.result is not None and answer.result.skipped:
        return logging.WARNING
    return logging.INFO


def audit_entries(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per (plugin, reason) group of an audited plugin's held-back verdicts.

    A log-based metric counts entries and cannot look into the decision entry's lists, so each group is an entry of
    its own (``extender.audit``), which ``terraform/monitoring.tf`` counts per plugin and rule.
    """
    entries = []
    for verdict in ("wouldReject", "wouldVeto"):
        for group in fields.get(verdict, {}).get("reasons", ()):
            entries.append(
                {
                    "event": AUDIT_EVENT,
                    "verdict": verdict,
                    "verb": fields["verb"],
                    "profile": fields["profile"],
                    "pod": fields["pod"],
                    "plugin": group["plugin"],
                    "rule": group["rule"],
                    "reason": group["reason"],
                    "count": group["count"],
                    "nodes": group["nodes"],
                }
            )
    return entries


def decision_fields(
    where: Route | None, answer: Answer, seconds: float, budget_seconds: float, *, method: str, path: str
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "event": EVENT,
        "verb": where.verb if where else None,
        "profile": where.profile if where else None,
        "method": method,
        "path": path,
        "status": answer.status,
        "durationMs": _ms(seconds),
        "budgetMs": _ms(budget_seconds),
        "remainingMs": _ms(budget_seconds - seconds),
        "nodesIn": answer.nodes_in,
        "nodesOut": answer.nodes_out,
        "pod": _pod(answer.pod),
    }
    if answer.error:
        fields["error"] = bounded(answer.error)
    result = answer.result
    if result is None:
        return fields
    if result.error is not None and result.error.plugin:
        fields["errorPlugin"] = result.error.plugin
    if isinstance(result, ScoreResult):
        fields["scores"] = _top_scores(result)
        if result.audited:
            fields["audited"] = list(result.audited)
    else:
        fields["rejected"] = _rejections(result.rejected.items())
    if result.skipped:
        fields["skipped"] = _rejections(_noted(result.skipped))
    if isinstance(result, FilterResult) and result.would_reject:
        fields["wouldReject"] = _rejections(_noted(result.would_reject), with_rule=True)
    if isinstance(result, PreemptResult):
        fields["accepted"] = _top_accepted(result)
        if result.would_veto:
            fields["wouldVeto"] = _rejections(_noted(result.would_veto), with_rule=True)
    fields["pluginMs"] = plugin_ms(result)
    return fields


def plugin_ms(result: FilterResult | ScoreResult | PreemptResult) -> dict[str, float]:
    return {name: _ms(spent) for name, spent in result.seconds_by_plugin.items()}


def _pod(pod: Pod | None) -> dict[str, str] | None:
    return None if pod is None else {"namespace": _name(pod.namespace), "name": _name(pod.name), "uid": _name(pod.uid)}


def _name(text: str) -> str:
    return bounded(text, MAX_NAME_CHARS)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _noted(notes: Mapping[str, tuple[Status, ...]]) -> list[tuple[str, Status]]:
    return [(node, status) for node, statuses in notes.items() for status in statuses]


def _rejections(rejected: Iterable[tuple[str, Status]], *, with_rule: bool = False) -> dict[str, Any]:
    """(node, status) pairs grouped as the pod's FailedScheduling event groups them: one line per plugin and reason;
    ``count`` is the number of nodes. ``with_rule`` adds the rule a reason names (``rule 'x'``), "" if none."""
    groups: dict[tuple[str, Code, str], list[str]] = defaultdict(list)
    nodes_seen: set[str] = set()
    for node, status in rejected:
        groups[status.plugin, status.code, status.reason].append(node)
        nodes_seen.add(node)
    largest = heapq.nlargest(TOP_N, groups.items(), key=lambda group: len(group[1]))
    reasons = []
    for (plugin, code, reason), nodes in largest:
        group: dict[str, Any] = {
            "plugin": plugin,
            "code": code.value,
            "reason": bounded(reason),
            "count": len(nodes),
            "nodes": [_name(node) for node in nodes[:NODES_PER_REASON]],
        }
        if with_rule:
            named = re.search(_RULE, reason)
            group["rule"] = _name(named.group(1)) if named else ""
        reasons.append(group)
    return {"count": len(nodes_seen), "reasons": reasons}


# How the built-in plugins name the rule behind a verdict: "NodeLabelPolicy rule 'ml-on-gpu-pool': ...",
# "NodeNameFilter: node is in maintenance 'pool-a-upgrade' until ...". Compiled on first use (re caches it).
_RULE = r"\b(?:rule|maintenance) '([^']*)'"


# The top scores of kept scores (``ScoreResult.kept``), with the plugins' score objects they came from: kept results
# hand back the same (never changed) score objects for the same candidates, whose top need not be searched again.
# Results not kept (the result cache off) are never memoized.
_tops: Derived[tuple[tuple[tuple[str, dict[str, int]], ...], list[dict[str, Any]]]] = Derived()


def _top_scores(result: ScoreResult) -> list[dict[str, Any]]:
    """The best-scored nodes, each with its plugins' 0..100 scores: why the winner won (a plugin left out for a node,
    its facts missing under failurePolicy Ignore, is not shown for it)."""
    by_plugin = tuple(result.by_plugin.items())
    known = _tops.get(result.scores) if result.kept else None
    if known is not None and _same_objects(by_plugin, known[0]):
        return known[1]
    best = heapq.nlargest(TOP_N, result.scores.items(), key=itemgetter(1))
    top = [
        {"node": _name(node), "score": score, "plugins": {plugin: scores[node] for plugin, scores in by_plugin if node in scores}}
        for node, score in best
    ]
    if result.kept:
        _tops.put(result.scores, (by_plugin, top))
    return top


def _same_objects(
    by_plugin: tuple[tuple[str, dict[str, int]], ...], other: tuple[tuple[str, dict[str, int]], ...]
) -> bool:
    return len(by_plugin) == len(other) and all(
        name == other_name and scores is other_scores
        for (name, scores), (other_name, other_scores) in zip(by_plugin, other)
    )


def _top_accepted(result: PreemptResult) -> dict[str, Any]:
    """The first accepted candidates with the number of pods each would evict."""
    shown = list(result.accepted.items())[:TOP_N]
    return {"count": len(result.accepted), "victims": {_name(node): len(victims.pods) for node, victims in shown}}
