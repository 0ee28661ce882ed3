"""preempt: keep the candidate nodes (and their victims, by UID) the policy accepts.

The scheduler's preemption result has no Error field: on a plugin error the
answer vetoes every candidate (evicting nothing is the safe side) and carries
``Error`` for humans; the scheduler ignores that key.
"""

from __future__ import annotations

from typing import Any

from extender.framework.profile import Profile
from extender.framework.types import Facts
from extender.nodesource.base import NodeSource
from extender.verbs import Answer, load_request
from extender.wire.schemas import ExtenderPreemptionArgsSchema, ExtenderPreemptionResultSchema

_args = ExtenderPreemptionArgsSchema()
_result = ExtenderPreemptionResultSchema()


def handle(payload: Any, profile: Profile, source: NodeSource) -> Answer:
    args = load_request(_args, payload, "ExtenderPreemptionArgs")
    names = list(args.candidates)
    # Preemption requests never carry node objects: labels come from the node source, if any.
    nodes = {node.name: node for node in source.lookup(names)} if profile.facts > Facts.NAME else {}
    result = profile.preempt(args.pod, args.candidates, nodes)
    body = _result.dump({"NodeNameToMetaVictims": result.accepted})
    error = result.error.reason if result.error else ""
    if error:
        body["Error"] = error
    return Answer(body, error=error, nodes_in=len(names), nodes_out=len(result.accepted))
