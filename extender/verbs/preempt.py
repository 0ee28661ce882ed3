"""preempt: keep the candidate nodes (and their victims, by UID) the policy accepts.

The scheduler's preemption result has no Error field: on a plugin error the
answer vetoes every candidate (evicting nothing is the safe side) and carries
``Error`` for humans; the scheduler ignores that key.

Node-name requests (nodeCacheCapable: true) name victims by UID only. When a
preempt plugin reads victim pods, they are listed from the Kubernetes API per
candidate node; a candidate whose victim is no longer there is vetoed (the
scheduler's view is stale), and one whose pods cannot be listed keeps UID-only
victims, so each plugin's failurePolicy decides (Fail vetoes only those
candidates). At most MAX_POD_LISTS candidates are
listed per request (the scheduler offers a few dozen; a request naming
thousands must not turn into thousands of API calls): the others are treated
as unlisted. Warnings name a bounded number of nodes: one log entry stays far
below Cloud Logging's 256 KB entry limit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from extender.errors import bounded
from extender.framework import status
from extender.framework.kept import ServedProfile
from extender.framework.status import Status
from extender.framework.types import Facts, Pod, VictimFacts, Victims
from extender.kube.errors import KubeError
from extender.nodesource.base import NodeSource
from extender.verbs import Answer, load_request
from extender.wire.preemption import ExtenderPreemptionArgsSchema, ExtenderPreemptionResultSchema

if TYPE_CHECKING:
    from extender.kube.client import KubeClient

logger = logging.getLogger("extender")

_args = ExtenderPreemptionArgsSchema()
_result = ExtenderPreemptionResultSchema()
# Candidates whose pods are listed per request.
MAX_POD_LISTS = 64
# Nodes named in one warning, each in at most so many characters; the rest are counted.
_NAMED_IN_LOG = 10
_ENTRY_CHARS = 300


def handle(payload: Any, profile: ServedProfile, source: NodeSource, kube: KubeClient | None) -> Answer:
    args = load_request(_args, payload, "ExtenderPreemptionArgs")
    names = list(args.candidates)
    candidates: Mapping[str, Victims] = args.candidates
    stale: dict[str, Status] = {}
    if not args.full_pods and profile.victim_facts > VictimFacts.UID:
        candidates, stale = _with_victim_pods(candidates, kube, profile.fail_open)
    # Preemption requests never carry node objects: labels come from the node source, if any.
    nodes = {node.name: node for node in source.lookup(list(candidates))} if profile.facts > Facts.NAME else {}
    result = profile.preempt(args.pod, candidates, nodes)
    result.rejected.update(stale)
    body = _result.dump({"NodeNameToMetaVictims": result.accepted})
    error = result.error.reason if result.error else ""
    if error:
        body["Error"] = error
    return Answer(
        body, error=error, nodes_in=len(names), nodes_out=len(result.accepted), pod=args.pod, result=result
    )


def _with_victim_pods(
    candidates: Mapping[str, Victims], kube: KubeClient | None, fail_open: bool
) -> tuple[dict[str, Victims], dict[str, Status]]:
    """Candidates with full victim pods where the API lists them, and the candidates vetoed as stale."""
    if kube is None or not candidates:
        return dict(candidates), {}
    nodes = list(candidates)
    wanted = {node: {victim.uid for victim in candidates[node].pods} for node in nodes[:MAX_POD_LISTS]}
    listed: dict[str, dict[str, Pod] | KubeError] = dict(kube.pods_on_nodes(wanted))
    skipped = KubeError(f"not listed: only {MAX_POD_LISTS} candidates' pods are listed per request")
    listed.update((node, skipped) for node in nodes[MAX_POD_LISTS:])
    detailed: dict[str, Victims] = {}
    stale: dict[str, Status] = {}
    unavailable: list[str] = []
    for node, victims in candidates.items():
        listing = listed[node]
        if isinstance(listing, KubeError):
            unavailable.append(bounded(f"{node} ({listing.message})", _ENTRY_CHARS))
            detailed[node] = victims  # UID-only: each plugin's failurePolicy decides
            continue
        found = _victims_in(listing, victims)
        if isinstance(found, Status):
            stale[node] = found
        else:
            detailed[node] = Victims(found, victims.num_pdb_violations)
    if unavailable:
        more = len(unavailable) - _NAMED_IN_LOG
        problem = "victim pods unavailable on " + ", ".join(unavailable[:_NAMED_IN_LOG])
        problem += f" and {more} more node(s)" if more > 0 else ""
        outcome = (
            f"each plugin's failurePolicy decides (policy default {'Ignore' if fail_open else 'Fail'}): "
            "Fail vetoes these candidates, Ignore skips the plugins that read victims there"
        )
        fields = {"event": "extender.preempt", "source": "kubernetes", "problem": problem, "outcome": outcome}
        logger.warning("%s; %s", problem, outcome, extra={"json_fields": fields})
    return detailed, stale


def _victims_in(listed: Mapping[str, Pod], victims: Victims) -> tuple[Pod, ...] | Status:
    """The victims as listed on their node (by UID), in the scheduler's order; a Status when one is no longer there."""
    missing = [victim.uid for victim in victims.pods if victim.uid not in listed]
    if missing:
        return status.unschedulable(f"victim pod {missing[0]} is no longer on this node: the scheduler's view is stale")
    return tuple(listed[victim.uid] for victim in victims.pods)
