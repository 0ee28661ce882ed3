"""NodeLoad's args, presets and scores (the Prometheus it reads is in tests/test_nodeload_prometheus.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from marshmallow import ValidationError

from extender.framework.args import loading_for
from extender.plugins import NodeLoad
from extender.plugins.nodeload import least_loaded, target_load
from extender.plugins.nodeload.args import GMP_URL, PRESETS, QUERY_SHARE
from extender.policy.loader import parse_policy
from extender.settings import Settings
from extender.wire.errors import flatten_errors
from tests.conftest import ROOT
from tests.policy_doc import code_blocks, policy_section
from tests.prometheus import promtool_test_rules

URL = "http://prometheus.example.internal:9090"
CPU = {"name": "cpu", "query": "node_load", "nodeLabel": "node"}
# The args exactly as the issue names them.
ISSUE_EXAMPLE = {
    "prometheus": {"url": GMP_URL.format(project="my-project"), "auth": "google"},
    "metrics": [{"name": "cpu", "query": "kubernetes_io:node_cpu_allocatable_utilization", "nodeLabel": "node_name"}],
    "refreshInterval": "30s",
    "maxAge": "3m",
    "filter": [{"metric": "cpu", "above": 0.9}],
    "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 0.6},
}


def load(args: dict, settings: Settings | None = None):
    with loading_for(settings or Settings()):
        return NodeLoad.args_schema().load(args)


def problems(args: dict, settings: Settings | None = None) -> list[str]:
    with pytest.raises(ValidationError) as raised:
        load(args, settings)
    return flatten_errors(raised.value.messages, "args")


def test_the_issue_s_example_loads_as_written():
    config = load(ISSUE_EXAMPLE, Settings(http_timeout=5.0))
    assert config.url == GMP_URL.format(project="my-project") and config.auth == "google"
    assert [(metric.name, metric.query, metric.node_label) for metric in config.metrics] == [
        ("cpu", "kubernetes_io:node_cpu_allocatable_utilization", "node_name")
    ]
    assert (config.refresh_interval, config.max_age) == (30.0, 180.0)
    assert [(rule.metric, rule.above) for rule in config.rules] == [("cpu", 0.9)]
    assert (config.score.metric, config.score.strategy, config.score.target) == ("cpu", "TargetLoad", 0.6)
    # A refresh may take a share of the scheduler's httpTimeout, well inside it.
    assert config.query_seconds == 5.0 * QUERY_SHARE < 5.0 and config.keep


def test_preset_gke_alone_queries_cloud_monitoring_in_the_function_s_project_as_the_function():
    config = load({"preset": "gke"}, Settings(project="acme-prod"))
    assert config.url == "https://monitoring.googleapis.com/v1/projects/acme-prod/location/global/prometheus"
    assert config.auth == "google"
    # No filter rule, the score on the first metric: only cpu is queried.
    [cpu] = config.metrics
    assert cpu.query == 'kubernetes_io:node_cpu_allocatable_utilization{monitored_resource="k8s_node"}'
    assert cpu.node_label == "node_name" and config.rules == () and config.score.strategy == "LeastLoaded"


def test_preset_gke_memory_reads_the_non_evictable_share_of_allocatable_memory():
    config = load({"preset": "gke", "filter": [{"metric": "memory", "above": 0.85}]}, Settings(project="p"))
    assert [metric.name for metric in config.metrics] == ["cpu", "memory"]
    memory = config.metrics[1]
    assert memory.query == (
        'kubernetes_io:node_memory_allocatable_utilization{monitored_resource="k8s_node",memory_type="non-evictable"}'
    )
    assert memory.node_label == "node_name"


@pytest.mark.parametrize(
    ("args", "auth"),
    [
        ({"preset": "gke"}, "google"),
        ({"preset": "gke", "prometheus": {"auth": "none"}}, "none"),  # explicit auth overrides the preset's
        ({"preset": "gke", "prometheus": {"url": "https://gmp-frontend.example.com"}}, "google"),
        ({"preset": "node-exporter", "prometheus": {"url": URL}}, "none"),
        ({"metrics": [CPU], "prometheus": {"url": "https://prom.example.com", "auth": "google"}}, "google"),
        ({"metrics": [CPU], "prometheus": {"url": URL}}, "none"),
    ],
)
def test_google_auth_when_asked_or_with_the_gke_preset_unless_auth_says_otherwise(args, auth):
    assert load(args, Settings(project="p")).auth == auth


def test_preset_node_exporter_joins_node_exporter_to_node_names_with_kube_state_metrics():
    config = load(
        {"preset": "node-exporter", "prometheus": {"url": URL}, "filter": [{"metric": "memory", "above": 0.9}]}
    )
    cpu, memory = config.metrics
    on_node = (
        "on (namespace, pod) group_left (node) topk by (namespace, pod) "
        '(1, max by (node, namespace, pod) (kube_pod_info{node!=""}))'
    )
    assert cpu.query.startswith(
        f'sum by (node) ((1 - rate(node_cpu_seconds_total{{mode="idle"}}[5m])) * {on_node}) / on (node) '
    )
    assert memory.query.startswith(
        f"max by (node) ((node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes) * {on_node}) / on (node) "
    )
    assert cpu.node_label == memory.node_label == "node"


def test_preset_node_exporter_measures_shares_of_allocatable_as_the_pods_estimates_are(tmp_path):
    """node-exporter sees the whole machine: 4 CPUs of which 2 busy, 16 GiB of which 8 in use. Of what pods may use
    (kube-state-metrics' allocatable: 2.5 cores, 10 GiB) that is 0.8 each, the base the in-flight pods' and the pod's
    own shares divide by; shares of the machine (0.5) would put a pod of 1 core on 0.5 + 0.4, not 0.8 + 0.4."""
    cpu, memory = PRESETS["node-exporter"].metrics
    node_exporter = 'namespace="monitoring",pod="node-exporter-a"'
    series = [
        *(
            {"series": f'node_cpu_seconds_total{{cpu="{cpu}",mode="{mode}",{node_exporter}}}', "values": "0+30x10"}
            for cpu in range(4)
            for mode in ("idle", "user")
        ),
        {"series": f"node_memory_MemTotal_bytes{{{node_exporter}}}", "values": f"{16 * 2**30}x10"},
        {"series": f"node_memory_MemAvailable_bytes{{{node_exporter}}}", "values": f"{8 * 2**30}x10"},
        # Two kube-state-metrics replicas report the same pod and node.
        *(
            {"series": f'kube_pod_info{{{node_exporter},node="node-a",instance="ksm-{n}"}}', "values": "1x10"}
            for n in (1, 2)
        ),
        {"series": 'kube_node_status_allocatable{node="node-a",resource="cpu",unit="core"}', "values": "2.5x10"},
        {
            "series": 'kube_node_status_allocatable{node="node-a",resource="memory",unit="byte"}',
            "values": f"{10 * 2**30}x10",
        },
    ]
    checks = [
        {"expr": query, "eval_time": "10m", "exp_samples": [{"labels": '{node="node-a"}', "value": 0.8}]}
        for query in (cpu.query, memory.query)
    ]
    tests = {"tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}]}
    failed = promtool_test_rules(tmp_path, tests)
    assert not failed, failed


def test_a_metric_of_the_args_replaces_the_preset_s_of_the_same_name():
    own = {
        "name": "cpu",
        "query": 'kubernetes_io:node_cpu_allocatable_utilization{cluster_name="prod"}',
        "nodeLabel": "node_name",
    }
    [cpu] = load({"preset": "gke", "metrics": [own]}, Settings(project="p")).metrics
    assert cpu.query.endswith('{cluster_name="prod"}')


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"metrics": [CPU]}, "args.prometheus.url: required: the Prometheus API's base URL"),
        ({"preset": "node-exporter"}, "args.prometheus.url: required: the Prometheus API's base URL"),
        ({}, "args.metrics: needs at least one metric (name, query, nodeLabel), or a preset (gke, node-exporter)"),
        ({"preset": "aks", "prometheus": {"url": URL}}, "args.preset: Must be one of: gke, node-exporter."),
        (
            {"metrics": [CPU], "prometheus": {"url": URL, "auth": "google"}},
            (
                "args.prometheus.url: must use https: the function's Google access token would cross the network in "
                "clear text"
            ),
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": f"{URL}?x=1"}},
            "args.prometheus.url: must not have a query or fragment",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL, "auth": "oauth"}},
            "args.prometheus.auth: Must be one of: google, bearer, basic, none.",
        ),
        (
            {"metrics": [{**CPU, "name": "CPU"}], "prometheus": {"url": URL}},
            "args.metrics[0].name: must be a short lowercase name",
        ),
        (
            {"metrics": [{**CPU, "nodeLabel": "node-name"}], "prometheus": {"url": URL}},
            "args.metrics[0].nodeLabel: must be a Prometheus label name",
        ),
        ({"metrics": [{**CPU, "query": ""}], "prometheus": {"url": URL}}, "args.metrics[0].query: must not be empty"),
        ({"metrics": [CPU, CPU], "prometheus": {"url": URL}}, "args.metrics[1].name: duplicate metric name 'cpu'"),
        (
            {"metrics": [CPU, {**CPU, "name": "disk"}], "prometheus": {"url": URL}},
            "args.metrics[1].name: metric 'disk' is named by no filter rule and not by the score: use or remove it",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "filter": [{"metric": "cpuu", "above": 0.9}]},
            "args.filter[0].metric: unknown metric 'cpuu': the metrics are cpu",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "filter": [{"metric": "cpu", "above": "0.9"}]},
            "args.filter[0].above: must be a number (a load such as 0.9), not a string or a boolean",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "filter": [{"metric": "cpu"}]},
            "args.filter[0].above: Missing data",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "score": {"metric": "mem"}},
            "args.score.metric: unknown metric 'mem': the metrics are cpu",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "score": {"metric": "cpu", "strategy": "TargetLoad"}},
            "args.score.target: TargetLoad needs a target, the load that scores best (such as 0.6)",
        ),
        (
            {
                "metrics": [CPU],
                "prometheus": {"url": URL},
                "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 1},
            },
            "args.score.target: 1 is outside metric cpu's range: it measures a ratio (0..1), so target must be",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "score": {"metric": "cpu", "target": 0.5}},
            "args.score.target: only strategy TargetLoad takes a target",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "score": {"metric": "cpu", "strategy": "MostLoaded"}},
            "args.score.strategy: Must be one of: LeastLoaded, TargetLoad, RiskBalancing.",
        ),
        ({"metrics": [CPU], "prometheus": {"url": URL}, "refreshInterval": 30}, "args.refreshInterval: Not a duration"),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "refreshInterval": "500ms"},
            "args.refreshInterval: Must be at least 1s.",
        ),
        (
            {"metrics": [CPU], "prometheus": {"url": URL}, "refreshInterval": "5m", "maxAge": "1m"},
            "args.maxAge: must be at least refreshInterval",
        ),
        ({"metrics": [CPU], "prometheus": {"url": URL}, "threshold": 0.9}, "args.threshold: Unknown field."),
    ],
)
def test_each_wrong_arg_is_named_with_what_is_wrong(args, expected):
    assert any(line.startswith(expected) for line in problems(args)), problems(args)


GKE_POLICY = """
nodeCacheCapable: true
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLoad}]}
    score: {enabled: [{name: NodeLoad, weight: 1}]}
  pluginConfig:
  - {name: NodeLoad, args: {preset: gke}}
"""


def test_preset_gke_needs_the_project_at_start_up_which_check_policy_lists(tmp_path):
    """The policy is valid anywhere (the deployment sets GOOGLE_CLOUD_PROJECT); start-up, and check-policy --env,
    refuse to run without the project the preset queries."""
    need = "GOOGLE_CLOUD_PROJECT: NodeLoad's preset queries Cloud Monitoring in the function's project"
    policy = parse_policy(GKE_POLICY, "test", Settings())
    assert [str(found) for found in policy.needs()] == [need]
    assert parse_policy(GKE_POLICY, "test", Settings(project="p")).profiles["default"].filters[0].config.url == (
        "https://monitoring.googleapis.com/v1/projects/p/location/global/prometheus"
    )
    path = tmp_path / "policy.yaml"
    path.write_text(GKE_POLICY)
    environment = {"PATH": "/usr/bin:/bin"}

    def check(*options: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "extender", "check-policy", str(path), *options]
        return subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False)

    checked = check()
    assert (checked.returncode, checked.stderr) == (0, "")
    assert checked.stdout.splitlines()[-1] == f"  needs {need}"
    checked = check("--env")
    assert checked.returncode == 2
    assert checked.stderr.splitlines() == [
        f"{path}: the policy needs variables the environment does not set:",
        f"  {need}",
    ]
    started = subprocess.run(
        [sys.executable, "-c", "from extender.startup import start; start()"],
        cwd=ROOT,
        env={**environment, "EXTENDER_POLICY": str(path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 1 and "Traceback" not in started.stderr
    assert started.stderr.splitlines()[-2:] == [
        "extender cannot start: the policy needs variables the environment does not set:",
        f"  {need}",
    ]
    environment["GOOGLE_CLOUD_PROJECT"] = "p"
    checked = check("--env")
    assert checked.returncode == 0, checked.stderr

@pytest.mark.parametrize(
    ("load", "score"),
    [(-0.5, 100), (0.0, 100), (0.005, 100), (0.006, 99), (0.25, 75), (0.5, 50), (0.995, 1), (1.0, 0), (1.7, 0)],
)
def test_least_loaded_scores_the_idle_share(load, score):
    assert least_loaded(load) == score


# Trimaran's TargetLoadPacking (kubernetes-sigs/scheduler-plugins, pkg/trimaran/targetloadpacking) with target 40%:
# at or below the target (100 - 40) * U / 40 + 40; above it 40 * (100 - U) / (100 - 40), so just above the target a
# node scores as an idle one does (its penalty), and 0 from 100% on.
@pytest.mark.parametrize(
    ("load", "score"),
    [(0.0, 40), (0.1, 55), (0.2, 70), (0.4, 100), (0.41, 39), (0.7, 20), (0.9, 7), (1.0, 0), (1.3, 0), (-0.2, 40)],
)
def test_target_load_scores_as_trimaran_s_target_load_packing(load, score):
    assert target_load(load, 0.4) == score


def test_a_built_in_plugin_named_by_a_policy_is_imported_then():
    checked = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys; from extender.policy.loader import embedded_default; embedded_default();"
                " assert 'extender.plugins.nodeload' not in sys.modules; from extender import plugins;"
                " assert plugins.NodeLoad.name == 'NodeLoad' and 'extender.plugins.nodeload' in sys.modules;"
                " assert 'requests' not in sys.modules and 'google.auth' not in sys.modules"
            ),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_documented_gke_recipe_loads_and_the_presets_are_documented_as_they_query():
    (recipe,) = code_blocks("yaml", "Load-aware scheduling on GKE")
    profile = parse_policy(recipe, "docs/plugins/nodeload.md", Settings(project="acme")).profiles["default"]
    [load] = profile.filters
    assert isinstance(load, NodeLoad) and profile.scores[0].plugin is load
    assert profile.entry("filter", load).fail_open and profile.entry("score", load).fail_open
    assert load.config.url == GMP_URL.format(project="acme") and load.config.auth == "google"
    assert [metric.name for metric in load.config.metrics] == ["cpu", "memory"]
    reference = policy_section()
    for preset in PRESETS.values():
        for metric in preset.metrics:
            assert metric.query in reference and re.search(rf"nodeLabel:? {metric.node_label}\b", reference)


def test_every_problem_of_the_args_is_reported_in_one_run():
    args = {
        "prometheus": {"url": URL, "auth": "google"},
        "metrics": [{"name": "CPU", "query": "", "nodeLabel": "node-name"}, {**CPU, "name": "disk"}],
        "refreshInterval": "5m",
        "maxAge": "1m",
        "filter": [{"metric": "cpuu", "above": "0.9"}, {"metric": "disk", "above": 0.9}],
        "score": {"metric": "disk", "strategy": "TargetLoad"},
        "bogus": 1,
    }
    assert sorted(problems(args)) == sorted(
        [
            "args.metrics[0].name: must be a short lowercase name such as cpu or memory",
            "args.metrics[0].query: must not be empty: a PromQL query",
            "args.metrics[0].nodeLabel: must be a Prometheus label name such as node or node_name",
            "args.filter[0].above: must be a number (a load such as 0.9), not a string or a boolean",
            "args.score.target: TargetLoad needs a target, the load that scores best (such as 0.6)",
            (
                "args.prometheus.url: must use https: the function's Google access token would cross the network in "
                "clear text"
            ),
            (
                "args.maxAge: must be at least refreshInterval: answers would be too old before they are asked "
                "again"
            ),
            "args.bogus: Unknown field.",
        ]
    )


@pytest.mark.parametrize(
    ("args", "source"),
    [
        ({"preset": "gke"}, "Cloud Monitoring"),
        ({"prometheus": {"url": "http://prometheus:9090"}, "metrics": ISSUE_EXAMPLE["metrics"]}, "Prometheus"),
    ],
)
def test_a_node_without_a_sample_names_the_source_actually_queried(args, source):
    from extender.framework.types import Node
    from tests.plugin_helpers import pod

    plugin = NodeLoad(load({**args, "filter": [{"metric": "cpu", "above": 0.9}]}, Settings(project="acme-prod")))
    other = b'{"metric": {"node_name": "other"}, "value": [1772330400, "0.5"]}'
    plugin.judge_offline({"cpu": b'{"status":"success","data":{"resultType":"vector","result":[' + other + b"]}}"})
    [why] = plugin.missing_facts("filter", [Node("n")], plugin.prepare(pod())).values()
    owner = "Prometheus'" if source == "Prometheus" else f"{source}'s"
    assert why.reason.startswith(f"NodeLoad: no series of {owner} cpu query ")
    # Before its first answer, too.
    from extender.plugins.nodeload.loads import NOT_ASKED, LoadView

    assert LoadView(NOT_ASKED, 0.0, 60.0, plugin.source).unknown("cpu", ["n"]) == {
        "n": f"NodeLoad: no cpu answer from {source} yet"
    }
