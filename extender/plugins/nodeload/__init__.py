"""NodeLoad: filter and score nodes by their predicted load, from metrics read with PromQL and the pods bound since.

kube-scheduler places pods by requests, not by what nodes use. NodeLoad reads
each node's utilisation (a ratio 0..1 per node name, or the metric's ``unit``) with PromQL, from a
self-run Prometheus or from Cloud Monitoring, which answers PromQL for GKE's
system metrics with nothing installed in the cluster. Metrics lag (sampling,
ingest, rate windows) while the scheduler goes on placing pods, so every rule
and score judges the **predicted** load (``predicted``): the measured value,
plus the estimated use (``estimates``) of the pods bound to the node since
its sample (``extender.kube.bound_pods``, from the Kubernetes API: every
instance sees every binding), plus the pod's own, as shares of the node's
allocatable.

A node above a filter rule's threshold is Unschedulable (resolvable: load
changes). Rules may select pods (``pods``); DaemonSet pods, each pinned to its
node, pass every rule that does not opt in (``daemonSets: true``). A node
without a fresh finite sample has no facts: the entry's failurePolicy decides,
as for a node whose labels are unknown (``Plugin.missing_facts``). Answers are
kept and asked again as ``extender.plugins.nodeload.loads`` says.

Scores: LeastLoaded ``100 × (1 − load)``; TargetLoad as Trimaran's
TargetLoadPacking (kubernetes-sigs/scheduler-plugins): ``target`` scores 100,
an idle node ``100 × target``, a node above the target at most that, down to 0
at full load; RiskBalancing as Trimaran's LoadVariationRiskBalancing: per
resource ``(1 − (μ + margin × σ^(1/sensitivity)) / 2) × 100`` from the mean μ
(in-flight pods and the pod added) and standard deviation σ of the load over
``window``, the worst resource counting. Loads are read as shares of their unit's range and clamped to 0..1.

    - name: NodeLoad
      args:
        prometheus:
          url: https://monitoring.googleapis.com/v1/projects/my-project/location/global/prometheus
          auth: google          # the function's identity; bearer, basic: credentials the policy names (``auth``)
        metrics:
        - {name: cpu, query: 'kubernetes_io:node_cpu_allocatable_utilization', nodeLabel: node_name, delay: 5m}
        refreshInterval: 30s    # how old a kept answer may be before it is asked again
        maxAge: 3m              # a node whose sample is older has no facts
        filter:
        - {metric: cpu, above: 0.9}
        score: {metric: cpu, strategy: TargetLoad, target: 0.6}
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from extender.framework import clock as request_clock
from extender.framework import status
from extender.framework.plugin import MAX_NODE_SCORE, FilterPlugin, Observed, ScorePlugin
from extender.framework.status import Status
from extender.framework.types import Node, Pod
from extender.kube.demand import PodDemand, Resources, demand_of, owned_by_daemon_set
from extender.plugins.nodeload.answers import parse_answer
from extender.plugins.nodeload.args import (
    LEAST_LOADED,
    RISK_BALANCING,
    Metric,
    NodeLoadArgs,
    NodeLoadConfig,
    Threshold,
)
from extender.plugins.nodeload.auth import BASIC, BEARER, GOOGLE, Credentials
from extender.plugins.nodeload.estimates import Estimator
from extender.plugins.nodeload.loads import Clock, Loads, LoadView, changed_between
from extender.plugins.nodeload.predicted import KeptTerms, Prediction, changed_allocatable, identity
from extender.plugins.nodeload.prometheus import Authorizer, GoogleAuth, Prometheus, QueryError, source_name
from extender.plugins.nodeload.units import RATIO
from extender.settings import PROJECT_ENV, Need

if TYPE_CHECKING:
    from extender.kube.bound_pods import Bindings
    from extender.kube.client import KubeClient

logger = logging.getLogger("extender.nodeload")

# The share of the scheduler's httpTimeout a request may spend waiting on the Kubernetes API, in all: catching up with
# the bound pods (and waiting for a binding on its way), listing them when the result cache is off, and while the
# instance is cold its first lists.
WATCH_SHARE = 0.25
# Seconds a binding may be stamped early by the API server's clock against the metrics' (added to the horizon).
CLOCK_SKEW = 60.0


# What each field of ``prometheus`` names, for check-policy and start-up.
_SECRET_OF = {
    "prometheus.tokenEnv": "bearer token",
    "prometheus.tokenFile": "bearer token",
    "prometheus.passwordEnv": "basic auth password",
    "prometheus.passwordFile": "basic auth password",
    "prometheus.tls.caFile": "CA bundle",
    "prometheus.tls.certFile": "client certificate",
    "prometheus.tls.keyFile": "client certificate's key",
}


def authorizer(config: NodeLoadConfig) -> Authorizer | None:
    """What a query's Authorization header comes from, as ``prometheus.auth`` says; None: no header."""
    if config.auth == GOOGLE:
        return GoogleAuth()
    if config.auth in (BEARER, BASIC):
        return Credentials(config.credentials, config.secret_variables)
    return None


class NodeLoad(FilterPlugin, ScorePlugin):
    name: ClassVar[str] = "NodeLoad"
    scores_per_node: ClassVar[bool] = True  # each from its node's load alone (``normalize_scores``)
    args_schema = NodeLoadArgs

    def __init__(self, args: NodeLoadConfig, clock: Clock | None = None) -> None:
        super().__init__(cast(Mapping[str, Any], args))  # the loaded args are a NodeLoadConfig, not a mapping
        self.config = args
        self._clock = clock  # None: the request's instant (``extender.framework.clock``)
        self.loads = Loads(
            args.queried,
            Prometheus(args.url, authorizer(args), args.credentials),
            refresh_interval=args.refresh_interval,
            query_seconds=args.query_seconds,
            keep=args.keep,
            max_age=args.max_age,
        )
        self.estimator = Estimator(args.estimates)
        self.source = source_name(args.url)
        metrics = {metric.name: metric for metric in args.metrics}
        # Per rule: the metric, the threshold, and the rejection (one text for every node, as events group them).
        self._rules = tuple(
            (metrics[rule.metric], rule.above, status.unschedulable(rejection(rule, metrics[rule.metric])))
            for rule in args.rules
        )
        self._score_metric = metrics.get(args.score.metric)
        unit = self._score_metric.unit if self._score_metric is not None else None
        share = unit.share if unit is not None else float
        target = share(args.score.target) if args.score.target is not None else 1.0
        if args.score.strategy == LEAST_LOADED:
            self._scale: Callable[[float], int] = lambda load: least_loaded(share(load))
        else:
            self._scale = lambda load: target_load(share(load), target)
        # The longest a binding can count against a sample still judged on (RiskBalancing's mean: until its window
        # has fully seen the pod).
        delays = [metric.delay for metric in args.metrics if metric.resource]
        window = args.score.window if args.score.strategy == RISK_BALANCING else 0.0
        self.horizon = max(delays, default=0.0) + window + args.max_age + CLOCK_SKEW
        # What the Kubernetes API gives (in-flight pods, allocatable): made by the first request that needs it.
        self._kube: KubeClient | None = None
        self._making = threading.Lock()
        # Offline (``judge_offline``): the bindings and allocatable judged on instead of the API's.
        self._offline: tuple[Bindings | None, Mapping[str, Resources] | None] | None = None
        # Each node's term kept across requests of one base (``predicted.KeptTerms``; the result cache on only).
        self._kept_terms: KeptTerms | None = None

    def needs(self) -> Iterable[Need]:
        if self.config.in_function_project:
            yield Need((PROJECT_ENV,), "NodeLoad's preset queries Cloud Monitoring in the function's project")
        credentials = self.config.credentials
        for field, name in credentials.variables():
            yield Need((name,), f"NodeLoad's Prometheus {_SECRET_OF[field]} ({field})")
        for field, path in credentials.files():
            yield Need((path,), f"NodeLoad's Prometheus {_SECRET_OF[field]} ({field})", check=credentials.problem)

    def notes(self) -> list[str]:
        notes = (self.config.in_flight_note, self.config.rules_note)
        return [f"NodeLoad: {note}" for note in notes if note]

    def prepare(self, pod: Pod) -> Prediction:
        """The answers this request judges on, at one instant (refreshed first when due: ``Loads``), with the
        in-flight pods caught up and the pod's own estimate."""
        now = self._clock() if self._clock is not None else request_clock.now()
        # One deadline for every wait on the API (the bound pods, the allocatable), counted from their start.
        until = time.monotonic() + WATCH_SHARE * self.config.http_timeout
        self._start_api_lists(now)
        view = LoadView(self.loads.snapshot(now), now, self.config.max_age, self.source)
        demand = demand_of(pod.raw)
        daemon = owned_by_daemon_set(pod.raw)
        rules = tuple(
            index
            for index, rule in enumerate(self.config.rules)
            if (rule.daemon_sets or not daemon) and rule.pods.matches(pod)
        )
        usage = self.estimator.usage(demand)
        bindings, problem, own = self._in_flight(pod, demand, now, until)
        allocatable, allocatable_problem, unknown = self._allocatable(until)
        kept_terms = None
        if self.config.keep and self._offline is None:
            base = (identity(view.snapshot), usage, identity(allocatable), allocatable_problem)
            kept_terms = self._kept_terms
            if kept_terms is None or kept_terms.base != base:
                kept_terms = self._kept_terms = KeptTerms(base)
        return Prediction(
            view,
            self.config,
            self.estimator,
            usage,
            pod.uid,
            rules,
            bindings,
            problem,
            own,
            allocatable,
            allocatable_problem,
            unknown,
            kept_terms,
        )

    def exemption(self, pod: Pod, view: Prediction) -> str | None:
        """A DaemonSet pod that rules select but none applies to (none opts in with daemonSets: true)."""
        if view.rules or not owned_by_daemon_set(pod.raw):
            return None
        return "DaemonSet" if any(rule.pods.matches(pod) for rule in self.config.rules) else None

    def incomplete(self, view: Prediction) -> str | None:
        """What the Kubernetes API's failing kept from this request's view: the in-flight pods (some or all may be
        missing: the API hung, refused, 403, a 410 relist failing, the watch behind) and the nodes' allocatable. None
        when the API answers, and when there is no API at all (a configuration, said by ``check-policy``)."""
        if self.config.kubernetes is None or self._offline is not None:
            return None
        problems = [view.bindings.problem if view.bindings is not None else view.in_flight_problem]
        problems.append(view.allocatable_problem)
        said = "; ".join(problem for problem in problems if problem)
        return said or None

    def reuse_key(self, pod: Pod, view: Prediction) -> Hashable:
        return view.key()

    def changed_nodes(self, old: Hashable, new: Hashable) -> Collection[str] | None:
        """Between two keys (``Prediction.key``) whose shared parts differ at most in the answers (a refresh) and the
        allocatable list (a relist): the nodes whose bound pods differ, whose samples or allocatable moved, among
        those with bound pods those whose sample time moved (an in-flight pod counts by how long before the sample it
        was bound), and, where the pods judged or their nodes differ, the nodes either key holds its pod on (a pod
        judged again does not count itself there). A node's term reads only its own pods, samples and allocatable,
        and scores are per node. None when anything else differs."""
        if not (isinstance(old, tuple) and isinstance(new, tuple)) or len(old) != 3 or len(new) != 3:
            return None
        (old_shared, before, old_own), (new_shared, after, new_own) = old, new
        if old_shared[1:-1] != new_shared[1:-1]:
            return None
        # Where the pod judged is among the bindings, it is not counted on its node: those nodes, in either key.
        own = () if old_own == new_own else {*(old_own[1] if old_own else ()), *(new_own[1] if new_own else ())}
        samples = changed_between(old_shared[0], new_shared[0])
        listed = changed_allocatable(old_shared[-1], new_shared[-1])
        if samples is None or listed is None:
            return None
        moved, retimed = samples
        moved = moved | listed if listed else moved
        pods: Collection[str] = ()
        if before is not after and before != after:
            since = getattr(after, "changed_since", None)  # a Bindings (bound_pods is imported only with an API)
            if since is None or type(before) is not type(after):
                return None
            pods = since(before)
        if not moved and not retimed:
            return {*pods, *own} if own else pods
        # Bindings' nodes with pods, in either view (a problem instead of bindings counts no pod).
        counted = {*getattr(before, "by_node", ()), *getattr(after, "by_node", ())} if retimed else ()
        return {*moved, *pods, *own, *(node for node in counted if node in retimed)}

    def missing_facts(self, point: str, nodes: Sequence[Node], view: Prediction) -> Mapping[str, Status]:
        """Nodes without a fresh finite sample of a metric ``point`` reads (the applicable filter rules', the
        score's). In filter the reason names the first rule that reads the metric (``rule 'cpu' not evaluated``), as
        its rejections do, so that the skipped metric counts rules not evaluated per rule."""
        view.remember(nodes)
        metrics = self._read_at(point, view)
        if not metrics:
            return {}
        names = [node.name for node in nodes]
        errors: dict[str, Status] = {}
        missing: dict[str, Status] = {}
        for metric, rule in metrics.items():
            unknown = view.loads.unknown(metric, names)
            if len(unknown) == len(names):
                self.loads.none_matched(view.loads.snapshot, metric, names)
            for name, why in unknown.items():
                if name not in missing:
                    reason = why if rule is None else f"{why} (rule {rule!r} not evaluated)"
                    missing[name] = errors.get(reason) or errors.setdefault(reason, status.error(reason))
        return missing

    def _read_at(self, point: str, view: Prediction) -> dict[str, str | None]:
        """The metrics ``point`` reads, each with the first applicable rule reading it (None: the score's)."""
        if point == "filter":
            read: dict[str, str | None] = {}
            for index in view.rules:
                read.setdefault(self._rules[index][0].name, self.config.rules[index].name)
            return read
        if point == "score":
            if self.config.score.strategy == RISK_BALANCING:
                risk = [name for _, mean, deviation in self.config.risk for name in (mean.name, deviation.name)]
                return dict.fromkeys(risk)
            return {self.config.score.metric: None}
        return {}

    def filter(self, pod: Pod, node: Node, view: Prediction | None = None) -> Status:
        view = view if view is not None else self.prepare(pod)
        for index in view.rules:
            metric, above, rejected = self._rules[index]
            if view.predicted(metric, node.name) > above:
                return rejected
        return status.SUCCESS

    def score(self, pod: Pod, node: Node, view: Prediction | None = None) -> int:
        view = view if view is not None else self.prepare(pod)
        if self.config.score.strategy == RISK_BALANCING:
            return self._risk_score(node.name, view)
        assert self._score_metric is not None
        return self._scale(view.predicted(self._score_metric, node.name))

    def _risk_score(self, node: str, view: Prediction) -> int:
        """Trimaran's LoadVariationRiskBalancing over the resource metrics: the worst (lowest) score counts."""
        score = self.config.score
        answers = view.loads.snapshot.answers
        worst = math.inf
        for metric, mean, deviation in self.config.risk:
            unit = metric.unit or RATIO
            mu = unit.share(view.term(metric, node, sample=mean.name, window=score.window).predicted)
            sigma = answers[deviation.name].values[node] / unit.span
            worst = min(worst, risk_balancing(mu, sigma, score.margin, score.sensitivity))
        return _round(worst)

    def normalize_scores(self, pod: Pod, scores: dict[str, int], view: Prediction | None = None) -> None:
        """Scores are 0..100 already, each from its node's load alone."""

    def observations(self, view: Prediction) -> Observed:
        return view.facts

    # --- the Kubernetes API ----------------------------------------------------------------------------------------

    def _client(self) -> KubeClient | None:
        settings = self.config.kubernetes
        if settings is None:
            return None
        with self._making:
            if self._kube is None:
                from extender.kube import client_from_settings

                self._kube = client_from_settings(settings)
            return self._kube

    def _start_api_lists(self, now: float) -> None:
        """The API lists a cold instance waits for (the bound pods, the nodes' allocatable) started before the
        metrics are asked, so that they run beside that refresh; warm, this starts nothing."""
        if self._offline is not None:
            return
        try:
            client = self._client()
            if client is None:
                return
            from extender import kube

            if self.config.keep:
                kube.shared_watch(client, self.horizon, self.config.assume_pods).start(now)
            kube.shared_allocatable(client).start()
        except Exception:  # a bug here must cost nothing: the reads below report it
            logger.exception("NodeLoad: starting the Kubernetes API's lists failed")

    def _in_flight(
        self, pod: Pod, demand: PodDemand, now: float, until: float
    ) -> tuple[Bindings | None, str, frozenset[str]]:
        """The bindings to count (None when unknown), why they may be incomplete, and the nodes they hold the pod
        itself on. Never raises: a failure costs the in-flight term, said. Waits on the API until ``until``
        (monotonic) at most, only while the instance is cold (``PodWatch.bindings``), or, with the result cache off,
        for its list."""
        if self._offline is not None:
            bindings = self._offline[0]
            if bindings is None:
                return None, "no --in-flight file: no in-flight pods counted", frozenset()
            return bindings, "", bindings.nodes_of(pod.uid)
        try:
            client = self._client()
            if client is None:
                unknown = "no Kubernetes API (KUBERNETES_API_URL): the pods bound since the sample are not known"
                return None, unknown, frozenset()
            from extender import kube

            if not self.config.keep:
                from extender.kube.bound_pods import list_bindings

                bindings = list_bindings(client, self.horizon, now, until)
                return (bindings if bindings.known else None), bindings.problem, bindings.nodes_of(pod.uid)
            watch = kube.shared_watch(client, self.horizon, self.config.assume_pods)
            watch.note_demand(pod.uid, demand)
            bindings, own = watch.bindings(now, until, exclude=pod.uid, expecting=kube.expects_bindings())
            # Listed or not, the pods this instance bound or answered for count (the API failing from the start).
            return (bindings if bindings.known or bindings.by_node else None), bindings.problem, own
        except Exception as exc:  # a bug must cost the in-flight term, never the request
            logger.exception("NodeLoad: reading the pods bound to nodes failed")
            return None, f"reading the pods bound to nodes failed: {type(exc).__name__}: {exc}", frozenset()

    def _allocatable(self, until: float) -> tuple[Mapping[str, Resources] | None, str, Callable[[], None] | None]:
        """The nodes' allocatable the API lists, why it may lack nodes, and what to tell when it lacks one; a cold
        instance waits for its first list until ``until`` (monotonic) at most."""
        if self._offline is not None:
            return self._offline[1], "", None
        try:
            client = self._client()
            if client is None:
                return None, "", None
            from extender import kube

            source = kube.shared_allocatable(client)
            return (*source.current(until), source.node_unknown)
        except Exception as exc:
            logger.exception("NodeLoad: reading the nodes' allocatable resources failed")
            return None, f"reading the nodes' allocatable resources failed: {type(exc).__name__}: {exc}", None

    # --- offline ---------------------------------------------------------------------------------------------------

    def judge_offline(
        self,
        answers: Mapping[str, bytes],
        bindings: Bindings | None = None,
        allocatable: Mapping[str, Resources] | None = None,
    ) -> float | None:
        """Judge on saved ``/api/v1/query`` answers (by metric name, derived queries such as ``cpu:allocatable``
        included where given), the in-flight pods ``bindings`` and the nodes' ``allocatable``, as ``explain
        --metrics`` does: no Prometheus nor API is asked. Returns the newest sample's time (None: the answers hold
        none), the instant ``explain`` judges them at unless told another (``extender.framework.clock``);
        AnswerError when an answer cannot be read."""
        times: list[float] = []
        queried = [metric for metric in self.config.queried if metric.name in answers]
        for metric in queried:
            answer, _ = parse_answer(answers[metric.name], metric.node_label)
            times += answer.sorted_times[-1:]
        saved = {metric.query: answers[metric.name] for metric in queried}
        # Only the answers given are asked: one not given (a capacity where --nodes gives allocatable) is not a failure.
        self.loads = Loads(queried, Saved(saved), refresh_interval=math.inf, query_seconds=1.0, keep=True)
        self._offline = (bindings, allocatable)
        return max(times, default=None)


class Saved:
    """Saved answers by query, for ``judge_offline``."""

    def __init__(self, answers: Mapping[str, bytes]) -> None:
        self.answers = answers

    def query(self, promql: str, seconds: float) -> bytes:
        if promql not in self.answers:
            raise QueryError("no saved answer")
        return self.answers[promql]


def rejection(rule: Threshold, metric: Metric) -> str:
    """``NodeLoad rule 'cpu': load above 0.9``; a rule named apart from its metric names both:
    ``NodeLoad rule 'batch-cpu': cpu load above 0.6``. The name is quoted as the decision log reads it back."""
    what = "load" if rule.name == metric.name else f"{metric.name} load"
    return f"NodeLoad rule {rule.name!r}: {what} above {(metric.unit or RATIO).shown(rule.above)}"


def least_loaded(load: float) -> int:
    """100 for an idle node, 0 for a fully loaded one."""
    return _round(MAX_NODE_SCORE * (1 - _clamped(load)))


def risk_balancing(mean: float, deviation: float, margin: float, sensitivity: float) -> float:
    """Trimaran's LoadVariationRiskBalancing score of one resource, 0..100 (not rounded): the risk is the mean
    load and the deviation's ``1/sensitivity`` root times ``margin`` (each clamped to 0..1), averaged."""
    mu = _clamped(mean)
    sigma = _clamped(margin * _clamped(deviation) ** (1 / sensitivity))
    return (1 - (mu + sigma) / 2) * MAX_NODE_SCORE


def target_load(load: float, target: float) -> int:
    """Trimaran's TargetLoadPacking on the 0..100 scale, on the node's predicted load."""
    used, best = MAX_NODE_SCORE * _clamped(load), MAX_NODE_SCORE * target
    if used > best:
        return _round(best * (MAX_NODE_SCORE - used) / (MAX_NODE_SCORE - best))
    return _round((MAX_NODE_SCORE - best) * used / best + best)


def _clamped(load: float) -> float:
    return min(1.0, max(0.0, load))


def _round(score: float) -> int:
    """Half away from zero, as Go's math.Round that the scheduling framework's plugins use."""
    return math.floor(score + 0.5)
