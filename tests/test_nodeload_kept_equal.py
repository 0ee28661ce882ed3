"""NodeLoad's kept answers and kept verdicts answer exactly as asking afresh: the same generated requests to an
extender with the result cache (answers kept per refreshInterval, verdicts and scores kept under NodeLoad's reuse
key) and one without it (Prometheus asked on every request, nothing kept), as loads change, nodes stop reporting
and time passes maxAge.

Both read the same answers through the offline source ``explain --metrics`` uses, changed by the test, and the
same clock: a new answer comes with a clock moved on by refreshInterval, as a refresh would fetch it. A verdict kept
past the load it was judged on (a key without the answers' identity, or without which samples are too old) answers
differently. tests/test_nodeload_kept_equal_served.py does the same from 8 threads against a real Prometheus.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from extender.framework import clock
from extender.framework.kept import KeptProfile
from extender.framework.profile import Profile
from extender.http.handler import Extender
from extender.nodesource.base import NamesOnly
from extender.plugins.nodeload import NodeLoad, Saved
from extender.policy.loader import parse_policy
from tests.prometheus import refreshes_landed
from tests.test_kept_equal import answer

REFRESH, MAX_AGE = 10.0, 30.0
LOAD_ARGS = """
      prometheus: {url: "http://127.0.0.1:9"}
      metrics:
      - {name: cpu, query: node_cpu_load, nodeLabel: node}
      - {name: memory, query: node_memory_load, nodeLabel: node}
      refreshInterval: 10s
      maxAge: 30s
      filter:
      - {metric: cpu, above: 0.8}
      - {metric: memory, above: 0.9}
      score: {metric: cpu, strategy: TargetLoad, target: 0.5}
"""
POLICY = f"""
nodeCacheCapable: true
profiles:
- name: default
  plugins:
    filter: {{enabled: [{{name: NodeNameFilter}}, {{name: NodeLoad}}]}}
    score: {{enabled: [{{name: NodeLoad, weight: 2}}]}}
  pluginConfig:
  - {{name: NodeNameFilter, args: {{deny: ["*-9"]}}}}
  - name: NodeLoad
    args:{LOAD_ARGS}
- name: ignore
  plugins:
    filter: {{enabled: [{{name: NodeLoad, failurePolicy: Ignore}}]}}
    score: {{enabled: [{{name: NodeLoad, weight: 1, failurePolicy: Ignore}}]}}
  pluginConfig:
  - name: NodeLoad
    args:{LOAD_ARGS}
- name: audit
  plugins:
    filter: {{enabled: [{{name: NodeLoad, enforcement: Audit}}]}}
    score: {{enabled: [{{name: NodeLoad, weight: 1, enforcement: Audit}}]}}
  pluginConfig:
  - name: NodeLoad
    args:{LOAD_ARGS}
"""
QUERIES = {"cpu": "node_cpu_load", "memory": "node_memory_load"}
NODES = [f"node-{index}" for index in range(6)]
# A node's sample: a load around the thresholds, not a number, or none (it stopped reporting); and how old it is when
# fetched (a Prometheus-compatible source may give a sample's own time), so that samples pass maxAge while one
# answer is kept.
VALUES = st.one_of(
    st.sampled_from([0.0, 0.3, 0.5, 0.8, 0.800001, 0.9, 0.95, 1.2]), st.sampled_from([math.nan, math.inf, None])
)
# Mostly fresh when fetched, as Prometheus stamps instant answers: the answers of two refreshes often expire alike.
SAMPLES = st.tuples(VALUES, st.sampled_from([0.0] * 8 + [5.0, 25.0, 29.999, 30.0, 31.0]))
ANSWERS = st.fixed_dictionaries(
    {metric: st.fixed_dictionaries(dict.fromkeys(NODES, SAMPLES)) for metric in QUERIES}
)
REQUESTS = st.fixed_dictionaries(
    {
        "verb": st.sampled_from(
            ["filter", "prioritize", "ignore/filter", "ignore/prioritize", "audit/filter", "audit/prioritize"]
        ),
        "names": st.lists(st.sampled_from(NODES), unique=True, min_size=1, max_size=len(NODES)),
    }
)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("answers"), ANSWERS),
        # Time passes without a new answer (within refreshInterval, or past it: a refresh): samples age past maxAge.
        st.tuples(st.just("time"), st.sampled_from([0.001, 1.0, 4.999, 5.0, 5.001, 9.0, 31.0])),
        st.tuples(st.just("request"), REQUESTS),
    ),
    min_size=1,
    max_size=25,
)


class Answers:
    """The one source both extenders ask: each metric's answer as the test last set it, its samples stamped then."""

    def __init__(self) -> None:
        self.saved = Saved({})

    def set(self, loads: dict[str, dict[str, tuple[float | None, float]]], now: float) -> None:
        """Each metric's samples: node -> (value or None for no sample, age when fetched at ``now``)."""
        self.saved.answers = {QUERIES[metric]: _answer(samples, now) for metric, samples in loads.items()}

    def query(self, promql: str, seconds: float) -> bytes:
        return self.saved.query(promql, seconds)


def _answer(samples: dict[str, tuple[float | None, float]], now: float) -> bytes:
    result = [
        {
            "metric": {"node": node},
            "value": [now - age, "NaN" if math.isnan(value) else "+Inf" if math.isinf(value) else repr(value)],
        }
        for node, (value, age) in samples.items()
        if value is not None
    ]
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def extender(cached: bool, answers: Answers, monkeypatch: pytest.MonkeyPatch) -> Extender:
    monkeypatch.setenv("EXTENDER_RESULT_CACHE", "on" if cached else "off")
    policy = parse_policy(POLICY, "test")
    assert isinstance(policy.profiles["default"], KeptProfile if cached else Profile)
    for profile in policy.profiles.values():
        for plugin in profile.filters:
            if isinstance(plugin, NodeLoad):
                assert plugin.loads.keep is cached
                plugin.loads.querier = answers
    return Extender(policy=policy, source=NamesOnly())


def refreshed(served: Extender, now: float) -> None:
    """The refresh due at ``now`` started, as the first request to find it due starts it (on a thread of its own,
    that request judging on the answers at hand), and landed."""
    for profile in served.policy.profiles.values():
        for plugin in profile.filters:
            if isinstance(plugin, NodeLoad):
                plugin.loads.snapshot(now)
    refreshes_landed()


def told(served: Extender, request: dict[str, Any]) -> tuple[int, bytes, list[Any]]:
    body = orjson.dumps(
        {
            "Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}},
            "Nodes": None,
            "NodeNames": request["names"],
        }
    )
    return answer(served, request["verb"], body)


def _loads(cpu: float, age: float = 0.0) -> dict[str, dict[str, tuple[float | None, float]]]:
    return {"cpu": dict.fromkeys(NODES, (cpu, age)), "memory": dict.fromkeys(NODES, (0.5, 0.0))}


_ALL = {"verb": "filter", "names": NODES}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS, ANSWERS)
# The loads change, as fresh as before: kept verdicts must not outlive the answers they were judged on.
@example(steps=[("request", _ALL), ("answers", _loads(0.95)), ("request", _ALL)], first=_loads(0.5))
# One kept answer's samples pass maxAge: kept verdicts must not outlive their samples' freshness.
@example(
    steps=[("answers", _loads(0.5, age=25.0)), ("request", _ALL), ("time", 5.001), ("request", _ALL)], first=_loads(0.5)
)
def test_kept_and_fresh_answers_agree(monkeypatch, steps, first):
    now = [1_000_000.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    answers = Answers()
    answers.set(first, now[0])
    cached, plain = extender(True, answers, monkeypatch), extender(False, answers, monkeypatch)
    for kind, step in steps:
        if kind == "answers":  # a refresh is due, and brings these
            now[0] += REFRESH
            answers.set(step, now[0])
            refreshed(cached, now[0])
        else:
            time_or_request(kind, step, now, cached, plain)


def time_or_request(kind: str, step: Any, now: list[float], cached: Extender, plain: Extender) -> None:
    """Time passing, or a request both extenders answer alike (twice: the second from what the first kept)."""
    if kind == "time":
        now[0] += step
        return
    for _ in range(2):
        assert told(cached, step) == told(plain, step)


def test_the_cache_keeps_one_answer_per_refresh_interval(monkeypatch):
    """What the differential test relies on: the cached extender asks once per refreshInterval, the other on every
    request."""
    now = [1_000_000.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    asked: list[str] = []
    answers = Answers()
    answers.set({"cpu": {"node-1": (0.5, 0.0)}, "memory": {"node-1": (0.5, 0.0)}}, now[0])
    counting = type(
        "Counting", (), {"query": lambda self, promql, seconds: asked.append(promql) or answers.query(promql, seconds)}
    )()
    cached, plain = extender(True, answers, monkeypatch), extender(False, answers, monkeypatch)
    for served in (cached, plain):
        for plugin in served.policy.profiles["default"].filters[1:]:
            plugin.loads.querier = counting
    request = {"verb": "filter", "names": ["node-1"]}
    for _ in range(3):
        told(cached, request)
    assert len(asked) == 2  # cpu and memory, once
    now[0] += REFRESH
    told(cached, request)
    refreshes_landed()
    assert len(asked) == 4
    told(plain, request)
    told(plain, request)
    assert len(asked) == 8
