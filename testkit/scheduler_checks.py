"""The checks kube-scheduler applies to an extender's answers (pkg/scheduler/extender.go), as assertions.

A wrong answer here is silent in production: a NodeNames answer to a
full-node request reads as "no node fits", a wrongly shaped prioritize
answer is ignored, a victim UID the scheduler did not offer fails preemption.
"""

from __future__ import annotations

from typing import Any

MAX_EXTENDER_PRIORITY = 10


def check_filter(request: dict[str, Any], answer: Any) -> None:
    assert isinstance(answer, dict), answer
    full = request.get("Nodes") is not None
    if full:
        sent = [node["metadata"]["name"] for node in request["Nodes"].get("items") or []]
        assert answer.get("NodeNames") is None, "full-node requests must be answered with Nodes"
        assert isinstance(answer.get("Nodes"), dict) and isinstance(answer["Nodes"].get("items"), list), answer
        kept = [node["metadata"]["name"] for node in answer["Nodes"]["items"]]
        by_name = {node["metadata"]["name"]: node for node in request["Nodes"].get("items") or []}
        for node in answer["Nodes"]["items"]:
            assert node == by_name[node["metadata"]["name"]], "full-node answers echo the node objects unchanged"
    else:
        sent = list(request["NodeNames"])
        assert answer.get("Nodes") is None, "node-name requests must be answered with NodeNames"
        assert isinstance(answer.get("NodeNames"), list), answer
        kept = answer["NodeNames"]
    failed = answer.get("FailedNodes") or {}
    unresolvable = answer.get("FailedAndUnresolvableNodes") or {}
    assert set(kept) <= set(sent), f"answer names nodes that were not sent: {set(kept) - set(sent)}"
    assert len(kept) == len(set(kept)), "a node is returned twice"
    assert set(failed) <= set(sent) and set(unresolvable) <= set(sent)
    assert not (set(kept) & (set(failed) | set(unresolvable))), "a node is both kept and rejected"
    assert all(isinstance(message, str) and message for message in [*failed.values(), *unresolvable.values()])
    assert isinstance(answer.get("Error", ""), str)
    if not answer.get("Error"):
        assert set(kept) | set(failed) | set(unresolvable) == set(sent), (
            "every node is either kept or rejected with a reason"
        )


def check_prioritize(request: dict[str, Any], answer: Any) -> None:
    assert isinstance(answer, list), f"prioritize must answer a bare array, got {type(answer).__name__}"
    if request.get("Nodes"):
        sent = [node["metadata"]["name"] for node in request["Nodes"].get("items") or []]
    else:
        sent = request["NodeNames"]
    assert [entry["Host"] for entry in answer] == list(sent), "one entry per input node, in order"
    for entry in answer:
        assert set(entry) == {"Host", "Score"}, entry
        assert type(entry["Score"]) is int and 0 <= entry["Score"] <= MAX_EXTENDER_PRIORITY, entry


def check_preempt(request: dict[str, Any], answer: Any) -> None:
    assert isinstance(answer, dict) and isinstance(answer.get("NodeNameToMetaVictims"), dict), answer
    if request.get("NodeNameToVictims") is not None:
        offered = {
            node: {pod["metadata"]["uid"] for pod in victims.get("Pods") or []}
            for node, victims in request["NodeNameToVictims"].items()
        }
    else:
        offered = {
            node: {pod["UID"] for pod in victims.get("Pods") or []}
            for node, victims in (request.get("NodeNameToMetaVictims") or {}).items()
        }
    for node, victims in answer["NodeNameToMetaVictims"].items():
        assert node in offered, f"node {node} was not a candidate"
        uids = [pod["UID"] for pod in victims["Pods"]]
        assert set(uids) <= offered[node], f"victims on {node} that the scheduler did not offer"
        assert type(victims["NumPDBViolations"]) is int


def check_bind(request: dict[str, Any], answer: Any) -> None:
    assert isinstance(answer, dict) and isinstance(answer.get("Error"), str), answer


CHECKS = {"filter": check_filter, "prioritize": check_prioritize, "preempt": check_preempt, "bind": check_bind}


def check_answer(verb: str, request: dict[str, Any], answer: Any) -> None:
    CHECKS[verb](request, answer)
