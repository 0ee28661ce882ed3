"""What the kubernetes node source adds to a node-name request, for a 5000-node GKE-like cluster.

Serves the bench workload's nodes from the in-test Kubernetes API server (real
HTTPS, metadata-only pages), lets the source list them once, then times:

- ``lookup``: the source's warm path for all N names (what every filter,
  prioritize and preempt call in node-name mode pays), against the baseline of
  building name-only Nodes;
- a whole node-name filter request through the function (functions-framework's
  app, in process) with a label rule, for scale;
- the cold list: how long the background refresh takes for N nodes.

    python -m bench.nodesource_lookup [--nodes 5000] [--rounds 200]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.workload import Workload
from extender.kube import client_from_settings
from extender.nodesource.base import NamesOnly
from extender.nodesource.kubernetes import KubernetesNodes, KubernetesSettings
from extender.settings import Settings
from testkit.certs import CertificateAuthority
from testkit.fake_apiserver import FakeApiServer

POLICY = """
failurePolicy: Fail
nodeSource:
  kubernetes: {}
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: off-gpu
        nodeSelector: {matchExpressions: [{key: cloud.google.com/gke-nodepool, operator: NotIn, values: [gpu]}]}
"""


def timings(run: Callable[[], object], rounds: int) -> list[float]:
    run()  # warm
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def report(label: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"{label:<52} median {statistics.median(samples):9.1f} us   p99 {p99:9.1f} us   min {ordered[0]:9.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()

    workload = Workload(args.nodes)
    names = workload.names(args.nodes)
    ca = CertificateAuthority()
    with tempfile.TemporaryDirectory() as directory, FakeApiServer.serving(ca, Path(directory)) as api:
        api.set_nodes(workload.nodes)
        env = api.environment()
        kube = client_from_settings(Settings.from_environment(env))
        assert kube is not None
        source = KubernetesNodes(kube, KubernetesSettings(), fail_open=False)

        started = time.perf_counter()
        first = source.start()
        assert first is not None
        first.result(timeout=120)
        cold_ms = (time.perf_counter() - started) * 1000
        assert all(node.labels for node in source.lookup(names)), "every node must be known"

        print(f"{args.nodes} nodes, {args.rounds} rounds each, Python {sys.version.split()[0]}")
        print(f"{'cold list (background, HTTPS, pages of 500)':<52} {cold_ms:9.1f} ms")
        lookup = timings(lambda: source.lookup(names), args.rounds)
        baseline = timings(lambda: NamesOnly().lookup(names), args.rounds)
        report(f"kubernetes source lookup, {args.nodes} names", lookup)
        report(f"baseline: name-only Nodes, {args.nodes} names", baseline)
        per_name_ns = statistics.median(lookup) * 1000 / args.nodes
        print(f"{'warm lookup per node name':<52} {per_name_ns:9.1f} ns")

        policy = Path(directory) / "policy.yaml"
        policy.write_text(POLICY)
        os.environ.update(env | {"EXTENDER_POLICY": str(policy)})
        import functions_framework

        root = Path(__file__).resolve().parents[1]
        client = functions_framework.create_app(target="extender", source=str(root / "main.py")).test_client()
        logging.getLogger("extender").setLevel(logging.WARNING)  # one decision line per request would drown the report
        body = workload.body(args.nodes, full_nodes=False)
        answer = client.post("/filter", data=body, content_type="application/json").get_json()
        assert answer["Error"] == ""
        assert len(answer["NodeNames"]) + len(answer["FailedAndUnresolvableNodes"]) == args.nodes
        whole = timings(
            lambda: client.post("/filter", data=body, content_type="application/json"), max(20, args.rounds // 4)
        )
        report(f"whole node-name filter request, {args.nodes} names", whole)
        print(f"{'lookup share of the filter request':<52} {statistics.median(lookup) / statistics.median(whole):9.1%}")


if __name__ == "__main__":
    main()
