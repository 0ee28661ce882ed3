"""NodeLoad's units (a threshold no load can reach is refused at load; percent metrics judged in their unit), named
filter rules, and answers that name no node (empty, the wrong nodeLabel), judged on saved answers; the served path
and ``check-policy --probe`` against a real Prometheus are in tests/test_nodeload_probe.py."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from extender.__main__ import main
from extender.decision_log import rejection_entries
from extender.framework.types import Node
from extender.kube.bound_pods import Bindings, by_node
from extender.plugins import NodeLoad
from extender.plugins.nodeload.args import Metric
from extender.plugins.nodeload.loads import Loads, LoadView
from extender.plugins.nodeload.units import PERCENT
from tests.test_nodeload_inflight import FOUR_CPU, NOW, answer, bound, judged, plugin, pod
from tests.test_nodeload_inflight import judged_at_the_samples_time as judged_at_the_samples_time
from tests.test_plugin_nodeload import CPU, URL, problems


def rule(above: Any, **metric: Any) -> dict[str, Any]:
    return {"prometheus": {"url": URL}, "metrics": [{**CPU, **metric}], "filter": [{"metric": "cpu", "above": above}]}


# --- units: checked at load ------------------------------------------------------------------------------------------


def test_a_percentage_written_for_a_ratio_is_refused_saying_the_ratio():
    assert problems(rule(80)) == [
        (
            "args.filter[0].above: 80 is a percentage; a ratio is 0.8: metric cpu measures a ratio (0..1), so write "
            "above: 0.8 (or give the metric unit: percent if its query answers percent)"
        )
    ]


@pytest.mark.parametrize("above", [-0.1, 1.5, 250])
def test_a_threshold_outside_the_unit_s_range_is_refused(above):
    assert problems(rule(above)) == [
        (
            f"args.filter[0].above: {above:g} is outside metric cpu's range: it measures a ratio (0..1), so above must "
            "be between 0 and 1 (both included)"
        )
    ]


def test_a_percentage_as_a_string_is_refused_saying_what_it_is_as_a_ratio():
    assert problems(rule("80%")) == [
        (
            "args.filter[0].above: must be a number, not a string: 80 % is 0.8 as a ratio (the unit of a metric unless "
            "it says otherwise), or 80 for a metric with unit: percent"
        )
    ]
    assert problems(rule("0.8"))[0].startswith("args.filter[0].above: must be a number (a load such as 0.9)")


def test_a_percent_metric_takes_percentages_and_a_target_in_its_unit():
    assert problems(rule(150, unit="percent")) == [
        (
            "args.filter[0].above: 150 is outside metric cpu's range: it measures a percentage (0..100), so above must "
            "be between 0 and 100 (both included)"
        )
    ]
    args = {**rule(80, unit="percent"), "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 60}}
    config = plugin(args).filters[0].config
    assert config.metrics[0].unit is PERCENT and config.rules[0].above == 80 and config.score.target == 60
    assert problems({**args, "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 100}}) == [
        (
            "args.score.target: 100 is outside metric cpu's range: it measures a percentage (0..100), so target must "
            "be between 0 and 100 (both excluded)"
        )
    ]


def test_a_ratio_target_written_as_a_percentage_is_refused_saying_the_ratio():
    args = {**rule(0.9), "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 60}}
    assert problems(args)[0].startswith("args.score.target: 60 is a percentage; a ratio is 0.6")


def test_a_unit_of_its_own_needs_its_range_and_measures_no_resource():
    disk = {"name": "iowait", "query": "q", "nodeLabel": "node", "unit": "seconds"}
    args = {"prometheus": {"url": URL}, "metrics": [disk], "filter": [{"metric": "iowait", "above": 5}]}
    assert problems(args) == [
        (
            "args.metrics[0].range: unit seconds needs its range: two numbers, its low and high ends, such as "
            "range: [0, 64]"
        )
    ]
    assert problems({**args, "metrics": [{**disk, "range": [10, 0]}]}) == [
        (
            "args.metrics[0].range: the range's low end must be below its high end: two numbers, its low and high "
            "ends, such as range: [0, 64]"
        )
    ]
    assert problems({**args, "metrics": [{**disk, "range": [0, 2]}]}) == [
        (
            "args.filter[0].above: 5 is outside metric iowait's range: it measures seconds (0..2), so above must be "
            "between 0 and 2 (both included)"
        )
    ]
    assert problems({**args, "metrics": [{**disk, "range": [0, 10], "resource": "cpu"}]}) == [
        (
            "args.metrics[0].unit: a cpu metric is a share of the node's allocatable, in unit ratio or percent (set "
            "resource: none for a metric of another unit)"
        )
    ]
    assert problems(rule(0.8, range=[0, 1])) == [
        "args.metrics[0].range: a ratio has its own range (a ratio (0..1)): drop range"
    ]
    profile = plugin({"metrics": [{**disk, "range": [0, 10]}], "filter": [{"metric": "iowait", "above": 5}]})
    filtered, scored = judged_on(profile, "iowait", {"a": 6.0, "b": 2.5})
    assert (
        filtered.feasible == ["b"] and filtered.rejected["a"].reason == "NodeLoad rule 'iowait': load above 5 seconds"
    )
    assert scored.by_plugin["NodeLoad"] == {"a": 40, "b": 75}  # LeastLoaded on the share of the range: 2.5 of 10


def test_the_presets_measure_ratios():
    assert problems(
        {"preset": "node-exporter", "prometheus": {"url": URL}, "filter": [{"metric": "cpu", "above": 80}]}
    )[0].startswith("args.filter[0].above: 80 is a percentage; a ratio is 0.8")


def test_check_policy_refuses_a_percentage_on_a_ratio(tmp_path, capsys):
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "profiles:\n- name: default\n  plugins: {filter: {enabled: [{name: NodeLoad}]}}\n  pluginConfig:\n"
        f"  - name: NodeLoad\n    args: {orjson.dumps(rule(80)).decode()}\n"
    )
    assert main(["check-policy", str(policy)]) == 1
    _, err = capsys.readouterr()
    assert "filter[0].above: 80 is a percentage; a ratio is 0.8" in err


# --- units: judged in the metric's unit ------------------------------------------------------------------------------


def judged_on(profile: Any, metric: str, values: dict[str, float], pods: list[Any] | None = None) -> Any:
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    bindings = Bindings(by_node({p.uid: p for p in pods or []}))
    node_load.judge_offline({metric: answer(values)}, bindings, FOUR_CPU)
    names = [Node(name) for name in values]
    return profile.filter(pod(cpu="400m"), names), profile.prioritize(pod(cpu="400m"), names)


def test_a_percent_metric_adds_the_pod_and_in_flight_pods_in_percent_and_scores_as_the_ratio_would():
    loads = {"a": 0.85, "b": 0.5, "c": 0.2}
    pods = [bound("x", "b", NOW + 5)]  # 400m of 4 CPU in flight on b
    ratio = plugin({"filter": [{"metric": "cpu", "above": 0.9}]})
    percent = plugin(
        {
            "metrics": [{"name": "cpu", "query": "q", "nodeLabel": "node", "unit": "percent"}],
            "filter": [{"metric": "cpu", "above": 90}],
        }
    )
    by_ratio, ratio_scores = judged(ratio, loads, pods)
    by_percent, percent_scores = judged_on(percent, "cpu", {node: value * 100 for node, value in loads.items()}, pods)
    assert by_percent.feasible == by_ratio.feasible == ["b", "c"]
    assert by_percent.rejected["a"].reason == "NodeLoad rule 'cpu': load above 90%"
    facts = by_percent.observed["NodeLoad"]("b")["cpu"]
    # 50 % measured + 10 % in flight + 10 % the pod: the shares of allocatable in the metric's unit.
    assert (facts["value"], facts["podShare"], facts["inFlight"], facts["predicted"]) == (
        50.0,
        10.0,
        {"pods": 1, "share": 10.0},
        70.0,
    )
    assert percent_scores.by_plugin == ratio_scores.by_plugin


def test_target_load_and_risk_balancing_score_a_percent_metric_as_its_ratio():
    target = {"strategy": "TargetLoad", "metric": "cpu"}
    ratio = plugin({"score": {**target, "target": 0.6}})
    percent = plugin(
        {
            "metrics": [{"name": "cpu", "query": "q", "nodeLabel": "node", "unit": "percent"}],
            "score": {**target, "target": 60},
        }
    )
    loads = {"a": 0.3, "b": 0.6, "c": 0.9}
    assert (
        judged(ratio, loads, [])[1].by_plugin
        == judged_on(percent, "cpu", {k: v * 100 for k, v in loads.items()})[1].by_plugin
    )
    risk = {"score": {"strategy": "RiskBalancing"}}
    percent_metric = [{"name": "cpu", "query": "q", "nodeLabel": "node", "unit": "percent"}]
    as_ratio = judged(
        plugin(risk), loads, [], **{"cpu:mean": answer(loads), "cpu:stddev": answer(dict.fromkeys(loads, 0.1))}
    )
    as_percent_profile = plugin({**risk, "metrics": percent_metric})
    node_load = next(p for p in as_percent_profile.scores if isinstance(p.plugin, NodeLoad)).plugin
    hundred = {k: v * 100 for k, v in loads.items()}
    node_load.judge_offline(
        {"cpu": answer(hundred), "cpu:mean": answer(hundred), "cpu:stddev": answer(dict.fromkeys(loads, 10.0))},
        None,
        FOUR_CPU,
    )
    scored = as_percent_profile.prioritize(pod(cpu="400m"), [Node(name) for name in loads])
    assert scored.by_plugin == as_ratio[1].by_plugin


def test_answers_far_outside_a_ratio_are_a_warning_naming_the_query_and_a_sample(caplog):
    profile = plugin({"filter": [{"metric": "cpu", "above": 0.8}]})
    with caplog.at_level(logging.WARNING, "extender.nodeload"):
        judged(profile, {"a": 35.0, "b": 70.0, "c": 91.0}, [])
    [warning] = [record.getMessage() for record in caplog.records if record.name == "extender.nodeload"]
    assert warning == (
        "NodeLoad: metric cpu: query `q` answers values far outside the metric's unit, a ratio (0..1), such as node "
        "a: 35 (3 of 3 nodes); is it answering another unit (unit: percent for 0..100)? (answer used: its "
        "values are judged as they are)"
    )


# --- named rules ------------------------------------------------------------------------------------------------------


def test_a_named_rule_is_named_in_its_reason_and_counted_by_its_name():
    profile = plugin(
        {
            "filter": [
                {"name": "batch-cpu", "metric": "cpu", "above": 0.6, "pods": {"namespaces": ["batch"]}},
                {"metric": "cpu", "above": 0.8},
            ]
        }
    )
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    assert [rule.name for rule in node_load.config.rules] == ["batch-cpu", "cpu"]
    filtered, _ = judged(profile, {"a": 0.85, "b": 0.65, "c": 0.2}, [], the_pod=pod(namespace="batch"))
    assert filtered.rejected["b"].reason == "NodeLoad rule 'batch-cpu': cpu load above 0.6"
    assert filtered.rejected["a"].reason == "NodeLoad rule 'batch-cpu': cpu load above 0.6"  # the first rule counts
    filtered, _ = judged(profile, {"a": 0.85, "b": 0.65, "c": 0.2}, [])
    assert filtered.rejected["a"].reason == "NodeLoad rule 'cpu': load above 0.8"
    fields = {
        "verb": "filter",
        "profile": "default",
        "pod": {"namespace": "batch", "name": "p"},
        "rejected": {"rules": [{"plugin": "NodeLoad", "rule": "batch-cpu", "count": 2}]},
    }
    assert [entry["rule"] for entry in rejection_entries(fields)] == ["batch-cpu"]


def test_rules_sharing_a_name_are_a_note_and_a_name_is_checked():
    profile = plugin(
        {
            "filter": [
                {"metric": "cpu", "above": 0.6, "pods": {"namespaces": ["batch"]}},
                {"metric": "cpu", "above": 0.8},
            ]
        }
    )
    [note] = [n for n in profile.filters[0].notes() if "named" in n]
    assert note == (
        "NodeLoad: 2 filter rules are named cpu: their rejections are counted and logged as one rule; give each a "
        "name (name: batch-cpu) to tell them apart"
    )
    bad = {**rule(0.8), "filter": [{"name": "Batch CPU!", "metric": "cpu", "above": 0.8}]}
    assert problems(bad)[0].startswith("args.filter[0].name: must be a short name such as batch-cpu")


# --- answers that name no node --------------------------------------------------------------------------------------


class Answering:
    """A querier answering ``body`` to every query, counting them."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.asked = 0

    def query(self, promql: str, seconds: float) -> bytes:
        self.asked += 1
        return self.body


def vector(*series: dict[str, str]) -> bytes:
    result = [{"metric": labels, "value": [NOW, "0.5"]} for labels in series]
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "extender.nodeload"]


def test_an_empty_answer_is_one_warning_a_minute_naming_the_query_and_label_and_every_node_s_reason(caplog):
    metric = Metric("cpu", "node_lod", "node")
    querier = Answering(vector())
    loads = Loads([metric], querier, refresh_interval=1.0, query_seconds=1.0, keep=False)
    with caplog.at_level(logging.WARNING, "extender.nodeload"):
        snapshots = [loads.snapshot(NOW) for _ in range(3)]
    assert querier.asked == 3
    [warning] = warnings_of(caplog)
    assert warning.getMessage() == (
        "NodeLoad: metric cpu: query `node_lod` returned no series (is the metric's name "
        "right, and does Prometheus scrape it?) (no node has facts)"
    )
    assert (warning.json_fields["query"], warning.json_fields["nodeLabel"]) == ("node_lod", "node")
    view = LoadView(snapshots[-1], NOW, 60.0)
    assert view.unknown("cpu", ["a", "b"]) == dict.fromkeys(
        ["a", "b"],
        "NodeLoad: metric cpu: query `node_lod` returned no series (is the metric's name "
        "right, and does Prometheus scrape it?)",
    )


def test_a_wrong_node_label_says_which_labels_the_series_have_and_which_is_meant(caplog):
    metric = Metric("cpu", "node_load", "instance")
    loads = Loads(
        [metric],
        Answering(vector({"node": "a", "job": "n"}, {"node": "b", "job": "n"}, {"node": "c", "job": "n"})),
        refresh_interval=1.0,
        query_seconds=1.0,
        keep=False,
    )
    with caplog.at_level(logging.WARNING, "extender.nodeload"):
        snapshot = loads.snapshot(NOW)
    [warning] = warnings_of(caplog)
    problem = (
        "the 3 series of query `node_load` have no `instance` label, so they name no node; labels present: job, "
        "node: did you mean node?"
    )
    assert warning.getMessage() == f"NodeLoad: metric cpu: {problem} (no node has facts)"
    assert LoadView(snapshot, NOW, 60.0).unknown("cpu", ["a"]) == {"a": f"NodeLoad: metric cpu: {problem}"}


def test_a_node_missing_from_an_answer_that_names_others_is_said_with_the_label():
    loads = Loads(
        [Metric("cpu", "node_load", "node")],
        Answering(vector({"node": "a"}, {"job": "x"})),
        refresh_interval=1.0,
        query_seconds=1.0,
        keep=False,
    )
    assert LoadView(loads.snapshot(NOW), NOW, 60.0).unknown("cpu", ["a", "b"]) == {
        "b": "NodeLoad: no series of Prometheus' cpu query `node_load` has label node set to this node's name (they "
        "name 1 node, such as a)"
    }


def test_an_answer_naming_none_of_a_request_s_nodes_is_one_warning_a_minute(caplog):
    profile = plugin(
        {
            "metrics": [{"name": "cpu", "query": "q", "nodeLabel": "instance"}],
            "filter": [{"metric": "cpu", "above": 0.9}],
        }
    )
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    node_load.judge_offline({"cpu": vector({"instance": "10.0.0.4:9100"}, {"instance": "10.0.0.5:9100"})})
    with caplog.at_level(logging.WARNING, "extender.nodeload"):
        for _ in range(2):
            filtered = profile.filter(pod(), [Node("worker-1"), Node("worker-2")])
    why = (
        "NodeLoad: no series of Prometheus' cpu query `q` has label instance set to this node's name (they name 2 "
        "nodes, such as 10.0.0.4:9100) (rule 'cpu' not evaluated)"
    )
    assert filtered.error is not None and filtered.error.reason == why  # no node could be judged
    [warning] = [record.getMessage() for record in warnings_of(caplog)]
    assert warning == (
        "NodeLoad: metric cpu: the series of query `q` name 2 nodes, such as 10.0.0.4:9100 on label instance, none of "
        "the 2 nodes asked about (such as worker-1): is the node's name in another label? (check-policy --probe "
        "shows which) (those nodes have no facts)"
    )
