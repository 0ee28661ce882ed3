"""filter: keep the nodes every filter plugin accepts, in the request's node-cache mode."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from extender.framework.profile import Profile
from extender.framework.status import Code
from extender.framework.types import Facts, Node
from extender.nodesource.base import NamesOnly, NodeSource
from extender.verbs import Answer, load_request
from extender.wire.schemas import ExtenderArgs, ExtenderArgsSchema, ExtenderFilterResultSchema

# Nodes known by name only, shared by every request whatever the policy's source.
_NAMES_ONLY = NamesOnly()
_args = ExtenderArgsSchema()
_result = ExtenderFilterResultSchema()
_name = attrgetter("name")


def node_facts(args: ExtenderArgs, profile: Profile, source: NodeSource) -> list[Node]:
    """Full-node requests carry their facts; node-name requests ask the source when a plugin needs more."""
    if args.nodes is not None:
        return args.nodes
    names = args.node_names or []
    return source.lookup(names) if profile.facts > Facts.NAME else _NAMES_ONLY.lookup(names)


def handle(payload: Any, profile: Profile, source: NodeSource) -> Answer:
    args = load_request(_args, payload, "ExtenderArgs")
    nodes = node_facts(args, profile, source)
    # A node source's nodes (node-name requests) are the same objects from request to request.
    result = profile.filter(args.pod, nodes, reusable=not args.full_nodes)
    failed = {name: s.reason for name, s in result.rejected.items() if s.code is Code.UNSCHEDULABLE}
    unresolvable = {name: s.reason for name, s in result.rejected.items() if s.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    answer: dict[str, Any] = {
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": result.error.reason if result.error else "",
    }
    if args.full_nodes:
        answer["Nodes"] = {"metadata": {}, "items": [node.raw for node in result.feasible]}
    else:
        answer["NodeNames"] = list(map(_name, result.feasible))
    return Answer(
        _result.dump(answer),
        error=answer["Error"],
        nodes_in=len(nodes),
        nodes_out=len(result.feasible),
        pod=args.pod,
        result=result,
    )
