"""The Cloud Monitoring dashboard (terraform/dashboard.tf) as Terraform renders it, checked offline.

dashboard.tf's locals, and those of monitoring.tf they use, are evaluated by real Terraform next to variables.tf (no
provider: the two values that come from modules/scheduler-config are given), with each of the module's log-based
metrics as monitoring.tf defines it: its name, count, kind and labels (the keys of its label extractors, and of its
descriptor's labels). The rendered JSON is then checked as the Monitoring Dashboards API defines it
(https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards): a mosaic layout whose tiles stay within
its 48 columns and do not overlap, every widget titled, every chart's data sets of the shape the API takes, with
aligners and reducers that suit their metric; and every metric and label a chart names exists, defined by the module
or built into Cloud Run (``CLOUD_RUN``).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.support import (
    ROOT_MODULE,
    load_hcl,
    load_module,
    local_source,
    resources,
    run_terraform,
    variables_module,
)

DASHBOARD = ROOT_MODULE / "dashboard.tf"
MONITORING = ROOT_MODULE / "monitoring.tf"
MAIN = ROOT_MODULE / "main.tf"
# Locals of main.tf the metrics read (the cluster's project, where the identity proxy logs).
MAIN_LOCALS = {"cluster_project_id"}
RESOURCES = resources(load_module(ROOT_MODULE))
LOG_METRICS = {name: body for (kind, name), body in RESOURCES.items() if kind == "google_logging_metric"}
HTTP_TIMEOUT_MS = {"5s": 5000, "2500ms": 2500}
# The values that come from modules/scheduler-config, as the module derives them (checked below), for a probe that
# has no such module: {local: (expression in the module, value for the probe)}.
STAND_INS = {
    "dashboard_timeout_ms": ("module.scheduler_config.http_timeout_ms", "{timeout_ms}"),
    "latency_threshold_ms": (
        "module.scheduler_config.http_timeout_ms * var.alert_latency_ratio",
        "{timeout_ms} * var.alert_latency_ratio",
    ),
}
SCENARIOS = {
    "public": {"invocation": "public"},
    "iam": {
        "invocation": "iam",
        "proxy_image": "europe-docker.pkg.dev/acme/extender/proxy:1",
        "http_timeout": "2500ms",
    },
    "public-without-token": {
        "invocation": "public",
        "caller_token_enabled": "false",
        "accept_unauthenticated_open_endpoint": "true",
    },
}

# Cloud Run's built-in metrics the dashboard may read, with their kind, value type and labels, as
# https://cloud.google.com/monitoring/api/metrics_gcp_p_z#gcp-run lists them (monitored resource cloud_run_revision).
CLOUD_RUN = {
    "run.googleapis.com/request_count": ("DELTA", "INT64", {"response_code", "response_code_class", "route"}),
    "run.googleapis.com/request_latencies": (
        "DELTA",
        "DISTRIBUTION",
        {"response_code", "response_code_class", "route"},
    ),
    "run.googleapis.com/container/instance_count": ("GAUGE", "INT64", {"state"}),
    "run.googleapis.com/container/startup_latencies": ("DELTA", "DISTRIBUTION", set()),
}
# https://cloud.google.com/monitoring/api/resources#tag_cloud_run_revision
CLOUD_RUN_REVISION = {"project_id", "service_name", "revision_name", "configuration_name", "location"}
# The module's log-based metrics of what is logged in the cluster (the identity proxy's container), and that resource's
# labels: https://cloud.google.com/monitoring/api/resources#tag_k8s_container
CLUSTER_METRICS = {"identity_proxy_failures"}
K8S_CONTAINER = {"project_id", "location", "cluster_name", "namespace_name", "pod_name", "container_name"}

# The parts of the Dashboards API's objects the dashboard may use: {object: {field: the object it is, or None}}.
SCHEMA: dict[str, dict[str, str | None]] = {
    "Dashboard": {"displayName": None, "mosaicLayout": "MosaicLayout", "labels": None},
    "MosaicLayout": {"columns": None, "tiles": "Tile"},
    "Tile": {"xPos": None, "yPos": None, "width": None, "height": None, "widget": "Widget"},
    "Widget": {"title": None, "xyChart": "XyChart", "text": "Text"},
    "Text": {"content": None, "format": None},
    "XyChart": {"dataSets": "DataSet", "thresholds": "Threshold", "yAxis": "Axis", "timeshiftDuration": None},
    "DataSet": {
        "timeSeriesQuery": "TimeSeriesQuery",
        "plotType": None,
        "legendTemplate": None,
        "minAlignmentPeriod": None,
        "targetAxis": None,
    },
    "TimeSeriesQuery": {"timeSeriesFilter": "TimeSeriesFilter", "prometheusQuery": None, "unitOverride": None},
    "TimeSeriesFilter": {"filter": None, "aggregation": "Aggregation"},
    "Aggregation": {
        "alignmentPeriod": None,
        "perSeriesAligner": None,
        "crossSeriesReducer": None,
        "groupByFields": None,
    },
    "Threshold": {"label": None, "value": None, "color": None, "direction": None, "targetAxis": None},
    "Axis": {"label": None, "scale": None},
}
REQUIRED = {
    "Dashboard": {"displayName"},
    "Tile": {"width", "height", "widget"},
    "TimeSeriesFilter": {"filter"},
    "Widget": {"title"},
}
ENUMS = {
    ("Text", "format"): {"MARKDOWN", "RAW"},
    ("DataSet", "plotType"): {"LINE", "STACKED_AREA", "STACKED_BAR", "HEATMAP"},
    ("DataSet", "targetAxis"): {"Y1", "Y2"},
    ("Threshold", "color"): {"GREY", "BLUE", "GREEN", "YELLOW", "ORANGE", "RED"},
    ("Threshold", "direction"): {"ABOVE", "BELOW"},
    ("Threshold", "targetAxis"): {"Y1", "Y2"},
    ("Axis", "scale"): {"LINEAR", "LOG10"},
}
PERCENTILES = {f"REDUCE_PERCENTILE_{n}" for n in (5, 50, 95, 99)}
# Which (metric kind, value type) each aligner and reducer takes, after the API reference's Aligner and Reducer.
ALIGNERS = {
    "ALIGN_RATE": {("DELTA", "INT64"), ("DELTA", "DOUBLE"), ("CUMULATIVE", "INT64"), ("CUMULATIVE", "DOUBLE")},
    "ALIGN_DELTA": {(kind, value) for kind in ("DELTA", "CUMULATIVE") for value in ("INT64", "DOUBLE", "DISTRIBUTION")},
    "ALIGN_MAX": {("GAUGE", "INT64"), ("GAUGE", "DOUBLE"), ("DELTA", "INT64"), ("DELTA", "DOUBLE")},
    "ALIGN_MEAN": {("GAUGE", "INT64"), ("GAUGE", "DOUBLE"), ("DELTA", "INT64"), ("DELTA", "DOUBLE")},
}
REDUCERS = {reducer: {"INT64", "DOUBLE", "DISTRIBUTION"} for reducer in ("REDUCE_SUM", *PERCENTILES)}

_LOCAL = re.compile(r"\blocal\.(\w+)")
_METRIC_TYPE = re.compile(r'metric\.type="([^"]+)"')
_FILTER_LABEL = re.compile(r"\b(metric|resource)\.labels?\.(\w+)\b")
_GROUP_BY = re.compile(r'metric\.label\."(\w+)"')
_LEGEND_LABEL = re.compile(r"\$\{metric\.labels\.(\w+)\}")


def _hcl(value: Any) -> str:
    """A value read by python-hcl2 (``"${expression}"``, a template, or a literal), as HCL again."""
    if isinstance(value, str) and value.startswith("${") and _closing_brace(value) == len(value) - 1:
        return value[2:-1]  # one interpolation, the whole value: its expression
    return json.dumps(value)


def _closing_brace(text: str) -> int:
    """Where the brace at ``text[1]`` closes; -1 if it does not."""
    depth = 0
    for at, character in enumerate(text[1:], start=1):
        depth += {"{": 1, "}": -1}.get(character, 0)
        if depth == 0:
            return at
    return -1


def _locals_source(timeout_ms: int) -> str:
    """dashboard.tf's locals, and those of monitoring.tf they use (variables.tf's are in the probe already), as
    written; the stand-ins for modules/scheduler-config's values."""
    defined_in_variables = {name for block in load_hcl(ROOT_MODULE / "variables.tf")["locals"] for name in block}
    wanted = [name for block in load_hcl(DASHBOARD)["locals"] for name in block]
    wanted += [name for body in LOG_METRICS.values() for name in _LOCAL.findall(json.dumps(body))]
    found: dict[str, str] = {}
    while wanted:
        name = wanted.pop()
        if name in found or name in defined_in_variables:
            continue
        if name in STAND_INS:
            found[name] = STAND_INS[name][1].format(timeout_ms=timeout_ms)
            continue
        path = DASHBOARD if name.startswith("dashboard") else MAIN if name in MAIN_LOCALS else MONITORING
        source = local_source(path, name)
        assert "module." not in source, f"local {name} reads a module: give it a stand-in"
        found[name] = source
        wanted += _LOCAL.findall(source)
    return "locals {\n" + "".join(f"  {name} = {source}\n" for name, source in found.items()) + "}\n"


def _metrics_output() -> str:
    """Each log-based metric as monitoring.tf defines it: name, count, kind, value type, and the keys of its label
    extractors and of its descriptor's labels; a resource with ``for_each``, by key (``each`` made a loop's)."""
    entries = []
    for resource, body in LOG_METRICS.items():
        descriptor = body["metric_descriptor"][0]
        dynamic = [block["labels"]["for_each"] for block in descriptor.get("dynamic", [])]
        static = [label["key"] for label in descriptor.get("labels", [])]
        extractors = body.get("label_extractors", {})
        extracted = _hcl(sorted(extractors)) if isinstance(extractors, dict) else f"keys({_hcl(extractors)})"
        fields = {
            "name": _hcl(body["name"]),
            "count": _hcl(body.get("count", 1)),
            "kind": _hcl(descriptor["metric_kind"]),
            "value_type": _hcl(descriptor["value_type"]),
            "labels": f"sort({extracted})",
            "descriptor_labels": f"sort({f'keys({_hcl(dynamic[0])})' if dynamic else _hcl(static)})",
        }
        metric = "{\n" + "".join(f"      {key} = {value}\n" for key, value in fields.items()) + "    }"
        if "for_each" in body:
            metric = f"{{ for each_key, each_value in {_hcl(body['for_each'])} : each_key => {metric} }}"
            metric = metric.replace("each.key", "each_key").replace("each.value", "each_value")
        entries.append(f"    {resource} = {metric}\n")
    return 'output "log_metrics" {\n  value = {\n' + "".join(entries) + "  }\n}\n"


def _created(outputs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The log-based metrics by resource address: ``name`` of a counted resource, ``name[key]`` of one per key."""
    found = {}
    for resource, value in outputs.items():
        keyed = {resource: value} if "name" in value else {f"{resource}[{key}]": entry for key, entry in value.items()}
        found.update(keyed)
    return found


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def rendered(
    request: pytest.FixtureRequest,
    terraform: str,
    terraform_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """{"dashboard": the dashboard's JSON, "metrics": the log-based metrics, "variables": the scenario's}."""
    variables = {
        "project_id": "acme",
        "function_location": "europe-west1",
        "kubernetes_version": "1.31.4",
        "http_timeout": "5s",
        **SCENARIOS[request.param],
    }
    probe = (
        _locals_source(HTTP_TIMEOUT_MS[variables["http_timeout"]])
        + 'output "dashboard" {\n  value = jsonencode(local.dashboard)\n}\n'
        + 'output "latency_threshold_ms" {\n  value = local.latency_threshold_ms\n}\n'
        + _metrics_output()
    )
    module = variables_module(tmp_path_factory.mktemp(f"dashboard-{request.param}") / "module", [], {"probe.tf": probe})
    env = {**terraform_env, "TF_DATA_DIR": str(module / ".terraform")}
    arguments = [f"-var={name}={value}" for name, value in variables.items()]
    run_terraform(terraform, "apply", "-auto-approve", "-input=false", *arguments, cwd=module, env=env)
    outputs = json.loads(run_terraform(terraform, "output", "-json", cwd=module, env=env).stdout)
    return {
        "dashboard": json.loads(outputs["dashboard"]["value"]),
        "metrics": _created(outputs["log_metrics"]["value"]),
        "threshold_ms": outputs["latency_threshold_ms"]["value"],
        "variables": variables,
    }


def charts(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [tile["widget"] for tile in dashboard["mosaicLayout"]["tiles"] if "xyChart" in tile["widget"]]


def data_sets(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(chart title, data set) of every chart's data set that reads a metric by filter."""
    return [
        (chart["title"], data)
        for chart in charts(dashboard)
        for data in chart["xyChart"]["dataSets"]
        if "prometheusQuery" not in data["timeSeriesQuery"]
    ]


def prometheus_queries(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(chart title, data set) of the data sets that read PromQL (kube state metrics, in the cluster's project)."""
    return [
        (chart["title"], data)
        for chart in charts(dashboard)
        for data in chart["xyChart"]["dataSets"]
        if "prometheusQuery" in data["timeSeriesQuery"]
    ]


def shape_problems(value: Any, kind: str, path: str) -> list[str]:
    """What in ``value`` is not an object ``kind`` of the API (``SCHEMA``), recursively."""
    if not isinstance(value, dict):
        return [f"{path}: a {kind} is an object"]
    fields = SCHEMA[kind]
    problems = [f"{path}.{key}: no such field of {kind}" for key in value if key not in fields]
    problems += [f"{path}.{key}: required in {kind}" for key in REQUIRED.get(kind, set()) - set(value)]
    for key, item in value.items():
        nested = fields.get(key)
        allowed = ENUMS.get((kind, key))
        if allowed is not None and item not in allowed:
            problems.append(f"{path}.{key}: {item!r} is none of {sorted(allowed)}")
        if nested is None:
            continue
        if nested in {"Tile", "DataSet", "Threshold"}:
            if not (isinstance(item, list) and item):
                problems.append(f"{path}.{key}: a non-empty list of {nested}")
            for index, element in enumerate(item if isinstance(item, list) else []):
                problems += shape_problems(element, nested, f"{path}.{key}[{index}]")
        else:
            problems += shape_problems(item, nested, f"{path}.{key}")
    return problems


def query_problems(title: str, data: dict[str, Any]) -> list[str]:
    """What the API refuses, or drops, in a data set's aggregation: a reducer needs an aligner, grouping needs a
    reducer, and what is empty is left out (the API leaves it out, and a plan would then always differ)."""
    aggregation = data["timeSeriesQuery"]["timeSeriesFilter"].get("aggregation", {})
    problems = []
    if not all(
        re.fullmatch(r"\d+s", period) for period in (aggregation.get("alignmentPeriod"), data["minAlignmentPeriod"])
    ):
        problems.append(f"{title}: alignment periods are durations in seconds")
    if aggregation.get("perSeriesAligner", "ALIGN_NONE") == "ALIGN_NONE":
        problems.append(f"{title}: no aligner")
    if "groupByFields" in aggregation and ("crossSeriesReducer" not in aggregation or not aggregation["groupByFields"]):
        problems.append(f"{title}: groupByFields needs a reducer, and is left out when empty")
    return problems


def layout_problems(layout: dict[str, Any]) -> list[str]:
    """Tiles outside the grid's columns, overlapping, or with a position of 0 written (the API leaves it out)."""
    problems = [] if layout["columns"] == 48 else ["a mosaic layout of 48 columns"]
    boxes = []
    for tile in layout["tiles"]:
        title = tile["widget"]["title"]
        x, y = tile.get("xPos", 0), tile.get("yPos", 0)
        if tile.get("xPos") == 0 or tile.get("yPos") == 0:
            problems.append(f"{title}: a position of 0 is left out")
        if not (x >= 0 and y >= 0 and tile["width"] > 0 and tile["height"] > 0 and x + tile["width"] <= 48):
            problems.append(f"{title}: outside the grid")
        boxes.append((x, y, x + tile["width"], y + tile["height"], title))
    for a, b in combinations(boxes, 2):
        if not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]):
            problems.append(f"{a[4]} overlaps {b[4]}")
    return problems


def metric_problems(title: str, data: dict[str, Any], rendered: dict[str, Any]) -> list[str]:
    """A metric or label a data set names that does not exist, or an aligner or reducer that does not suit it."""
    function = rendered["variables"].get("function_name", "scheduler-extender")
    query = data["timeSeriesQuery"]["timeSeriesFilter"]
    [metric_type] = _METRIC_TYPE.findall(query["filter"])
    found = _metric_of(metric_type, rendered)
    if isinstance(found, str):
        return [f"{title}: {found}"]
    kind, value_type, labels = found
    problems = []
    in_cluster = metric_type.endswith(tuple(f"/{name}" for name in CLUSTER_METRICS))
    resource = 'resource.type="k8s_container"' if in_cluster else 'resource.type="cloud_run_revision"'
    if resource not in query["filter"] or (
        metric_type in CLOUD_RUN and f'resource.labels.service_name="{function}"' not in query["filter"]
    ):
        problems.append(f"{title}: the function's Cloud Run service only (the identity proxy: its container)")
    named = set(_FILTER_LABEL.findall(query["filter"]))
    resource_labels = K8S_CONTAINER if in_cluster else CLOUD_RUN_REVISION
    if not {label for scope, label in named if scope == "resource"} <= resource_labels:
        problems.append(f"{title}: a resource label {resource_labels} lacks")
    aggregation = query["aggregation"]
    fields = aggregation.get("groupByFields", [])
    grouped = set(_GROUP_BY.findall(" ".join(fields)))
    if len(grouped) != len(fields):
        problems.append(f"{title}: group by metric labels only")
    shown = set(_LEGEND_LABEL.findall(data["legendTemplate"]))
    used = {label for scope, label in named if scope == "metric"} | grouped | shown
    if not used <= labels:
        problems.append(f"{title}: {metric_type} has no label {sorted(used - labels)} (it has {sorted(labels)})")
    if not shown <= grouped:
        problems.append(f"{title}: the legend shows a label the series are not grouped by")
    aligner, reducer = aggregation["perSeriesAligner"], aggregation["crossSeriesReducer"]
    if (kind, value_type) not in ALIGNERS.get(aligner, set()) or value_type not in REDUCERS.get(reducer, set()):
        problems.append(f"{title}: {aligner} and {reducer} on {metric_type}, {kind} {value_type}")
    return problems


def _metric_of(metric_type: str, rendered: dict[str, Any]) -> tuple[str, str, set[str]] | str:
    """(kind, value type, labels) of a metric the dashboard reads: one of the module's log-based metrics, created
    with these variables, or one of Cloud Run's; else what is wrong."""
    if metric_type in CLOUD_RUN:
        return CLOUD_RUN[metric_type]
    name = metric_type.removeprefix("logging.googleapis.com/user/")
    found = [(n, m) for n, m in rendered["metrics"].items() if m["name"] == name and name != metric_type]
    if not found:
        return f"{metric_type} is neither the module's nor Cloud Run's"
    [(resource, metric)] = found
    if metric["count"] != 1:
        return f"{metric_type}: google_logging_metric.{resource} is not created with these variables"
    return metric["kind"], metric["value_type"], set(metric["labels"])


def test_the_dashboard_has_the_shape_the_dashboards_api_takes(rendered: dict[str, Any]) -> None:
    dashboard = rendered["dashboard"]
    assert shape_problems(dashboard, "Dashboard", "dashboard") == []
    assert dashboard["displayName"].startswith("scheduler-extender: ")
    for tile in dashboard["mosaicLayout"]["tiles"]:
        assert len({"xyChart", "text"} & set(tile["widget"])) == 1 and tile["widget"]["title"].strip(), tile
    assert [problem for title, data in data_sets(dashboard) for problem in query_problems(title, data)] == []


def test_tiles_stay_within_the_48_columns_and_never_overlap(rendered: dict[str, Any]) -> None:
    assert layout_problems(rendered["dashboard"]["mosaicLayout"]) == []


def test_every_metric_and_label_a_chart_names_exists(rendered: dict[str, Any]) -> None:
    problems = [
        problem
        for title, data in data_sets(rendered["dashboard"])
        for problem in metric_problems(title, data, rendered)
    ]
    assert problems == []


def test_the_checks_catch_mistakes(rendered: dict[str, Any]) -> None:
    """The checkers themselves, on a copy of the dashboard broken in each way they look for."""
    broken = copy.deepcopy(rendered["dashboard"])
    tiles = broken["mosaicLayout"]["tiles"]
    chart = tiles[1]["widget"]
    chart["xyChart"]["dataSets"][0]["plotType"] = "PIE"
    chart["xyChart"]["dataSets"][0]["timeSeriesQuery"]["timeSeriesFilter"]["aggregation"]["groupByFields"] = []
    chart["xyChart"]["legend"] = {}
    del tiles[2]["widget"]["title"]
    tiles[3]["xPos"], tiles[4]["xPos"] = 30, 0
    del tiles[6]["xPos"]  # onto the tile to its left
    problems = shape_problems(broken, "Dashboard", "dashboard")
    assert "dashboard.mosaicLayout.tiles[1].widget.xyChart.legend: no such field of XyChart" in problems
    assert any(
        problem.endswith(".plotType: 'PIE' is none of ['HEATMAP', 'LINE', 'STACKED_AREA', 'STACKED_BAR']")
        for problem in problems
    )
    assert "dashboard.mosaicLayout.tiles[2].widget.title: required in Widget" in problems
    tiles[2]["widget"]["title"] = "untitled"
    layout = layout_problems(broken["mosaicLayout"])
    assert (
        f"{tiles[3]['widget']['title']}: outside the grid" in layout
        and f"{tiles[4]['widget']['title']}: a position of 0 is left out" in layout
    )
    assert f"{tiles[5]['widget']['title']} overlaps {tiles[6]['widget']['title']}" in layout
    [(title, data), *_] = data_sets(broken)
    assert query_problems(title, data) == [f"{title}: groupByFields needs a reducer, and is left out when empty"]
    query = data["timeSeriesQuery"]["timeSeriesFilter"]
    query["aggregation"]["groupByFields"] = ['metric.label."zone"']
    data["legendTemplate"] = "${metric.labels.verb}"
    requests = "logging.googleapis.com/user/scheduler-extender/requests"
    assert metric_problems(title, data, rendered) == [
        f"{title}: {requests} has no label ['zone'] (it has ['profile', 'status', 'verb'])",
        f"{title}: the legend shows a label the series are not grouped by",
    ]
    # A rate of a gauge.
    instances = "run.googleapis.com/container/instance_count"
    query["filter"] = query["filter"].replace("logging.googleapis.com/user/scheduler-extender/requests", instances)
    query["filter"] += ' AND resource.labels.service_name="scheduler-extender"'
    query["aggregation"]["groupByFields"], data["legendTemplate"] = ['metric.label."state"'], "${metric.labels.state}"
    assert metric_problems(title, data, rendered) == [f"{title}: ALIGN_RATE and REDUCE_SUM on {instances}, GAUGE INT64"]
    query["filter"] = query["filter"].replace(instances, "logging.googleapis.com/user/scheduler-extender/requests")
    query["filter"] = query["filter"].replace("/requests", "/no_such_metric")
    unknown = "logging.googleapis.com/user/scheduler-extender/no_such_metric"
    assert metric_problems(title, data, rendered) == [f"{title}: {unknown} is neither the module's nor Cloud Run's"]


def test_each_log_based_metric_s_labels_are_those_it_extracts(rendered: dict[str, Any]) -> None:
    """The label check above reads the extractors' keys: the descriptor declares the same labels."""
    for name, metric in rendered["metrics"].items():
        assert metric["labels"] == metric["descriptor_labels"], name


def test_the_tiles_the_issue_asks_for_read_what_they_say(rendered: dict[str, Any]) -> None:
    """Calls per verb and status, p50 and p99 per verb against httpTimeout, rejections and audited would-rejects per
    plugin and rule, errors, Cloud Run instances and cold starts."""
    function = "logging.googleapis.com/user/scheduler-extender/"
    read: dict[str, set[tuple[str, frozenset[str]]]] = {}
    for _, data in data_sets(rendered["dashboard"]):
        query = data["timeSeriesQuery"]["timeSeriesFilter"]
        [metric_type] = _METRIC_TYPE.findall(query["filter"])
        grouped = frozenset(_GROUP_BY.findall(" ".join(query["aggregation"].get("groupByFields", []))))
        read.setdefault(metric_type, set()).add((query["aggregation"]["crossSeriesReducer"], grouped))
    assert ("REDUCE_SUM", frozenset({"verb", "status"})) in read[function + "requests"]
    assert {("REDUCE_PERCENTILE_50", frozenset({"verb"})), ("REDUCE_PERCENTILE_99", frozenset({"verb"}))} <= read[
        function + "latency"
    ]
    assert ("REDUCE_SUM", frozenset({"plugin", "rule"})) in read[function + "rejections"]
    assert ("REDUCE_SUM", frozenset({"plugin", "rule", "verdict"})) in read[function + "would_reject"]
    assert ("REDUCE_SUM", frozenset({"verb"})) in read[function + "errors"]
    assert ("REDUCE_SUM", frozenset({"state"})) in read["run.googleapis.com/container/instance_count"]
    assert ("REDUCE_PERCENTILE_99", frozenset()) in read["run.googleapis.com/container/startup_latencies"]
    # What only some deployments have: IAM's refusals with IAM-only invocation, calls without a valid caller token
    # with one (on by default for public invocation only).
    variables = rendered["variables"]
    assert (function + "iam_refused" in read) == (variables["invocation"] == "iam")
    token = variables["invocation"] == "public" and variables.get("caller_token_enabled") != "false"
    assert (function + "unauthenticated" in read) == token


def test_latency_charts_are_drawn_against_the_schedulers_http_timeout(rendered: dict[str, Any]) -> None:
    timeout_ms = HTTP_TIMEOUT_MS[rendered["variables"]["http_timeout"]]
    latency = [
        chart
        for chart in charts(rendered["dashboard"])
        if chart["xyChart"]["dataSets"][0]["timeSeriesQuery"]
        .get("timeSeriesFilter", {"aggregation": {}})["aggregation"]
        .get("perSeriesAligner")
        == "ALIGN_DELTA"
    ]
    assert len(latency) == 3, [chart["title"] for chart in latency]  # the function's, Cloud Run's, cold starts
    for chart in latency:
        lines = {(line["value"], line["color"]) for line in chart["xyChart"]["thresholds"]}
        assert (timeout_ms, "RED") in lines, chart["title"]
        assert chart["xyChart"]["yAxis"]["label"] == "ms"
    assert rendered["threshold_ms"] == pytest.approx(timeout_ms * 0.8)
    assert (
        sum(
            (rendered["threshold_ms"], "YELLOW")
            in {(line["value"], line["color"]) for line in chart["xyChart"]["thresholds"]}
            for chart in latency
        )
        == 2
    )


def test_the_stand_ins_are_the_module_s_own_expressions() -> None:
    for name, (expression, _) in STAND_INS.items():
        source = local_source(DASHBOARD if name.startswith("dashboard") else MONITORING, name)
        assert re.sub(r"\s+", "", source) == re.sub(r"\s+", "", expression), name


def test_the_dashboard_is_created_with_monitoring_and_reads_what_it_depends_on() -> None:
    dashboard = RESOURCES[("google_monitoring_dashboard", "extender")]
    assert dashboard["count"] == "${var.monitoring_enabled && var.dashboard_enabled ? 1 : 0}"
    assert dashboard["dashboard_json"] == "${jsonencode(local.dashboard)}"
    assert set(dashboard["depends_on"]) == {f"${{google_logging_metric.{name}}}" for name in LOG_METRICS}


def test_the_console_url_names_the_dashboard() -> None:
    output = load_module(ROOT_MODULE)["output"]
    [url] = [body["value"] for block in output for name, body in block.items() if name == "dashboard_url"]
    assert (
        "https://console.cloud.google.com/monitoring/dashboards/builder/" in url
        and 'split("/", dashboard.id), 3)' in url
    )
    assert "google_monitoring_dashboard.extender" in url


def test_silent_degradations_are_charted(rendered: dict[str, Any]) -> None:
    """Rules not evaluated and failing sources on every dashboard; the identity proxy's failures with IAM-only
    invocation (its metric in the cluster's project, here the dashboard's)."""
    read = " ".join(
        data["timeSeriesQuery"]["timeSeriesFilter"]["filter"] for _, data in data_sets(rendered["dashboard"])
    )
    assert '/skipped"' in read and '/source_failures"' in read
    assert ('/identity_proxy_failures"' in read) == (rendered["variables"]["invocation"] == "iam")


# kube state metrics the PromQL charts may read, as GKE's package (Managed Service for Prometheus) exports them.
KUBE_STATE_METRICS = {"kube_pod_status_unschedulable", "kube_deployment_status_replicas_available"}


def test_pods_not_placed_are_charted_from_kube_state_metrics_in_valid_promql(
    rendered: dict[str, Any], tmp_path: Path
) -> None:
    import yaml

    queries = [data["timeSeriesQuery"]["prometheusQuery"] for _, data in prometheus_queries(rendered["dashboard"])]
    assert len(queries) == 2  # the cluster's project is the dashboard's in every scenario here
    for query in queries:
        assert set(re.findall(r"\b(kube_\w+)", query)) <= KUBE_STATE_METRICS, query
    assert 'deployment="extender-scheduler"' in queries[1]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH (Debian's prometheus package)")
    rules = {"groups": [{"name": "chart", "rules": [{"record": f"q{n}", "expr": q} for n, q in enumerate(queries)]}]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    checked = subprocess.run(
        [promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
