"""Predicted load, piece by piece: Kubernetes quantities, pod estimates, which bound pods count and until when, the
pod's own share, allocatable from each source, DaemonSets and pod selectors in rules, RiskBalancing, and what the
decision's nodeFacts and check-policy say. The API and Prometheus are stood in for by saved answers here
(``NodeLoad.judge_offline``); tests/test_nodeload_watch.py reads a real stream."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import orjson
import pytest

from extender.framework.types import Node, Pod
from extender.kube.bound_pods import Bindings, by_node
from extender.kube.demand import PodDemand, Resources, demand_of, owned_by_daemon_set
from extender.kube.lists import BoundPod
from extender.kube.quantity import parse_quantity
from extender.plugins.nodeload import NodeLoad, risk_balancing
from extender.plugins.nodeload.estimates import Estimator, ResourceEstimate
from extender.policy.loader import parse_policy
from extender.settings import Settings
from tests.conftest import ROOT

GI = 2**30


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 0.5),
        ("2", 2.0),
        ("1.5", 1.5),
        (".5", 0.5),
        ("100u", 1e-4),
        ("10n", 1e-8),
        ("1k", 1e3),
        ("1Ki", 1024.0),
        ("128Mi", 128 * 2**20),
        ("1Gi", GI),
        ("1.5Gi", 1.5 * GI),
        ("2Ti", 2 * 2**40),
        ("1M", 1e6),
        ("1G", 1e9),
        ("1e3", 1e3),
        ("1E3", 1e3),
        ("12e-3", 0.012),
        ("1E", 1e18),
        ("+1", 1.0),
        ("-1", -1.0),
        ("0", 0.0),
    ],
)
def test_quantities_read_as_kubernetes_writes_them(text, value):
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "1g", "1 Gi", "Gi", "0x10", "1.2.3", "1e", "1Kb", "one", "1" * 100, " 1"])
def test_what_is_not_a_quantity_is_refused(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def container(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


def usage(spec: dict[str, Any], **estimates: ResourceEstimate) -> tuple[float, float]:
    used = Estimator(estimates).usage(demand_of({"spec": spec}))
    return round(used.cpu, 6), round(used.memory)


def test_a_container_is_estimated_by_its_limit_else_its_request_times_a_factor_else_a_default():
    limited = container({"cpu": "100m", "memory": "64Mi"}, {"cpu": "400m", "memory": "256Mi"})
    requested = container({"cpu": "200m", "memory": "100Mi"})
    bare = container()
    assert usage({"containers": [limited]}) == (0.4, 256 * 2**20)
    # Trimaran's factor 1.5 for CPU, 1 for memory.
    assert usage({"containers": [requested]}) == (0.3, 100 * 2**20)
    assert usage({"containers": [bare]}) == (0.1, 128 * 2**20)
    assert usage({"containers": [limited, requested, bare]}) == (0.8, (256 + 100 + 128) * 2**20)
    custom = {"cpu": ResourceEstimate(2.0, 0.25), "memory": ResourceEstimate(1.2, 2**20)}
    assert usage({"containers": [requested, bare]}, **custom) == (0.65, (120 * 2**20 + 2**20))


def test_init_containers_sidecars_and_overhead_count_as_the_scheduler_counts_them():
    app = container(limits={"cpu": "1", "memory": "1Gi"})
    big_init = container(limits={"cpu": "3", "memory": "512Mi"})
    sidecar = container(limits={"cpu": "500m", "memory": "128Mi"}, restartPolicy="Always")
    # A plain init container runs alone: the pod needs the larger of it and the regular containers.
    assert usage({"containers": [app], "initContainers": [big_init]}) == (3.0, GI)
    # A sidecar runs beside the regular containers, and beside the init containers after it.
    assert usage({"containers": [app], "initContainers": [sidecar]}) == (1.5, GI + 128 * 2**20)
    assert usage({"containers": [app], "initContainers": [sidecar, big_init]}) == (3.5, GI + 128 * 2**20)
    assert usage({"containers": [app], "initContainers": [big_init, sidecar]}) == (3.0, GI + 128 * 2**20)
    # Overhead (RuntimeClass) on top, as it is.
    assert usage({"containers": [app], "overhead": {"cpu": "250m", "memory": "120Mi"}}) == (1.25, GI + 120 * 2**20)


def test_a_pod_s_demand_and_owner_are_read_leniently():
    assert demand_of({"spec": {"containers": [container({"cpu": "bogus"}, {"cpu": 2})]}}).containers == (
        Resources(None, 2.0, None, None),
    )
    assert demand_of(None) == PodDemand() and demand_of({"spec": "x"}) == PodDemand()
    owned = {"metadata": {"ownerReferences": [{"kind": "ReplicaSet"}, {"kind": "DaemonSet"}]}}
    assert owned_by_daemon_set(owned) and not owned_by_daemon_set({"metadata": {"ownerReferences": [{"kind": "Job"}]}})


# --- NodeLoad judging on saved answers ----------------------------------------------------------------------------

NODES = ["a", "b", "c"]
NOW = 1_000_000.0


@pytest.fixture(autouse=True)
def judged_at_the_samples_time(monkeypatch):
    """Saved answers are judged at their samples' time, as ``explain --metrics`` judges them."""
    from extender.framework import clock

    monkeypatch.setattr(clock, "now", lambda: NOW)


def answer(values: dict[str, float], at: float = NOW) -> bytes:
    result = [{"metric": {"node": node}, "value": [at, repr(value)]} for node, value in values.items()]
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def plugin(args: dict[str, Any], node_names: bool = True) -> Any:
    base = {
        "prometheus": {"url": "http://127.0.0.1:9"},
        "metrics": [{"name": "cpu", "query": "q", "nodeLabel": "node"}],
    }
    document = {
        "nodeCacheCapable": node_names,
        "profiles": [
            {
                "name": "default",
                "plugins": {
                    "filter": {"enabled": [{"name": "NodeLoad"}]},
                    "score": {"enabled": [{"name": "NodeLoad", "weight": 1}]},
                },
                "pluginConfig": [{"name": "NodeLoad", "args": {**base, **args}}],
            }
        ],
    }
    return parse_policy(json.dumps(document), "test", Settings(result_cache=False)).profiles["default"]


def bound(uid: str, node: str, at: float, cpu: str = "400m") -> BoundPod:
    return BoundPod(
        uid, node, at, demand_of({"spec": {"containers": [container(limits={"cpu": cpu, "memory": "1Gi"})]}})
    )


def pod(uid: str = "p", cpu: str = "400m", owner: str | None = None, namespace: str = "default") -> Pod:
    raw: dict[str, Any] = {
        "metadata": {"uid": uid, "namespace": namespace},
        "spec": {"containers": [container(limits={"cpu": cpu})]},
    }
    if owner:
        raw["metadata"]["ownerReferences"] = [{"kind": owner}]
    return Pod(uid, uid, namespace, {}, {}, 0, raw)


FOUR_CPU = {name: Resources(4.0, None, 16 * GI, None) for name in NODES}


def judged(profile: Any, loads: dict[str, float], pods: list[BoundPod], the_pod: Pod | None = None, **answers: bytes):
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    node_load.judge_offline({"cpu": answer(loads), **answers}, Bindings(by_node({p.uid: p for p in pods})), FOUR_CPU)
    names = [Node(name) for name in loads]
    return profile.filter(the_pod or pod(), names), profile.prioritize(the_pod or pod(), names)


def test_a_pod_bound_after_the_sample_counts_until_a_sample_newer_than_its_binding_plus_the_delay():
    profile = plugin(
        {
            "filter": [{"metric": "cpu", "above": 0.9}],
            "metrics": [{"name": "cpu", "query": "q", "nodeLabel": "node", "delay": "2m"}],
        }
    )
    pods = [
        bound("before-sample-long-ago", "a", NOW - 121),  # sample newer than binding + 2m: shown by the metric
        bound("within-delay", "a", NOW - 119),  # the sample may not show it yet
        bound("after-sample", "a", NOW + 5),  # bound after the sample: it cannot show it
        bound("elsewhere", "b", NOW + 5),
    ]
    filtered, scored = judged(profile, {"a": 0.5, "b": 0.5, "c": 0.5}, pods)
    facts = filtered.observed["NodeLoad"]("a")["cpu"]
    # 0.5 measured + 2 × 0.1 in flight + 0.1 the pod itself.
    assert facts["inFlight"] == {"pods": 2, "share": 0.2} and facts["podShare"] == 0.1 and facts["predicted"] == 0.8
    assert filtered.feasible == ["a", "b", "c"]
    assert scored.by_plugin["NodeLoad"] == {"a": 20, "b": 30, "c": 40}


def test_the_pod_s_own_share_decides_whether_it_fits():
    profile = plugin({"filter": [{"metric": "cpu", "above": 0.9}]})
    filtered, _ = judged(profile, {"a": 0.85, "b": 0.8, "c": 0.5}, [], the_pod=pod(cpu="400m"))
    # a: 0.85 + 0.1 > 0.9; b: 0.8 + 0.1 is not above it.
    assert filtered.feasible == ["b", "c"] and filtered.rejected["a"].reason == "NodeLoad rule 'cpu': load above 0.9"


def test_the_pod_itself_is_never_counted_twice():
    profile = plugin({})
    _, scored = judged(profile, {"a": 0.5}, [bound("p", "a", NOW + 1)], the_pod=pod("p"))
    assert scored.by_plugin["NodeLoad"] == {"a": 40}


def test_daemon_set_pods_pass_rules_unless_one_opts_in_and_rules_select_pods():
    profile = plugin(
        {
            "filter": [
                {"metric": "cpu", "above": 0.9},
                {"metric": "cpu", "above": 0.5, "pods": {"namespaces": ["batch"]}},
                {"metric": "cpu", "above": 0.99, "daemonSets": True},
            ]
        }
    )
    loads = {"a": 0.95, "b": 0.6, "c": 0.3}
    assert judged(profile, loads, [])[0].feasible == ["b", "c"]
    assert judged(profile, loads, [], the_pod=pod(namespace="batch"))[0].feasible == ["c"]
    # A DaemonSet pod: only the rule that opts in judges it (a: 0.95 + 0.1 is above 0.99).
    assert judged(profile, loads, [], the_pod=pod(owner="DaemonSet"))[0].feasible == ["b", "c"]
    assert judged(profile, {**loads, "a": 0.85}, [], the_pod=pod(owner="DaemonSet"))[0].feasible == ["a", "b", "c"]
    lenient = plugin({"filter": [{"metric": "cpu", "above": 0.1}]})
    assert judged(lenient, loads, [], the_pod=pod(owner="DaemonSet"))[0].feasible == ["a", "b", "c"]


def test_allocatable_comes_from_the_request_s_nodes_first_then_the_api_then_a_capacity_metric():
    profile = plugin({"metrics": [{"name": "cpu", "query": "q", "nodeLabel": "node", "capacity": "cap"}]})
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    assert [metric.name for metric in node_load.config.queried] == ["cpu", "cpu:allocatable"]
    capacity = answer({"a": 8.0, "b": 8.0, "c": 8.0})
    node_load.judge_offline(
        {"cpu": answer({"a": 0.5, "b": 0.5, "c": 0.5}), "cpu:allocatable": capacity}, None, {"b": Resources(2.0)}
    )
    nodes = [Node("a", allocatable={"cpu": "1"}), Node("b"), Node("c"), Node("d")]
    facts = profile.filter(pod(cpu="400m"), nodes).observed["NodeLoad"]
    assert facts("a")["cpu"]["podShare"] == 0.4  # the request's node object: 1 CPU
    assert facts("b")["cpu"]["podShare"] == 0.2  # the API's list: 2 CPU
    assert facts("c")["cpu"]["podShare"] == 0.05  # the capacity metric: 8 CPU
    assert facts("c")["cpu"]["inFlight"] == {"unknown": "no --in-flight file: no in-flight pods counted"}


def test_a_node_of_unknown_allocatable_and_a_metric_of_no_resource_are_judged_as_measured():
    profile = plugin(
        {
            "metrics": [
                {"name": "cpu", "query": "q", "nodeLabel": "node"},
                {"name": "disk", "query": "d", "nodeLabel": "node"},
            ],
            "filter": [{"metric": "disk", "above": 0.5}],
        }
    )
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    assert [metric.resource for metric in node_load.config.metrics] == ["cpu", None]
    node_load.judge_offline(
        {"cpu": answer({"a": 0.5, "z": 0.5}), "disk": answer({"a": 0.5, "z": 0.5})}, Bindings({}), FOUR_CPU
    )
    facts = profile.filter(pod(), [Node("a"), Node("z")]).observed["NodeLoad"]
    assert facts("a")["disk"] == {"value": 0.5, "ageSeconds": 0.0, "predicted": 0.5}
    assert facts("z")["cpu"]["predicted"] == 0.5 and facts("z")["cpu"]["podShare"] is None
    assert "allocatable is unknown" in facts("z")["cpu"]["inFlight"]["unknown"]


# Trimaran's LoadVariationRiskBalancing (pkg/trimaran/loadvariationriskbalancing): risk = (mu + margin * sigma) / 2.
@pytest.mark.parametrize(
    ("mean", "deviation", "margin", "sensitivity", "score"),
    [
        (0.0, 0.0, 1, 1, 100),
        (0.5, 0.0, 1, 1, 75),
        (0.5, 0.2, 1, 1, 65),
        (0.5, 0.2, 2, 1, 55),
        (0.5, 0.25, 1, 2, 50),
        (1.2, 0.9, 1, 1, 5),
        (0.4, 0.5, 3, 1, 30),
    ],
)
def test_risk_balancing_scores_as_trimaran(mean, deviation, margin, sensitivity, score):
    assert round(risk_balancing(mean, deviation, margin, sensitivity)) == score


def test_risk_balancing_takes_the_worst_resource_with_in_flight_pods_added_to_the_mean():
    profile = plugin(
        {
            "metrics": [
                {"name": "cpu", "query": "c", "nodeLabel": "node"},
                {"name": "memory", "query": "m", "nodeLabel": "node"},
            ],
            "score": {"strategy": "RiskBalancing", "window": "10m", "margin": 1},
        }
    )
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    queried = {metric.name: metric.query for metric in node_load.config.queried}
    assert (
        queried["cpu:mean"] == "avg_over_time((c)[600s:60s])"
        and queried["memory:stddev"] == "stddev_over_time((m)[600s:60s])"
    )
    answers = {
        "cpu": answer({"a": 0.3, "b": 0.3}),
        "memory": answer({"a": 0.3, "b": 0.3}),
        "cpu:mean": answer({"a": 0.3, "b": 0.3}),
        "cpu:stddev": answer({"a": 0.1, "b": 0.0}),
        "memory:mean": answer({"a": 0.2, "b": 0.6}),
        "memory:stddev": answer({"a": 0.0, "b": 0.0}),
    }
    node_load.judge_offline(answers, Bindings(by_node({"x": bound("x", "a", NOW + 1, cpu="800m")})), FOUR_CPU)
    scores = profile.prioritize(pod(cpu="400m"), [Node("a"), Node("b")]).by_plugin["NodeLoad"]
    # a: cpu mean 0.3 + 0.2 in flight + 0.1 own = 0.6, sigma 0.1 -> 65; memory 0.2 + 128Mi/16Gi own -> 90: 65 counts.
    # b: cpu 0.4 -> 80; memory 0.6 + 0.008 -> 70: 70 counts.
    assert scores == {"a": 65, "b": 70}


def risk_scores_after_a_burst(seconds: float) -> tuple[dict[str, int], dict[str, Any]]:
    """RiskBalancing over a 10-minute window, ``seconds`` after three pods of 800m (0.6 of 4 CPU) were bound to node
    a, whose mean still shows 0.3; b, busier before the burst (0.5), got none. The metric's delay is 5 minutes."""
    profile = plugin(
        {
            "metrics": [{"name": "cpu", "query": "c", "nodeLabel": "node", "delay": "5m"}],
            "score": {"strategy": "RiskBalancing", "window": "10m", "margin": 1},
        }
    )
    node_load = next(p for p in profile.filters if isinstance(p, NodeLoad))
    answers = {
        "cpu": answer({"a": 0.3, "b": 0.5}),
        "cpu:mean": answer({"a": 0.3, "b": 0.5}),
        "cpu:stddev": answer({"a": 0.0, "b": 0.0}),
    }
    burst = {f"x{index}": bound(f"x{index}", "a", NOW - seconds, cpu="800m") for index in range(3)}
    node_load.judge_offline(answers, Bindings(by_node(burst)), FOUR_CPU)
    prioritized = profile.prioritize(pod(cpu="400m"), [Node("a"), Node("b")])
    return prioritized.by_plugin["NodeLoad"], prioritized.observed["NodeLoad"]("a")["cpu:mean"]


def test_risk_balancing_counts_a_bound_pod_until_its_window_has_fully_seen_it():
    # Just past the delay the 10-minute mean has seen 10 s of the pods: they count almost whole (0.59 of 0.6), and
    # the fuller node a (0.3 + 0.59 + the pod's 0.1) scores below b (0.5 + 0.1: 70), not above it (80, as measured).
    scores, mean = risk_scores_after_a_burst(310)
    assert scores["a"] < scores["b"] == 70, (scores, mean)
    assert scores == {"a": 51, "b": 70}
    # Halfway through the window the mean holds half of them: the other half counts (0.3 + 0.3 + 0.1 -> 65).
    assert risk_scores_after_a_burst(600)[0]["a"] == 65
    # Once the window has fully seen them (delay + window), only the mean counts: 0.3 + 0.1 -> 80.
    assert risk_scores_after_a_burst(901)[0]["a"] == 80
    node_load = next(p for p in plugin({"score": {"strategy": "RiskBalancing", "window": "10m"}}).filters)
    assert node_load.horizon == 120 + 600 + 180 + 60  # delay + window + maxAge + clock skew


def policy_json(args: dict[str, Any], **policy: Any) -> str:
    """A policy file whose one profile filters and scores with NodeLoad given ``args``."""
    plugins = {"filter": {"enabled": [{"name": "NodeLoad"}]}, "score": {"enabled": [{"name": "NodeLoad", "weight": 1}]}}
    profile = {"name": "default", "plugins": plugins, "pluginConfig": [{"name": "NodeLoad", "args": args}]}
    return json.dumps({**policy, "profiles": [profile]})


def test_check_policy_says_when_bursts_are_not_accounted_for(tmp_path):
    path = tmp_path / "policy.json"
    args = {
        "prometheus": {"url": "http://127.0.0.1:9"},
        "metrics": [
            {"name": "cpu", "query": "q", "nodeLabel": "node"},
            {"name": "gpu", "query": "g", "nodeLabel": "node"},
        ],
        "filter": [{"metric": "gpu", "above": 0.9}],
    }
    path.write_text(policy_json(args))
    checked = subprocess.run(
        [sys.executable, "-m", "extender", "check-policy", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert checked.returncode == 0, checked.stderr
    assert (
        "note: NodeLoad: bursts are not accounted for: without the Kubernetes API (KUBERNETES_API_URL)"
        in checked.stdout
    )
    assert (
        "metric gpu measures no resource (cpu or memory): no in-flight pods or pod estimate is added to it"
        in checked.stdout
    )


def test_explain_shows_the_prediction_offline_with_in_flight_pods_from_a_file(tmp_path):
    now = 1_700_000_000.0
    policy_path = tmp_path / "policy.json"
    args = {
        "prometheus": {"url": "http://127.0.0.1:9"},
        "metrics": [{"name": "cpu", "query": "q", "nodeLabel": "node"}],
        "filter": [{"metric": "cpu", "above": 0.8}],
    }
    policy_path.write_text(policy_json(args, nodeCacheCapable=False))
    saved = tmp_path / "cpu.json"
    saved.write_bytes(answer({"a": 0.5, "b": 0.5}, at=now))
    from testkit.fake_apiserver import node as node_object
    from testkit.fake_apiserver import pod as pod_object

    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "List", "items": [node_object("a"), node_object("b")]}))
    in_flight = tmp_path / "bound.json"
    bound_pods = [pod_object(f"x{i}", f"u{i}", "a", cpu="500m", bound_at=now + 1) for i in range(2)]
    in_flight.write_text(json.dumps({"kind": "List", "items": bound_pods}))
    incoming = tmp_path / "pod.json"
    incoming.write_text(json.dumps(pod_object("web", "u-web", "", cpu="400m")))
    command = [
        sys.executable,
        "-m",
        "extender",
        "explain",
        str(incoming),
        "--nodes",
        str(nodes),
        "--policy",
        str(policy_path),
        "--metrics",
        f"cpu={saved}",
        "--in-flight",
        str(in_flight),
    ]
    shown = subprocess.run(
        [*command, "--json"], cwd=ROOT, capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"}
    )
    assert shown.returncode == 0, shown.stderr
    rows = {row["name"]: row for row in json.loads(shown.stdout)["nodes"]}
    cpu = rows["a"]["measured"]["NodeLoad"]["cpu"]
    # 0.5 measured + 2 × 500m / 4 in flight + 400m / 4 the pod = 0.85: above 0.8.
    assert cpu["inFlight"] == {"pods": 2, "share": 0.25} and cpu["podShare"] == 0.1 and cpu["predicted"] == 0.85
    assert rows["a"]["answer"] == "FailedNodes" and rows["b"]["answer"] == "kept"
    table = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"}
    )
    line = next(line for line in table.stdout.splitlines() if line.startswith("a "))
    assert "cpu 0.5 (0 s old) +2 in flight 0.25 +pod 0.1 = 0.85" in line
    assert "the --in-flight pods for the pods bound to nodes" in table.stderr


@pytest.mark.parametrize(
    "status",
    [
        {
            "allocatable": {"cpu": "3920m", "memory": "12Gi", "pods": "110"},
            "images": [{"names": ["x"], "sizeBytes": 1}],
        },
        {"allocatable": {"cpu": 4}},  # not strings: not read
        "not an object",
        None,
    ],
)
def test_both_decoders_read_a_full_node_s_allocatable_alike(status):
    from extender.wire.decode import decode_fast_or_full, decode_full
    from extender.wire.decode_cost import Meter
    from extender.wire.schemas import ExtenderArgsSchema

    item: dict[str, Any] = {"metadata": {"name": "a", "labels": {"k": "v"}}}
    if status is not None:
        item["status"] = status
    body = orjson.dumps(
        {"Pod": {"metadata": {"uid": "u"}}, "Nodes": {"metadata": {}, "items": [item]}, "NodeNames": None}
    )
    fast = ExtenderArgsSchema().load(decode_fast_or_full(body, Meter(2**30)))
    full = ExtenderArgsSchema().load(decode_full(body, Meter(2**30)))
    assert fast.nodes[0].allocatable == full.nodes[0].allocatable
    expected = (
        {"cpu": "3920m", "memory": "12Gi", "pods": "110"} if isinstance(status, dict) and status.get("images") else None
    )
    assert full.nodes[0].allocatable == expected
