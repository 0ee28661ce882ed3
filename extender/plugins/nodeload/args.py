"""NodeLoad's args: validated field by field, presets applied, worked out for the instance's settings.

A preset supplies the Prometheus URL and auth (``gke``) and the metrics, so
that most policies write no PromQL; whatever the args set themselves wins
(``prometheus.url``, ``prometheus.auth``, a metric of the same name). The
metrics queried are those the filter rules and the score name, with what
predicted load needs beside them: each resource metric's capacity query (the
nodes' allocatable, where the Kubernetes API cannot list it) and, for
``RiskBalancing``, each resource metric's mean and standard deviation over
the score's window.

A metric measures a resource (``cpu`` or ``memory``: its values are shares of
the node's allocatable of it, so pods' estimates add to them) when it says so
(``resource``), when it is a preset's, or when it is named ``cpu`` or
``memory``; ``resource: none`` says it measures none (no estimate is added to
it). ``delay`` is how long after a pod's binding the metric may still not show
the pod: the preset's cover their sampling and ingest (gke) or rate window
(node-exporter); a metric of your own says its own, at least 2 minutes by
default.

A metric's ``unit`` says what its values measure (``extender.plugins.nodeload.units``): a ratio 0..1 (the default),
a percent, or a unit of its own with its ``range``; each filter rule's ``above`` and the score's ``target`` are
written in the unit of the metric they name and checked against its range. A filter rule's ``name`` (its metric's
name unless given) is what its rejections are counted and logged by.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Length, OneOf, Range, Regexp

from extender.duration import Duration
from extender.errors import ConfigError
from extender.framework.args import Number, failed_fields, instance_settings
from extender.framework.selectors import PodSelector, PodSelectorSchema
from extender.kube.quantity import parse_quantity
from extender.kube.variables import API_URL_ENV
from extender.plugins.nodeload.auth import BASIC, BEARER, GOOGLE, NONE, PrometheusArgs, PrometheusAuth, with_kind
from extender.plugins.nodeload.estimates import DEFAULTS, ResourceEstimate
from extender.plugins.nodeload.units import PERCENT, RATIO, Unit
from extender.settings import PROJECT_ENV, Settings
from extender.urls import credential_base_url

LEAST_LOADED, TARGET_LOAD, RISK_BALANCING = "LeastLoaded", "TargetLoad", "RiskBalancing"
CPU, MEMORY = "cpu", "memory"
RESOURCES = (CPU, MEMORY)
# A metric of your own: how long after a binding it may not show the pod, unless it says (``delay``).
DEFAULT_DELAY = 120.0
# The GKE system metrics: sampled every 60 s, visible in Cloud Monitoring up to 240 s later.
GKE_DELAY = 300.0
# node-exporter's CPU: a 5-minute rate window; its memory: an instant gauge, scraped and started within 2 minutes.
RATE_WINDOW_DELAY = 300.0
DEFAULT_WINDOW = 600.0
# The share of the scheduler's httpTimeout (EXTENDER_HTTP_TIMEOUT) a refresh may take on the request that makes it:
# the rest of the answer is quick, and the scheduler must get it well inside its timeout.
QUERY_SHARE = 0.4
DEFAULT_REFRESH_INTERVAL = 30.0
DEFAULT_MAX_AGE = 180.0
GMP_URL = "https://monitoring.googleapis.com/v1/projects/{project}/location/global/prometheus"


class Metric:
    """A named PromQL query answering one sample per node, the node named by ``node_label``; with the resource it
    measures (None: none), how long after a binding it may not show the pod (``delay``, seconds), a query
    answering each node's allocatable of the resource (``capacity``, in cores or bytes), if known, and the unit of
    its values (None: a query beside a metric whose values have no range, such as its capacity)."""

    __slots__ = ("capacity", "delay", "name", "node_label", "query", "resource", "unit")

    def __init__(
        self,
        name: str,
        query: str,
        node_label: str,
        resource: str | None = None,
        delay: float = DEFAULT_DELAY,
        capacity: str | None = None,
        unit: Unit | None = RATIO,
    ) -> None:
        self.name = name
        self.query = query
        self.node_label = node_label
        self.resource = resource
        self.delay = delay
        self.capacity = capacity
        self.unit = unit

    def __repr__(self) -> str:
        return f"Metric({self.name!r}, {self.query!r}, {self.node_label!r}, resource={self.resource!r})"

    def derived(self, suffix: str, query: str, unit: Unit | None = None) -> Metric:
        """A query of its own beside this metric (its capacity, its mean over a window), named ``name:suffix``."""
        return Metric(f"{self.name}:{suffix}", query, self.node_label, None, self.delay, unit=unit)


class Preset:
    __slots__ = ("auth", "metrics", "url")

    def __init__(self, metrics: tuple[Metric, ...], url: str | None = None, auth: str = NONE) -> None:
        self.metrics = metrics
        self.url = url  # a format string taking the project
        self.auth = auth


# kube-state-metrics' kube_pod_info names the node each node-exporter pod runs on; node-exporter's series carry that
# pod's namespace and pod labels (Prometheus Operator and kube-prometheus-stack add them), as kubernetes-mixin joins
# them. topk keeps one kube_pod_info series per pod while two kube-state-metrics replicas report it.
_ON_NODE = (
    "on (namespace, pod) group_left (node) topk by (namespace, pod) "
    '(1, max by (node, namespace, pod) (kube_pod_info{node!=""}))'
)
_ALLOCATABLE_CPU = 'max by (node) (kube_node_status_allocatable{resource="cpu"})'
_ALLOCATABLE_MEMORY = 'max by (node) (kube_node_status_allocatable{resource="memory"})'
PRESETS: dict[str, Preset] = {
    # Cloud Monitoring's GKE system metrics in PromQL (kubernetes.io/node/cpu/allocatable_utilization and
    # kubernetes.io/node/memory/allocatable_utilization): the fraction of the node's allocatable CPU and memory in
    # use, per k8s_node with its node_name; memory split by memory_type, of which non-evictable is what eviction reads.
    "gke": Preset(
        (
            Metric(
                "cpu",
                'kubernetes_io:node_cpu_allocatable_utilization{monitored_resource="k8s_node"}',
                "node_name",
                CPU,
                GKE_DELAY,
                'kubernetes_io:node_cpu_allocatable_cores{monitored_resource="k8s_node"}',
            ),
            Metric(
                "memory",
                'kubernetes_io:node_memory_allocatable_utilization{monitored_resource="k8s_node",'
                'memory_type="non-evictable"}',
                "node_name",
                MEMORY,
                GKE_DELAY,
                'kubernetes_io:node_memory_allocatable_bytes{monitored_resource="k8s_node"}',
            ),
        ),
        url=GMP_URL,
        auth=GOOGLE,
    ),
    # A self-run Prometheus scraping node-exporter and kube-state-metrics: the cores busy over 5 minutes, and the
    # bytes of memory not available, as shares of the node's allocatable (kube-state-metrics'), as GKE's metrics and
    # the pods' estimates are: node-exporter measures the whole machine, whose capacity the kubelet's and the
    # system's reservations make larger than what pods may use.
    "node-exporter": Preset(
        (
            Metric(
                "cpu",
                f'sum by (node) ((1 - rate(node_cpu_seconds_total{{mode="idle"}}[5m])) * {_ON_NODE}) '
                f"/ on (node) {_ALLOCATABLE_CPU}",
                "node",
                CPU,
                RATE_WINDOW_DELAY,
                _ALLOCATABLE_CPU,
            ),
            Metric(
                "memory",
                f"max by (node) ((node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes) * {_ON_NODE}) "
                f"/ on (node) {_ALLOCATABLE_MEMORY}",
                "node",
                MEMORY,
                DEFAULT_DELAY,
                _ALLOCATABLE_MEMORY,
            ),
        ),
    ),
}

# Metric names appear in messages and decision entries; node labels are Prometheus label names.
_METRIC_NAME = Regexp(r"^[a-z][a-z0-9_-]{0,62}$", error="must be a short lowercase name such as cpu or memory")
_LABEL_NAME = Regexp(r"^[a-zA-Z_][a-zA-Z0-9_]*$", error="must be a Prometheus label name such as node or node_name")
# A filter rule's name is a label of the rejections metric; a unit's name appears in messages.
_RULE_NAME = Regexp(
    r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", error="must be a short name such as batch-cpu (letters, "
    "digits, '-', '_', '.'; at most 63)"
)
_UNIT_NAME = Regexp(
    r"^[A-Za-z][A-Za-z0-9_ /.-]{0,30}$", error="must be ratio, percent or a short unit name such as seconds"
)
_UNITS = {RATIO.name: RATIO, PERCENT.name: PERCENT}
_RANGE_FORM = "two numbers, its low and high ends, such as range: [0, 64]"


class Load(Number):
    """A number compared with a metric's values; a string such as "80%" is refused saying how to write it."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        percent = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*%\s*", value) if isinstance(value, str) else None
        if percent is not None:
            given = float(percent.group(1))
            raise ValidationError(
                f"must be a number, not a string: {given:g} % is {given / 100:g} as a ratio (the unit of a metric "
                f"unless it says otherwise), or {given:g} for a metric with unit: percent"
            )
        return super()._deserialize(value, attr, data, **kwargs)


class Threshold:
    """A filter rule named ``name``: a node whose predicted ``metric`` is above ``above`` (in the metric's unit) is
    Unschedulable, for the pods ``pods`` selects (DaemonSet pods only with ``daemon_sets``)."""

    __slots__ = ("above", "daemon_sets", "metric", "name", "pods")

    def __init__(
        self,
        metric: str,
        above: float,
        pods: PodSelector | None = None,
        daemon_sets: bool = False,
        name: str | None = None,
    ) -> None:
        self.metric = metric
        self.above = above
        self.pods = pods or PodSelector()
        self.daemon_sets = daemon_sets
        self.name = name or metric


class ScoreRule:
    """How nodes score: ``metric`` (LeastLoaded, TargetLoad) or the resource metrics (RiskBalancing)."""

    __slots__ = ("margin", "metric", "sensitivity", "strategy", "target", "window")

    def __init__(
        self,
        metric: str,
        strategy: str = LEAST_LOADED,
        target: float | None = None,
        window: float = DEFAULT_WINDOW,
        margin: float = 1.0,
        sensitivity: float = 1.0,
    ) -> None:
        self.metric = metric
        self.strategy = strategy
        self.target = target
        self.window = window
        self.margin = margin
        self.sensitivity = sensitivity


class NodeLoadConfig:
    """The loaded args: everything a NodeLoad instance needs, the instance's settings applied."""

    __slots__ = (
        "assume_pods",
        "auth",
        "credentials",
        "estimates",
        "http_timeout",
        "in_function_project",
        "keep",
        "kubernetes",
        "max_age",
        "metrics",
        "query_seconds",
        "refresh_interval",
        "risk",
        "rules",
        "score",
        "secret_variables",
        "url",
    )

    def __init__(
        self,
        url: str,
        auth: str,
        metrics: tuple[Metric, ...],
        rules: tuple[Threshold, ...],
        score: ScoreRule,
        refresh_interval: float,
        max_age: float,
        query_seconds: float,
        keep: bool,
        estimates: dict[str, ResourceEstimate] | None = None,
        settings: Settings | None = None,
        in_function_project: bool = False,
        credentials: PrometheusAuth | None = None,
    ) -> None:
        self.url = url
        # The URL is the preset's in the function's project (GOOGLE_CLOUD_PROJECT), which start-up needs set.
        self.in_function_project = in_function_project
        self.auth = auth
        # Where the credentials, client certificate and CA bundle are, and the extra headers (``auth``).
        self.credentials = with_kind(credentials or PrometheusAuth(), auth)
        # The metrics queried: those the rules and the score name, in the order the args list them.
        self.metrics = metrics
        self.rules = rules
        self.score = score
        self.refresh_interval = refresh_interval
        self.max_age = max_age
        # The deadline of one refresh's queries.
        self.query_seconds = query_seconds
        # Answers kept across requests (EXTENDER_RESULT_CACHE): off asks Prometheus on every request.
        self.keep = keep
        self.estimates = {**DEFAULTS, **(estimates or {})}
        settings = settings or Settings()
        # The Kubernetes API the in-flight pods and the nodes' allocatable come from (KUBERNETES_*), if any.
        self.kubernetes = settings if settings.kubernetes.get(API_URL_ENV) else None
        # The PROMETHEUS_* variables the credentials may name (tokenEnv, passwordEnv): the instance's, as it started.
        self.secret_variables = settings.prometheus
        self.http_timeout = settings.http_timeout
        # Pods answered for count where they go until bound (EXTENDER_ASSUME_PODS, ``extender.verbs.assumed``).
        self.assume_pods = settings.assume_pods
        # RiskBalancing: per resource metric, its mean and standard deviation over the score's window.
        self.risk: tuple[tuple[Metric, Metric, Metric], ...] = ()
        if score.strategy == RISK_BALANCING:
            self.risk = tuple(_risk_queries(metric, score.window) for metric in metrics if metric.resource)

    @property
    def queried(self) -> tuple[Metric, ...]:
        """Every query a refresh asks: the metrics, their capacity (what allocatable is when the API cannot list it:
        none configured, or its list failing), and RiskBalancing's means and deviations."""
        queries = list(self.metrics)
        queries += [capacity_query(metric) for metric in self.metrics if metric.resource and metric.capacity]
        for _, mean, deviation in self.risk:
            queries += [mean, deviation]
        return tuple(queries)

    @property
    def in_flight_note(self) -> str:
        """What check-policy and start-up say of bursts (predicted load) with these args: "" when all is counted."""
        notes = []
        if self.kubernetes is None:
            notes.append(
                "bursts are not accounted for: without the Kubernetes API (KUBERNETES_API_URL) the pods bound since a "
                "node's last sample are not counted, only the pod's own estimate"
            )
        plain = [metric.name for metric in self.metrics if not metric.resource]
        if plain:
            notes.append(
                f"metric {', '.join(plain)} measures no resource (cpu or memory): no in-flight pods or pod estimate "
                "is added to it (set resource: cpu or memory if it is a share of the node's allocatable)"
            )
        return "; ".join(notes)

    @property
    def rules_note(self) -> str:
        """What check-policy says of filter rules that share a name: their rejections are counted as one rule."""
        names = [rule.name for rule in self.rules]
        shared = sorted({name for name in names if names.count(name) > 1})
        if not shared:
            return ""
        return (
            f"{len(names) - len(set(names)) + len(shared)} filter rules are named {', '.join(shared)}: their "
            "rejections are counted and logged as one rule; give each a name (name: batch-cpu) to tell them apart"
        )


def capacity_query(metric: Metric) -> Metric:
    assert metric.capacity is not None
    return metric.derived("allocatable", metric.capacity)


def _risk_queries(metric: Metric, window: float) -> tuple[Metric, Metric, Metric]:
    """The metric, its mean and its standard deviation over ``window`` (PromQL subqueries at a tenth of it)."""
    step = f"{max(1, round(window / 10))}s"
    span = f"{round(window)}s"
    mean = metric.derived("mean", f"avg_over_time(({metric.query})[{span}:{step}])", metric.unit)
    deviation = metric.derived("stddev", f"stddev_over_time(({metric.query})[{span}:{step}])")
    return metric, mean, deviation


class MetricArgs(Schema):
    name = fields.String(required=True, validate=_METRIC_NAME)
    query = fields.String(required=True, validate=Length(min=1, error="must not be empty: a PromQL query"))
    nodeLabel = fields.String(required=True, validate=_LABEL_NAME)
    resource = fields.String(validate=OneOf([CPU, MEMORY, NONE]))
    delay = Duration(minimum="0s")
    capacity = fields.String(validate=Length(min=1, error="must not be empty: a PromQL query"))
    unit = fields.String(validate=_UNIT_NAME)
    range = fields.List(Number(example="a bound such as 0 or 64"), validate=Length(equal=2, error=_RANGE_FORM))

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def unit_and_range(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        broken = failed_fields(self, data, original)
        if broken & {"unit", "range", "name", "resource"}:
            return
        unit = data.get("unit", RATIO.name)
        if unit in _UNITS:
            if "range" in data:
                raise ValidationError(f"a {unit} has its own range ({_UNITS[unit].described}): drop range", "range")
            return
        if "range" not in data:
            raise ValidationError(f"unit {unit} needs its range: {_RANGE_FORM}", "range")
        low, high = data["range"]
        if not low < high:
            raise ValidationError(f"the range's low end must be below its high end: {_RANGE_FORM}", "range")
        if _resource(data) is not None:
            raise ValidationError(
                f"a {_resource(data)} metric is a share of the node's allocatable, in unit ratio or percent (set "
                "resource: none for a metric of another unit)",
                "unit",
            )

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Metric:
        unit = data.get("unit", RATIO.name)
        return Metric(
            data["name"],
            data["query"],
            data["nodeLabel"],
            _resource(data),
            data.get("delay", DEFAULT_DELAY),
            data.get("capacity"),
            _UNITS.get(unit) or Unit(unit, *data["range"]),
        )


def _resource(data: Mapping[str, Any]) -> str | None:
    """The resource a metric's args say it measures: ``resource`` when given, else its name if cpu or memory."""
    declared = data.get("resource")
    if declared:
        return None if declared == NONE else str(declared)
    return str(data["name"]) if data.get("name") in RESOURCES else None


class ThresholdArgs(Schema):
    name = fields.String(validate=_RULE_NAME)
    metric = fields.String(required=True)
    above = Load(required=True, example="a load such as 0.9")
    pods = fields.Nested(PodSelectorSchema)
    daemonSets = fields.Boolean(load_default=False)


class ScoreArgs(Schema):
    metric = fields.String()
    strategy = fields.String(load_default=LEAST_LOADED, validate=OneOf([LEAST_LOADED, TARGET_LOAD, RISK_BALANCING]))
    target = Load(example="a load such as 0.6")
    window = Duration(minimum="1m")
    margin = Number(example="a factor such as 1", validate=Range(min=0, error="must be 0 or more"))
    sensitivity = Number(
        example="a root such as 1", validate=Range(min=0, min_inclusive=False, error="must be above 0")
    )

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def fits_the_strategy(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        strategy = data.get("strategy")  # None: not a strategy, said by its own error
        if strategy == TARGET_LOAD and "target" not in data.keys() | failed_fields(self, data, original):
            raise ValidationError("TargetLoad needs a target, the load that scores best (such as 0.6)", "target")
        if strategy != TARGET_LOAD and "target" in data:
            raise ValidationError("only strategy TargetLoad takes a target", "target")
        for name in ("window", "margin", "sensitivity"):
            if strategy != RISK_BALANCING and name in data:
                raise ValidationError(f"only strategy RiskBalancing takes a {name}", name)
        if strategy == RISK_BALANCING and "metric" in data:
            raise ValidationError("RiskBalancing scores on every cpu and memory metric: it takes no metric", "metric")
        if strategy != RISK_BALANCING and "metric" not in data.keys() | failed_fields(self, data, original):
            raise ValidationError("Missing data for required field.", "metric")


class ResourceEstimateArgs(Schema):
    requestFactor = Number(example="a factor such as 1.5", validate=Range(min=0, error="must be 0 or more"))
    default = fields.String()

    @validates_schema(skip_on_field_errors=False)
    def readable(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "default" in data:  # a string: anything else has its own error
            try:
                parse_quantity(data["default"])
            except ValueError:
                raise ValidationError("must be a Kubernetes quantity such as 100m or 128Mi", "default") from None


class EstimatesArgs(Schema):
    cpu = fields.Nested(ResourceEstimateArgs)
    memory = fields.Nested(ResourceEstimateArgs)


class NodeLoadArgs(Schema):
    preset = fields.String(validate=OneOf(sorted(PRESETS)))
    prometheus = fields.Nested(PrometheusArgs, load_default=dict)
    metrics = fields.List(fields.Nested(MetricArgs), load_default=list)
    refreshInterval = Duration(minimum="1s", load_default=DEFAULT_REFRESH_INTERVAL)
    maxAge = Duration(minimum="1s", load_default=DEFAULT_MAX_AGE)
    filter = fields.List(fields.Nested(ThresholdArgs), load_default=list)
    score = fields.Nested(ScoreArgs)
    estimates = fields.Nested(EstimatesArgs, load_default=dict)

    # The checks across fields run beside the fields' own errors, so that one run reports every problem; each leaves
    # out what depends on a field that did not load (``failed_fields``: it has an error of its own).
    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def consistent(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        broken = failed_fields(self, data, original)
        problems: dict[str, Any] = {}
        preset = PRESETS.get(data.get("preset", ""))
        if not broken & {"preset", "prometheus"}:
            url_problem = _url_problem(data, preset)
            if url_problem:
                problems["prometheus"] = {"url": [url_problem]}
        # A list with a broken entry keeps the entries as far as they loaded: only a Metric loaded whole.
        given = data.get("metrics", [])
        own = [metric for metric in given if isinstance(metric, Metric)]
        if len(own) < len(given):
            broken.add("metrics")
        for index, metric in enumerate(given):
            if isinstance(metric, Metric) and metric.name in (other.name for other in own[: own.index(metric)]):
                problems.setdefault("metrics", {})[index] = {"name": [f"duplicate metric name {metric.name!r}"]}
        if not broken & {"preset", "metrics"}:
            self._metrics_named(data, preset, own, broken, problems)
        if "maxAge" in data and "refreshInterval" in data and data["maxAge"] < data["refreshInterval"]:
            problems["maxAge"] = [
                "must be at least refreshInterval: answers would be too old before they are asked again"
            ]
        if problems:
            raise ValidationError(problems)

    @staticmethod
    def _metrics_named(
        data: Mapping[str, Any], preset: Preset | None, own: list[Metric], broken: set[str], problems: dict[str, Any]
    ) -> None:
        """The metrics exist, the rules and the score name existing ones, and every metric of the args' own is named."""
        metrics = _metrics(data, preset)
        if not metrics:
            problems["metrics"] = [
                "needs at least one metric (name, query, nodeLabel), or a preset (gke, node-exporter)"
            ]
        names = ", ".join(metrics) or "none"
        rules = data.get("filter", [])
        for index, rule in enumerate(rules):
            if "metric" in rule and rule["metric"] not in metrics:
                unknown = [f"unknown metric {rule['metric']!r}: the metrics are {names}"]
                problems.setdefault("filter", {})[index] = {"metric": unknown}
        for index, rule in enumerate(rules):
            metric = metrics.get(rule.get("metric", ""))
            if metric is not None and metric.unit is not None and "above" in rule:
                problem = metric.unit.problem(rule["above"], metric.name, "above")
                if problem:
                    problems.setdefault("filter", {}).setdefault(index, {})["above"] = [problem]
        score = data.get("score", {})
        if "metric" in score and score["metric"] not in metrics:
            problems["score"] = {"metric": [f"unknown metric {score['metric']!r}: the metrics are {names}"]}
        scored = metrics.get(score.get("metric", ""))
        if scored is not None and scored.unit is not None and "target" in score:
            problem = scored.unit.problem(score["target"], scored.name, "target", open_range=True)
            if problem:
                problems.setdefault("score", {})["target"] = [problem]
        if score.get("strategy") == RISK_BALANCING and not any(metric.resource for metric in metrics.values()):
            problems["score"] = {
                "strategy": [
                    "RiskBalancing needs a cpu or memory metric (a preset's, or one with resource: cpu/memory)"
                ]
            }
        risk = score.get("strategy") == RISK_BALANCING
        named = all("metric" in rule for rule in rules) and (not score or risk or "metric" in score)
        if broken & {"filter", "score"} or not named:
            return  # which metrics are named is not known
        used = _used(data, metrics)
        for index, metric in enumerate(own):
            if metric.name not in used:
                unused = [f"metric {metric.name!r} is named by no filter rule and not by the score: use or remove it"]
                problems.setdefault("metrics", {}).setdefault(index, {"name": unused})

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> NodeLoadConfig:
        settings = instance_settings()
        preset = PRESETS.get(data.get("preset", ""))
        metrics = _metrics(data, preset)
        used = _used(data, metrics)
        score = data.get("score") or {"metric": next(iter(metrics))}
        rules = tuple(
            Threshold(rule["metric"], rule["above"], rule.get("pods"), rule["daemonSets"], rule.get("name"))
            for rule in data["filter"]
        )
        estimates = {
            resource: ResourceEstimate(
                given.get("requestFactor", DEFAULTS[resource].request_factor),
                parse_quantity(given["default"]) if "default" in given else DEFAULTS[resource].default,
            )
            for resource, given in data["estimates"].items()
        }
        return NodeLoadConfig(
            url=_url(data, preset, settings),
            auth=_auth(data, preset),
            metrics=tuple(metric for name, metric in metrics.items() if name in used),
            rules=rules,
            score=ScoreRule(
                score.get("metric", ""),
                score.get("strategy", LEAST_LOADED),
                score.get("target"),
                score.get("window", DEFAULT_WINDOW),
                score.get("margin", 1.0),
                score.get("sensitivity", 1.0),
            ),
            refresh_interval=data["refreshInterval"],
            max_age=data["maxAge"],
            query_seconds=settings.http_timeout * QUERY_SHARE,
            keep=settings.result_cache,
            estimates=estimates,
            settings=settings,
            in_function_project="url" not in data["prometheus"],
            credentials=data["prometheus"].get("credentials"),
        )


def _metrics(data: Mapping[str, Any], preset: Preset | None) -> dict[str, Metric]:
    """The preset's metrics, then the args' own (one of the same name replaces the preset's), by name."""
    metrics = {metric.name: metric for metric in preset.metrics} if preset is not None else {}
    metrics.update((metric.name, metric) for metric in data["metrics"])
    return metrics


def _used(data: Mapping[str, Any], metrics: Mapping[str, Metric]) -> set[str]:
    """The metrics the filter rules and the score name (RiskBalancing: every resource metric); without a score, the
    first metric is scored."""
    score = data.get("score")
    if score is None:
        scored = {next(iter(metrics))} if metrics else set()
    elif score.get("strategy") == RISK_BALANCING:
        scored = {name for name, metric in metrics.items() if metric.resource}
    else:
        scored = {score["metric"]}
    return {rule["metric"] for rule in data.get("filter", [])} | scored


def _auth(data: Mapping[str, Any], preset: Preset | None) -> str:
    """``prometheus.auth`` when set, else the preset's (google for gke), else none."""
    return data.get("prometheus", {}).get("auth") or (preset.auth if preset is not None else NONE)


def _url(data: Mapping[str, Any], preset: Preset | None, settings: Settings) -> str:
    """The URL given, else the preset's in the function's project: without GOOGLE_CLOUD_PROJECT, a URL naming the
    variable, which is never asked (start-up refuses to start without the project: ``NodeLoad.needs``)."""
    url: str | None = data["prometheus"].get("url")
    if url is None and preset is not None and preset.url is not None:
        url = preset.url.format(project=settings.project or PROJECT_ENV)
    assert url is not None  # checked by ``consistent``
    return url.rstrip("/")


def _url_problem(data: Mapping[str, Any], preset: Preset | None) -> str:
    url = data.get("prometheus", {}).get("url")
    if url is None:
        if preset is not None and preset.url is not None:
            return ""  # in the function's project, a setting start-up needs (``NodeLoad.needs``)
        return (
            "required: the Prometheus API's base URL, such as http://prometheus.example.internal:9090 "
            "(or preset: gke, which queries Cloud Monitoring)"
        )
    credential = _CREDENTIALS.get(_auth(data, preset))
    try:
        example = GMP_URL.format(project="my-project")
        credential_base_url(url, what="prometheus.url", example=example, credential=credential)
    except ConfigError as exc:
        return str(exc).removeprefix("prometheus.url ")
    given: PrometheusAuth | None = data["prometheus"].get("credentials")
    if given is not None and (given.ca_file or given.cert_file) and not url.startswith("https:"):
        return "must be an https:// URL: tls (caFile, certFile, keyFile) applies to https only"
    return ""


_CREDENTIALS = {
    GOOGLE: "the function's Google access token",
    BEARER: "the bearer token",
    BASIC: "the basic auth password",
}
