"""The one log entry per request that says what the extender decided, and why.

kube-scheduler drops prioritize errors silently and shows only aggregated
messages in a rejected pod's events, so the extender tells its own story here.
Log-based metrics and alerts read these fields: their names are stable. Per-node
detail is bounded however large the cluster: rejections are grouped by plugin and
reason (audited plugins' verdicts by plugin and rule), scores and accepted
candidates cut to the top ``TOP_N``, with counts; node and victim names only
ever go into bounded lists.
Nothing secret or bulky is logged: the path only as the router redacts it (it
carries the caller token), no Kubernetes objects.
"""

from __future__ import annotations

import heapq
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from operator import itemgetter
from typing import Any

from extender.errors import bounded
from extender.framework.kept import Derived
from extender.framework.plugin import Observed
from extender.framework.profile import FilterResult, Notes, PreemptResult, ScoreResult
from extender.framework.status import Status
from extender.framework.types import Pod
from extender.protocol import Route
from extender.verbs import Answer

EVENT = "extender.decision"
MESSAGE = "extender decision"
# What an audited plugin would have done, one entry per plugin and rule, for the would-reject metric.
AUDIT_EVENT = "extender.audit"
AUDIT_MESSAGE = "extender audit"
# What enforced plugins rejected (filter) or vetoed (preempt), one entry per plugin and rule, for the rejections
# metric; logged apart (logger ``extender.rejection``) from the decision entries, one of which each request has.
REJECTION_EVENT = "extender.rejection"
REJECTION_MESSAGE = "extender rejection"
# What plugins did not judge (facts missing, the scheduler's filter trusted), one entry per plugin, rule and code, for
# the skipped metric: a rule that quietly stops being evaluated (failurePolicy Ignore) must show as more than a count
# in the decision entries' lists. Logged apart (logger ``extender.skipped``), at WARNING as the decision entry is.
SKIPPED_EVENT = "extender.skipped"
SKIPPED_MESSAGE = "extender skipped"
TOP_N = 10
# Node names shown per rejection reason (and reasons per audited rule).
NODES_PER_REASON = 5
# Longest text copied from a request (names are at most 253 in Kubernetes; a hostile caller's may be megabytes),
# so that an entry stays far below Cloud Logging's 256 KB limit.
MAX_NAME_CHARS = 256

logger = logging.getLogger("extender.decision")
rejection_logger = logging.getLogger("extender.rejection")
skipped_logger = logging.getLogger("extender.skipped")


def log_decision(
    where: Route | None, answer: Answer, seconds: float, budget_seconds: float, *, method: str, path: str
) -> None:
    """``path`` as ``Router.redact`` gives it: the raw path carries the caller token."""
    fields = decision_fields(where, answer, seconds, budget_seconds, method=method, path=path)
    logger.log(severity(answer, seconds, budget_seconds), MESSAGE, extra={"json_fields": fields})
    for rejection in rejection_entries(fields):
        rejection_logger.info(REJECTION_MESSAGE, extra={"json_fields": rejection})
    for skipped in skipped_entries(fields, answer.result):
        skipped_logger.warning(SKIPPED_MESSAGE, extra={"json_fields": skipped})
    for audit in audit_entries(fields, answer.result):
        logger.info(AUDIT_MESSAGE, extra={"json_fields": audit})


def severity(answer: Answer, seconds: float, budget_seconds: float) -> int:
    """ERROR when the scheduler gets a failed or ignored answer from us, WARNING for bad requests, slow answers,
    plugins that did not judge a node (``skipped``: never silent) and audited plugins that failed.

    A request over half the budget warns before the scheduler's httpTimeout turns it into a failure.
    """
    if answer.status >= 500 or (answer.error and answer.status < 400):
        return logging.ERROR
    if answer.status >= 400 or seconds > budget_seconds / 2:
        return logging.WARNING
    if answer.result is not None and (answer.result.skipped or answer.result.audit_failed):
        return logging.WARNING
    return logging.INFO


def audit_entries(
    fields: Mapping[str, Any], result: FilterResult | ScoreResult | PreemptResult | None
) -> list[dict[str, Any]]:
    """One entry per (plugin, rule) of an audited plugin's held-back verdicts, however many rules there are.

    A log-based metric counts entries and cannot look into the decision entry's lists, so each group is an entry of
    its own (``extender.audit``), which ``terraform/monitoring.tf`` counts per plugin and rule. The groups are the
    policy's rules: node and victim names stay out of the grouping, in the entry's bounded lists.
    """
    entries = []
    for verdict, notes in _held_back(result):
        for group in _by_rule(_noted(notes)):
            entries.append(
                {
                    "event": AUDIT_EVENT,
                    "verdict": verdict,
                    "verb": fields["verb"],
                    "profile": fields["profile"],
                    "pod": fields["pod"],
                    **group,
                }
            )
    return entries


def rejection_entries(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per (plugin, rule) that rejected nodes in filter or vetoed candidates in preempt, every one: the
    decision entry's ``rejected.rules``, each on its own, since a log-based metric counts entries and cannot look into
    lists (``terraform/monitoring.tf`` counts these per plugin and rule)."""
    rejected = fields.get("rejected")
    if not rejected:
        return []
    common = {"event": REJECTION_EVENT, "verb": fields["verb"], "profile": fields["profile"], "pod": fields["pod"]}
    return [{**common, **rule} for rule in rejected["rules"]]


def skipped_entries(
    fields: Mapping[str, Any], result: FilterResult | ScoreResult | PreemptResult | None
) -> list[dict[str, Any]]:
    """One entry per (plugin, rule, code) of the nodes plugins did not judge, every one (the decision entry's
    ``skipped`` shows the largest groups only): ``terraform/monitoring.tf`` counts these per plugin and rule, so that a
    rule left unevaluated (a query that never answers under failurePolicy Ignore) alerts instead of passing for a rule
    that rejects nothing. ``code`` says what followed: ``Success`` the node passed (or was left out of the plugin's
    score, or the candidate accepted) unjudged, otherwise it was rejected, scored 0 or vetoed."""
    if result is None or not result.skipped:
        return []
    common = {"event": SKIPPED_EVENT, "verb": fields["verb"], "profile": fields["profile"], "pod": fields["pod"]}
    counts = Counter(map(itemgetter(1), _noted(result.skipped)))
    return [{**common, **rule} for rule in _rule_counts(counts, with_code=True)]


def _held_back(result: FilterResult | ScoreResult | PreemptResult | None) -> list[tuple[str, Notes]]:
    """(field, notes) of the verdicts audited plugins held back: rejections in filter, vetoes in preempt."""
    if isinstance(result, FilterResult) and result.would_reject:
        return [("wouldReject", result.would_reject)]
    if isinstance(result, PreemptResult) and result.would_veto:
        return [("wouldVeto", result.would_veto)]
    return []


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
        fields["rejected"] = _rejection_groups(result)
    if isinstance(result, FilterResult | ScoreResult) and result.assumed:
        fields["assumedOn"] = _name(result.assumed)  # counted there until its binding shows (extender.verbs.assumed)
    if isinstance(result, FilterResult) and result.exempt:
        fields["exempt"] = dict(result.exempt)  # plugin -> why the pod passed it unjudged ("DaemonSet")
    if isinstance(result, FilterResult | ScoreResult) and result.incomplete:
        # plugin -> why what it judged on may be incomplete (NodeLoad: the API failing, in-flight pods may be missing)
        fields["incomplete"] = {plugin: bounded(why) for plugin, why in result.incomplete.items()}
    if result.skipped:
        fields["skipped"] = _noted_groups(result.skipped)
    if result.audit_failed:
        fields["auditFailed"] = _audit_failures(result.audit_failed)
    for verdict, notes in _held_back(result):
        pairs = _noted(notes)
        fields[verdict] = {"count": len(notes), "reasons": _by_rule(pairs)[:TOP_N]}
    if isinstance(result, PreemptResult):
        fields["accepted"] = _top_accepted(result)
    elif result.observed:
        fields["nodeFacts"] = _node_facts(result.observed, fields)
    fields["pluginMs"] = plugin_ms(result)
    return fields


def _node_facts(observed: Mapping[str, Observed], fields: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What the plugins that measure something measured of the nodes the entry names (rejected, skipped, would be
    rejected, best scored): per plugin, per node, e.g. ``{"cpu": {"value": 0.93, "ageSeconds": 12.5}}``."""
    named = [score["node"] for score in fields.get("scores", ())]
    for key in ("rejected", "skipped", "wouldReject"):
        named += [node for group in fields.get(key, {}).get("reasons", ()) for node in group["nodes"]]
    shown: dict[str, dict[str, Any]] = {}
    for plugin, facts in observed.items():
        known = {node: found for node in dict.fromkeys(named) if (found := facts(node))}
        if known:
            shown[plugin] = known
    return shown


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


def _rejection_groups(result: FilterResult | PreemptResult) -> dict[str, Any]:
    """``_rejections`` by rule, worked out once per kept rejections (``FilterResult.rejected_kept``)."""
    kept_as = result.rejected_kept if isinstance(result, FilterResult) else None
    return _kept_groups.memo(kept_as, lambda: _rejections(result.rejected, by_rule=True))


def _rejections(rejected: Mapping[str, Status], by_rule: bool = False) -> dict[str, Any]:
    """Rejected nodes grouped as the pod's FailedScheduling event groups them: one line per plugin and reason;
    ``count`` is the number of nodes. ``by_rule`` adds ``rules``: the nodes of every plugin and rule, not only of the
    largest groups. Nodes are taken in the order of their names: the same entry however the scheduler ordered them.

    Statuses are counted at C speed (equal statuses are one group: same plugin, code and reason) and only the few
    nodes each shown group names are looked for: a request rejecting thousands of nodes pays little here."""
    pairs = sorted(rejected.items(), key=itemgetter(0))
    return _grouped(Counter(map(itemgetter(1), pairs)), pairs, len(rejected), by_rule)


def _noted_groups(notes: Notes) -> dict[str, Any]:
    """``_rejections`` of nodes that may each carry several statuses (skipped by several plugins)."""
    pairs = _noted(notes)
    return _grouped(Counter(map(itemgetter(1), pairs)), pairs, len(notes))


def _grouped(
    counts: Counter[Status], pairs: Iterable[tuple[str, Status]], nodes: int, by_rule: bool = False
) -> dict[str, Any]:
    largest = heapq.nlargest(TOP_N, counts.items(), key=itemgetter(1))
    reasons = [
        {
            "plugin": status.plugin,
            "code": status.code.value,
            "reason": bounded(status.reason),
            "count": count,
            "nodes": [_name(node) for node in islice(_nodes_of(pairs, status), NODES_PER_REASON)],
        }
        for status, count in largest
    ]
    found: dict[str, Any] = {"count": nodes, "reasons": reasons}
    if by_rule:
        found["rules"] = _rule_counts(counts)
    return found


def _nodes_of(pairs: Iterable[tuple[str, Status]], status: Status) -> Iterator[str]:
    return (node for node, found in pairs if found == status)


def _rule_counts(counts: Mapping[Status, int], with_code: bool = False) -> list[dict[str, Any]]:
    """Nodes per plugin and the rule its reasons name ("" if none), and per code too if ``with_code``, the most first.
    Each distinct reason is read once: filter's name the rule, not the node, so they are few."""
    by_rule: defaultdict[tuple[str, str, str], int] = defaultdict(int)
    for status, count in counts.items():
        by_rule[status.plugin, _rule_named(status.reason), status.code.value if with_code else ""] += count
    ranked = sorted(by_rule.items(), key=itemgetter(1), reverse=True)
    return [
        {"plugin": plugin, "rule": _name(rule), **({"code": code} if with_code else {}), "count": count}
        for (plugin, rule, code), count in ranked
    ]


def _audit_failures(failed: Notes) -> list[dict[str, Any]]:
    """One item per audited plugin that failed: the first reason, and the nodes it failed on (``count``, the first
    of them in ``nodes``)."""
    by_plugin: dict[str, tuple[Status, list[str]]] = {}
    for node, status in _noted(failed):
        by_plugin.setdefault(status.plugin, (status, []))[1].append(node)
    return [
        {
            "plugin": plugin,
            "reason": bounded(first.reason),
            "count": len(nodes),
            "nodes": [_name(node) for node in nodes[:NODES_PER_REASON]],
        }
        for plugin, (first, nodes) in by_plugin.items()
    ]


def _by_rule(held: Iterable[tuple[str, Status]]) -> list[dict[str, Any]]:
    """Audited verdicts, (node, status) pairs, grouped by plugin and the rule their reason names ("" if none), the
    largest first: ``count`` nodes, the first of them in ``nodes`` and the first distinct reasons (which name the
    victims) in ``reasons``, each list bounded."""
    groups: dict[tuple[str, str], tuple[list[str], dict[str, Status]]] = {}
    rules: dict[str, str] = {}  # by reason: thousands of nodes share a few
    for node, status in held:
        rule = rules.get(status.reason)
        if rule is None:
            rule = rules[status.reason] = _rule_named(status.reason)
        nodes, reasons = groups.setdefault((status.plugin, rule), ([], {}))
        nodes.append(node)
        if len(reasons) < NODES_PER_REASON:
            reasons.setdefault(status.reason, status)
    largest = sorted(groups.items(), key=lambda group: len(group[1][0]), reverse=True)
    return [
        {
            "plugin": plugin,
            "rule": _name(rule),
            "code": next(iter(reasons.values())).code.value,
            "reason": bounded(next(iter(reasons))),
            "reasons": [bounded(reason) for reason in reasons],
            "count": len(nodes),
            "nodes": [_name(node) for node in nodes[:NODES_PER_REASON]],
        }
        for (plugin, rule), (nodes, reasons) in largest
    ]


def _rule_named(reason: str) -> str:
    """The rule a reason names as the built-in plugins name it, exactly ("" if none): ``NodeLabelPolicy rule
    'ml-on-gpu-pool': ...``, ``NodeNameFilter: node is in maintenance 'pool-a-upgrade' until ...``. The name is
    quoted as Python's repr quotes it (``rule "it's-gpu"`` for a name with a quote), and read back as such."""
    named = re.search(_RULE, reason)
    if named is None:
        return ""
    literal = named.group(1)
    if "\\" not in literal:  # nothing escaped: the text between the quotes (the parser costs more than the rest)
        return literal[1:-1]
    import ast

    try:
        return str(ast.literal_eval(literal))
    except (ValueError, SyntaxError):  # quoted some other way: the text between the quotes
        return literal[1:-1]


# A rule's name after "rule" or "maintenance", as a Python string literal. Compiled on first use (re caches it).
_RULE = r"\b(?:rule|maintenance) ('(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\")"


# The ``rejected`` groups of kept rejections, by their identity: shared by the entries of every request that rejects
# exactly those nodes, so read only.
_kept_groups: Derived[dict[str, Any]] = Derived()
# The top scores of kept scores (``ScoreResult.kept``), with the plugins' score objects they came from: kept results
# hand back the same (never changed) score objects for the same candidates, whose top need not be searched again.
# Results not kept (the result cache off) are never memoized.
_tops: Derived[tuple[tuple[tuple[str, dict[str, int]], ...], list[dict[str, Any]]]] = Derived()


def _top_scores(result: ScoreResult) -> list[dict[str, Any]]:
    """The best-scored nodes, each with its plugins' 0..100 scores: why the winner won (a plugin left out for a node,
    its facts missing under failurePolicy Ignore, is not shown for it); each score as answered."""
    top = _kept_top(result)
    if not result.demoted:
        return top
    # A tie at the top broken in the answer (at most extender.verbs.assumed.MAX_TIED <= TOP_N nodes, all among these).
    demoted = {_name(node) for node in result.demoted}
    answered = [{**entry, "score": entry["score"] - 1} if entry["node"] in demoted else entry for entry in top]
    return sorted(answered, key=itemgetter("score"), reverse=True)


def _kept_top(result: ScoreResult) -> list[dict[str, Any]]:
    by_plugin = tuple(result.by_plugin.items())
    known = _tops.get(result.scores) if result.kept else None
    if known is not None and _same_objects(by_plugin, known[0]):
        return known[1]
    tied = result.best()
    # As nlargest would pick them (ties in the order of the scores), without its pass when enough nodes tie at the top.
    best = (
        [(node, result.scores[node]) for node in tied[:TOP_N]]
        if len(tied) >= TOP_N
        else heapq.nlargest(TOP_N, result.scores.items(), key=itemgetter(1))
    )
    top = [
        {
            "node": _name(node),
            "score": score,
            "plugins": {plugin: scores[node] for plugin, scores in by_plugin if node in scores},
        }
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
        for (name, scores), (other_name, other_scores) in zip(by_plugin, other, strict=True)
    )


def _top_accepted(result: PreemptResult) -> dict[str, Any]:
    """The first accepted candidates with the number of pods each would evict."""
    shown = list(result.accepted.items())[:TOP_N]
    return {"count": len(result.accepted), "victims": {_name(node): len(victims.pods) for node, victims in shown}}
