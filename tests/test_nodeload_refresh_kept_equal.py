"""A refresh of NodeLoad's answers (or a relist of the nodes' allocatable) re-judges only the nodes it changed, and the
answers stay those worked out afresh.

A refreshed snapshot names the nodes whose samples moved and those whose sample time alone moved
(``Snapshot.changed_since``); the kept verdicts and scores of the snapshot before are judged again on the first, and
on the second where the node has bound pods (an in-flight pod counts by how long before the sample it was bound).
The same generated steps go to an extender with the result cache and one without it, as in
tests/test_nodeload_kept_equal.py, with in-flight pods bound around the instant the next sample stops counting them
(``delay`` after the binding), so that a refresh with unchanged values changes verdicts through the times alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from extender.framework import clock
from extender.http.handler import Extender
from extender.kube.bound_pods import Bindings, by_node
from extender.kube.demand import Resources
from extender.kube.lists import BoundPod
from extender.plugins.nodeload import NodeLoad
from tests.test_nodeload_inflight import GI, bound
from tests.test_nodeload_kept_equal import (
    ANSWERS,
    NODES,
    REFRESH,
    REQUESTS,
    Answers,
    _loads,
    extender,
    refreshed,
    time_or_request,
    told,
)

ALLOCATABLE = {name: Resources(4.0, None, 16 * GI, None) for name in NODES}
# The metrics' delay (the default): a pod bound ``delay`` before a sample is the first its sample may show.
DELAY = 120.0
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("answers"), ANSWERS),
        # A refresh that brings the same values, newer: Prometheus stamps an instant answer with its own time.
        st.tuples(st.just("same"), st.none()),
        # A pod bound on a node, at an instant around where the next refreshes stop counting it; or one deleted.
        st.tuples(
            st.just("bind"),
            st.tuples(
                st.sampled_from(NODES),
                st.sampled_from([-5.0, 0.0, 3.0, 9.999, 10.0, 15.0, 25.0]),
                st.sampled_from(["500m", "1", "2", None]),  # None: a pod of the node deleted
            ),
        ),
        # The nodes listed again: a new list, the same allocatable but where a node's changed or it is missing.
        st.tuples(
            st.just("relist"),
            st.dictionaries(st.sampled_from(NODES), st.sampled_from([None, 2.0, 4.0, 8.0]), max_size=2),
        ),
        st.tuples(st.just("time"), st.sampled_from([0.001, 5.001, 31.0])),
        st.tuples(st.just("request"), REQUESTS),
    ),
    min_size=1,
    max_size=25,
)
_ALL = {"verb": "filter", "names": NODES}
_SCORES = {"verb": "prioritize", "names": NODES}


class InFlight:
    """The bound pods both extenders count, published as the index does: a new ``Bindings`` per change, sharing the
    tuples of the nodes whose pods did not change."""

    def __init__(self, served: list[Extender]) -> None:
        self.pods: dict[str, BoundPod] = {}
        self.served = served
        self.bindings = Bindings({})
        self.allocatable: dict[str, Resources] = dict(ALLOCATABLE)
        self.publish()

    def relist(self, cpus: dict[str, float | None]) -> None:
        """A new allocatable list: each node's as before, but a node given another CPU count, or None (not listed)."""
        changed = {node: Resources(cpu, None, 16 * GI, None) for node, cpu in cpus.items() if cpu}
        listed = {**self.allocatable, **changed}
        self.allocatable = {node: found for node, found in listed.items() if cpus.get(node, 1.0) is not None}
        self.publish()

    def bind(self, node: str, at: float, cpu: str = "1") -> None:
        self.pods[f"uid-{len(self.pods)}"] = bound(f"uid-{len(self.pods)}", node, at, cpu=cpu)
        self.publish()

    def delete(self, node: str) -> None:
        for uid in [uid for uid, pod in self.pods.items() if pod.node == node][:1]:
            del self.pods[uid]
        self.publish()

    def publish(self) -> None:
        before = self.bindings.by_node
        fresh = by_node(self.pods)
        self.bindings = Bindings(
            {node: before[node] if before.get(node) == pods else pods for node, pods in fresh.items()}
        )
        for served in self.served:
            for plugin in _node_loads(served):
                plugin._offline = (self.bindings, self.allocatable)


def _node_loads(served: Extender) -> list[NodeLoad]:
    return [
        plugin
        for profile in served.policy.profiles.values()
        for plugin in profile.filters
        if isinstance(plugin, NodeLoad)
    ]


def _with_pods(
    now: list[float], monkeypatch: pytest.MonkeyPatch, answers: Answers
) -> tuple[Extender, Extender, InFlight]:
    monkeypatch.setattr(clock, "now", lambda: now[0])
    cached, plain = extender(True, answers, monkeypatch), extender(False, answers, monkeypatch)
    return cached, plain, InFlight([cached, plain])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS, ANSWERS)
# The same values refreshed: the pod bound 3 s after ``delay`` before the first sample stops counting on the refresh.
@example(
    steps=[
        ("bind", ("node-1", 3.0, "2")),
        ("request", _ALL),
        ("request", _SCORES),
        ("same", None),
        ("request", _ALL),
        ("request", _SCORES),
    ],
    first=_loads(0.5),
)
# Nodes without a sample (never kept: judged on every request) beside one that gets a sample.
@example(
    steps=[
        ("request", _ALL),
        ("answers", {**_loads(0.5), "memory": {**_loads(0.5)["memory"], "node-1": (None, 0.0)}}),
        ("request", _ALL),
    ],
    first={**_loads(0.5), "memory": {**_loads(0.5)["memory"], "node-1": (None, 0.0), "node-2": (None, 0.0)}},
)
# A node relisted with twice the CPU: its pod in flight now a smaller share.
@example(
    steps=[
        ("bind", ("node-3", 25.0, "2")),
        ("request", _ALL),
        ("request", _SCORES),
        ("relist", {"node-3": 8.0}),
        ("request", _ALL),
        ("request", _SCORES),
    ],
    first=_loads(0.5),
)
def test_answers_after_a_refresh_equal_those_worked_out_afresh(monkeypatch, steps, first):
    now = [1_000_000.0]
    answers = Answers()
    answers.set(first, now[0])
    latest = first
    cached, plain, in_flight = _with_pods(now, monkeypatch, answers)
    for kind, step in steps:
        if kind in ("answers", "same"):  # a refresh is due, and brings these
            now[0] += REFRESH
            latest = step if kind == "answers" else latest
            answers.set(latest, now[0])
            refreshed(cached, now[0])
        elif kind == "bind":
            node, after, cpu = step
            if cpu is not None:  # bound so that a sample ``after`` seconds from now is the first to show it
                in_flight.bind(node, now[0] + after - DELAY, cpu)
            else:
                in_flight.delete(node)
        elif kind == "relist":
            in_flight.relist(step)
        else:
            time_or_request(kind, step, now, cached, plain)


def test_a_refresh_with_the_same_values_judges_again_only_the_nodes_with_bound_pods(monkeypatch):
    now = [1_000_000.0]
    answers = Answers()
    answers.set(_loads(0.5), now[0])
    cached, plain, in_flight = _with_pods(now, monkeypatch, answers)
    judged: list[str] = []
    original = NodeLoad.filter

    def counting(self: NodeLoad, pod: Any, node: Any, view: Any = None) -> Any:
        judged.append(node.name)
        return original(self, pod, node, view)

    monkeypatch.setattr(NodeLoad, "filter", counting)
    # 2 CPUs of 4 on a node at 0.5: over 0.8 until its sample is 3 s after ``delay`` from the binding.
    in_flight.bind("node-2", now[0] + 3.0 - DELAY, cpu="2")
    first = told(cached, _ALL)
    assert first == told(plain, _ALL)
    assert b"node-2" in first[1].split(b'"FailedNodes"')[1]
    judged.clear()
    now[0] += REFRESH
    answers.set(_loads(0.5), now[0])  # the same loads, 10 s newer: node-2's pod now shows in its sample
    refreshed(cached, now[0])
    after = told(cached, _ALL)
    assert judged == ["node-2"]  # the others keep their verdicts
    assert after == told(plain, _ALL)
    assert b"node-2" not in after[1].split(b'"FailedNodes"')[1]
    judged.clear()
    now[0] += REFRESH
    moved = _loads(0.5)
    moved["cpu"]["node-4"] = (0.85, 0.0)
    answers.set(moved, now[0])  # one value moved: that node too
    refreshed(cached, now[0])
    moved_answer = told(cached, _ALL)
    assert sorted(judged) == ["node-2", "node-4"]
    assert moved_answer == told(plain, _ALL)
    assert b"node-4" in moved_answer[1].split(b'"FailedNodes"')[1]
    for relisted, again in (({}, []), ({"node-3": 2.0}, ["node-3"])):  # listed again: all alike, or one node's less
        judged.clear()
        in_flight.relist(relisted)
        relisted_answer = told(cached, _ALL)
        assert judged == again
        assert relisted_answer == told(plain, _ALL)
