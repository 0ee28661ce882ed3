"""filter: keep the nodes every filter plugin accepts, in the request's node-cache mode."""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from extender.framework.kept import Derived, ServedProfile
from extender.framework.profile import FilterResult
from extender.framework.status import Code, Status
from extender.framework.types import Facts
from extender.kube import assume, assuming, expect
from extender.nodesource.base import NamesOnly, NodeSource
from extender.verbs import Answer, load_request
from extender.wire.answered_names import AnsweredNames
from extender.wire.schemas import ExtenderArgs, ExtenderArgsSchema, ExtenderFilterResultSchema

# Nodes known by name only, shared by every request whatever the policy's source.
_NAMES_ONLY = NamesOnly()
_args = ExtenderArgsSchema()
_result = ExtenderFilterResultSchema()
# The failure maps of kept rejections (``FilterResult.rejected_kept``), by their identity: never changed, read only.
_failures: Derived[tuple[dict[str, str], dict[str, str]]] = Derived()


def names_source(profile: ServedProfile, source: NodeSource) -> NodeSource:
    """Where a node-name request's facts come from: the policy's source only when a plugin needs more than names."""
    return source if profile.facts > Facts.NAME else _NAMES_ONLY


def handle(
    payload: Any, profile: ServedProfile, source: NodeSource, answered: AnsweredNames | None = None
) -> Answer:
    """``answered`` keeps a node-name answer's names for the prioritize request that names them again."""
    args = load_request(_args, payload, "ExtenderArgs")
    result = _filter(args, profile, source)
    if result.error is None and assuming():
        if len(result.feasible) < 2:  # one: bound there without prioritize; none: no binding follows
            result.assumed = assume(args.pod.uid, result.feasible) or ""
        else:
            expect(args.pod.uid)  # placed by whichever instance answers its prioritize
    failed, unresolvable = _failure_maps(result)
    answer: dict[str, Any] = {
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": result.error.reason if result.error else "",
    }
    if args.nodes is not None:
        feasible = set(result.feasible)
        answer["Nodes"] = {"metadata": {}, "items": [node.raw for node in args.nodes if node.name in feasible]}
        nodes_in = len(args.nodes)
    else:
        answer["NodeNames"] = result.feasible
        if answered is not None and len(result.feasible) > 1:  # one node or none: no prioritize follows
            answered.remember(result.feasible)
        nodes_in = len(args.node_names or ())
    return Answer(
        _result.dump(answer),
        error=answer["Error"],
        nodes_in=nodes_in,
        nodes_out=len(result.feasible),
        pod=args.pod,
        result=result,
    )


def _failure_maps(result: FilterResult) -> tuple[dict[str, str], dict[str, str]]:
    """FailedNodes and FailedAndUnresolvableNodes, worked out once per kept rejections."""
    return _failures.memo(result.rejected_kept, lambda: _by_code(result.rejected))


def _by_code(rejected: Mapping[str, Status]) -> tuple[dict[str, str], dict[str, str]]:
    """Node -> reason by the status's code, in the order of the node names (the same answer however the scheduler
    ordered the nodes). The code is looked up once, not per node: an Enum member read from its class costs a lookup
    each time, and a request may reject thousands."""
    resolvable, unresolvable_code = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    for name, status in sorted(rejected.items(), key=itemgetter(0)):
        code = status.code
        if code is resolvable:
            failed[name] = status.reason
        elif code is unresolvable_code:
            unresolvable[name] = status.reason
    return failed, unresolvable


def _filter(args: ExtenderArgs, profile: ServedProfile, source: NodeSource) -> FilterResult:
    if args.nodes is not None:  # full-node requests carry their facts
        return profile.filter(args.pod, args.nodes)
    return profile.filter_names(args.pod, args.node_names or [], names_source(profile, source))
