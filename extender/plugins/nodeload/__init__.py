"""NodeLoad: filter and score nodes by their live load, read from a Prometheus-compatible API.

kube-scheduler places pods by requests, not by what nodes use. NodeLoad reads
each node's utilisation (a ratio 0..1 per node name) with PromQL, from a
self-run Prometheus or from Cloud Monitoring, which answers PromQL for GKE's
system metrics with nothing installed in the cluster. It needs node names
only: node-name requests need no node source.

A node above a filter rule's threshold is Unschedulable (resolvable: load
changes). ``preset: gke`` (Cloud Monitoring, the function's project and
identity) or ``preset: node-exporter`` supply the URL, auth and metrics. A node
without a fresh finite sample has no facts: the entry's failurePolicy decides,
as for a node whose labels are unknown (``Plugin.missing_facts``). Answers are
kept and asked again as ``extender.plugins.nodeload.loads`` says.

Scores: LeastLoaded ``100 × (1 − load)``; TargetLoad as Trimaran's
TargetLoadPacking (kubernetes-sigs/scheduler-plugins) with the node's measured
load: ``target`` scores 100, an idle node ``100 × target``, a node above the
target at most that, down to 0 at full load. Loads are clamped to 0..1.

    - name: NodeLoad
      args:
        prometheus:
          url: https://monitoring.googleapis.com/v1/projects/my-project/location/global/prometheus
          auth: google          # the function's identity; none: no credentials
        metrics:
        - {name: cpu, query: 'kubernetes_io:node_cpu_allocatable_utilization', nodeLabel: node_name}
        refreshInterval: 30s    # how old a kept answer may be before it is asked again
        maxAge: 3m              # a node whose sample is older has no facts
        filter:
        - {metric: cpu, above: 0.9}
        score: {metric: cpu, strategy: TargetLoad, target: 0.6}
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import ClassVar

from extender.framework import clock as request_clock
from extender.framework import status
from extender.framework.plugin import MAX_NODE_SCORE, FilterPlugin, Observed, ScorePlugin
from extender.framework.status import Status
from extender.framework.types import Node, Pod
from extender.plugins.nodeload.answers import parse_answer
from extender.plugins.nodeload.args import GOOGLE, LEAST_LOADED, NodeLoadArgs, NodeLoadConfig
from extender.plugins.nodeload.loads import Clock, Loads, LoadView
from extender.plugins.nodeload.prometheus import GoogleAuth, Prometheus, QueryError
from extender.settings import PROJECT_ENV, Need


class NodeLoad(FilterPlugin, ScorePlugin):
    name: ClassVar[str] = "NodeLoad"
    args_schema = NodeLoadArgs

    def __init__(self, args: NodeLoadConfig, clock: Clock | None = None) -> None:
        super().__init__(args)
        self.config = args
        self._clock = clock  # None: the request's instant (``extender.framework.clock``)
        self.loads = Loads(
            args.metrics,
            Prometheus(args.url, GoogleAuth() if args.auth == GOOGLE else None),
            refresh_interval=args.refresh_interval,
            query_seconds=args.query_seconds,
            keep=args.keep,
        )
        # Per rule: the metric, the threshold, and the rejection (one text for every node, as events group them).
        self._rules = tuple(
            (rule.metric, rule.above, status.unschedulable(f"NodeLoad rule '{rule.metric}': load above {rule.above:g}"))
            for rule in args.rules
        )
        self._metrics_at = {
            "filter": tuple(dict.fromkeys(rule.metric for rule in args.rules)),
            "score": (args.score.metric,),
        }
        target = args.score.target
        self._scale = least_loaded if args.score.strategy == LEAST_LOADED else lambda load: target_load(load, target)

    def needs(self) -> Iterable[Need]:
        if self.config.in_function_project:
            yield Need((PROJECT_ENV,), "NodeLoad's preset queries Cloud Monitoring in the function's project")

    def prepare(self, pod: Pod) -> LoadView:
        """The answers this request judges on, at one instant: refreshed first when due (``Loads``)."""
        now = self._clock() if self._clock is not None else request_clock.now()
        return LoadView(self.loads.snapshot(now), now, self.config.max_age)

    def reuse_key(self, pod: Pod, view: LoadView) -> Hashable:
        """The verdicts depend on the node's samples: the snapshot's identity and which samples are too old."""
        return view.key()

    def missing_facts(self, point: str, nodes: Sequence[Node], view: LoadView) -> Mapping[str, Status]:
        """Nodes without a fresh finite sample of a metric ``point`` reads (the filter rules', the score's)."""
        metrics = self._metrics_at.get(point, ())
        if not metrics:
            return {}
        names = [node.name for node in nodes]
        errors: dict[str, Status] = {}
        missing: dict[str, Status] = {}
        for metric in metrics:
            for name, why in view.unknown(metric, names).items():
                if name not in missing:
                    missing[name] = errors.get(why) or errors.setdefault(why, status.error(why))
        return missing

    def filter(self, pod: Pod, node: Node, view: LoadView) -> Status:
        for metric, above, rejected in self._rules:
            if view.value(metric, node.name) > above:
                return rejected
        return status.SUCCESS

    def score(self, pod: Pod, node: Node, view: LoadView) -> int:
        return self._scale(view.value(self.config.score.metric, node.name))

    def normalize_scores(self, pod: Pod, scores: dict[str, int], view: LoadView) -> None:
        """Scores are 0..100 already, each from its node's load alone."""

    def observations(self, view: LoadView) -> Observed:
        return view.facts

    def judge_offline(self, answers: Mapping[str, bytes]) -> float | None:
        """Judge on saved ``/api/v1/query`` answers (by metric name), as ``explain --metrics`` does: no Prometheus is
        asked. Returns the newest sample's time (None: the answers hold none), the instant ``explain`` judges them at
        unless told another (``extender.framework.clock``); AnswerError when an answer cannot be read."""
        times: list[float] = []
        for metric in self.config.metrics:
            answer, _ = parse_answer(answers[metric.name], metric.node_label)
            times += answer.sorted_times[-1:]
        saved = {metric.query: answers[metric.name] for metric in self.config.metrics}
        self.loads = Loads(self.config.metrics, Saved(saved), refresh_interval=math.inf, query_seconds=1.0, keep=True)
        return max(times, default=None)


class Saved:
    """Saved answers by query, for ``judge_offline``."""

    def __init__(self, answers: Mapping[str, bytes]) -> None:
        self.answers = answers

    def query(self, promql: str, seconds: float) -> bytes:
        if promql not in self.answers:
            raise QueryError("no saved answer")
        return self.answers[promql]


def least_loaded(load: float) -> int:
    """100 for an idle node, 0 for a fully loaded one."""
    return _round(MAX_NODE_SCORE * (1 - _clamped(load)))


def target_load(load: float, target: float) -> int:
    """Trimaran's TargetLoadPacking on the 0..100 scale, with the node's measured load as its predicted one."""
    used, best = MAX_NODE_SCORE * _clamped(load), MAX_NODE_SCORE * target
    if used > best:
        return _round(best * (MAX_NODE_SCORE - used) / (MAX_NODE_SCORE - best))
    return _round((MAX_NODE_SCORE - best) * used / best + best)


def _clamped(load: float) -> float:
    return min(1.0, max(0.0, load))


def _round(score: float) -> int:
    """Half away from zero, as Go's math.Round that the scheduling framework's plugins use."""
    return math.floor(score + 0.5)
