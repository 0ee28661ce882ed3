"""explain decides from the facts the served function uses, for every node source and mode.

A differential test: for every policy the documentation, the examples and the benchmark show, and a generated set
(every node source × both modes × Enforce/Audit), ``explain POD --nodes NODES --victims PODS`` answers filter,
prioritize and preempt exactly as the function does for the same pod, nodes and victims, sent as kube-scheduler sends
them in the policy's mode (node names and victim UIDs unless the policy declares ``nodeCacheCapable: false``), with a
Kubernetes API server listing the same nodes and pods. The nodes file disagrees with the names the ``names`` source
reads (a node labelled gpu in a general pool), holds a node no source but the API can describe, and a victim runs on a
node the file lacks: explain must take each fact where the function takes it. A policy with NodeLoad reads, on
both sides, a real Prometheus serving GKE's node metrics for the same nodes (tests/prometheus.py), in place of Cloud
Monitoring.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from extender.__main__ import main
from extender.policy.loader import Policy, PolicyError, parse_policy
from extender.settings import Settings
from testkit.fake_apiserver import node as api_node
from tests.conftest import ROOT
from tests.policy_doc import fenced_blocks

POOL, ZONE, TYPE = "cloud.google.com/gke-nodepool", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"
SPOT = "cloud.google.com/gke-spot"
# As deployed: the Terraform module sets GOOGLE_CLOUD_PROJECT, which NodeLoad's gke preset reads.
DEPLOYED = Settings(project="example-project")


def parse(text: str, name: str) -> Policy:
    return parse_policy(text, name, DEPLOYED)


def documented_policies() -> list[tuple[str, str]]:
    """Every policy the documentation shows that the function accepts, and the policy files of the repository."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for index, (fence, block) in enumerate(fenced_blocks(path.read_text())):
            # The custom plugin's policy needs the docs' lucky.py on the path (tests/test_plugin_custom.py serves it).
            if fence != "yaml" or "profiles:" not in block or "pluginModules" in block:
                continue
            try:
                parse(block, "documented")
            except PolicyError:
                continue  # shown as invalid on purpose (its shown run says so; tests/test_policy_cli.py runs it)
            found.append((f"{path.relative_to(ROOT)}[{index}]", block))
    from tests.test_readme import readme_files

    found += [(f"README.md:{name}", text) for name, text in readme_files().items() if name.endswith(".yaml")]
    files = [
        *sorted(ROOT.glob("terraform/examples/*/policy*.yaml")),
        ROOT / "bench" / "policy-all.yaml",
        ROOT / "extender" / "policy" / "default.yaml",
    ]
    return found + [(str(path.relative_to(ROOT)), path.read_text()) for path in files]


def generated_policies() -> list[tuple[str, str]]:
    """Every node source in both modes, enforced and audited, with the plugins each combination allows."""
    sources = {
        "none": "",
        "names": "nodeSource: {names: {cluster: prod, nodePools: [gpu, general, spot-pool, default-pool]}}\n",
        "static": (
            "nodeSource:\n  static:\n    nodes:\n"
            f"    - {{names: ['*'], labels: {{{ZONE}: europe-west1-b, {TYPE}: e2-standard-4}}}}\n"
            f"    - {{names: ['gke-prod-gpu-*'], labels: {{{POOL}: gpu, {TYPE}: g2-standard-8}}}}\n"
            f"    - {{names: ['gke-prod-general-*'], labels: {{{POOL}: general, {ZONE}: europe-west1-c}}}}\n"
            f"    - {{names: ['*-spot-pool-*'], labels: {{{SPOT}: 'true'}}}}\n"
        ),
        "kubernetes": "nodeSource: {kubernetes: {minRefreshInterval: 1m}}\n",
    }
    policies = []
    for kind, source in sources.items():
        for full in (True, False):
            for audit in (False, True):
                policies.append((f"generated-{kind}-{'full' if full else 'names'}-{'audit' if audit else 'enforce'}",
                                 _generated(kind, source, full, audit)))
    return policies


def _generated(kind: str, source: str, full: bool, audit: bool) -> str:
    mode = "Audit" if audit else "Enforce"
    labels = kind != "none" or full  # label plugins need a source in node-name mode
    victims = full or kind == "kubernetes"  # ProtectedVictims needs victim pods
    key = POOL if kind in ("names", "static") else ZONE
    off = "gpu" if key == POOL else "europe-west1-d"
    filters = ["{name: NodeNameFilter}"] + ([f"{{name: NodeLabelPolicy, enforcement: {mode}}}"] if labels else [])
    scores = [f"{{name: TopologyPreference, weight: 2, enforcement: {mode}}}"] if labels else []
    if (labels and kind in ("none", "static", "kubernetes")) or (labels and full):
        scores.append("{name: InstanceCost, weight: 1, failurePolicy: Ignore}")
    preempts = [f"{{name: ProtectedVictims, enforcement: {mode}}}"] if victims else []
    config = [
        "{name: NodeNameFilter, args: {deny: ['*-canary-*']}}",
        *(
            [
                (
                    "{name: NodeLabelPolicy, args: {rules: ["
                    "{name: shop-off, pods: {namespaces: [shop, payments]}, "
                    f"nodeSelector: {{matchExpressions: [{{key: {key}, operator: NotIn, values: [{off}]}}]}}}}, "
                    "{name: \"ml's-pool\", pods: {namespaces: [ml]}, "
                    f"nodeSelector: {{matchExpressions: [{{key: {key}, operator: Exists}}]}}}}]}}}}"
                ),
                (
                    f"{{name: TopologyPreference, args: {{preferences: [{{label: {key}, "
                    "weights: {gpu: 100, general: 40, europe-west1-b: 100, europe-west1-c: 50}}]}}"
                ),
            ]
            if labels
            else []
        ),
        *(
            [
                (
                    "{name: InstanceCost, args: {prices: {e2-standard-4: 0.134, n2-standard-8: 0.388, "
                    "g2-standard-8: 0.854}, spotDiscount: 0.7}}"
                )
            ]
            if len(scores) > 1
            else []
        ),
        *(
            ["{name: ProtectedVictims, args: {protect: [{name: system, pods: {namespaces: [kube-system]}}]}}"]
            if victims
            else []
        ),
    ]
    trust = "preemptTrustsSchedulerFilter: true\n" if kind == "none" else ""
    return (
        f"nodeCacheCapable: {str(not full).lower()}\n{trust}{source}profiles:\n- name: default\n  plugins:\n"
        f"    filter: {{enabled: [{', '.join(filters)}]}}\n"
        + (f"    score: {{enabled: [{', '.join(scores)}]}}\n" if scores else "")
        + (f"    preempt: {{enabled: [{', '.join(preempts)}]}}\n" if preempts else "")
        + "  pluginConfig:\n" + "".join(f"  - {entry}\n" for entry in config)
    )


POLICIES = documented_policies() + generated_policies()


def unknown_plugins(name: str, text: str) -> list[str]:
    """The problems of a policy that names a plugin this tree does not have yet; none for the others."""
    try:
        parse(text, name)
    except PolicyError as error:
        return [problem for problem in error.problems if "unknown plugin" in problem]
    return []


def _param(name: str, text: str) -> object:
    """The policy as a test case; skipped, saying so, when it names a plugin this tree does not have yet."""
    unknown = unknown_plugins(name, text)
    return pytest.param(name, text, id=name, marks=[pytest.mark.skip(reason=unknown[0])] if unknown else [])


def cluster_nodes(cluster: str) -> list[dict]:
    def node(name: str, **labels: str) -> dict:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}

    prefix = f"gke-{cluster}"
    return [
        node(
            f"{prefix}-gpu-1a2b3c4d-g001",
            **{
                POOL: "gpu",
                ZONE: "europe-west1-b",
                TYPE: "g2-standard-8",
                "cloud.google.com/gke-accelerator": "nvidia-l4",
                "cloud.google.com/machine-family": "g2",
            },
        ),
        node(f"{prefix}-general-1a2b3c4d-n001", **{POOL: "general", ZONE: "europe-west1-c", TYPE: "e2-standard-4"}),
        node(
            f"{prefix}-general-1a2b3c4d-n002",
            **{
                POOL: "general",
                ZONE: "europe-west1-b",
                TYPE: "n2-standard-8",
                SPOT: "true",
                "cloud.google.com/machine-family": "n2",
                "example.com/cpus": "8",
            },
        ),
        # Labelled gpu, but its name (all the names source reads) says general.
        node(f"{prefix}-general-1a2b3c4d-n003", **{POOL: "gpu", ZONE: "europe-west1-d", TYPE: "g2-standard-8"}),
        node(
            f"{prefix}-spot-pool-1a2b3c4d-s001",
            **{POOL: "spot-pool", ZONE: "europe-west1-d", TYPE: "e2-standard-4", SPOT: "true"},
        ),
        node(
            f"{prefix}-default-pool-1a2b3c4d-d001",
            **{POOL: "default-pool", ZONE: "europe-west1-b", TYPE: "e2-standard-4"},
        ),
        node(f"{prefix}-pool-a-1a2b3c4d-a001", **{POOL: "pool-a", ZONE: "europe-west1-b", TYPE: "n2-standard-8"}),
        node(f"{prefix}-canary-1a2b3c4d-c001", **{POOL: "canary", ZONE: "europe-west1-b", TYPE: "e2-standard-4"}),
        node("node-x", **{ZONE: "europe-west1-b", "team": "shared"}),  # no GKE name, in no inventory
    ]


PODS = [
    {"metadata": {"name": "trainer", "namespace": "ml", "uid": "u-ml"}, "spec": {"priority": 1000}},
    {
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-shop", "labels": {"team": "shop"}},
        "spec": {"priority": 2000},
    },
    {"metadata": {"name": "pay", "namespace": "payments", "uid": "u-pay"}, "spec": {"priority": 5000}},
    {"metadata": {"name": "job", "namespace": "default", "uid": "u-default"}, "spec": {}},
]


def victims_on(nodes: list[dict], cluster: str) -> list[dict]:
    def victim(index: int, node: str, namespace: str, annotations: dict[str, str] | None = None) -> dict:
        metadata = {"name": f"victim-{index}", "namespace": namespace, "uid": f"u-victim-{index}",
                    "labels": {"app": "batch"}, "annotations": annotations or {}}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": node, "priority": 0}}

    names = [item["metadata"]["name"] for item in nodes]
    found = [victim(index, name, "kube-system" if index % 4 == 1 else "batch") for index, name in enumerate(names)]
    found.append(victim(len(names), names[0], "batch", {"example.com/preemptible": "false"}))
    found.append(victim(len(names) + 1, f"gke-{cluster}-general-1a2b3c4d-n999", "batch"))  # a node the file lacks
    return found


def ask(client, path: str, payload: dict) -> object:
    response = client.post(path, data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 200, response.data
    return response.get_json()


def function_answers(client, profile: str, pod: dict, nodes: list[dict], victims: list[dict], full: bool) -> dict:
    """What the function's ``profile`` answers kube-scheduler, which sends the policy's mode."""
    names = [item["metadata"]["name"] for item in nodes]
    request = {
        "Pod": pod,
        "Nodes": {"metadata": {}, "items": nodes} if full else None,
        "NodeNames": None if full else names,
    }
    filtered = ask(client, f"/{profile}/filter", request)
    kept = filtered["Nodes"]["items"] if full else filtered["NodeNames"]
    prioritized = None
    if kept:
        prioritized = ask(client, f"/{profile}/prioritize", {"Pod": pod, "Nodes": filtered["Nodes"] if full else None,
                                                 "NodeNames": None if full else kept})
    by_node: dict[str, list[dict]] = {}
    for victim in victims:
        by_node.setdefault(victim["spec"]["nodeName"], []).append(victim)
    if full:
        candidates = {node: {"Pods": pods, "NumPDBViolations": 0} for node, pods in by_node.items()}
        preempt = {"Pod": pod, "NodeNameToVictims": candidates, "NodeNameToMetaVictims": None}
    else:
        meta = {
            node: {"Pods": [{"UID": p["metadata"]["uid"]} for p in pods], "NumPDBViolations": 0}
            for node, pods in by_node.items()
        }
        preempt = {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    return {"filter": filtered, "prioritize": prioritized, "preempt": ask(client, f"/{profile}/preempt", preempt)}


def explained(
    capsys, directory: Path, policy: Path, profile: str, pod: dict, nodes: Path, victims: Path
) -> tuple[dict, str]:
    pod_file = directory / "pod.json"
    pod_file.write_text(json.dumps(pod))
    main(["explain", str(pod_file), "--nodes", str(nodes), "--victims", str(victims), "--policy", str(policy),
          "--profile", profile, "--json"])
    out, err = capsys.readouterr()
    answers = json.loads(out)
    return {verb: (answers[verb] or {}).get("answer") for verb in ("filter", "prioritize", "preempt")}, err


def reading_metrics_of(text: str, nodes: list[dict], request: pytest.FixtureRequest) -> tuple[str, bool]:
    """``text`` with each NodeLoad entry reading the test's Prometheus (no credentials), which serves GKE's node
    metrics for ``nodes``, a third of them busy (unchanged without NodeLoad); and whether a NodeLoad filters."""
    document = yaml.safe_load(text)
    entries = [
        entry
        for profile in document["profiles"]
        for entry in profile.get("pluginConfig") or ()
        if entry.get("name") == "NodeLoad"
    ]
    if not entries:
        return text, False
    exporter, prometheus = request.getfixturevalue("exporter"), request.getfixturevalue("prometheus")
    names = [item["metadata"]["name"] for item in nodes]
    loads = {name: [0.95, 0.3, 0.6][index % 3] for index, name in enumerate(names)}
    node = {"monitored_resource": "k8s_node"}
    exporter.set_samples(
        "kubernetes_io:node_cpu_allocatable_utilization",
        [({**node, "node_name": n}, load) for n, load in loads.items()],
    )
    memory = {**node, "memory_type": "non-evictable"}
    exporter.set_samples(
        "kubernetes_io:node_memory_allocatable_utilization", [({**memory, "node_name": n}, 0.5) for n in names]
    )
    prometheus.wait_until(
        "count by (node) (label_replace(kubernetes_io:node_cpu_allocatable_utilization, 'node', '$1', 'node_name', "
        "'(.*)'))",
        lambda values: set(values) == set(names),
    )
    for entry in entries:
        entry.setdefault("args", {})["prometheus"] = {"url": prometheus.url, "auth": "none"}
    return yaml.safe_dump(document), any(entry["args"].get("filter") for entry in entries)


@pytest.mark.parametrize(("name", "text"), [_param(name, text) for name, text in POLICIES])
def test_explain_answers_as_the_served_function(client_factory, apiserver, tmp_path, capsys, request, name, text):
    spec = parse(text, name).node_source
    cluster = spec.settings["cluster"] if spec.kind == "names" else "prod"
    nodes = cluster_nodes(cluster)
    text, load_filters = reading_metrics_of(text, nodes, request)
    loaded = parse_policy(text, name)
    victims = victims_on(nodes, cluster)
    apiserver.set_nodes([api_node(item["metadata"]["name"], item["metadata"]["labels"]) for item in nodes])
    apiserver.set_pods(victims)
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    nodes_file, victims_file = tmp_path / "nodes.json", tmp_path / "victims.yaml"
    nodes_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    victims_file.write_text(yaml.safe_dump_all(victims))
    client = client_factory(policy, **apiserver.environment())
    full = loaded.node_cache_capable is False
    answered = []
    for profile in loaded.profiles:
        for pod in PODS:
            expected = function_answers(client, profile, pod, nodes, victims, full)
            got, notes = explained(capsys, tmp_path, policy, profile, pod, nodes_file, victims_file)
            assert got == expected, (profile, pod["metadata"]["namespace"])
            if spec.kind == "kubernetes":  # explain read no API: it says what stood in for it
                assert "--nodes" in notes and "Kubernetes API" in notes
            answered.append(json.dumps(expected))
    if load_filters:  # NodeLoad judged on the metrics: the busy nodes' rejections are in what both answered
        assert any("NodeLoad rule 'cpu': load above 0.9" in answer for answer in answered)


def test_every_kind_of_policy_is_compared():
    loaded = [parse(text, name) for name, text in POLICIES if not unknown_plugins(name, text)]
    kinds = {(policy.node_source.kind, policy.node_cache_capable is False) for policy in loaded}
    assert kinds >= {(kind, full) for kind in ("", "names", "static", "kubernetes") for full in (True, False)}
    assert sum(1 for name, _ in POLICIES if name.startswith(("docs/", "README"))) >= 6
