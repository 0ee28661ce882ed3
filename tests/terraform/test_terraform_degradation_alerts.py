"""The alerts for every way the extender can quietly stop enforcing: rules not evaluated (skipped), sources failing,
the identity proxy's own failures, pods the second scheduler does not place.

The log-based metrics' filters, as Terraform renders them, are matched against the entries the code really logs:
a served filter request whose node source (the Kubernetes API) is down under failurePolicy Ignore, and the identity
proxy's JSON lines, each turned into the entry Cloud Logging makes of it (its resource, severity and jsonPayload).
The pending-pods PromQL runs in Prometheus's rule tester (promtool) on kube state metrics series.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from testkit.ports import free_port
from tests.prometheus import promtool_test_rules
from tests.terraform.support import ROOT_MODULE, load_module, monitoring_locals, resources

MONITORING = ROOT_MODULE / "monitoring.tf"
RESOURCES = resources(load_module(ROOT_MODULE))
FUNCTION = "scheduler-extender"
LOCALS = [
    "scheduler_deployment",
    "pending_pods_query",
    "source_failures_log_filter",
    "identity_proxy_log_filter",
]


@pytest.fixture(scope="module")
def rendered(terraform: str, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The locals above for the default function name, namespace and scheduler name."""
    return monitoring_locals(terraform, terraform_env, tmp_path_factory.mktemp("degradation") / "module", LOCALS)


# --- Cloud Logging's query language, the part the filters use --------------------------------------------------------

_CLAUSE = re.compile(r'^(NOT )?([\w.]+)(=|!=|>=|:)("(?:[^"\\]|\\.)*"|\*|\w+)$')
SEVERITIES = ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"]


def matches(log_filter: str, entry: dict[str, Any]) -> bool:
    """Whether ``entry`` passes ``log_filter``: clauses joined by AND, each ``field="value"``, ``field!=value``,
    ``field:*`` (present), ``severity>=LEVEL``, optionally negated with NOT; every clause must be one of these."""
    for clause in log_filter.split(" AND "):
        found = _CLAUSE.match(clause)
        assert found, f"a clause this check cannot read: {clause}"
        negated, path, operator, value = found.groups()
        actual: Any = entry
        for key in path.split("."):
            actual = actual.get(key) if isinstance(actual, dict) else None
        if operator == ":":
            holds = actual is not None
        elif operator == ">=":
            holds = SEVERITIES.index(str(actual)) >= SEVERITIES.index(value)
        else:
            expected = json.loads(value) if value.startswith('"') else value
            holds = (str(actual) == str(expected)) == (operator == "=")
        if holds == bool(negated):
            return False
    return True


def cloud_run_entry(record: logging.LogRecord) -> dict[str, Any]:
    """The entry Cloud Logging makes of a record the function logs on Cloud Run."""
    return {
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": FUNCTION}},
        "severity": record.levelname,
        "jsonPayload": getattr(record, "json_fields", None) or {},
    }


NODE_LIST_DOWN = """
failurePolicy: Ignore
nodeSource:
  kubernetes: {maxWait: 200ms}
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args: {rules: [{name: zone-a-only, nodeSelector: {matchLabels: {topology.kubernetes.io/zone: a}}}]}
"""


@pytest.fixture
def served_entries(client_factory, tmp_path, caplog) -> list[dict[str, Any]]:
    """Every entry of a served filter request while the Kubernetes API is down: nothing judged, every node passed."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(NODE_LIST_DOWN)
    env = {"KUBERNETES_API_URL": f"https://127.0.0.1:{free_port()}", "KUBERNETES_TOKEN": "t"}
    with caplog.at_level(logging.INFO, logger="extender"):
        client = client_factory(policy, **env)
        pod = {"metadata": {"name": "web", "namespace": "shop", "uid": "u-web"}, "spec": {}}
        answer = client.post("/filter", json={"Pod": pod, "Nodes": None, "NodeNames": ["node-a", "node-b"]})
    assert answer.get_json()["NodeNames"] == ["node-a", "node-b"]  # Ignore: passed unjudged
    return [cloud_run_entry(record) for record in caplog.records]


def by_rule_filter(event: str) -> str:
    """The by_rule metric's filter for one of its entries (its resource is checked against monitoring.tf below)."""
    resource = f'resource.type="cloud_run_revision" AND resource.labels.service_name="{FUNCTION}"'
    return f'{resource} AND jsonPayload.event="{event}"'


def test_the_skipped_metric_counts_each_plugin_and_rule_not_evaluated_in_a_served_request(served_entries) -> None:
    metric = RESOURCES[("google_logging_metric", "by_rule")]
    assert 'jsonPayload.event=\\"${each.value.event}\\"' in metric["filter"]
    counted = [entry for entry in served_entries if matches(by_rule_filter("extender.skipped"), entry)]
    [entry] = counted
    assert entry["severity"] == "WARNING"
    # Every label the metric extracts is in the entry: plugin, rule, code, and the verb and profile of every metric.
    labels = {"plugin", "rule", "code", "verb", "profile"}
    assert labels <= set(entry["jsonPayload"])
    assert (entry["jsonPayload"]["plugin"], entry["jsonPayload"]["code"], entry["jsonPayload"]["count"]) == (
        "NodeLabelPolicy",
        "Success",
        2,
    )


def test_the_source_failures_metric_counts_the_failed_node_list_and_nothing_else(rendered, served_entries) -> None:
    log_filter = rendered["source_failures_log_filter"]
    counted = [entry for entry in served_entries if matches(log_filter, entry)]
    assert counted, "the failed node list is a source failure"
    for entry in counted:
        payload = entry["jsonPayload"]
        assert (payload["source"], payload["event"]) == ("kubernetes", "extender.nodesource")
        assert payload["problem"].startswith("listing nodes failed: ") or "did not list the nodes" in payload["problem"]
    # Decisions, skipped entries: not source failures.
    assert all(entry["jsonPayload"].get("event") not in ("extender.decision", "extender.skipped") for entry in counted)
    metric = RESOURCES[("google_logging_metric", "source_failures")]
    assert metric["label_extractors"] == {
        "source": "EXTRACT(jsonPayload.source)",
        "event": "EXTRACT(jsonPayload.event)",
    }


def test_a_prometheus_answer_used_despite_an_oddity_is_no_source_failure(rendered) -> None:
    warning = {"event": "extender.nodeload", "source": "prometheus", "metric": "cpu", "problem": "x"}
    entry = {"resource": {"type": "cloud_run_revision", "labels": {"service_name": FUNCTION}}, "severity": "WARNING"}
    assert not matches(
        rendered["source_failures_log_filter"], {**entry, "jsonPayload": {**warning, "outcome": "answer used"}}
    )
    failed = {**warning, "outcome": "no answer: its nodes have no facts"}
    assert matches(rendered["source_failures_log_filter"], {**entry, "jsonPayload": failed})


def test_the_identity_proxy_metric_counts_the_proxy_s_own_json_lines(rendered, tmp_path) -> None:
    from tests.test_proxy import logged_entries, running_proxy

    log_path = tmp_path / "proxy.log"
    target = f"http://127.0.0.1:{free_port()}"
    import requests

    with running_proxy(target, tmp_path / "no-such-key.json", "--log-format", "json", log_path=log_path) as url:
        assert requests.get(f"{url}/identity-proxy/ready", timeout=10).status_code == 503
    resource = {
        "type": "k8s_container",
        "labels": {"namespace_name": "kube-system", "container_name": "identity-proxy"},
    }
    entries = [
        {"resource": resource, "severity": line.pop("severity"), "jsonPayload": line}
        for line in logged_entries(log_path)
    ]
    counted = [entry for entry in entries if matches(rendered["identity_proxy_log_filter"], entry)]
    assert counted and all(entry["jsonPayload"]["failure"] == "no_id_token" for entry in counted)
    assert {"failure", "status"} <= set(counted[-1]["jsonPayload"]) and counted[-1]["jsonPayload"]["status"] == 503
    # Its start-up line is no failure.
    assert any(not matches(rendered["identity_proxy_log_filter"], entry) for entry in entries)
    metric = RESOURCES[("google_logging_metric", "identity_proxy_failures")]
    assert metric["project"] == "${local.cluster_project_id}"
    assert metric["label_extractors"] == {
        "failure": "EXTRACT(jsonPayload.failure)",
        "status": "EXTRACT(jsonPayload.status)",
    }


def test_cluster_alerts_live_in_the_cluster_project() -> None:
    policy = RESOURCES[("google_monitoring_alert_policy", "cluster")]
    assert policy["project"] == "${local.cluster_project_id}"
    assert policy["for_each"] == "${local.cluster_alerts}"


# --- Pods not placed: kube state metrics, in promtool -----------------------------------------------------------------

DEPLOYMENT = 'kube_deployment_status_replicas_available{namespace="kube-system",deployment="extender-scheduler"}'
UNSCHEDULABLE = 'kube_pod_status_unschedulable{namespace="shop",pod="web-0",uid="u-1"}'
MINUTES = 30
SCHEDULER = {"namespace": "kube-system", "deployment": "extender-scheduler"}
PENDING_CASES: dict[str, tuple[str | None, str | None, list[dict[str, str]]]] = {
    # name: (available replicas, per minute, or None for no series; unschedulable, likewise; the alerts' labels)
    "scheduler_up_nothing_pending": ("2", None, []),
    "scheduler_down": ("0", None, [SCHEDULER]),
    "no_kube_state_metrics": (None, None, [SCHEDULER]),
    "a_pod_unschedulable_for_long": ("2", "1", [{"namespace": "shop"}]),
    "a_pod_unschedulable_briefly": ("2", "_x22 1x3 _x4", []),
}


@pytest.mark.parametrize("case", sorted(PENDING_CASES))
def test_pending_pods_alert(rendered: dict[str, str], tmp_path: Path, case: str) -> None:
    available, unschedulable, alerts = PENDING_CASES[case]
    series = []
    if available is not None:
        series.append({"series": DEPLOYMENT, "values": f"{available}x{MINUTES}"})
    if unschedulable is not None:
        values = unschedulable if " " in unschedulable else f"{unschedulable}x{MINUTES}"
        series.append({"series": UNSCHEDULABLE, "values": values})
    # Cloud Monitoring's duration for this condition is 2 windows (10 min by default): the rule's "for".
    rule = {"alert": "Pending", "expr": rendered["pending_pods_query"], "for": "10m"}
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{
                "eval_time": "29m",
                "alertname": "Pending",
                "exp_alerts": [{"exp_labels": labels} for labels in alerts],
            }],
        }],
    }  # fmt: skip
    failed = promtool_test_rules(tmp_path, tests, {"groups": [{"name": "extender", "rules": [rule]}]})
    assert not failed, f"{rendered['pending_pods_query']}\n{failed}"
