"""``check-policy --probe``: each NodeLoad query asked once of a real Prometheus (tests/prometheus.py), and what its
answer says: the series, the nodes matched and on which label, the labels present when none matched, the values'
range and the samples' age; exit 1 when a metric matches no node."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from extender.__main__ import main
from testkit.ports import free_port
from tests.prometheus import METRIC, write_nodeload_policy


def write_policy(directory: Path, url: str, **metric: Any) -> Path:
    cpu = {"name": "cpu", "query": METRIC, "nodeLabel": "node", **metric}
    args = {
        "prometheus": {"url": url, "auth": "none"},
        "metrics": [cpu],
        "filter": [{"metric": "cpu", "above": 80 if metric.get("unit") == "percent" else 0.8}],
    }
    return write_nodeload_policy(directory, args)


def write_nodes(directory: Path, *names: str) -> Path:
    path = directory / "nodes.json"
    items = [{"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}} for name in names]
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    return path


def probe(capsys, *argv: object) -> tuple[int, str, str]:
    code = main(["check-policy", "--probe", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def loads(prometheus, exporter):
    exporter.set({"a": 0.25, "b": 0.5})
    prometheus.wait_until(METRIC, lambda values: set(values) == {"a", "b"})
    return prometheus


def test_a_query_that_names_the_nodes_says_what_it_matched_the_values_and_their_age(loads, capsys, tmp_path):
    policy = write_policy(tmp_path, loads.url)
    code, out, err = probe(capsys, policy, "--nodes", write_nodes(tmp_path, "a", "b", "c"))
    assert code == 0, err
    assert f"probing {loads.url}" in out
    assert f"NodeLoad metric cpu: query `{METRIC}`, nodeLabel node" in out
    assert "2 series answered" in out
    assert "2 of 3 nodes matched on label node; not matched: c" in out
    assert "values 0.25 to 0.5 (the metric measures a ratio (0..1))" in out
    assert "samples " in out and " s old" in out


def test_a_wrong_node_label_exits_1_naming_the_labels_present_and_the_one_meant(loads, capsys, tmp_path):
    policy = write_policy(tmp_path, loads.url, nodeLabel="hostname")
    code, out, _ = probe(capsys, policy, "--nodes", write_nodes(tmp_path, "a", "b"))
    assert code == 1
    assert "0 of 2 nodes matched on label hostname" in out
    # Prometheus adds instance and job to what it scrapes.
    assert (
        f"the 2 series of query `{METRIC}` have no `hostname` label, so they name no node; labels present: "
        "instance, job, node: did you mean node? (it names 2 nodes)"
    ) in out


def test_a_label_whose_values_are_not_node_names_exits_1_saying_which_label_names_them(loads, capsys, tmp_path):
    policy = write_policy(tmp_path, loads.url, nodeLabel="instance")
    code, out, _ = probe(capsys, policy, "--nodes", write_nodes(tmp_path, "a", "b"))
    assert code == 1
    assert "0 of 2 nodes matched on label instance" in out
    assert (
        "on label instance, none of them a node's name; labels present: instance, job, node: did you mean node?"
    ) in out


def test_without_nodes_the_labels_alone_are_checked_and_a_guess_is_offered(loads, capsys, tmp_path):
    code, out, _ = probe(capsys, write_policy(tmp_path, loads.url))
    assert code == 0
    assert "2 nodes named on label node (not checked against the cluster's nodes" in out
    code, out, _ = probe(capsys, write_policy(tmp_path, loads.url, nodeLabel="hostname"))
    assert code == 1 and "labels present: instance, job, node: did you mean node?" in out


def test_without_nodes_the_kubernetes_api_s_nodes_are_matched(loads, apiserver, monkeypatch, capsys, tmp_path):
    node = {"metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}}
    apiserver.set_nodes([node, {**node, "metadata": {"name": "z"}}])
    for name, value in apiserver.environment().items():
        monkeypatch.setenv(name, value)
    code, out, _ = probe(capsys, write_policy(tmp_path, loads.url))
    assert code == 0 and "1 of 2 nodes matched on label node; not matched: z" in out


def test_a_query_answering_nothing_exits_1_saying_so(loads, capsys, tmp_path):
    policy = write_policy(tmp_path, loads.url, query="node_lod")
    code, out, _ = probe(capsys, policy, "--nodes", write_nodes(tmp_path, "a"))
    assert code == 1
    assert "0 series answered" in out
    assert "query `node_lod` returned no series (is the metric's name right" in out


def test_percent_answers_for_a_ratio_metric_are_pointed_out(loads, capsys, tmp_path):
    policy = write_policy(tmp_path, loads.url, query=f"{METRIC} * 100")
    code, out, _ = probe(capsys, policy, "--nodes", write_nodes(tmp_path, "a", "b"))
    assert code == 0  # the nodes match: the unit is a finding, not a failure
    assert "values 25 to 50 (the metric measures a ratio (0..1))" in out
    assert "2 of 2 values far outside a ratio (0..1), such as node a: 25: is the query answering another unit" in out
    code, out, _ = probe(capsys, write_policy(tmp_path, loads.url, query=f"{METRIC} * 100", unit="percent"))
    assert code == 0 and "values 25 to 50 (the metric measures a percentage (0..100))" in out
    assert "far outside" not in out


def test_an_unreachable_prometheus_exits_1_saying_why(capsys, tmp_path):
    code, out, _ = probe(capsys, write_policy(tmp_path, f"http://127.0.0.1:{free_port()}"))
    assert code == 1
    assert "NodeLoad metric cpu: query `node_load`, nodeLabel node\n      no answer: " in out


def test_nodes_is_only_read_with_probe(capsys, tmp_path):
    code = main(["check-policy", str(write_policy(tmp_path, "http://127.0.0.1:9")), "--nodes", "x.json"])
    _, err = capsys.readouterr()
    assert code == 2 and "--nodes is read by --probe only" in err


# --- the same answers served ------------------------------------------------------------------------------------------


def served_policy(directory: Path, url: str, filters: list[dict[str, Any]], **metric: Any) -> Path:
    path = write_policy(directory, url, **metric)
    document = json.loads(path.read_text())
    document["profiles"][0]["pluginConfig"][0]["args"].update(filter=filters, refreshInterval="1s")
    path.write_text(json.dumps(document))
    return path


def filter_call(client, namespace: str = "default") -> dict[str, Any]:
    pod = {"metadata": {"name": "p", "namespace": namespace, "uid": f"uid-{namespace}"}, "spec": {}}
    answer = client.post("/filter", json={"Pod": pod, "Nodes": None, "NodeNames": ["a", "b"]})
    assert answer.status_code == 200
    return answer.get_json()


def test_named_rules_are_the_rule_of_their_rejections(loads, client_factory, tmp_path, caplog):
    rules = [
        {"name": "batch-cpu", "metric": "cpu", "above": 0.3, "pods": {"namespaces": ["batch"]}},
        {"metric": "cpu", "above": 0.4},
    ]
    client = client_factory(served_policy(tmp_path, loads.url, rules))
    caplog.clear()
    assert filter_call(client, "batch")["FailedNodes"] == {"b": "NodeLoad rule 'batch-cpu': cpu load above 0.3"}
    assert filter_call(client)["FailedNodes"] == {"b": "NodeLoad rule 'cpu': load above 0.4"}
    entries = [record.json_fields for record in caplog.records if record.name == "extender.rejection"]
    assert [(entry["plugin"], entry["rule"], entry["count"]) for entry in entries] == [
        ("NodeLoad", "batch-cpu", 1),
        ("NodeLoad", "cpu", 1),
    ]


def test_a_served_empty_answer_warns_once_naming_the_query_and_every_node_s_reason_does(
    loads, client_factory, tmp_path, caplog
):
    policy = served_policy(tmp_path, loads.url, [{"metric": "cpu", "above": 0.9}], query="node_lod")
    client = client_factory(policy)
    caplog.clear()
    first = filter_call(client)
    time.sleep(1.1)  # past refreshInterval: asked again, not warned again within the minute
    filter_call(client)
    why = (
        "NodeLoad: metric cpu: query `node_lod` returned no series (is the metric's name "
        "right, and does Prometheus scrape it?)"
    )
    assert first["Error"] == f"{why} (rule 'cpu' not evaluated)"  # no node could be judged: the answer says why
    warnings = [record for record in caplog.records if record.name == "extender.nodeload"]
    assert [record.getMessage() for record in warnings] == [f"{why} (no node has facts)"]
    assert (warnings[0].json_fields["query"], warnings[0].json_fields["nodeLabel"]) == ("node_lod", "node")
