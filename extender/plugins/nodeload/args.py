"""NodeLoad's args: validated field by field, presets applied, worked out for the instance's settings.

A preset supplies the Prometheus URL and auth (``gke``) and the metrics, so
that most policies write no PromQL; whatever the args set themselves wins
(``prometheus.url``, ``prometheus.auth``, a metric of the same name). The
metrics queried are those the filter rules and the score name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Length, OneOf, Range, Regexp

from extender.duration import Duration
from extender.errors import ConfigError
from extender.framework.args import Number, failed_fields, instance_settings
from extender.settings import PROJECT_ENV, Settings
from extender.urls import credential_base_url

LEAST_LOADED, TARGET_LOAD = "LeastLoaded", "TargetLoad"
GOOGLE, NONE = "google", "none"
# The share of the scheduler's httpTimeout (EXTENDER_HTTP_TIMEOUT) a refresh may take on the request that makes it:
# the rest of the answer is quick, and the scheduler must get it well inside its timeout.
QUERY_SHARE = 0.4
DEFAULT_REFRESH_INTERVAL = 30.0
DEFAULT_MAX_AGE = 180.0
GMP_URL = "https://monitoring.googleapis.com/v1/projects/{project}/location/global/prometheus"


class Metric:
    """A named PromQL query answering one sample per node, the node named by ``node_label``."""

    __slots__ = ("name", "node_label", "query")

    def __init__(self, name: str, query: str, node_label: str) -> None:
        self.name = name
        self.query = query
        self.node_label = node_label

    def __repr__(self) -> str:
        return f"Metric({self.name!r}, {self.query!r}, {self.node_label!r})"


class Preset:
    __slots__ = ("auth", "metrics", "url")

    def __init__(self, metrics: tuple[Metric, ...], url: str | None = None, auth: str = NONE) -> None:
        self.metrics = metrics
        self.url = url  # a format string taking the project
        self.auth = auth


# kube-state-metrics' kube_pod_info names the node each node-exporter pod runs on; node-exporter's series carry that
# pod's namespace and pod labels (Prometheus Operator and kube-prometheus-stack add them), as kubernetes-mixin joins
# them. topk keeps one kube_pod_info series per pod while two kube-state-metrics replicas report it.
_ON_NODE = 'on (namespace, pod) group_left (node) topk by (namespace, pod) (1, max by (node, namespace, pod) (kube_pod_info{node!=""}))'
PRESETS: dict[str, Preset] = {
    # Cloud Monitoring's GKE system metrics in PromQL (kubernetes.io/node/cpu/allocatable_utilization and
    # kubernetes.io/node/memory/allocatable_utilization): the fraction of the node's allocatable CPU and memory in
    # use, per k8s_node with its node_name; memory split by memory_type, of which non-evictable is what eviction reads.
    "gke": Preset(
        (
            Metric("cpu", 'kubernetes_io:node_cpu_allocatable_utilization{monitored_resource="k8s_node"}', "node_name"),
            Metric(
                "memory",
                'kubernetes_io:node_memory_allocatable_utilization{monitored_resource="k8s_node",memory_type="non-evictable"}',
                "node_name",
            ),
        ),
        url=GMP_URL,
        auth=GOOGLE,
    ),
    # A self-run Prometheus scraping node-exporter and kube-state-metrics: the busy share of the node's CPUs over
    # 5 minutes, and the share of its memory not available.
    "node-exporter": Preset(
        (
            Metric("cpu", f'1 - avg by (node) (rate(node_cpu_seconds_total{{mode="idle"}}[5m]) * {_ON_NODE})', "node"),
            Metric(
                "memory",
                f"1 - max by (node) ((node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes) * {_ON_NODE})",
                "node",
            ),
        ),
    ),
}

# Metric names appear in messages and decision entries; node labels are Prometheus label names.
_METRIC_NAME = Regexp(r"^[a-z][a-z0-9_-]{0,62}$", error="must be a short lowercase name such as cpu or memory")
_LABEL_NAME = Regexp(r"^[a-zA-Z_][a-zA-Z0-9_]*$", error="must be a Prometheus label name such as node or node_name")


class Threshold:
    """A filter rule: a node whose ``metric`` is above ``above`` is Unschedulable."""

    __slots__ = ("above", "metric")

    def __init__(self, metric: str, above: float) -> None:
        self.metric = metric
        self.above = above


class ScoreRule:
    __slots__ = ("metric", "strategy", "target")

    def __init__(self, metric: str, strategy: str = LEAST_LOADED, target: float | None = None) -> None:
        self.metric = metric
        self.strategy = strategy
        self.target = target


class NodeLoadConfig:
    """The loaded args: everything a NodeLoad instance needs, the instance's settings applied."""

    __slots__ = (
        "auth",
        "in_function_project",
        "keep",
        "max_age",
        "metrics",
        "query_seconds",
        "refresh_interval",
        "rules",
        "score",
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
        in_function_project: bool = False,
    ) -> None:
        self.url = url
        # The URL is the preset's in the function's project (GOOGLE_CLOUD_PROJECT), which start-up needs set.
        self.in_function_project = in_function_project
        self.auth = auth
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


class PrometheusArgs(Schema):
    url = fields.String(validate=Length(min=1, error="must not be empty"))
    auth = fields.String(validate=OneOf([GOOGLE, NONE]))


class MetricArgs(Schema):
    name = fields.String(required=True, validate=_METRIC_NAME)
    query = fields.String(required=True, validate=Length(min=1, error="must not be empty: a PromQL query"))
    nodeLabel = fields.String(required=True, validate=_LABEL_NAME)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Metric:
        return Metric(data["name"], data["query"], data["nodeLabel"])


class ThresholdArgs(Schema):
    metric = fields.String(required=True)
    above = Number(required=True, example="a load such as 0.9")


class ScoreArgs(Schema):
    metric = fields.String(required=True)
    strategy = fields.String(load_default=LEAST_LOADED, validate=OneOf([LEAST_LOADED, TARGET_LOAD]))
    target = Number(
        example="a load such as 0.6",
        validate=Range(min=0, max=1, min_inclusive=False, max_inclusive=False, error="must be between 0 and 1 (both excluded)"),
    )

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def target_with_target_load(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        strategy = data.get("strategy")  # None: not a strategy, said by its own error
        if strategy == TARGET_LOAD and "target" not in data.keys() | failed_fields(self, data, original):
            raise ValidationError("TargetLoad needs a target, the load that scores best (such as 0.6)", "target")
        if strategy == LEAST_LOADED and "target" in data:
            raise ValidationError("only strategy TargetLoad takes a target", "target")


class NodeLoadArgs(Schema):
    preset = fields.String(validate=OneOf(sorted(PRESETS)))
    prometheus = fields.Nested(PrometheusArgs, load_default=dict)
    metrics = fields.List(fields.Nested(MetricArgs), load_default=list)
    refreshInterval = Duration(minimum="1s", load_default=DEFAULT_REFRESH_INTERVAL)
    maxAge = Duration(minimum="1s", load_default=DEFAULT_MAX_AGE)
    filter = fields.List(fields.Nested(ThresholdArgs), load_default=list)
    score = fields.Nested(ScoreArgs)

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
            problems["maxAge"] = ["must be at least refreshInterval: answers would be too old before they are asked again"]
        if problems:
            raise ValidationError(problems)

    @staticmethod
    def _metrics_named(
        data: Mapping[str, Any], preset: Preset | None, own: list[Metric], broken: set[str], problems: dict[str, Any]
    ) -> None:
        """The metrics exist, the rules and the score name existing ones, and every metric of the args' own is named."""
        metrics = _metrics(data, preset)
        if not metrics:
            problems["metrics"] = ["needs at least one metric (name, query, nodeLabel), or a preset (gke, node-exporter)"]
        names = ", ".join(metrics) or "none"
        rules = data.get("filter", [])
        for index, rule in enumerate(rules):
            if "metric" in rule and rule["metric"] not in metrics:
                unknown = [f"unknown metric {rule['metric']!r}: the metrics are {names}"]
                problems.setdefault("filter", {})[index] = {"metric": unknown}
        score = data.get("score", {})
        if "metric" in score and score["metric"] not in metrics:
            problems["score"] = {"metric": [f"unknown metric {score['metric']!r}: the metrics are {names}"]}
        if broken & {"filter", "score"} or not all("metric" in rule for rule in rules) or (score and "metric" not in score):
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
        return NodeLoadConfig(
            url=_url(data, preset, settings),
            auth=_auth(data, preset),
            metrics=tuple(metric for name, metric in metrics.items() if name in used),
            rules=tuple(Threshold(rule["metric"], rule["above"]) for rule in data["filter"]),
            score=ScoreRule(score["metric"], score.get("strategy", LEAST_LOADED), score.get("target")),
            refresh_interval=data["refreshInterval"],
            max_age=data["maxAge"],
            query_seconds=settings.http_timeout * QUERY_SHARE,
            keep=settings.result_cache,
            in_function_project="url" not in data["prometheus"],
        )


def _metrics(data: Mapping[str, Any], preset: Preset | None) -> dict[str, Metric]:
    """The preset's metrics, then the args' own (one of the same name replaces the preset's), by name."""
    metrics = {metric.name: metric for metric in preset.metrics} if preset is not None else {}
    metrics.update((metric.name, metric) for metric in data["metrics"])
    return metrics


def _used(data: Mapping[str, Any], metrics: Mapping[str, Metric]) -> set[str]:
    """The metrics the filter rules and the score name; without a score, the first metric is scored."""
    score = data["score"]["metric"] if "score" in data else next(iter(metrics), None)
    return {rule["metric"] for rule in data.get("filter", [])} | ({score} if score else set())


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
    google = _auth(data, preset) == GOOGLE
    try:
        credential_base_url(
            url,
            what="prometheus.url",
            example=GMP_URL.format(project="my-project"),
            credential="the function's Google access token" if google else None,
        )
    except ConfigError as exc:
        return str(exc).removeprefix("prometheus.url ")
    return ""
