"""prioritize: a bare array of integer scores 0..10, one per input node.

The scheduler silently ignores a failed prioritize call, so a plugin error
answers neutral zeros (the same effect) and says why in the
``X-Extender-Error`` header and the decision log instead of a non-array body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from extender.framework.kept import Derived, ServedProfile
from extender.framework.profile import MIN_EXTENDER_PRIORITY, ScoreResult
from extender.kube import expecting_bindings
from extender.nodesource.base import NodeSource
from extender.verbs import Answer, load_request
from extender.verbs.assumed import assume_best
from extender.verbs.filtering import names_source
from extender.wire.priorities import HostPrioritySchema
from extender.wire.schemas import ExtenderArgs, ExtenderArgsSchema

_args = ExtenderArgsSchema()
_result = HostPrioritySchema(many=True)
# The encoded answer entries of kept scores (``ScoreResult.kept``), by node name: kept results hand back the same
# scores object for the same candidates (or scores holding them: ``ScoreResult.covering``), and then each node's entry
# is the same too, only the order and choice of the request's names are new. Scores not kept are encoded afresh.
_encoded: Derived[dict[str, bytes]] = Derived()


def handle(payload: Any, profile: ServedProfile, source: NodeSource) -> Answer:
    args = load_request(_args, payload, "ExtenderArgs")
    names = [node.name for node in args.nodes] if args.nodes is not None else args.node_names or []
    with expecting_bindings():
        result = _prioritize(args, profile, source)
    if result.error is not None:
        zeros = [{"Host": name, "Score": MIN_EXTENDER_PRIORITY} for name in names]
        reason = result.error.reason
        return Answer(
            _result.dump(zeros),
            headers={"X-Extender-Error": reason},
            error=reason,
            nodes_in=len(names),
            pod=args.pod,
            result=result,
        )
    assume_best(args.pod.uid, result, profile.scores)
    return Answer(
        _answer(result, names), nodes_in=len(names), nodes_out=len(result.scores), pod=args.pod, result=result
    )


def _prioritize(args: ExtenderArgs, profile: ServedProfile, source: NodeSource) -> ScoreResult:
    if args.nodes is not None:  # full-node requests carry their facts
        return profile.prioritize(args.pod, args.nodes)
    return profile.prioritize_names(args.pod, args.node_names or [], names_source(profile, source))


def _answer(result: ScoreResult, names: Sequence[str]) -> orjson.Fragment:
    """One entry per node, in the request's order, joined from entries encoded once per kept scores object (those
    the request's scores are part of, when they hold more nodes: ``ScoreResult.covering``)."""
    scores = result.covering if result.covering is not None else result.scores
    encoded = _encoded.get(scores) if result.kept else None
    if encoded is None and result.kept and result.derived_from is not None:
        # Derived from kept scores whose entries are encoded: only the names whose scores may differ are encoded.
        base, changed = result.derived_from
        before = _encoded.get(base)
        if before is not None:
            entries = _result.dump([{"Host": name, "Score": scores[name]} for name in changed])
            encoded = {**before, **dict(zip(changed, map(orjson.dumps, entries), strict=True))}
            _encoded.put(scores, encoded)
    if encoded is None:
        entries = _result.dump([{"Host": name, "Score": score} for name, score in scores.items()])
        encoded = dict(zip(scores, map(orjson.dumps, entries), strict=True))
        if result.kept:
            _encoded.put(scores, encoded)
    entries_of = map(encoded.__getitem__, names)
    if result.demoted:  # a tie at the top broken (``extender.verbs.assumed``): this answer's alone
        lower = _result.dump([{"Host": name, "Score": scores[name] - 1} for name in result.demoted])
        entries_of = map(dict(zip(result.demoted, map(orjson.dumps, lower), strict=True)).get, names, entries_of)
    return orjson.Fragment(b"[%b]" % b",".join(entries_of))
