"""prioritize: a bare array of integer scores 0..10, one per input node.

The scheduler silently ignores a failed prioritize call, so a plugin error
answers neutral zeros (the same effect) and says why in the
``X-Extender-Error`` header and the decision log instead of a non-array body.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from extender.framework.profile import MIN_EXTENDER_PRIORITY, Profile
from extender.framework.types import Node
from extender.nodesource.base import NodeSource
from extender.verbs import Answer, load_request
from extender.verbs.filter import node_facts
from extender.wire.schemas import ExtenderArgsSchema, HostPrioritySchema

_args = ExtenderArgsSchema()
_result = HostPrioritySchema(many=True)
_name = attrgetter("name")
# The answer entries of the last scores, by node name: a profile hands back the same scores object for the same
# candidates, and then each node's entry is the same too, only the order of the request is new. Holding the scores
# keeps their identity theirs.
_last: tuple[dict[str, int], dict[str, Any]] = ({}, {})


def handle(payload: Any, profile: Profile, source: NodeSource) -> Answer:
    args = load_request(_args, payload, "ExtenderArgs")
    nodes = node_facts(args, profile, source)
    result = profile.prioritize(args.pod, nodes, reusable=not args.full_nodes)
    if result.error is not None:
        zeros = [{"Host": node.name, "Score": MIN_EXTENDER_PRIORITY} for node in nodes]
        reason = result.error.reason
        return Answer(
            _result.dump(zeros),
            headers={"X-Extender-Error": reason},
            error=reason,
            nodes_in=len(nodes),
            pod=args.pod,
            result=result,
        )
    return Answer(
        _answer(result.scores, nodes), nodes_in=len(nodes), nodes_out=len(result.scores), pod=args.pod, result=result
    )


def _answer(scores: dict[str, int], nodes: Sequence[Node]) -> list[Any]:
    """One entry per node, in the request's order."""
    global _last
    last_scores, entries = _last
    if scores is not last_scores:
        entries = dict(zip(scores, _result.dump([{"Host": name, "Score": score} for name, score in scores.items()])))
        _last = (scores, entries)
    return list(map(entries.__getitem__, map(_name, nodes)))
