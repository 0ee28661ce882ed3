"""``python -m extender explain`` shows exactly what the function answers, per node and per plugin."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
import yaml

from extender.__main__ import main
from tests.recordings import exchanges
from tests.test_decision_log import FULL_FILTER, write_policy

FILTERS = [exchange for exchange in exchanges() if exchange.verb == "filter"]


@pytest.fixture
def policy(tmp_path):
    return write_policy(tmp_path)


@pytest.fixture
def function(client_factory, policy):
    """The function itself, serving the same policy."""
    return client_factory(policy)


def write_inputs(tmp_path, request) -> tuple[str, list[str]]:
    """The recorded pod as a manifest file, the nodes as `kubectl get nodes -o json` would dump them, or names."""
    pod = tmp_path / "pod.json"
    pod.write_text(json.dumps(request["Pod"]))
    if request.get("Nodes") is None:
        return str(pod), ["--node-names", ",".join(request["NodeNames"])]
    nodes = tmp_path / "nodes.json"
    nodes.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": request["Nodes"]["items"]})
    )
    return str(pod), ["--nodes", str(nodes)]


def run_explain(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def ask(function, path: str, payload) -> tuple[int, object]:
    response = function.post(path, data=json.dumps(payload), content_type="application/json")
    return response.status_code, response.get_json()


@pytest.mark.parametrize("profile", ["default", "names"])
@pytest.mark.parametrize("exchange", FILTERS, ids=lambda e: e.id)
def test_explain_answers_what_the_function_answers(function, policy, tmp_path, capsys, exchange, profile):
    pod, nodes = write_inputs(tmp_path, exchange.request)
    code, out, _ = run_explain(capsys, pod, *nodes, "--policy", str(policy), "--profile", profile, "--json")
    explained = json.loads(out)
    assert code == 0

    status, filtered = ask(function, f"/{profile}/filter", exchange.request)
    assert (explained["filter"]["status"], explained["filter"]["answer"]) == (status, filtered)
    kept = filtered["Nodes"]["items"] if "Nodes" in filtered else filtered["NodeNames"]
    assert kept, "every scenario keeps a node"
    full = "Nodes" in filtered
    status, prioritized = ask(
        function,
        f"/{profile}/prioritize",
        {"Pod": exchange.request["Pod"], "Nodes": filtered.get("Nodes"), "NodeNames": None if full else kept},
    )
    assert (explained["prioritize"]["status"], explained["prioritize"]["answer"]) == (status, prioritized)

    rows = {row["name"]: row for row in explained["nodes"]}
    sent = (
        [node["metadata"]["name"] for node in exchange.request["Nodes"]["items"]]
        if full
        else exchange.request["NodeNames"]
    )
    assert list(rows) == sent
    for name, reason in {**filtered["FailedNodes"], **filtered["FailedAndUnresolvableNodes"]}.items():
        assert rows[name]["reason"] == reason and rows[name]["score"] is None
        assert rows[name]["filter"]["NodeNameFilter"]["code"] != "Success"
    for entry in prioritized:
        assert rows[entry["Host"]]["answer"] == "kept" and rows[entry["Host"]]["score"] == entry["Score"]
    assert explained["pod"]["uid"] == exchange.request["Pod"]["metadata"]["uid"]


def test_the_table_shows_each_plugins_verdict_and_score_per_node(function, policy, tmp_path, capsys):
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    code, out, _ = run_explain(capsys, pod, *nodes, "--policy", str(policy))
    assert code == 0
    _, filtered = ask(function, "/filter", FULL_FILTER.request)
    _, prioritized = ask(
        function, "/prioritize", {"Pod": FULL_FILTER.request["Pod"], "Nodes": filtered["Nodes"], "NodeNames": None}
    )
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("NODE"))
    assert header.split() == [
        "NODE",
        "NodeNameFilter",
        "TopologyPreference",
        "×3",
        "InstanceCost",
        "×1",
        "SCORE",
        "ANSWER",
    ]
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 1 :] if line.startswith("node-")}
    assert set(rows) == {"node-a", "node-b", "node-c", "node-d"}
    assert rows["node-c"][:3] == ["node-c", "unresolvable", "FailedAndUnresolvableNodes:"]
    assert " ".join(rows["node-c"][3:]) == filtered["FailedAndUnresolvableNodes"]["node-c"]
    for entry in prioritized:
        _, verdict, _, _, score, answer = rows[entry["Host"]]
        assert (verdict, int(score), answer) == ("pass", entry["Score"], "kept")
    assert rows["node-b"][2] == "100" and rows["node-a"][2] == "40"
    assert "filter: kept 3 of 4 nodes" in out


def test_nodes_and_pod_may_be_yaml_from_stdin_and_the_namespace_defaults(
    function, policy, tmp_path, capsys, monkeypatch
):
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(manifest))
    nodes = [{**node, "kind": "Node", "apiVersion": "v1"} for node in FULL_FILTER.request["Nodes"]["items"]]
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump_all(nodes)))
    code, out, _ = run_explain(capsys, str(pod), "--nodes", "-", "--policy", str(policy), "--json")
    explained = json.loads(out)
    assert code == 0
    assert explained["pod"] == {"namespace": "default", "name": "web", "uid": ""}
    sent = {**manifest, "metadata": {"name": "web", "namespace": "default"}}
    _, filtered = ask(function, "/filter", {"Pod": sent, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})
    assert explained["filter"]["answer"] == filtered


def test_a_profile_the_policy_lacks_fails_as_the_function_does(function, policy, tmp_path, capsys):
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    code, out, _ = run_explain(capsys, pod, *nodes, "--policy", str(policy), "--profile", "gpu")
    status, answer = ask(function, "/gpu/filter", FULL_FILTER.request)
    assert code == 1 and status == 404
    assert f"filter answered 404 with Error: {answer['Error']}" in out


def test_a_request_the_function_rejects_is_shown_with_its_error(policy, tmp_path, capsys):
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\nmetadata: {name: web, labels: {team: 7}}\n")
    code, out, _ = run_explain(capsys, str(pod), "--node-names", "node-a", "--policy", str(policy), "--json")
    explained = json.loads(out)
    assert code == 1
    assert explained["filter"]["status"] == 400
    assert "Pod.metadata.labels" in explained["filter"]["error"] and explained["prioritize"] is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("kind: Deployment\nmetadata: {name: web}\n", "expected a Pod manifest, got kind Deployment"),
        ("[unclosed", "not valid YAML or JSON"),
        ("kind: Pod\n---\nkind: Pod\n", "expected one Pod manifest"),
    ],
)
def test_a_manifest_explain_cannot_read_is_named(policy, tmp_path, capsys, content, problem):
    pod = tmp_path / "pod.yaml"
    pod.write_text(content)
    code, out, err = run_explain(capsys, str(pod), "--node-names", "node-a", "--policy", str(policy))
    assert (code, out) == (1, "")
    assert err.startswith(f"{pod}: ") and problem in err


def test_explain_works_behind_a_caller_token_without_printing_it(policy, tmp_path, capsys, monkeypatch):
    token = "explain-T0ken-never-printed"
    monkeypatch.setenv("EXTENDER_CALLER_TOKEN", token)
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    code, out, err = run_explain(capsys, pod, *nodes, "--policy", str(policy))
    assert code == 0 and "filter: kept 3 of 4 nodes" in out
    assert token not in out + err


KUBERNETES_POLICY = """
nodeSource: {kubernetes: {}}
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
    preempt: {enabled: [{name: ProtectedVictims}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args: {rules: [{name: zone-1-only, nodeSelector: {matchLabels: {topology.kubernetes.io/zone: zone-1}}}]}
  - name: ProtectedVictims
    args: {protect: [{name: system, pods: {namespaces: [kube-system]}}]}
"""


def victim(name, namespace, node):
    return {"kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {"nodeName": node}}


def test_with_nodes_explain_works_offline_for_a_kubernetes_source_policy(tmp_path, capsys, monkeypatch):
    """It used to stop with "KUBERNETES_API_URL is not set" even though --nodes carries every fact. It says what stands
    in for the API, and asks by name, as kube-scheduler asks a policy that does not declare full nodes."""
    monkeypatch.delenv("KUBERNETES_API_URL", raising=False)
    policy = tmp_path / "policy.yaml"
    policy.write_text(KUBERNETES_POLICY)
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    code, out, err = run_explain(capsys, pod, *nodes, "--policy", str(policy), "--json")
    assert code == 0
    assert "explain: the --nodes file stands in for the node list the function reads from the Kubernetes API\n" in err
    explained = json.loads(out)
    assert explained["filter"]["answer"]["NodeNames"] == ["node-b", "node-d"]
    assert explained["filter"]["answer"]["FailedAndUnresolvableNodes"] == {
        "node-a": "NodeLabelPolicy rule 'zone-1-only': node does not match topology.kubernetes.io/zone=zone-1",
        "node-c": "NodeLabelPolicy rule 'zone-1-only': node does not match topology.kubernetes.io/zone=zone-1",
    }
    assert explained["preempt"] is None and explained["candidates"] == {}


def test_explain_shows_what_preempt_answers_per_candidate(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBERNETES_API_URL", raising=False)
    policy = tmp_path / "policy.yaml"
    policy.write_text(KUBERNETES_POLICY)
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    victims = tmp_path / "victims.yaml"
    victims.write_text(
        yaml.safe_dump_all(
            [
                victim("batch-1", "batch", "node-a"),
                victim("dns", "kube-system", "node-b"),
                victim("batch-2", "batch", "node-d"),
            ]
        )
    )
    code, out, _ = run_explain(capsys, pod, *nodes, "--victims", str(victims), "--policy", str(policy), "--json")
    assert code == 0
    explained = json.loads(out)
    assert explained["preempt"]["answer"] == {
        "NodeNameToMetaVictims": {"node-d": {"Pods": [{"UID": "batch/batch-2"}], "NumPDBViolations": 0}}
    }
    assert explained["candidates"] == {
        "node-a": {
            "answer": "vetoed",
            "plugin": "NodeLabelPolicy",
            "reason": "NodeLabelPolicy rule 'zone-1-only': node does not match topology.kubernetes.io/zone=zone-1",
        },
        "node-b": {
            "answer": "vetoed",
            "plugin": "ProtectedVictims",
            "reason": "ProtectedVictims rule 'system' protects victim kube-system/dns",
        },
        "node-d": {"answer": "accepted", "victims": "1"},
    }
    code, out, _ = run_explain(capsys, pod, *nodes, "--victims", str(victims), "--policy", str(policy))
    assert out.splitlines()[-4:] == [
        "preempt (the candidates kube-scheduler proposed, with their victims):",
        "  node-a: vetoed: NodeLabelPolicy rule 'zone-1-only': node does not match topology.kubernetes.io/zone=zone-1",
        "  node-b: vetoed: ProtectedVictims rule 'system' protects victim kube-system/dns",
        "  node-d: accepted, 1 victim(s) may be evicted",
    ]


@pytest.mark.parametrize("node", [None, "", ["node-a"], 7])
def test_a_victim_without_a_node_is_named(policy, tmp_path, capsys, node):
    victims = tmp_path / "victims.yaml"
    victims.write_text(yaml.safe_dump(victim("web", "default", node)))
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    code, out, err = run_explain(capsys, pod, *nodes, "--victims", str(victims), "--policy", str(policy))
    assert (code, out) == (1, "")
    assert err == f"{victims}: victim pod web has no spec.nodeName\n"


@pytest.mark.parametrize(("option", "kind"), [("--nodes", "Node"), ("--victims", "Pod")])
def test_a_file_of_the_wrong_kind_is_named(policy, tmp_path, capsys, option, kind):
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: settings}\n")
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    arguments = [*nodes, option, str(wrong)] if option == "--victims" else [option, str(wrong)]
    code, out, err = run_explain(capsys, pod, *arguments, "--policy", str(policy))
    assert (code, out) == (1, "")
    assert err == f"{wrong}: expected {kind} manifests or a List of them, found ConfigMap\n"


GKE_LOAD_POLICY = """
profiles:
- name: default
  plugins: {filter: {enabled: [{name: NodeLoad}]}}
  pluginConfig: [{name: NodeLoad, args: {preset: gke, filter: [{metric: cpu, above: 0.9}]}}]
"""


def test_offline_explain_needs_only_what_nothing_stands_in_for(tmp_path, capsys, monkeypatch):
    """NodeLoad's gke preset queries the function's project: explain needs GOOGLE_CLOUD_PROJECT to ask it, and nothing
    when --metrics answers stand in for the query."""
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    policy = tmp_path / "policy.yaml"
    policy.write_text(GKE_LOAD_POLICY)
    pod, nodes = write_inputs(tmp_path, FULL_FILTER.request)
    code, out, err = run_explain(capsys, pod, *nodes, "--policy", str(policy))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "the policy needs variables the environment does not set:",
        "  GOOGLE_CLOUD_PROJECT: NodeLoad's preset queries Cloud Monitoring in the function's project",
    ]
    saved = tmp_path / "cpu.json"
    saved.write_text(json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}))
    code, out, err = run_explain(capsys, pod, *nodes, "--policy", str(policy), "--metrics", f"cpu={saved}", "--json")
    assert "GOOGLE_CLOUD_PROJECT" not in err
    assert json.loads(out)["filter"]["status"] == 200


# --- NodeLoad on saved answers: exempt pods, and what stands in for what ------------------------------------------

LOAD_POLICY = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLoad}]}
    score: {enabled: [{name: NodeLoad, weight: 1}]}
  pluginConfig:
  - name: NodeLoad
    args:
      prometheus: {url: "http://127.0.0.1:9"}
      metrics: [{name: cpu, query: node_cpu, nodeLabel: node, resource: cpu}]
      filter: [{metric: cpu, above: 0.8}]
"""
DAEMON_POD = {
    "kind": "Pod",
    "metadata": {
        "name": "agent-x",
        "namespace": "kube-system",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u1"}],
    },
    "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]},
}
# 2026-03-01T02:00:00Z
SAMPLED = 1772330400


def load_inputs(tmp_path, pod=DAEMON_POD, policy=LOAD_POLICY) -> list[str]:
    (tmp_path / "policy.yaml").write_text(policy)
    (tmp_path / "pod.json").write_text(json.dumps(pod))
    nodes = [
        {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}}
        for name in ("busy", "idle")
    ]
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": nodes}))
    samples = [{"metric": {"node": node}, "value": [SAMPLED, cpu]} for node, cpu in (("busy", "0.95"), ("idle", "0.1"))]
    answer = {"status": "success", "data": {"resultType": "vector", "result": samples}}
    (tmp_path / "cpu.json").write_text(json.dumps(answer))
    return [
        str(tmp_path / "pod.json"), "--nodes", str(tmp_path / "nodes.json"), "--policy", str(tmp_path / "policy.yaml"),
        "--metrics", str(tmp_path / "cpu.json"),
    ]


def test_a_daemonset_pod_reads_exempt_where_nodeload_s_rules_do_not_apply_to_it(tmp_path, capsys):
    args = load_inputs(tmp_path)
    code, out, _ = run_explain(capsys, *args)
    rows = {line.split()[0]: line for line in out.splitlines()[3:5]}
    assert code == 0 and set(rows) == {"busy", "idle"}
    for line in rows.values():
        assert line.split()[1:3] == ["exempt", "(DaemonSet)"] and line.endswith("kept")
    code, out, _ = run_explain(capsys, *args, "--json")
    explained = json.loads(out)
    assert explained["filter"]["exempt"] == {"NodeLoad": "DaemonSet"}
    assert [row["filter"]["NodeLoad"] for row in explained["nodes"]] == [{"code": "Success", "exempt": "DaemonSet"}] * 2


@pytest.mark.parametrize(
    ("pod", "policy"),
    [
        ({**DAEMON_POD, "metadata": {"name": "web-1", "namespace": "shop"}}, LOAD_POLICY),  # no DaemonSet
        (DAEMON_POD, LOAD_POLICY.replace("above: 0.8}", "above: 0.8, daemonSets: true}")),  # the rule opts in
    ],
    ids=["not-a-daemonset-pod", "rule-opts-in"],
)
def test_a_pod_the_rules_apply_to_is_judged_not_exempt(tmp_path, capsys, pod, policy):
    code, out, _ = run_explain(capsys, *load_inputs(tmp_path, pod, policy), "--json")
    explained = json.loads(out)
    assert code == 0 and "exempt" not in explained["filter"]
    assert list(explained["filter"]["answer"]["FailedNodes"]) == ["busy"]


def test_the_decision_entry_carries_the_exemption_fresh_and_from_kept_verdicts(tmp_path):
    from extender.cli.explain import call, judge_on_saved_metrics, offline, read_nodes
    from extender.decision_log import decision_fields
    from extender.framework.clock import judged_at

    load_inputs(tmp_path)
    nodes = read_nodes(str(tmp_path / "nodes.json"))
    extender = offline(str(tmp_path / "policy.yaml"), nodes)
    judge_on_saved_metrics(extender, "default", [str(tmp_path / "cpu.json")], None, nodes)
    payload = {"Pod": DAEMON_POD, "Nodes": None, "NodeNames": ["busy", "idle"]}
    with judged_at(dt.datetime.fromtimestamp(SAMPLED, dt.UTC)):
        for _ in range(2):  # the second request from kept verdicts
            answer = call(extender, "default", "filter", payload)
            fields = decision_fields(None, answer, 0.001, 5.0, method="POST", path="/default/filter")
            assert fields["exempt"] == {"NodeLoad": "DaemonSet"} and fields["nodesOut"] == 2
        plain = {**payload, "Pod": {**DAEMON_POD, "metadata": {"name": "web-1", "namespace": "shop"}}}
        fields = decision_fields(None, call(extender, "default", "filter", plain), 0.001, 5.0, method="POST", path="/")
        assert "exempt" not in fields and fields["nodesOut"] == 1


def test_stderr_says_what_stands_in_for_what_the_function_reads(tmp_path, capsys):
    code, _, err = run_explain(capsys, *load_inputs(tmp_path))
    assert code == 0
    assert err.splitlines() == [
        ("explain: the --metrics answers stand in for what NodeLoad reads from Prometheus, judged at their newest "
        "sample's time; no --in-flight file: no pod bound since the samples is counted"),
        ("explain: the policy does not declare nodeCacheCapable: false, so explain asks by node name as kube-scheduler "
        "with nodeCacheCapable: true does: --nodes gives the names, no labels (no nodeSource)"),
        ("explain: the --nodes file's status.allocatable stands in for the nodes' allocatable NodeLoad reads from the "
        "Kubernetes API"),
    ]
    # By name only: nothing gives the allocatable, and explain says what that leaves out.
    args = load_inputs(tmp_path)
    args[1:3] = ["--node-names", "busy,idle"]
    code, _, err = run_explain(capsys, *args)
    assert code == 0 and err.splitlines()[1:] == [
        ("explain: no --nodes file: NodeLoad knows no node's allocatable, so it judges each node as measured, without "
        "the pods in flight or the pod's own share")
    ]


def test_with_nodes_nodeload_asks_no_capacity_answer_and_adds_the_pod_s_share_of_their_allocatable(
    tmp_path, capsys, caplog
):
    """node-exporter's preset reads allocatable from kube-state-metrics when there is no API: offline, the --nodes
    file gives it, so explain asks no capacity answer (no "no saved answer" warning) and judges with it."""
    policy = LOAD_POLICY.replace(
        '      prometheus: {url: "http://127.0.0.1:9"}\n      metrics: [{name: cpu, query: node_cpu, nodeLabel: node, '
        "resource: cpu}]\n",
        '      preset: node-exporter\n      prometheus: {url: "http://127.0.0.1:9"}\n',
    )
    assert "preset: node-exporter" in policy
    pod = {**DAEMON_POD, "metadata": {"name": "web-1", "namespace": "shop"}}
    code, out, err = run_explain(capsys, *load_inputs(tmp_path, pod, policy), "--json")
    assert code == 0
    assert not [record for record in caplog.records if "no saved answer" in record.getMessage()]
    assert "no saved answer" not in err
    [busy, idle] = json.loads(out)["nodes"]
    # 100m of 4 allocatable cores, as the estimate counts it: a share of the node's allocatable, added to its load.
    assert busy["measured"]["NodeLoad"]["cpu"]["podShare"] > 0
    assert busy["measured"]["NodeLoad"]["cpu"]["predicted"] > 0.95 and busy["answer"] == "FailedNodes"
    assert idle["answer"] == "kept"


def test_explain_json_says_what_a_call_judged_on_may_be_incomplete_as_the_decision_entry_does():
    from extender.cli.explain import _call_json
    from extender.framework.profile import FilterResult, ScoreResult
    from extender.verbs import Answer

    why = {"NodeLoad": "the pods bound to nodes are not listed yet"}
    assert _call_json(Answer(body=None, result=FilterResult(["a"], incomplete=why)))["incomplete"] == why
    assert _call_json(Answer(body=None, result=ScoreResult({"a": 5}, incomplete=why)))["incomplete"] == why
    assert "incomplete" not in _call_json(Answer(body=None, result=ScoreResult({"a": 5})))
