"""Measure: for each mode and cluster size, the extender and the references interleaved, then cold starts."""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench.client import Connection
from bench.servers import (
    AS_DEPLOYED,
    ROOT,
    THREADS,
    NodeListAPI,
    PrometheusAPI,
    Server,
    ServerSpec,
    compile_like_cloud_functions,
    function_spec,
    wsgi_spec,
)
from bench.workload import Workload
from testkit.scheduler_checks import check_answer

VERBS = ("filter", "prioritize")
ALL_PLUGINS_POLICY = ROOT / "bench" / "policy-all.yaml"
# What the all-plugins policy gains for load-aware placement: NodeLoad filtering and scoring, reading the bench's
# stand-in Prometheus (its URL filled in at run time).
NODELOAD_ARGS = {
    "prometheus": {"url": None, "auth": "none"},
    "metrics": [{"name": "cpu", "query": "instance:node_cpu_utilisation:rate5m", "nodeLabel": "node"}],
    "filter": [{"metric": "cpu", "above": 0.9}],
    "score": {"metric": "cpu", "strategy": "TargetLoad", "target": 0.6},
}
# The references, in the table's order after the extender's rows.
TYPICAL, FLOOR_ECHO, FLOOR_WSGI, FLOOR_ORJSON = (
    "typical Flask extender",
    "floor: echo (functions-framework)",
    "floor: empty WSGI handler",
    "floor: orjson parse+serialise",
)
# The floors every figure is compared with: what a minimal correct answer costs, and what moving the body costs.
FLOORS = (FLOOR_ECHO, FLOOR_WSGI)
EXTENDER, EXTENDER_ALL = "extender, default policy", "extender, all plugins"
# The all-plugins policy with NodeLoad filtering and scoring (``nodeload_policy``), against a stand-in Prometheus.
EXTENDER_NODELOAD = "extender, all + NodeLoad"
# Cloud Functions refuses bodies over 32 MiB; over that the extender is run with its limit raised.
DEFAULT_LIMIT = 32 * 1024 * 1024
# The cluster size whose full-node requests are also sent THREADS at once, for the memory they hold together.
CONCURRENT_NODES = 1000


@dataclass
class Row:
    mode: str
    nodes: int
    verb: str
    server: str
    body_bytes: int
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: float | None = None
    peak_rss_mb: float | None = None
    limit_raised: bool = False

    def stat(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    cold_starts: dict[str, list[float]] = field(default_factory=dict)
    # Per cold start, CPU seconds of gunicorn's master (start-up) and of its worker (up to the first answer).
    cold_start_cpu: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    uncovered_plugins: list[str] = field(default_factory=list)
    # Peak RSS (MB) of the extender and the typical extender serving THREADS full-node requests at once.
    concurrent_rss_mb: dict[str, float] = field(default_factory=dict)

    def row(self, mode: str, nodes: int, verb: str, server: str) -> Row | None:
        return next((r for r in self.rows if (r.mode, r.nodes, r.verb, r.server) == (mode, nodes, verb, server)), None)


@dataclass(frozen=True)
class StandIns:
    """What the servers read on loopback: the Kubernetes API's node list, and Prometheus (through NodeLoad's policy,
    written with its URL)."""

    kubernetes_url: str
    nodeload_policy: Path


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]
    modes: tuple[str, ...]
    reps: int | None  # None: as many as about 300 MB of request bodies, 5..60
    cold_starts: int
    log: Callable[[str], None] = print
    # EXTENDER_RESULT_CACHE of the extender's servers ("on" or "off").
    result_cache: str = "on"
    # Another commit's extender (its exported tree and short name), measured in the same run: an A/B.
    against: tuple[Path, str] | None = None

    def reps_for(self, body_bytes: int) -> int:
        return self.reps or max(5, min(60, int(300e6 / body_bytes)))


def run(plan: Plan) -> Results:
    results = Results(uncovered_plugins=_uncovered_plugins())
    workload = Workload(max(plan.sizes))
    api = NodeListAPI(workload.nodes)
    prometheus = PrometheusAPI(workload.names(max(plan.sizes)))
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="policy-nodeload-") as nodeload:
        nodeload.write(nodeload_policy(prometheus.url))
        nodeload.flush()
        stand_ins = StandIns(api.url, Path(nodeload.name))
        try:
            for mode in plan.modes:
                for size in plan.sizes:
                    results.rows += _measure_group(plan, workload, stand_ins, mode, size)
            if "full" in plan.modes and CONCURRENT_NODES in plan.sizes:
                body = workload.body(CONCURRENT_NODES, full_nodes=True)
                for spec in _specs(plan, stand_ins, limit_raised=False):
                    if spec.name in (EXTENDER, TYPICAL):
                        results.concurrent_rss_mb[spec.name] = _concurrent_peak_rss(spec, body)
                plan.log(f"{THREADS} concurrent full-node requests, N={CONCURRENT_NODES}: {results.concurrent_rss_mb}")
            specs = _specs(plan, stand_ins, limit_raised=False)
            results.cold_starts, results.cold_start_cpu = _cold_starts(plan, specs, workload, max(plan.sizes))
        finally:
            api.close()
            prometheus.close()
    return results


def _specs(plan: Plan, stand_ins: StandIns, limit_raised: bool) -> list[ServerSpec]:
    env = {**AS_DEPLOYED, "EXTENDER_RESULT_CACHE": plan.result_cache}
    if limit_raised:
        env["EXTENDER_MAX_BODY_BYTES"] = str(8 * DEFAULT_LIMIT)
    all_plugins = {"EXTENDER_POLICY": str(ALL_PLUGINS_POLICY), "KUBERNETES_API_URL": stand_ins.kubernetes_url}
    specs = [
        function_spec(EXTENDER, "main.py", **env),
        function_spec(EXTENDER_ALL, "main.py", **all_plugins, **env),
        function_spec(
            EXTENDER_NODELOAD, "main.py", **{**all_plugins, "EXTENDER_POLICY": str(stand_ins.nodeload_policy)}, **env
        ),
    ]
    if plan.against is not None:
        root, name = plan.against
        specs += [
            function_spec(f"{EXTENDER} @{name}", "main.py", root, **env),
            function_spec(f"{EXTENDER_ALL} @{name}", "main.py", root, **all_plugins, **env),
        ]
    return [
        *specs,
        function_spec(TYPICAL, "bench/typical_extender.py"),
        # Served as the function is, as deployed: the least the function's own server costs.
        function_spec(FLOOR_ECHO, "bench/echo_floor.py", **AS_DEPLOYED),
        wsgi_spec(FLOOR_WSGI, "bench.floor:app"),
    ]


def _measure_group(plan: Plan, workload: Workload, stand_ins: StandIns, mode: str, size: int) -> list[Row]:
    full = mode == "full"
    first = workload.body(size, full)
    # Pods take turns, as consecutive scheduling cycles would; few bodies when they are large.
    bodies = [first, *(workload.body(size, full, pod) for pod in range(1, 8 if len(first) < 20e6 else 2))]
    limit_raised = len(first) > DEFAULT_LIMIT
    reps = plan.reps_for(len(first))
    plan.log(f"{mode} N={size}: {len(first) / 1e6:.2f} MB bodies, {reps} rounds")
    servers = [Server(spec) for spec in _specs(plan, stand_ins, limit_raised)]
    rows: list[Row] = []
    try:
        for server in servers:
            server.wait_listening()
        connections = {server.spec.name: Connection(server.port) for server in servers}
        for verb in VERBS:
            verb_rows = {
                server.spec.name: Row(mode, size, verb, server.spec.name, len(first), limit_raised=limit_raised)
                for server in servers
            }
            verb_rows[FLOOR_ORJSON] = Row(mode, size, verb, FLOOR_ORJSON, len(first))
            for server in servers:
                _warm_up(connections[server.spec.name], verb, first, check=server.spec.name != FLOOR_WSGI)
            cpu = {server.spec.name: 0.0 for server in servers}
            for round_ in range(reps):
                body = bodies[round_ % len(bodies)]
                turn = servers[round_ % len(servers) :] + servers[: round_ % len(servers)]
                for server in turn:
                    before = server.cpu_seconds()
                    seconds, status, answer = connections[server.spec.name].post(f"/{verb}", body)
                    cpu[server.spec.name] += server.cpu_seconds() - before
                    if status != 200:
                        raise RuntimeError(f"{server.spec.name} answered {verb} with {status}: {answer[:300]!r}")
                    verb_rows[server.spec.name].seconds.append(seconds)
                verb_rows[FLOOR_ORJSON].seconds.append(_parse_and_serialise(body))
            for server in servers:
                verb_rows[server.spec.name].cpu_seconds = cpu[server.spec.name] / reps
            rows += verb_rows.values()
        for server in servers:
            peak = server.peak_rss_mb()
            for row in rows:
                if row.server == server.spec.name:
                    row.peak_rss_mb = peak
        for connection in connections.values():
            connection.close()
    finally:
        for server in servers:
            server.stop()
    return rows


def _warm_up(connection: Connection, verb: str, body: bytes, check: bool) -> None:
    """Two untimed requests; the first answer must be one kube-scheduler accepts."""
    for attempt in range(2):
        _, status, answer = connection.post(f"/{verb}", body)
        if status != 200:
            raise RuntimeError(f"{verb} answered {status}: {answer[:300]!r}")
        if check and attempt == 0:
            with _gc_paused():
                check_answer(verb, orjson.loads(body), orjson.loads(answer))


def _parse_and_serialise(body: bytes) -> float:
    """The least any extender that decodes the whole body must spend (the collector paused)."""
    with _gc_paused():
        started = time.perf_counter()
        orjson.dumps(orjson.loads(body))
        return time.perf_counter() - started


def _concurrent_peak_rss(spec: ServerSpec, body: bytes) -> float:
    """The worker's peak RSS after rounds of THREADS filter requests sent at once, as many as it serves at once."""
    server = Server(spec)
    try:
        server.wait_listening()

        def send() -> None:
            _, status, answer = Connection(server.port).post("/filter", body)
            if status != 200:
                raise RuntimeError(f"{spec.name} answered {status}: {answer[:300]!r}")

        for _ in range(2):
            with ThreadPoolExecutor(max_workers=int(THREADS)) as pool:
                list(pool.map(lambda _: send(), range(int(THREADS))))
        return server.peak_rss_mb()
    finally:
        server.stop()


def _cold_starts(
    plan: Plan, specs: list[ServerSpec], workload: Workload, names: int
) -> tuple[dict[str, list[float]], dict[str, list[tuple[float, float]]]]:
    """``plan.cold_starts`` launches of each server, taking turns (the order reversed every other round), so that
    the machine's load falls on all alike; each tree served is compiled first, as Cloud Functions' build does.
    Each launch's seconds to the first answer, and the CPU seconds its master and its worker had spent by then."""
    for root in dict.fromkeys(spec.root for spec in specs):
        compile_like_cloud_functions(root)
    body = workload.body(names, full_nodes=False)
    runs: dict[str, list[float]] = {spec.name: [] for spec in specs}
    cpu: dict[str, list[tuple[float, float]]] = {spec.name: [] for spec in specs}
    for round_ in range(plan.cold_starts):
        for spec in specs if round_ % 2 == 0 else specs[::-1]:
            seconds, on_cpu = _cold_start(spec, body, spec.name != FLOOR_WSGI)
            runs[spec.name].append(seconds)
            cpu[spec.name].append(on_cpu)
    for name, seconds in runs.items():
        plan.log(f"cold start {name}: " + ", ".join(f"{s * 1000:.0f} ms" for s in seconds))
    return runs, cpu


def _cold_start(spec: ServerSpec, body: bytes, check: bool) -> tuple[float, tuple[float, float]]:
    """Seconds from launching the process to its first (correct) filter answer, and the CPU seconds its master and
    its worker had spent when the answer arrived."""
    server = Server(spec)
    try:
        while True:
            try:
                connection = Connection(server.port)
                _, status, answer = connection.post("/filter", body)
                break
            except OSError:  # not listening yet, or closed while starting
                server.check_alive()
                time.sleep(0.002)
        seconds = time.perf_counter() - server.launched
        on_cpu = server.on_cpu_seconds()
        connection.close()
        if status != 200:
            raise RuntimeError(f"{spec.name}'s first filter answer was {status}: {answer[:300]!r}")
        if check:
            check_answer("filter", orjson.loads(body), orjson.loads(answer))
        return seconds, on_cpu
    finally:
        server.stop()


@contextmanager
def _gc_paused() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def nodeload_policy(prometheus_url: str, base: Path = ALL_PLUGINS_POLICY) -> str:
    """The ``base`` policy (all plugins) with NodeLoad filtering and scoring too, reading ``prometheus_url`` (as
    JSON)."""
    import yaml

    document = yaml.safe_load(base.read_text())
    profile = document["profiles"][0]
    plugins = profile.setdefault("plugins", {})
    plugins.setdefault("filter", {}).setdefault("enabled", []).append({"name": "NodeLoad"})
    plugins.setdefault("score", {}).setdefault("enabled", []).append({"name": "NodeLoad", "weight": 1})
    args = {**NODELOAD_ARGS, "prometheus": {**NODELOAD_ARGS["prometheus"], "url": prometheus_url}}
    profile.setdefault("pluginConfig", []).append({"name": "NodeLoad", "args": args})
    return orjson.dumps(document).decode()


def _uncovered_plugins() -> list[str]:
    """Built-in plugins the bench's policies do not enable yet: the bench says so rather than failing."""
    from extender import plugins  # noqa: F401  (registers the built-in plugins)
    from extender.framework import registry

    enabled = {
        ref["name"]
        for profile in orjson.loads(nodeload_policy("http://127.0.0.1:9"))["profiles"]
        for point in (profile.get("plugins") or {}).values()
        for ref in point.get("enabled") or ()
    }
    return sorted(set(registry.names()) - enabled)
