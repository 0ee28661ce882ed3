"""``python -m bench.burst``: pods per second through kube-scheduler's cycle, with and without the extender.

A burst of pods, all pending at once, placed one after another by testkit.scheduling's stand-in for kube-scheduler's
scheduling cycle (the in-tree fit filter, which stops at ``percentageOfNodesToScore`` of the nodes feasible: every
node by default, as Terraform sets it, or kube-scheduler's adaptive sample, listed as its parallel workers find
them; the extender's filter over those, the in-tree resource scores beside the extender's prioritize score × weight
5, the highest total), each pod then bound asynchronously as kube-scheduler's binding cycle does: a thread per pod
waits for kube-scheduler's client rate limiter (``clientConnection`` qps 50, burst 100, its defaults) and POSTs the
binding to the API stand-in (testkit.fake_apiserver, over TLS) while the next pod's filter is already sent. The pods
are alike, or with ``--shapes`` of several CPU requests in turn, as a burst of several workloads is. Measured for:

- no extender: the stand-in's own pace, the reference;
- echo floor: bench/echo_floor.py served as the function is, the least a correct extender does (the names echoed,
  zero scores): what serving an answer costs before any of the extender's own work;
- node names: the function (served as Cloud Functions serves it, bench.servers) with the default policy, node-name
  requests, ``KUBERNETES_API_URL`` set;
- node names + NodeLoad: the default policy with NodeLoad filtering and scoring (bench.run's ``NODELOAD_ARGS``) on
  a loopback Prometheus stand-in, in-flight accounting on (the API stand-in the scheduler binds through);

at each cluster size, with that API healthy and hung (the function's ``KUBERNETES_API_URL`` accepts connections and
never answers; the scheduler's own bindings still land; no extender and the echo floor read no API, so they run with
the healthy one only). Every run starts its servers afresh and warms the function
up with a few pods (not timed), then pauses (``--pause``: past NodeLoad's refreshInterval, the burst starts as one
after a quiet spell does); the pace is the burst's pods over the time from its first cycle to its last binding.
A run whose cycles pass ``--max-seconds`` stops there and counts the pods bound by then. Ways take turns within each
round; the table gives medians over the rounds and each pace's ratio to no extender's at that size.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import queue
import ssl
import statistics
import sys
import tempfile
import threading
import time
from base64 import b64decode
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from bench import report
from bench.client import Connection
from bench.run import nodeload_policy
from bench.servers import AS_DEPLOYED, ROOT, PrometheusAPI, Server, ServerSpec, function_spec
from bench.workload import POOLS, node_name
from testkit.fake_apiserver import node
from testkit.scheduling import Scheduler, guaranteed_pod

NONE, FLOOR, NAMES, NODELOAD = "no extender", "echo floor", "node names", "node names + NodeLoad"
WAYS = (NONE, FLOOR, NAMES, NODELOAD)
# The ways that read no Kubernetes API: run with the healthy one only.
NO_API = (NONE, FLOOR)
HEALTHY, HUNG = "healthy API", "hung API"
DEFAULT_POLICY = ROOT / "extender" / "policy" / "default.yaml"
# kube-scheduler's clientConnection defaults: the client every binding goes through.
QPS, BURST = 50.0, 100
WARM_UP_PODS = 10
# After the warm-up: what a function does once it has answered (importing Cloud Logging's library) is done by then.
WARM_UP_PAUSE = 1.0
WEIGHT = 5


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...] = (1000, 5000)
    pods: int = 300
    rounds: int = 1
    apis: tuple[str, ...] = (HEALTHY, HUNG)
    qps: float = QPS
    burst: int = BURST
    max_seconds: float = 20.0
    warm_up: int = WARM_UP_PODS
    pause: float = WARM_UP_PAUSE
    # The scheduler's percentageOfNodesToScore: 100 (Terraform's on the extender's profile) asks the extender about
    # every node; 0 (kube-scheduler's default) about an adaptive sample that moves round the cluster.
    percentage: int = 100
    # Pod shapes (CPU requests) the pods take in turn: NodeLoad judges every node for the first pod of each.
    shapes: int = 1
    # Another commit's function (its exported tree and short name), measured in the same run.
    against: tuple[Path, str] | None = None
    log: Callable[[str], None] = print


@dataclass
class Run:
    way: str
    nodes: int
    api: str
    round: int
    pods: int  # bound in the timed burst
    seconds: float  # from the burst's first cycle to its last binding
    # Per pod: the extender's filter + prioritize round trips, in ms (none without an extender).
    extender_ms: list[float] = field(default_factory=list)
    cycles_seconds: float = 0.0  # the cycles alone, without waiting for the last bindings
    # The function's CPU time (its serving worker's, all threads) per pod of the burst, in ms: less moved than wall
    # time by other work on the machine. None without an extender.
    cpu_ms: float | None = None

    @property
    def pace(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0


def run(plan: Plan) -> list[Run]:
    runs: list[Run] = []
    ways = [*WAYS, *((f"{NAMES} @{plan.against[1]}", f"{NODELOAD} @{plan.against[1]}") if plan.against else ())]
    for round_ in range(plan.rounds):
        for size in plan.sizes:
            for api in plan.apis:
                # Taking turns: the order reversed every other round, so that a drifting machine falls on all alike.
                turn = ways if round_ % 2 == 0 else ways[::-1]
                for way in turn:
                    if way in NO_API and api != HEALTHY:
                        continue  # nothing reads that API
                    done = burst(plan, way, size, api, round_)
                    ms = f", extender {statistics.median(done.extender_ms):.1f} ms/pod" if done.extender_ms else ""
                    ms += f", its CPU {done.cpu_ms:.1f} ms/pod" if done.cpu_ms is not None else ""
                    plan.log(
                        f"round {round_ + 1} N={size} {api} {way}: {done.pods} pods in {done.seconds:.2f} s, "
                        f"{done.pace:.1f} pods/s (cycles {done.cycles_seconds:.2f} s{ms})"
                    )
                    runs.append(done)
    return runs


def burst(plan: Plan, way: str, size: int, api: str, round_: int) -> Run:
    nodes = cluster(size)
    pods = [burst_pod(index, plan.shapes) for index in range(plan.warm_up + plan.pods)]
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    stand_ins = context.Process(target=serve_stand_ins, args=(child, size, pods, api == HUNG), daemon=True)
    stand_ins.start()
    with ExitStack() as stack:
        stack.callback(stand_ins.join, 20)
        stack.callback(parent.send, "stop")
        if not parent.poll(120):
            raise RuntimeError("the API and Prometheus stand-ins did not start")
        started: dict[str, Any] = parent.recv()
        binder = Binder(started["api"], plan.qps, plan.burst)
        stack.callback(binder.close)
        timings: list[float] = []
        served = stack.enter_context(ServedFunction(way, plan, started, stack)) if way != NONE else None
        call = _no_extender if served is None else _timed(served.ask, timings)
        scheduler = Scheduler(
            nodes,
            call,
            weight=WEIGHT,
            bind=binder.bind,
            bind_delay=(0.0, 0.0),
            percentage_of_nodes_to_score=plan.percentage,
            parallel_order=True,
        )
        for pod in pods[: plan.warm_up]:
            scheduler.schedule(pod)
        scheduler.wait_for_bindings()
        time.sleep(plan.pause)
        scheduler.bindings.clear()
        binder.reset()
        timings.clear()
        cpu_before = served.server.cpu_seconds() if served is not None else 0.0
        started_at = time.monotonic()
        for pod in pods[plan.warm_up :]:
            scheduler.schedule(pod)  # a pod no node fits is not bound, and not counted
            if time.monotonic() - started_at > plan.max_seconds:
                break
        cycles = time.monotonic() - started_at
        scheduler.wait_for_bindings()
        cpu_ms = (served.server.cpu_seconds() - cpu_before) * 1000 / len(timings) if served and timings else None
        if binder.failures:
            raise RuntimeError(f"{way}: bindings failed: {binder.failures[:3]}")
        last = max(binder.bound_at, default=started_at)
        per_pod = [seconds * 1000 for seconds in timings]
        return Run(way, size, api, round_, len(binder.bound_at), last - started_at, per_pod, cycles, cpu_ms)


def burst_pod(index: int, shapes: int) -> dict[str, Any]:
    """The burst's pod ``index``, of the ``index % shapes``-th shape: 400m of CPU, 10m more per shape."""
    return guaranteed_pod(f"burst-{index}", cpu=f"{400 + 10 * (index % shapes)}m")


def cluster(size: int) -> list[dict[str, Any]]:
    """``size`` nodes of the bench's GKE-like pools (their names and allocatable; nothing the cycle does not read)."""
    nodes = []
    for index in range(size):
        pool = POOLS[index % len(POOLS)]
        nodes.append(node(node_name(index, pool), cpu=str(pool.cpu), memory=f"{pool.memory_gi}Gi"))
    return nodes


def serve_stand_ins(pipe: Pipe, size: int, pods: Sequence[dict[str, Any]], hung: bool) -> None:
    """In a process of its own (the scheduler's and the function's work must not share its interpreter): the API
    stand-in holding the nodes and the pending pods, a Prometheus stand-in, and for ``hung`` an API that accepts
    connections and never answers. Sends the environments, then serves until told to stop."""
    from testkit.certs import CertificateAuthority
    from testkit.fake_apiserver import FakeApiServer

    nodes = cluster(size)
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        ca = CertificateAuthority()
        (Path(directory) / "api").mkdir()
        api = stack.enter_context(FakeApiServer.serving(ca, Path(directory) / "api"))
        api.set_nodes(nodes)
        for pod in pods:
            api.add_pod(pod)
        prometheus = PrometheusAPI([item["metadata"]["name"] for item in nodes])
        stack.callback(prometheus.close)
        extender_api = api.environment()
        if hung:
            (Path(directory) / "hung").mkdir()
            silent = stack.enter_context(FakeApiServer.serving(ca, Path(directory) / "hung"))
            silent.stall_handshake = True
            extender_api = silent.environment()
        pipe.send({"api": api.environment(), "extender_api": extender_api, "prometheus": prometheus.url})
        pipe.recv()


class ServedFunction:
    """The function served for ``way`` (a context manager): ``ask(verb, payload)`` posts to it as the scheduler does."""

    def __init__(self, way: str, plan: Plan, started: dict[str, Any], stack: ExitStack) -> None:
        self.server = Server(_served_spec(way, plan, started, stack))

    def __enter__(self) -> ServedFunction:
        self.server.wait_listening()
        self.connection = Connection(self.server.port)
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.close()
        self.server.stop()

    def ask(self, verb: str, payload: dict[str, Any]) -> Any:
        _, status, answer = self.connection.post(f"/{verb}", orjson.dumps(payload))
        if status != 200:
            raise RuntimeError(f"{self.server.spec.name} answered {verb} with {status}: {answer[:300]!r}")
        return orjson.loads(answer)


def _served_spec(way: str, plan: Plan, started: dict[str, Any], stack: ExitStack) -> ServerSpec:
    """The echo floor, or the function (this checkout's, or another commit's) on its policy for ``way``."""
    if way == FLOOR:
        return function_spec(way, "bench/echo_floor.py", ROOT, **AS_DEPLOYED)
    root = ROOT
    if "@" in way:
        assert plan.against is not None
        root = plan.against[0]
    document = (
        nodeload_policy(started["prometheus"], DEFAULT_POLICY)
        if way.startswith(NODELOAD)
        else orjson.dumps(_yaml(DEFAULT_POLICY)).decode()
    )
    policy = stack.enter_context(tempfile.NamedTemporaryFile("w", suffix=".json", prefix="policy-burst-"))
    policy.write(document)
    policy.flush()
    env = {**AS_DEPLOYED, **started["extender_api"], "EXTENDER_POLICY": policy.name}
    return function_spec(way, "main.py", root, **env)


def _yaml(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text())


def _no_extender(verb: str, payload: dict[str, Any]) -> Any:
    """Every node passes; no score is added (what the scheduler does without an extender)."""
    return {"NodeNames": payload["NodeNames"], "Error": ""} if verb == "filter" else []


def _timed(ask: Callable[[str, dict[str, Any]], Any], timings: list[float]) -> Callable[[str, dict[str, Any]], Any]:
    """``ask``, timed: a pod's filter appends its seconds to ``timings``, its prioritize adds to them."""

    def call(verb: str, payload: dict[str, Any]) -> Any:
        started = time.perf_counter()
        answer = ask(verb, payload)
        seconds = time.perf_counter() - started
        if verb == "filter":
            timings.append(seconds)
        else:
            timings[-1] += seconds
        return answer

    return call


class Binder:
    """kube-scheduler's default binder: each binding waits for the client's rate limiter (a token bucket, as
    client-go's), then POSTs the binding subresource over one of a few kept-alive TLS connections."""

    def __init__(self, environment: dict[str, str], qps: float, burst: int) -> None:
        url = urlsplit(environment["KUBERNETES_API_URL"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.token = environment["KUBERNETES_TOKEN"]
        self.context = ssl.create_default_context(cadata=b64decode(environment["KUBERNETES_CA_DATA"]).decode())
        self.qps, self.burst = qps, burst
        self._lock = threading.Lock()
        self._connections: queue.SimpleQueue[http.client.HTTPSConnection] = queue.SimpleQueue()
        self.reset()

    def reset(self) -> None:
        """A full bucket, nothing bound yet: the burst starts as the scheduler would after a quiet time."""
        with self._lock:
            self._tokens, self._refilled = float(self.burst), time.monotonic()
            self.bound_at: list[float] = []
            self.failures: list[str] = []

    def bind(self, pod: dict[str, Any], node_name: str) -> None:
        self._wait_for_token()
        meta = pod["metadata"]
        body = {
            "kind": "Binding",
            "apiVersion": "v1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "target": {"kind": "Node", "name": node_name},
        }
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
        try:
            connection = self._connections.get_nowait()
        except queue.Empty:
            connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
        try:
            connection.request(
                "POST",
                path,
                json.dumps(body),
                {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            )
            answer = connection.getresponse()
            text = answer.read()
        except OSError as exc:
            connection.close()
            with self._lock:
                self.failures.append(f"{meta['name']}: {exc}")
            return
        self._connections.put(connection)
        with self._lock:
            if answer.status == 201:
                self.bound_at.append(time.monotonic())
            else:
                self.failures.append(f"{meta['name']}: {answer.status} {text[:200]!r}")

    def _wait_for_token(self) -> None:
        """Reserve the next token and sleep until it is due (golang.org/x/time/rate's Wait); qps 0: no limit."""
        if self.qps <= 0:
            return
        with self._lock:
            now = time.monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._refilled) * self.qps) - 1
            self._refilled = now
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait:
            time.sleep(wait)

    def close(self) -> None:
        while True:
            try:
                self._connections.get_nowait().close()
            except queue.Empty:
                return


# --- the report ---------------------------------------------------------------------------------------------------


def table(runs: list[Run], pods: int) -> str:
    """Markdown: per size and API, each way's median pace and its ratio to no extender's at that size."""
    ways = list(dict.fromkeys(run.way for run in runs))
    header = f"| burst of {pods} pods | " + " | ".join(ways) + " |"
    lines = [header, "|---|" + "---:|" * len(ways)]
    for size in dict.fromkeys(run.nodes for run in runs):
        reference = _median_pace(runs, NONE, size, HEALTHY)
        for api in dict.fromkeys(run.api for run in runs):
            cells = []
            for way in ways:
                pace = _median_pace(runs, way, size, api)
                if pace is None:
                    cells.append("")
                elif way == NONE or not reference:
                    cells.append(f"{pace:.1f} pods/s")
                else:
                    cells.append(f"{pace:.1f} pods/s ({pace / reference:.2f}×)")
            label = f"{size} nodes" + ("" if api == HEALTHY else f", {api}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def extender_times(runs: list[Run]) -> str:
    """Per run kind: the median of the extender's filter + prioritize round trips per pod, and its CPU per pod."""
    lines = ["Extender's filter + prioritize per pod (median ms; the cycle waits for both), and the function's CPU:"]
    grouped: dict[tuple[int, str, str], list[Run]] = {}
    for done in runs:
        grouped.setdefault((done.nodes, done.api, done.way), []).append(done)
    for (size, api, way), kind in grouped.items():
        times = [ms for done in kind for ms in done.extender_ms]
        cpu = [done.cpu_ms for done in kind if done.cpu_ms is not None]
        if times:
            lines.append(
                f"  N={size} {api} {way}: {statistics.median(times):.1f} ms (p90 {_p90(times):.1f}), "
                f"CPU {statistics.median(cpu):.1f} ms"
            )
    return "\n".join(lines)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _median_pace(runs: list[Run], way: str, size: int, api: str) -> float | None:
    paces = [run.pace for run in runs if (run.way, run.nodes, run.api) == (way, size, api)]
    return statistics.median(paces) if paces else None


def plot(runs: list[Run], target: Path, title: str) -> None:
    """Grouped bars: pods per second per size and API, a bar per way (another commit's paler, hatched), no
    extender's pace as a dashed line; saved as bench.plot saves its pictures."""
    from bench.plot import MissingPlotLibrary, _save

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingPlotLibrary(f"--plot needs matplotlib: pip install -r bench/requirements.txt ({exc})") from None
    ways = sorted(
        (way for way in dict.fromkeys(run.way for run in runs) if way != NONE),
        key=lambda way: (WAYS.index(way.split(" @")[0]), way),
    )
    apis = list(dict.fromkeys(run.api for run in runs))
    groups = [(size, api) for size in dict.fromkeys(run.nodes for run in runs) for api in apis]
    figure, axis = plt.subplots(figsize=(10, 3.4))
    width = 0.8 / max(1, len(ways))
    colours = {FLOOR: "tab:gray", NAMES: "tab:blue", NODELOAD: "tab:green"}
    for index, way in enumerate(ways):
        paces = [_median_pace(runs, way, size, api) or 0.0 for size, api in groups]
        positions = [group + (index - (len(ways) - 1) / 2) * width for group in range(len(groups))]
        other = "@" in way
        style = {"alpha": 0.45, "hatch": "//"} if other else {}
        axis.bar(positions, paces, width, label=way, color=colours[way.split(" @")[0]], **style)
    for group, (size, _) in enumerate(groups):
        reference = _median_pace(runs, NONE, size, HEALTHY)
        if reference:
            axis.hlines(reference, group - 0.45, group + 0.45, colors="black", linestyles="--", linewidth=1)
    axis.plot([], [], color="black", linestyle="--", linewidth=1, label=NONE)
    axis.set_xticks(range(len(groups)), [f"{size} nodes\n{api}" for size, api in groups], fontsize=8)
    axis.set_ylabel("pods per second (bound)")
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.suptitle(title, fontsize=8)
    figure.tight_layout()
    _save(figure, target)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.burst", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,5000", help="comma-separated cluster sizes (default 1000,5000)")
    parser.add_argument("--pods", type=int, default=300, help="pods in each timed burst (default 300)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds, the ways taking turns in each (default 1)")
    parser.add_argument("--apis", default="healthy,hung", help="healthy and/or hung (default both)")
    parser.add_argument("--qps", type=float, default=QPS, help=f"the scheduler's client qps (default {QPS:g}; 0: none)")
    parser.add_argument("--burst", type=int, default=BURST, help=f"the scheduler's client burst (default {BURST})")
    parser.add_argument(
        "--max-seconds", type=float, default=20.0, help="a burst's cycles stop after this long (default 20)"
    )
    parser.add_argument(
        "--warm-up", type=int, default=WARM_UP_PODS, help=f"untimed pods before each burst (default {WARM_UP_PODS})"
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=WARM_UP_PAUSE,
        help=f"seconds between the warm-up and the burst (default {WARM_UP_PAUSE:g}; 31: past refreshInterval)",
    )
    parser.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        default=100,
        choices=range(101),
        metavar="0..100",
        help=(
            "the scheduler's percentageOfNodesToScore (default 100, as Terraform sets it on the extender's profile: "
            "every node; 0: kube-scheduler's adaptive default, a sample)"
        ),
    )
    parser.add_argument(
        "--shapes", type=int, default=1, help="pod shapes (CPU requests) the burst's pods take in turn (default 1)"
    )
    parser.add_argument("--against", metavar="COMMIT", help="also measure the function of COMMIT in the same run")
    parser.add_argument("--plot", metavar="PNG", help="draw the paces into this file (matplotlib)")
    parser.add_argument("--json", metavar="FILE", help="write every run's figures to this file")
    args = parser.parse_args(argv)
    if args.pause < 0:
        parser.error(f"--pause must be 0 or more seconds, not {args.pause:g}")
    if args.shapes < 1:
        parser.error(f"--shapes must be 1 or more, not {args.shapes}")
    apis = tuple({"healthy": HEALTHY, "hung": HUNG}[name] for name in args.apis.split(",") if name)
    against = None
    if args.against:
        from bench.__main__ import exported

        against = exported(args.against)
    plan = Plan(
        sizes=tuple(int(size) for size in args.sizes.split(",")),
        pods=args.pods,
        rounds=args.rounds,
        apis=apis,
        qps=args.qps,
        burst=args.burst,
        max_seconds=args.max_seconds,
        warm_up=args.warm_up,
        pause=args.pause,
        percentage=args.percentage_of_nodes_to_score,
        shapes=args.shapes,
        against=against,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    load_before = report.load()
    runs = run(plan)
    limiter = f"client qps {plan.qps:g}, burst {plan.burst}" if plan.qps > 0 else "no client rate limit"
    head = "\n".join(
        [
            f"Date: {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC",
            f"Machine: {report.machine()}",
            f"Load average (1/5/15 min) before: {load_before}; after: {report.load()}",
            (
                f"Burst: {plan.pods} pods after {plan.warm_up} warm-up pods and a {plan.pause:g} s pause, "
                f"{plan.rounds} round(s), {limiter}, percentageOfNodesToScore {plan.percentage or 'adaptive'}, "
                f"{plan.shapes} pod shape(s)"
            ),
        ]
    )
    print("\n\n".join([head, table(runs, plan.pods), extender_times(runs)]))
    if args.json:
        Path(args.json).write_text(json.dumps({"header": head, "runs": [asdict(done) for done in runs]}, indent=1))
    if args.plot:
        plot(runs, Path(args.plot), f"burst of {plan.pods} pods, {report.machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
