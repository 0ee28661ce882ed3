"""The results as a table (text, as printed and pasted into docs/performance.md), the targets, and a JSON record."""

from __future__ import annotations

import datetime as dt
import os
import platform
from dataclasses import asdict
from pathlib import Path

from bench.run import (
    CONCURRENT_NODES,
    EXTENDER,
    EXTENDER_ALL,
    EXTENDER_NODELOAD,
    FLOOR_ECHO,
    FLOOR_ORJSON,
    FLOOR_WSGI,
    FLOORS,
    TYPICAL,
    Results,
    Row,
)
from bench.servers import THREADS

# (what, mode, nodes, verb, server, limit, unit): medians in ms, or peak RSS in MB where unit is "MB".
TARGETS = [
    ("node names, N=5000, all plugins, filter", "names", 5000, "filter", EXTENDER_ALL, 5, "ms"),
    ("node names, N=5000, all plugins, prioritize", "names", 5000, "prioritize", EXTENDER_ALL, 5, "ms"),
    ("full nodes, N=1000, filter", "full", 1000, "filter", EXTENDER, 110, "ms"),
    ("full nodes, N=1000, prioritize", "full", 1000, "prioritize", EXTENDER, 90, "ms"),
    ("full nodes, N=1000, peak RSS", "full", 1000, "filter", EXTENDER, 200, "MB"),
    ("full nodes, N=5000 (limit raised), filter", "full", 5000, "filter", EXTENDER, 700, "ms"),
    ("full nodes, N=5000 (limit raised), peak RSS", "full", 5000, "filter", EXTENDER, 600, "MB"),
]
# Every verb, mode and size: the extender's median within this many times the echo floor's.
ECHO_RATIO_TARGET = 1.5
# (what, mode, nodes, verb, server, baseline, limit): the server's median at most ``limit`` times the baseline's, the
# same requests measured side by side in one run.
RATIO_TARGETS = [
    ("node names, N=5000, + NodeLoad, filter", "names", 5000, "filter", EXTENDER_NODELOAD, EXTENDER_ALL, 1.2),
    ("node names, N=5000, + NodeLoad, prioritize", "names", 5000, "prioritize", EXTENDER_NODELOAD, EXTENDER_ALL, 1.2),
]
INSTANCE_MEMORY_MB = 512
COLD_START_TARGET_MS = 500


def machine() -> str:
    model = next(
        (line.split(":", 1)[1].strip() for line in _lines("/proc/cpuinfo") if line.startswith("model name")),
        platform.processor(),
    )
    memory = next(
        (int(line.split()[1]) / 1024**2 for line in _lines("/proc/meminfo") if line.startswith("MemTotal")), 0.0
    )
    system = f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    return f"{model}, {os.cpu_count()} cores, {memory:.0f} GiB; {system}"


def load() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def header(load_before: str, load_after: str) -> str:
    return "\n".join(
        [
            f"Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
            f"Machine: {machine()}",
            f"Load average (1/5/15 min) before: {load_before}; after: {load_after}",
            (
                f"Servers: functions-framework under gunicorn, 1 worker, THREADS={THREADS}; "
                "one request at a time over loopback, keep-alive, kube-scheduler's headers"
            ),
        ]
    )


def table(results: Results) -> str:
    lines = [
        (f"{'mode':<6} {'nodes':>5} {'body':>9} {'verb':<10} {'server':<34} "
         f"{'median':>9} {'p90':>9} {'max':>9} {'CPU/req':>9} {'peak RSS':>9} {'x echo':>7} {'x empty':>7}"),
    ]
    for row in results.rows:
        cpu = _ms(row.cpu_seconds * 1000) if row.cpu_seconds is not None else "-"
        rss = f"{row.peak_rss_mb:.0f} MB" if row.peak_rss_mb is not None else "-"
        raised = row.limit_raised and row.server in (EXTENDER, EXTENDER_ALL, EXTENDER_NODELOAD)
        server = row.server + (" *" if raised else "")
        lines.append(
            f"{row.mode:<6} {row.nodes:>5} {row.body_bytes / 1e6:>6.2f} MB {row.verb:<10} {server:<34} "
            f"{_ms(row.median * 1000):>9} {_ms(row.stat(0.9) * 1000):>9} {_ms(max(row.seconds) * 1000):>9} "
            f"{cpu:>9} {rss:>9} {_ratio(results, row, FLOOR_ECHO):>7} {_ratio(results, row, FLOOR_WSGI):>7}"
        )
    if any(row.limit_raised for row in results.rows):
        lines.append("* EXTENDER_MAX_BODY_BYTES raised: the body is over Cloud Functions' 32 MiB request limit")
    lines.append("")
    lines.append(
        "Cold start, process launch to the first correct filter answer (node names, largest N), median of runs:"
    )
    for server, runs in results.cold_starts.items():
        if runs:
            lines.append(
                f"  {server:<30} {_ms(_median(runs) * 1000):>9}   runs: {', '.join(_ms(s * 1000) for s in runs)}"
            )
    lines += _cold_start_detail(results)
    if results.concurrent_rss_mb:
        lines.append("")
        lines.append(f"Peak RSS serving {THREADS} full-node filter requests at once (N={CONCURRENT_NODES}):")
        for server, mb in results.concurrent_rss_mb.items():
            lines.append(f"  {server:<30} {mb:>6.0f} MB")
    if results.uncovered_plugins:
        lines.append(f"Note: the bench's policies do not enable {', '.join(results.uncovered_plugins)} yet")
    return "\n".join(lines)


def targets(results: Results) -> str:
    lines = [f"{'target':<48} {'goal':>9} {'measured':>9} {'typical':>9} {'floor':>9}  verdict"]
    for what, mode, nodes, verb, server, limit, unit in TARGETS:
        ours, typical, floor = (results.row(mode, nodes, verb, name) for name in (server, TYPICAL, FLOOR_WSGI))
        if ours is None:
            continue
        values = [_value(row, unit) for row in (ours, typical, floor)]
        shown = [_fmt(value, unit) for value in values]
        verdict = "met" if values[0] is not None and values[0] < limit else "MISSED"
        lines.append(
            f"{what:<48} {'< ' + str(limit) + ' ' + unit:>9} {shown[0]:>9} {shown[1]:>9} {shown[2]:>9}  {verdict}"
        )
    for what, mode, nodes, verb, server, baseline, limit in RATIO_TARGETS:
        ours, theirs = results.row(mode, nodes, verb, server), results.row(mode, nodes, verb, baseline)
        if ours is None or theirs is None:
            continue
        ratio = ours.median / theirs.median
        verdict = "met" if ratio <= limit else "MISSED"
        shown = f"{ratio:.2f}x ({_ms(ours.median * 1000)} / {_ms(theirs.median * 1000)})"
        lines.append(f"{what:<48} {'<= ' + str(limit) + 'x':>9} {shown:>29}  {verdict}")
    for server in (EXTENDER, EXTENDER_ALL):
        runs = results.cold_starts.get(server)
        if runs:
            ms = _median(runs) * 1000
            typical = results.cold_starts.get(TYPICAL) or [float("nan")]
            floor = results.cold_starts.get(FLOOR_WSGI) or [float("nan")]
            verdict = "met" if ms < COLD_START_TARGET_MS else "MISSED"
            lines.append(
                f"{'cold start, ' + server:<48} {'< 500 ms':>9} {_ms(ms):>9} {_ms(_median(typical) * 1000):>9} "
                f"{_ms(_median(floor) * 1000):>9}  {verdict}"
            )
    if EXTENDER in results.concurrent_rss_mb:
        # Cloud Functions' default instance memory, which Terraform keeps: 512 MiB (the goal stays on the safe side).
        mb, typical = results.concurrent_rss_mb[EXTENDER], results.concurrent_rss_mb.get(TYPICAL, float("nan"))
        verdict = "met" if mb < INSTANCE_MEMORY_MB else "MISSED"
        what = f"full nodes, N={CONCURRENT_NODES}, {THREADS} at once: peak RSS"
        lines.append(f"{what:<48} {'< 512 MB':>9} {mb:>6.0f} MB {typical:>6.0f} MB {'-':>9}  {verdict}")
    for row in results.rows:
        if row.server in (EXTENDER, EXTENDER_ALL):
            echo = results.row(row.mode, row.nodes, row.verb, FLOOR_ECHO)
            if echo is not None:
                ratio = row.median / echo.median
                what = f"{row.mode} N={row.nodes} {row.verb}, {row.server.removeprefix('extender, ')}"
                verdict = "met" if ratio <= ECHO_RATIO_TARGET else "MISSED"
                goal = f"<= {ECHO_RATIO_TARGET}x"
                lines.append(
                    f"{what:<48} {goal:>9} {ratio:>8.2f}x {'':>9} {_ms(echo.median * 1000):>9}  "
                    f"{verdict} (x echo floor)"
                )
    lines.append(
        f"(typical: {TYPICAL}; floor: {FLOOR_WSGI}, and {FLOOR_ECHO} for the ratios; {FLOOR_ORJSON} is in the table)"
    )
    return "\n".join(lines)


def markdown(results: Results) -> str:
    """The medians as docs/performance.md's results table: every server of the run, then each extender's median over
    the echo floor's, and the peak RSS of the extender and the typical extender."""
    servers = list(dict.fromkeys(row.server for row in results.rows))
    ours = [server for server in servers if server.startswith("extender")]
    head = ["mode", "N", "verb", *servers, *(f"{server} / echo" for server in ours), "peak RSS (MB)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]
    for mode, nodes, verb in dict.fromkeys((row.mode, row.nodes, row.verb) for row in results.rows):
        rows = {server: results.row(mode, nodes, verb, server) for server in servers}
        echo = rows.get(FLOOR_ECHO)
        medians = [_md(row.median * 1000) if row is not None else "" for row in rows.values()]
        ratios = [_over(rows[server], echo) for server in ours]
        rss = " / ".join(
            f"{row.peak_rss_mb:.0f}"
            for server, row in rows.items()
            if row is not None and row.peak_rss_mb and server in (*ours, TYPICAL)
        )
        raised = " *" if any(row is not None and row.limit_raised for row in rows.values()) else ""
        lines.append("| " + " | ".join([mode, f"{nodes}{raised}", verb, *medians, *ratios, rss]) + " |")
    return "\n".join(lines)


def _over(row: Row | None, floor: Row | None) -> str:
    return f"{row.median / floor.median:.2f}" if row is not None and floor is not None else ""


def _md(ms: float) -> str:
    """Three significant figures, as the tables in docs/performance.md give them."""
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def _cold_start_detail(results: Results) -> list[str]:
    """Where each launch's time went (CPU of gunicorn's master, which loads the function, and of its worker, which
    answers), and each server's launch against the typical extender's launch of the same round."""
    lines = ["CPU time by the first answer, median: gunicorn's master (loading the function) / its worker (answering):"]
    for server, spent in results.cold_start_cpu.items():
        if spent:
            master, worker = (_median([each[i] for each in spent]) * 1000 for i in (0, 1))
            lines.append(f"  {server:<30} {_ms(master):>9} / {_ms(worker)}")
    typical = results.cold_starts.get(TYPICAL)
    if typical:
        lines.append("Against the typical extender's launch in the same round: median ratio, rounds it was quicker:")
        for server, runs in results.cold_starts.items():
            if server in (TYPICAL, *FLOORS) or not runs:
                continue
            ratios = [ours / theirs for ours, theirs in zip(runs, typical, strict=True)]
            quicker = sum(ratio < 1 for ratio in ratios)
            lines.append(f"  {server:<30} {_median(ratios):>9.2f}   quicker in {quicker} of {len(ratios)}")
    return lines


def save(results: Results, text: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}.json"
    record = {
        "report": text,
        "rows": [asdict(row) for row in results.rows],
        "cold_starts": results.cold_starts,
        "cold_start_cpu": results.cold_start_cpu,
        "concurrent_rss_mb": results.concurrent_rss_mb,
    }
    path.write_text(__import__("json").dumps(record, indent=1))
    return path


def _ratio(results: Results, row: Row, floor: str) -> str:
    """The row's median over the floor's for the same request, shown as ``1.23x`` (or ``-`` without one)."""
    reference = results.row(row.mode, row.nodes, row.verb, floor)
    if reference is None or row.server == floor:
        return "-"
    return f"{row.median / reference.median:.2f}x"


def _value(row: Row | None, unit: str) -> float | None:
    if row is None:
        return None
    return row.peak_rss_mb if unit == "MB" else row.median * 1000


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} MB" if unit == "MB" else _ms(value)


def _ms(ms: float) -> str:
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _lines(path: str) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []
