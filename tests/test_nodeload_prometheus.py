"""NodeLoad against a real Prometheus (tests/prometheus.py), through the function's real HTTP handling.

The exporter serves per-node values that the tests change; Prometheus scrapes
it; the function queries Prometheus over HTTP as it would in production. Each
case is checked in what kube-scheduler gets (the filter and prioritize
answers) and in what the decision log and WARNINGs say.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import ROOT
from tests.prometheus import METRIC, PrometheusServer, refreshes_landed

POD = {"metadata": {"name": "web-1", "namespace": "default", "uid": "uid-web-1"}, "spec": {}}
CPU = {"name": "cpu", "query": METRIC, "nodeLabel": "node"}
REFRESH = 1.0
OVER = "NodeLoad rule 'cpu': load above 0.9"


def write_policy(
    directory: Path,
    url: str,
    *,
    failure: str = "Fail",
    enforcement: str = "Enforce",
    full_nodes: bool = False,
    max_age: str = "1m",
    score: dict[str, Any] | None = None,
) -> Path:
    args = {
        "prometheus": {"url": url, "auth": "none"},
        "metrics": [CPU],
        "refreshInterval": f"{REFRESH:g}s",
        "maxAge": max_age,
        "filter": [{"metric": "cpu", "above": 0.9}],
        "score": score or {"metric": "cpu", "strategy": "LeastLoaded"},
    }
    entry = {"name": "NodeLoad", "failurePolicy": failure, "enforcement": enforcement}
    document = {
        "nodeCacheCapable": not full_nodes,
        "profiles": [
            {
                "name": "default",
                "plugins": {"filter": {"enabled": [entry]}, "score": {"enabled": [{**entry, "weight": 1}]}},
                "pluginConfig": [{"name": "NodeLoad", "args": args}],
            }
        ],
    }
    path = directory / "policy.yaml"
    path.write_text(json.dumps(document))
    return path


def node_object(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "status": {}}


def extender_args(names: list[str], full_nodes: bool) -> dict[str, Any]:
    if full_nodes:
        return {
            "Pod": POD,
            "Nodes": {"metadata": {}, "items": [node_object(name) for name in names]},
            "NodeNames": None,
        }
    return {"Pod": POD, "Nodes": None, "NodeNames": names}


def filtered(client, names: list[str], full_nodes: bool = False) -> dict[str, Any]:
    answer = client.post("/filter", json=extender_args(names, full_nodes))
    assert answer.status_code == 200
    body = answer.get_json()
    kept = [node["metadata"]["name"] for node in body["Nodes"]["items"]] if full_nodes else body["NodeNames"]
    return {
        "kept": kept,
        "failed": body["FailedNodes"],
        "unresolvable": body["FailedAndUnresolvableNodes"],
        "error": body["Error"],
    }


def prioritized(client, names: list[str], full_nodes: bool = False) -> tuple[dict[str, int], str | None]:
    answer = client.post("/prioritize", json=extender_args(names, full_nodes))
    assert answer.status_code == 200
    return {entry["Host"]: entry["Score"] for entry in answer.get_json()}, answer.headers.get("X-Extender-Error")


def decisions(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    entries = [record.json_fields for record in caplog.records if record.name == "extender.decision"]
    return [entry for entry in entries if entry["event"] == "extender.decision"]


def refresh_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "extender.nodeload"]


def after_refresh_interval(client: Any) -> None:
    """Past refreshInterval, with the refresh it makes due landed: a request starts it on a thread of its own (and
    judges on the answers at hand), the requests after it judge on what it brought."""
    time.sleep(REFRESH + 0.1)
    filtered(client, ["a"])
    refreshes_landed()


@pytest.mark.parametrize("full_nodes", [False, True], ids=["node names", "full nodes"])
def test_nodes_over_the_threshold_are_unschedulable_and_the_least_loaded_score_best(
    prometheus, exporter, client_factory, tmp_path, full_nodes
):
    exporter.set({"at": 0.9, "over": 0.9000001, "busy": 0.95, "idle": 0.1, "half": 0.5})
    prometheus.wait_until(METRIC, lambda values: len(values) == 5)
    client = client_factory(write_policy(tmp_path, prometheus.url, full_nodes=full_nodes))
    names = ["at", "over", "busy", "idle", "half"]
    verdict = filtered(client, names, full_nodes)
    # At the threshold passes: only a load above it is rejected, and as resolvable (load changes).
    assert verdict == {
        "kept": ["at", "idle", "half"],
        "failed": {"over": OVER, "busy": OVER},
        "unresolvable": {},
        "error": "",
    }
    scores, error = prioritized(client, verdict["kept"], full_nodes)
    assert error is None and scores == {"at": 1, "idle": 9, "half": 5}


def test_target_load_prefers_nodes_near_the_target(prometheus, exporter, client_factory, tmp_path):
    exporter.set({"idle": 0.0, "near": 0.55, "target": 0.6, "busy": 0.85})
    prometheus.wait_until(METRIC, lambda values: len(values) == 4)
    policy = write_policy(tmp_path, prometheus.url, score={"metric": "cpu", "strategy": "TargetLoad", "target": 0.6})
    scores, _ = prioritized(client_factory(policy), ["idle", "near", "target", "busy"])
    # Trimaran's TargetLoadPacking: 100 at the target, 60 when idle (100 x target), 23 at 0.85 (60 x 15 / 40).
    assert scores == {"idle": 6, "near": 10, "target": 10, "busy": 2}


@pytest.mark.parametrize("failure", ["Fail", "Ignore"])
def test_a_node_that_stops_reporting_has_no_facts_and_the_failure_policy_decides(
    prometheus, exporter, client_factory, tmp_path, caplog, failure
):
    exporter.set({"a": 0.2, "b": 0.3})
    prometheus.wait_until(METRIC, lambda values: len(values) == 2)
    client = client_factory(write_policy(tmp_path, prometheus.url, failure=failure))
    assert filtered(client, ["a", "b"])["kept"] == ["a", "b"]
    exporter.set({"a": 0.2})  # b's exporter is gone: Prometheus marks its series stale at the next scrape
    prometheus.wait_until(METRIC, lambda values: set(values) == {"a"})
    after_refresh_interval(client)
    caplog.clear()
    verdict = filtered(client, ["a", "b"])
    why = (
        "NodeLoad: no series of Prometheus' cpu query `node_load` has label node set to this node's name (they name "
        "1 node, such as a) (rule 'cpu' not evaluated)"
    )
    if failure == "Fail":
        assert verdict["kept"] == ["a"]
        assert verdict["failed"] == {"b": f"plugin NodeLoad could not judge the node (failurePolicy Fail): {why}"}
    else:
        assert verdict["kept"] == ["a", "b"] and verdict["failed"] == {}
    [entry] = decisions(caplog)
    [skipped] = entry["skipped"]["reasons"]
    assert skipped["plugin"] == "NodeLoad" and skipped["nodes"] == ["b"] and why in skipped["reason"]
    # The rule not evaluated, for the skipped metric: its entry names it.
    [rule] = [record.json_fields for record in caplog.records if record.name == "extender.skipped"]
    code = "Unschedulable" if failure == "Fail" else "Success"
    assert (rule["plugin"], rule["rule"], rule["code"], rule["count"]) == ("NodeLoad", "cpu", code, 1)
    assert entry["nodeFacts"]["NodeLoad"]["b"] == {"cpu": {"value": None, "ageSeconds": None}}


def test_while_prometheus_is_down_the_last_answer_serves_until_max_age_then_nodes_have_no_facts(
    exporter, client_factory, tmp_path, caplog, request
):
    exporter.set({"a": 0.2, "b": 0.95})
    prometheus = PrometheusServer(tmp_path / "prometheus", [exporter.target])  # of its own: it goes down
    prometheus.start()
    request.addfinalizer(prometheus.stop)
    prometheus.wait_until(METRIC, lambda values: len(values) == 2)
    client = client_factory(write_policy(tmp_path, prometheus.url, max_age="3s"))
    answered_at = time.time()
    assert filtered(client, ["a", "b"])["kept"] == ["a"]
    prometheus.stop()
    caplog.clear()
    after_refresh_interval(client)
    # The refresh fails (one WARNING), the answer of a second ago is used: the same verdicts.
    assert filtered(client, ["a", "b"]) == {"kept": ["a"], "failed": {"b": OVER}, "unresolvable": {}, "error": ""}
    [warning] = refresh_warnings(caplog)
    assert "metric cpu: cannot reach" in warning and "the previous one is used until" in warning
    time.sleep(max(0.0, answered_at + 3.2 - time.time()))
    # Every node's sample is older than maxAge: not one node can be judged, so the answer is that Error (Fail).
    verdict = filtered(client, ["a", "b"])
    assert verdict["kept"] == [] and "NodeLoad: the node's cpu sample is older than maxAge (3 s)" in verdict["error"]
    assert "its last refresh failed: cannot reach" in verdict["error"]
    scores, error = prioritized(client, ["a", "b"])
    assert scores == {"a": 0, "b": 0} and "older than maxAge" in error
    prometheus.start()  # back: judged again once an answer comes
    prometheus.wait_until(METRIC, lambda values: len(values) == 2)
    after_refresh_interval(client)
    assert filtered(client, ["a", "b"])["kept"] == ["a"]


def test_when_prometheus_is_down_at_start_nothing_is_judged_until_it_answers(
    exporter, client_factory, tmp_path, caplog
):
    exporter.set({"a": 0.2, "b": 0.3})
    prometheus = PrometheusServer(tmp_path / "prometheus", [exporter.target])  # not started yet
    client = client_factory(write_policy(tmp_path, prometheus.url, failure="Ignore"))
    caplog.clear()
    verdict = filtered(client, ["a", "b"])
    assert verdict["kept"] == ["a", "b"]  # Ignore: passed, each noted as not judged
    [entry] = decisions(caplog)
    [skipped] = entry["skipped"]["reasons"]
    assert (
        skipped["count"] == 2
        and "no cpu answer from Prometheus yet (its last refresh failed: cannot reach" in skipped["reason"]
    )
    assert len(refresh_warnings(caplog)) == 1
    prometheus.start()
    try:
        prometheus.wait_until(METRIC, lambda values: len(values) == 2)
        after_refresh_interval(client)
        caplog.clear()
        assert filtered(client, ["a", "b"])["kept"] == ["a", "b"]
        assert "skipped" not in decisions(caplog)[0] and refresh_warnings(caplog) == []
    finally:
        prometheus.stop()


def test_two_samples_for_one_node_the_highest_counts_and_a_warning_says_so(
    prometheus, exporter, client_factory, tmp_path, caplog
):
    exporter.set_samples(
        METRIC, [({"node": "a", "cpu": "0"}, 0.2), ({"node": "a", "cpu": "1"}, 0.95), ({"node": "b"}, 0.5)]
    )
    prometheus.wait_until(METRIC, lambda values: len(prometheus.query(METRIC)["data"]["result"]) == 3)
    client = client_factory(write_policy(tmp_path, prometheus.url))
    caplog.clear()
    assert filtered(client, ["a", "b"]) == {"kept": ["b"], "failed": {"a": OVER}, "unresolvable": {}, "error": ""}
    [warning] = refresh_warnings(caplog)
    assert "metric cpu: 1 node with several series, the highest value counts: a (answer used)" in warning


def test_nan_and_infinite_values_are_no_facts(prometheus, exporter, client_factory, tmp_path, caplog):
    exporter.set({"nan": math.nan, "inf": math.inf, "ok": 0.3})
    prometheus.wait_until(METRIC, lambda values: len(values) == 3)
    client = client_factory(write_policy(tmp_path, prometheus.url))
    caplog.clear()
    verdict = filtered(client, ["nan", "inf", "ok"])
    why = (
        "plugin NodeLoad could not judge the node (failurePolicy Fail): "
        "NodeLoad: the node's cpu sample is not a finite number (rule 'cpu' not evaluated)"
    )
    assert verdict["kept"] == ["ok"] and verdict["failed"] == {"nan": why, "inf": why}
    [warning] = refresh_warnings(caplog)
    assert (
        "2 nodes with no value but NaN or infinity, so no facts: " in warning and "nan" in warning and "inf" in warning
    )
    facts = decisions(caplog)[0]["nodeFacts"]["NodeLoad"]
    assert facts["nan"]["cpu"]["value"] == "NaN" and facts["inf"]["cpu"]["value"] == "+Inf"


@pytest.mark.parametrize("failure", ["Fail", "Ignore"])
def test_a_node_the_metrics_do_not_know(prometheus, exporter, client_factory, tmp_path, failure):
    exporter.set({"a": 0.4})
    prometheus.wait_until(METRIC, lambda values: len(values) == 1)
    client = client_factory(write_policy(tmp_path, prometheus.url, failure=failure))
    verdict = filtered(client, ["a", "ghost"])
    scores, error = prioritized(client, ["a", "ghost"])
    assert error is None
    if failure == "Fail":
        assert verdict["kept"] == ["a"] and "has label node set to this node's name" in verdict["failed"]["ghost"]
        assert scores == {"a": 6, "ghost": 0}  # scored 0 for the plugin: below nodes known to fit
    else:
        assert verdict["kept"] == ["a", "ghost"]
        assert scores == {"a": 6, "ghost": 0}  # the plugin left out of its score, and no other plugin scored it


def test_audit_mode_rejects_nothing_and_says_what_it_would_do(prometheus, exporter, client_factory, tmp_path, caplog):
    exporter.set({"busy": 0.95, "idle": 0.1})
    prometheus.wait_until(METRIC, lambda values: len(values) == 2)
    client = client_factory(write_policy(tmp_path, prometheus.url, enforcement="Audit"))
    caplog.clear()
    assert filtered(client, ["busy", "idle"])["kept"] == ["busy", "idle"]
    scores, _ = prioritized(client, ["busy", "idle"])
    assert scores == {"busy": 0, "idle": 0}  # audited scores count for nothing
    filter_entry, prioritize_entry = decisions(caplog)
    [would] = filter_entry["wouldReject"]["reasons"]
    assert (would["plugin"], would["rule"], would["reason"], would["nodes"]) == ("NodeLoad", "cpu", OVER, ["busy"])
    assert filter_entry["nodeFacts"]["NodeLoad"]["busy"]["cpu"]["value"] == 0.95
    assert prioritize_entry["audited"] == ["NodeLoad"]
    assert {entry["node"]: entry["plugins"]["NodeLoad"] for entry in prioritize_entry["scores"]} == {
        "busy": 5,
        "idle": 90,
    }


def test_the_decision_log_shows_each_named_node_s_value_and_sample_age(
    prometheus, exporter, client_factory, tmp_path, caplog
):
    exporter.set({"busy": 0.95, "idle": 0.1})
    prometheus.wait_until(METRIC, lambda values: len(values) == 2)
    client = client_factory(write_policy(tmp_path, prometheus.url))
    filtered(client, ["busy", "idle"])
    time.sleep(0.3)  # the same answer, judged later: older
    caplog.clear()
    filtered(client, ["busy", "idle"])
    prioritized(client, ["idle"])
    filter_entry, prioritize_entry = decisions(caplog)
    busy = filter_entry["nodeFacts"]["NodeLoad"]["busy"]["cpu"]
    assert busy["value"] == 0.95 and 0.3 <= busy["ageSeconds"] < REFRESH + 1
    assert prioritize_entry["nodeFacts"]["NodeLoad"]["idle"]["cpu"]["value"] == 0.1


def explain_command(pod: Path, policy: Path, names: str) -> list[str]:
    """``python -m extender explain`` of ``pod`` on the node ``names`` (comma-separated) under ``policy``."""
    return [sys.executable, "-m", "extender", "explain", str(pod), "--node-names", names, "--policy", str(policy)]


def test_explain_runs_offline_on_a_saved_answer(prometheus, exporter, tmp_path):
    exporter.set({"busy": 0.95, "idle": 0.1, "half": 0.5})
    prometheus.wait_until(METRIC, lambda values: len(values) == 3)
    saved = tmp_path / "cpu.json"
    saved.write_bytes(requests.get(f"{prometheus.url}/api/v1/query", params={"query": METRIC}, timeout=5).content)
    policy = write_policy(tmp_path, "http://127.0.0.1:9")  # nothing listens there: the saved answer is all it reads
    pod = tmp_path / "pod.yaml"
    pod.write_text(json.dumps(POD))
    command = explain_command(pod, policy, "busy,idle,half,ghost")
    shown = subprocess.run(
        [*command, "--metrics", f"cpu={saved}", "--json"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0, shown.stderr
    rows = {row["name"]: row for row in json.loads(shown.stdout)["nodes"]}
    assert rows["busy"]["answer"] == "FailedNodes" and rows["busy"]["reason"] == OVER
    busy = rows["busy"]["measured"]["NodeLoad"]["cpu"]
    assert (busy["value"], busy["ageSeconds"], busy["predicted"]) == (0.95, 0.0, 0.95)
    assert rows["idle"]["answer"] == "kept" and rows["idle"]["scores"] == {"NodeLoad": 90}
    assert rows["ghost"]["measured"]["NodeLoad"] == {"cpu": {"value": None, "ageSeconds": None}}
    table = subprocess.run([*command, "--metrics", str(saved)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert table.returncode == 0, table.stderr
    busy = next(line for line in table.stdout.splitlines() if line.startswith("busy "))
    assert "cpu 0.95 (0 s old)" in busy and "MEASURED" in table.stdout


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (["memory=FILE"], "--metrics: no answer for NodeLoad's cpu (give cpu=FILE)"),
        (["cpu=FILE", "disk=FILE"], "--metrics: NodeLoad has no metric disk (it queries cpu)"),
        (["cpu=NOTJSON"], "--metrics: not a usable Prometheus /api/v1/query answer: the answer is not JSON"),
        (["cpu=MISSING"], "MISSING: cannot read: No such file or directory"),
    ],
)
def test_explain_names_what_is_wrong_with_saved_answers(tmp_path, given, problem):
    saved, not_json = tmp_path / "cpu.json", tmp_path / "bad.json"
    saved.write_text(json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}))
    not_json.write_text("<html>")
    pod = tmp_path / "pod.yaml"
    pod.write_text(json.dumps(POD))
    policy = write_policy(tmp_path, "http://127.0.0.1:9")
    files = {"FILE": str(saved), "NOTJSON": str(not_json), "MISSING": str(tmp_path / "MISSING")}
    arguments = [item for spec in given for item in ("--metrics", spec.split("=")[0] + "=" + files[spec.split("=")[1]])]
    shown = subprocess.run(
        [*explain_command(pod, policy, "a"), *arguments], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert shown.returncode == 1 and problem.replace("MISSING", files["MISSING"]) in shown.stderr, shown.stderr


def test_refresh_warnings_name_the_metric_and_never_a_credential(
    prometheus, exporter, client_factory, tmp_path, caplog
):
    exporter.set({"a": 0.2})
    prometheus.wait_until(METRIC, lambda values: len(values) == 1)
    policy = write_policy(tmp_path, prometheus.url)
    text = policy.read_text().replace(json.dumps(METRIC), json.dumps("sum(rate(node_load[1m]) by (node)"))  # unbalanced
    policy.write_text(text)
    client = client_factory(policy)
    caplog.set_level(logging.WARNING)
    verdict = filtered(client, ["a"])
    assert "NodeLoad: no cpu answer from Prometheus yet (its last refresh failed:" in verdict["error"]
    [record] = [record for record in caplog.records if record.name == "extender.nodeload"]
    assert record.json_fields["metric"] == "cpu" and "400 Bad Request: bad_data: " in record.json_fields["problem"]
    # What the source_failures metric counts by: the source, and that no answer was used.
    assert record.json_fields["source"] == "prometheus"
    assert record.json_fields["outcome"] == "no answer: its nodes have no facts"


def test_refresh_warnings_name_cloud_monitoring_as_their_source() -> None:
    from extender.plugins.nodeload.args import GMP_URL
    from extender.plugins.nodeload.loads import source_of
    from extender.plugins.nodeload.prometheus import Prometheus

    assert source_of(Prometheus(GMP_URL.format(project="acme"))) == "cloud-monitoring"
    assert source_of(Prometheus("http://prometheus.monitoring.svc:9090")) == "prometheus"
    assert source_of(Prometheus("https://monitoring.googleapis.com.example.org/v1")) == "prometheus"
