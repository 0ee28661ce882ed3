"""``explain --at``: every plugin that reads the clock judges at the given instant, through the one request clock
(``extender.framework.clock``), in every request explain makes (filter, prioritize, preempt)."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time

import pytest
import yaml

from extender.__main__ import main
from extender.framework import clock

# pool-b is closed on Sundays 02:00-04:00 UTC; 2026-03-01 is a Sunday.
MAINTENANCE_POLICY = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}]}
  pluginConfig:
  - name: NodeNameFilter
    args:
      maintenance:
      - name: pool-b-upgrade
        nodes: ["gke-prod-pool-b-*"]
        windows:
        - {days: [Sun], from: "02:00", to: "04:00", timeZone: UTC}
"""
NODES = "gke-prod-pool-a-1a2b3c4d-x1,gke-prod-pool-b-5e6f7a8b-y2"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop"}, "spec": {}}
CLOSED = "NodeNameFilter: node is in maintenance 'pool-b-upgrade' until 2026-03-01T04:00:00+00:00"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "policy.yaml").write_text(MAINTENANCE_POLICY)
    (tmp_path / "pod.yaml").write_text(json.dumps(POD))
    return tmp_path


def explain(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_maintenance_window_is_judged_at_the_given_instant(files, capsys):
    args = [str(files / "pod.yaml"), "--node-names", NODES, "--policy", str(files / "policy.yaml"), "--json"]
    code, out, _ = explain(capsys, *args, "--at", "2026-03-01T02:30:00Z")
    explained = json.loads(out)
    assert code == 0 and explained["at"] == "2026-03-01T02:30:00+00:00"
    assert explained["filter"]["answer"]["NodeNames"] == ["gke-prod-pool-a-1a2b3c4d-x1"]
    assert explained["filter"]["answer"]["FailedAndUnresolvableNodes"] == {"gke-prod-pool-b-5e6f7a8b-y2": CLOSED}
    # An offset is an instant like any other: 04:30 in Paris (UTC+1 in March) is 03:30 UTC, still closed.
    code, out, _ = explain(capsys, *args, "--at", "2026-03-01T04:30:00+01:00")
    assert json.loads(out)["filter"]["answer"]["NodeNames"] == ["gke-prod-pool-a-1a2b3c4d-x1"]
    # The window ends at 04:00, and is closed on Mondays.
    for after in ("2026-03-01T04:00:00Z", "2026-03-02T02:30:00Z"):
        code, out, _ = explain(capsys, *args, "--at", after)
        assert json.loads(out)["filter"]["answer"]["NodeNames"] == NODES.split(","), after


def test_the_table_says_the_instant(files, capsys):
    code, out, _ = explain(
        capsys, str(files / "pod.yaml"), "--node-names", NODES, "--policy", str(files / "policy.yaml"),
        "--at", "2026-03-01T02:30:00Z",
    )
    assert code == 0
    assert out.splitlines()[0].endswith(" · at 2026-03-01T02:30:00+00:00")
    assert f"FailedAndUnresolvableNodes: {CLOSED}" in out


def test_preempt_judges_its_candidates_at_the_same_instant(files, capsys):
    victims = files / "victims.yaml"
    victims.write_text(
        yaml.safe_dump_all(
            [
                {"kind": "Pod", "metadata": {"name": name, "namespace": "batch"}, "spec": {"nodeName": node}}
                for name, node in zip(("batch-1", "batch-2"), NODES.split(","), strict=True)
            ]
        )
    )
    args = [str(files / "pod.yaml"), "--node-names", NODES, "--policy", str(files / "policy.yaml")]
    code, out, _ = explain(capsys, *args, "--victims", str(victims), "--json", "--at", "2026-03-01T03:00:00Z")
    candidates = json.loads(out)["candidates"]
    assert code == 0 and candidates["gke-prod-pool-a-1a2b3c4d-x1"]["answer"] == "accepted"
    vetoed = {"answer": "vetoed", "plugin": "NodeNameFilter", "reason": CLOSED}
    assert candidates["gke-prod-pool-b-5e6f7a8b-y2"] == vetoed
    code, out, _ = explain(capsys, *args, "--victims", str(victims), "--json", "--at", "2026-03-01T05:00:00Z")
    assert code == 0 and {verdict["answer"] for verdict in json.loads(out)["candidates"].values()} == {"accepted"}


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("2026-03-01T02:30:00", "argument --at: 2026-03-01T02:30:00 has no UTC offset: end it with Z or an offset"),
        ("sunday 2am", "argument --at: 'sunday 2am' is not an RFC 3339 timestamp such as 2026-03-01T22:00:00Z"),
        ("2026-02-30T02:30:00Z", "argument --at: '2026-02-30T02:30:00Z' is not an RFC 3339 timestamp"),
    ],
)
def test_a_bad_instant_is_a_usage_error_that_says_why(files, capsys, given, problem):
    with pytest.raises(SystemExit) as exited:
        main(["explain", str(files / "pod.yaml"), "--node-names", NODES, "--at", given])
    assert exited.value.code == 2
    assert problem in capsys.readouterr().err


NODE_LOAD_POLICY = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLoad}]}
  pluginConfig:
  - name: NodeLoad
    args:
      prometheus: {url: "http://127.0.0.1:9"}
      metrics: [{name: cpu, query: node_cpu, nodeLabel: node}]
      refreshInterval: 30s
      maxAge: 3m
      filter: [{metric: cpu, above: 0.9}]
"""
# 2026-03-01T02:00:00Z
SAMPLED = 1772330400


def test_saved_samples_age_to_the_given_instant(tmp_path, capsys):
    (tmp_path / "policy.yaml").write_text(NODE_LOAD_POLICY)
    (tmp_path / "pod.yaml").write_text(json.dumps(POD))
    answer = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": "busy"}, "value": [SAMPLED, "0.95"]},
        {"metric": {"node": "idle"}, "value": [SAMPLED, "0.1"]},
    ]}}
    (tmp_path / "cpu.json").write_text(json.dumps(answer))
    args = [str(tmp_path / "pod.yaml"), "--node-names", "busy,idle", "--policy", str(tmp_path / "policy.yaml")]
    args += ["--metrics", str(tmp_path / "cpu.json"), "--json"]
    # Without --at: at the newest sample's time, so the samples are fresh.
    code, out, err = explain(capsys, *args)
    explained = json.loads(out)
    assert explained["at"] == "2026-03-01T02:00:00+00:00" and "judged at their newest sample's time" in err
    assert explained["filter"]["answer"]["NodeNames"] == ["idle"]
    # Four minutes later the samples are older than maxAge (3m): no node has facts, and failurePolicy Fail says Error.
    code, out, err = explain(capsys, *args, "--at", "2026-03-01T02:04:00Z")
    explained = json.loads(out)
    assert code == 1 and "judged at --at" in err
    assert "older than maxAge (180 s)" in explained["filter"]["error"]


# pool-b's maintenance and a NodeLoad whose Prometheus nobody answers (port 9): asked, it would leave every node
# without facts, and failurePolicy Fail would make the answer an Error.
MAINTENANCE_AND_LOAD_POLICY = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}, {name: NodeLoad}]}
    score: {enabled: [{name: NodeLoad, weight: 2}]}
  pluginConfig:
  - name: NodeNameFilter
    args:
      maintenance:
      - name: pool-b-upgrade
        nodes: ["gke-prod-pool-b-*"]
        windows:
        - {days: [Sun], from: "02:00", to: "04:00", timeZone: UTC}
  - name: NodeLoad
    args:
      prometheus: {url: "http://127.0.0.1:9"}
      metrics: [{name: cpu, query: node_cpu, nodeLabel: node}]
      filter: [{metric: cpu, above: 0.9}]
"""
NOT_JUDGED = (
    "it reads the nodes' load now, not at --at: give answers saved at that time (--metrics cpu=FILE; Prometheus "
    "answers curl '<url>/api/v1/query' --data-urlencode 'query=<query>' --data-urlencode 'time=<--at>')"
)


def test_without_saved_answers_time_rules_are_judged_at_the_instant_and_load_rules_are_shown_not_judged(
    tmp_path, capsys
):
    (tmp_path / "policy.yaml").write_text(MAINTENANCE_AND_LOAD_POLICY)
    (tmp_path / "pod.yaml").write_text(json.dumps(POD))
    args = [str(tmp_path / "pod.yaml"), "--node-names", NODES, "--policy", str(tmp_path / "policy.yaml")]
    code, out, err = explain(capsys, *args, "--at", "2026-03-01T02:30:00Z", "--json")
    explained = json.loads(out)
    assert (code, err) == (0, "")
    assert explained["filter"]["answer"]["NodeNames"] == ["gke-prod-pool-a-1a2b3c4d-x1"]
    assert explained["filter"]["answer"]["FailedAndUnresolvableNodes"] == {"gke-prod-pool-b-5e6f7a8b-y2": CLOSED}
    assert explained["notJudged"] == {"NodeLoad": NOT_JUDGED}
    [open_node, _] = explained["nodes"]
    assert open_node["filter"]["NodeLoad"] == {"code": "Success", "notJudged": NOT_JUDGED}
    assert open_node["scores"] == {}  # the score is the other plugins' (none here), NodeLoad's left out
    code, out, _ = explain(capsys, *args, "--at", "2026-03-01T02:30:00Z")
    lines = out.splitlines()
    assert code == 0
    assert lines[2].split() == ["NODE", "NodeNameFilter", "NodeLoad", "NodeLoad", "×2", "(not", "counted)", "SCORE",
                                "ANSWER"]
    assert lines[3].split()[:6] == ["gke-prod-pool-a-1a2b3c4d-x1", "pass", "not", "judged", "not", "judged"]
    assert lines[4].split()[:2] == ["gke-prod-pool-b-5e6f7a8b-y2", "unresolvable"]
    assert f"NodeLoad: not judged: {NOT_JUDGED}" in lines
    [times] = [line for line in lines if line.startswith("filter: kept 1 of 2 nodes")]
    assert "NodeNameFilter" in times and "NodeLoad" not in times  # it did not run: no time of its own


@pytest.mark.parametrize("given", ["--nodes", "--node-names"])
def test_a_preset_left_unjudged_needs_none_of_its_variables(tmp_path, capsys, monkeypatch, given):
    """The gke preset queries the function's project: not judged, it needs no GOOGLE_CLOUD_PROJECT, offline (--nodes)
    or built as the function starts (--node-names)."""
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    policy = MAINTENANCE_AND_LOAD_POLICY.split("      prometheus:")[0] + "      preset: gke\n"
    (tmp_path / "policy.yaml").write_text(policy)
    (tmp_path / "pod.yaml").write_text(json.dumps(POD))
    nodes = [{"kind": "Node", "metadata": {"name": name}} for name in NODES.split(",")]
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": nodes}))
    inputs = [given, str(tmp_path / "nodes.json") if given == "--nodes" else NODES]
    code, out, _ = explain(
        capsys, str(tmp_path / "pod.yaml"), *inputs, "--policy", str(tmp_path / "policy.yaml"),
        "--at", "2026-03-01T02:30:00Z", "--json",
    )
    explained = json.loads(out)
    assert code == 0 and explained["filter"]["answer"]["NodeNames"] == ["gke-prod-pool-a-1a2b3c4d-x1"]
    assert "Cloud Monitoring answers curl" in explained["notJudged"]["NodeLoad"]


def test_with_saved_answers_at_the_instant_nothing_is_left_unjudged(tmp_path, capsys):
    (tmp_path / "policy.yaml").write_text(MAINTENANCE_AND_LOAD_POLICY)
    (tmp_path / "pod.yaml").write_text(json.dumps(POD))
    samples = [{"metric": {"node": name}, "value": [SAMPLED, "0.95"]} for name in NODES.split(",")]
    answer = {"status": "success", "data": {"resultType": "vector", "result": samples}}
    (tmp_path / "cpu.json").write_text(json.dumps(answer))
    code, out, _ = explain(
        capsys, str(tmp_path / "pod.yaml"), "--node-names", NODES, "--policy", str(tmp_path / "policy.yaml"),
        "--metrics", str(tmp_path / "cpu.json"), "--at", "2026-03-01T02:01:00Z", "--json",
    )
    explained = json.loads(out)
    assert code == 0 and explained["notJudged"] == {}
    # pool-a is over the load threshold (its sample a minute old), pool-b in maintenance: both judged at --at.
    answer = explained["filter"]["answer"]
    assert answer["NodeNames"] == [] and list(answer["FailedAndUnresolvableNodes"]) == ["gke-prod-pool-b-5e6f7a8b-y2"]
    assert answer["FailedNodes"]["gke-prod-pool-a-1a2b3c4d-x1"].startswith("NodeLoad rule 'cpu': load above 0.9")


def test_the_instant_holds_in_its_own_context_only():
    """Served requests, on other threads, keep judging at the wall clock while explain judges at another instant."""
    seen: list[float] = []
    with clock.judged_at(dt.datetime(2026, 3, 1, 2, 30, tzinfo=dt.UTC)):
        assert clock.utc_now() == dt.datetime(2026, 3, 1, 2, 30, tzinfo=dt.UTC)
        other = threading.Thread(target=lambda: seen.append(clock.now()))
        other.start()
        other.join()
    assert abs(seen[0] - time.time()) < 60
    assert abs(clock.now() - time.time()) < 60


# pool-b's maintenance closes it to the payments namespace only.
NODES_LINE = '        nodes: ["gke-prod-pool-b-*"]\n'
PODS_WINDOW_POLICY = MAINTENANCE_POLICY.replace(NODES_LINE, NODES_LINE + "        pods: {namespaces: [payments]}\n")


@pytest.mark.parametrize(("namespace", "kept"), [("payments", 1), ("shop", 2)])
def test_a_window_with_pods_is_shown_for_the_pods_it_selects_only(tmp_path, capsys, namespace, kept):
    (tmp_path / "policy.yaml").write_text(PODS_WINDOW_POLICY)
    pod = {**POD, "metadata": {"name": "api-1", "namespace": namespace}}
    (tmp_path / "pod.yaml").write_text(json.dumps(pod))
    code, out, _ = explain(
        capsys, str(tmp_path / "pod.yaml"), "--node-names", NODES, "--policy", str(tmp_path / "policy.yaml"),
        "--at", "2026-03-01T02:30:00Z",
    )
    rows = {line.split()[0]: line for line in out.splitlines()[3:5]}
    assert code == 0 and f"filter: kept {kept} of 2 nodes" in out
    pool_b = rows["gke-prod-pool-b-5e6f7a8b-y2"]
    if namespace == "payments":
        assert pool_b.split()[1] == "unresolvable" and pool_b.endswith(f"{CLOSED} for pods namespace in (payments)")
    else:
        assert pool_b.split()[1] == "pass" and pool_b.endswith("kept")


def test_check_policy_checks_a_window_s_pods_as_every_pod_selector(tmp_path, capsys):
    (tmp_path / "policy.yaml").write_text(PODS_WINDOW_POLICY.replace("namespaces: [payments]", "namespace: [payments]"))
    code = main(["check-policy", str(tmp_path / "policy.yaml")])
    _, err = capsys.readouterr()
    assert code == 1
    entry = "profiles[0].pluginConfig[0].args.maintenance[0]"
    assert f"{entry}.pods.namespace: Unknown field. Did you mean namespaces?" in err
