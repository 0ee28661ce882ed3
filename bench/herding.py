"""``python -m bench.herding [--plot PNG]``: the burst docs/plugins/nodeload.md shows, three ways, and its picture.

8 nodes of 4 CPU measured at 0.05, 0.30, 0.35, ... 0.60 (a loopback Prometheus stand-in whose loads do not move),
32 Guaranteed pods of 400m placed one after another by testkit.scheduling's stand-in for kube-scheduler's cycle
(in-tree resource scores, the extender's weight 5), bound through the API stand-in (testkit.fake_apiserver, over
TLS): without an extender, with NodeLoad on the measured load only (no Kubernetes API), and with NodeLoad on the
predicted load (the API configured). Prints each one's pods per node and load after the burst; ``--plot`` draws them
(matplotlib, bench/requirements.txt).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.servers import PrometheusAPI
from extender.cli.explain import call
from extender.http.handler import Extender
from extender.settings import Settings
from testkit.certs import CertificateAuthority
from testkit.fake_apiserver import FakeApiServer, node
from testkit.scheduling import Scheduler, guaranteed_pod

MEASURED = {f"node-{index}": load for index, load in enumerate([0.05, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60])}
PODS, SHARE = 32, 0.1
WAYS = ("no extender", "NodeLoad, measured load only", "NodeLoad, predicted load")


def policy(url: str) -> dict[str, Any]:
    args = {
        "prometheus": {"url": url, "auth": "none"},
        "metrics": [{"name": "cpu", "query": "node_cpu_load", "nodeLabel": "node"}],
        "score": {"metric": "cpu", "strategy": "LeastLoaded"},
    }
    plugins = {"score": {"enabled": [{"name": "NodeLoad", "weight": 1}]}}
    return {
        "nodeCacheCapable": True,
        "profiles": [{"name": "default", "plugins": plugins, "pluginConfig": [{"name": "NodeLoad", "args": args}]}],
    }


def burst(way: str, directory: Path) -> dict[str, int]:
    prometheus = PrometheusAPI(list(MEASURED), MEASURED)
    with FakeApiServer.serving(CertificateAuthority(), directory) as apiserver:
        nodes = [node(name) for name in MEASURED]
        apiserver.set_nodes(nodes)
        path = directory / "policy.json"
        path.write_text(json.dumps(policy(prometheus.url)))
        environment = {"EXTENDER_POLICY": str(path), "EXTENDER_PROCESS_TUNING": "off"}
        if way == WAYS[2]:
            environment.update(apiserver.environment())
        extender = Extender.from_environment(settings=Settings.from_environment(environment))

        def ask(verb: str, payload: dict[str, Any]) -> Any:
            if way == WAYS[0]:
                names = payload["NodeNames"]
                return (
                    {"NodeNames": names, "Error": ""} if verb == "filter" else [{"Host": n, "Score": 0} for n in names]
                )
            return call(extender, "default", verb, payload).json()

        def bind(pod: dict[str, Any], node_name: str) -> None:
            apiserver.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], node_name)

        scheduler = Scheduler(nodes, ask, weight=5, bind=bind)
        for index in range(PODS):
            pod = guaranteed_pod(f"burst-{index}")
            apiserver.add_pod(pod)
            scheduler.schedule(pod)
        scheduler.wait_for_bindings()
    prometheus.close()
    return {state.name: len(state.pods) for state in scheduler.nodes}


def plot(results: dict[str, dict[str, int]], target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(results), figsize=(11, 3.2), sharey=True)
    for axis, (way, placed) in zip(axes, results.items(), strict=True):
        names = list(MEASURED)
        measured = [MEASURED[name] for name in names]
        added = [SHARE * placed[name] for name in names]
        axis.bar(range(len(names)), measured, color="#9aa5b1", label="measured before the burst")
        axis.bar(range(len(names)), added, bottom=measured, color="#3b7dd8", label="the burst's pods (0.1 each)")
        axis.axhline(1.0, color="#c0392b", linewidth=1)
        axis.set_title(f"{way}\nmost loaded {max(m + a for m, a in zip(measured, added, strict=True)):.2f}", fontsize=9)
        axis.set_xticks(range(len(names)), [str(placed[name]) for name in names], fontsize=8)
        axis.set_xlabel("pods per node", fontsize=8)
    axes[0].set_ylabel("load after the burst")
    axes[0].legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    figure.savefig(target, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plot", metavar="PNG", help="draw the three bursts into this file")
    args = parser.parse_args()
    results = {}
    for way in WAYS:
        with tempfile.TemporaryDirectory() as directory:
            placed = burst(way, Path(directory))
        results[way] = placed
        loads = " ".join(f"{MEASURED[name] + SHARE * count:.2f}" for name, count in placed.items())
        print(f"{way}: pods per node {' '.join(map(str, placed.values()))}; load after {loads}")
    if args.plot:
        plot(results, Path(args.plot))


if __name__ == "__main__":
    main()
