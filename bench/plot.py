"""``python -m bench --plot DIR``: a saved run's results as pictures (matplotlib, from bench/requirements.txt).

- ``latency.png``: median latency against N, log-log, one panel per mode and
  verb, a line for every server (the extender, any commit measured against
  it, the typical extender) and both floors;
- ``rss.png``: each server's peak RSS against N, one panel per mode;
- ``cold-start.png``: every launch's time to the first answer, per server.

Each is a small PNG (an indexed palette): docs/performance.md shows them.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.run import FLOOR_ECHO, FLOOR_ORJSON, FLOOR_WSGI, TYPICAL, VERBS

REQUIREMENTS = "bench/requirements.txt"
FILES = ("latency.png", "rss.png", "cold-start.png")
# Fixed looks for the references; the extender's servers take the colour cycle.
_REFERENCE_STYLE = {
    TYPICAL: {"color": "tab:red", "linestyle": "-", "marker": "s"},
    FLOOR_ECHO: {"color": "black", "linestyle": "--", "marker": "v"},
    FLOOR_WSGI: {"color": "grey", "linestyle": ":", "marker": "v"},
}
_OURS_COLOURS = ("tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:cyan", "tab:olive")
_DPI = 80
_MODE_TITLES = {"names": "node names", "full": "full nodes"}


class MissingPlotLibrary(RuntimeError):
    """matplotlib is not installed: the bench runs without it, only --plot needs it."""


def latest_results(directory: Path) -> Path:
    """The newest saved run in ``directory`` (named by its UTC time, so the names sort by time)."""
    runs = sorted(directory.glob("*.json"))
    if not runs:
        raise FileNotFoundError(f"no saved run in {directory}: run `python -m bench` first, or name a results file")
    return runs[-1]


def plot(results_file: Path, out: Path) -> list[Path]:
    """Draw the pictures of the run saved in ``results_file`` into ``out``; the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingPlotLibrary(f"--plot needs matplotlib: pip install -r {REQUIREMENTS} ({exc})") from None
    record = json.loads(results_file.read_text())
    rows = record["rows"]
    out.mkdir(parents=True, exist_ok=True)
    styles = _styles(rows, record.get("cold_starts", {}))
    title = _title(record)
    written = []
    for name, draw in zip(FILES, (_latency, _rss, _cold_starts), strict=True):
        figure = draw(plt, rows, record, styles)
        figure.suptitle(title, fontsize=8)
        path = out / name
        _save(figure, path)
        plt.close(figure)
        written.append(path)
    return written


def _styles(rows: list[dict[str, Any]], cold_starts: dict[str, list[float]]) -> dict[str, dict[str, str]]:
    servers = list(dict.fromkeys([*(row["server"] for row in rows), *cold_starts]))
    ours = [server for server in servers if server not in _REFERENCE_STYLE and server != FLOOR_ORJSON]
    styles = {
        server: {"color": colour, "linestyle": "-", "marker": "o"}
        for server, colour in zip(ours, _OURS_COLOURS * 3, strict=False)
    }
    return {**styles, **{server: style for server, style in _REFERENCE_STYLE.items() if server in servers}}


def _title(record: dict[str, Any]) -> str:
    """The run's date and machine, from the first lines of its report."""
    lines = record.get("report", "").splitlines()
    return "; ".join(line for line in lines[:2] if line)


def _series(rows: list[dict[str, Any]], mode: str, verb: str | None, value: str) -> dict[str, list[tuple[int, float]]]:
    """(N, value) per server, in N order: ``median`` latency in ms, or ``rss`` in MB (one per N)."""
    series: dict[str, dict[int, float]] = {}
    for row in rows:
        if row["mode"] != mode or (verb is not None and row["verb"] != verb) or row["server"] == FLOOR_ORJSON:
            continue
        if value == "median":
            series.setdefault(row["server"], {})[row["nodes"]] = statistics.median(row["seconds"]) * 1000
        elif row.get("peak_rss_mb") is not None:
            series.setdefault(row["server"], {})[row["nodes"]] = row["peak_rss_mb"]
    return {server: sorted(points.items()) for server, points in series.items()}


def _modes(rows: list[dict[str, Any]]) -> list[str]:
    return [mode for mode in ("names", "full") if any(row["mode"] == mode for row in rows)]


def _latency(plt: Any, rows: list[dict[str, Any]], record: dict[str, Any], styles: dict[str, Any]) -> Any:
    panels = [
        (mode, verb, "median", f"{_MODE_TITLES[mode]}: {verb}", "median latency (ms)")
        for mode in _modes(rows)
        for verb in VERBS
    ]
    return _panels(plt, rows, styles, panels, columns=len(VERBS))


def _rss(plt: Any, rows: list[dict[str, Any]], record: dict[str, Any], styles: dict[str, Any]) -> Any:
    panels = [
        (mode, None, "rss", f"{_MODE_TITLES[mode]}: peak RSS", "peak RSS of the worker (MB)") for mode in _modes(rows)
    ]
    return _panels(plt, rows, styles, panels, columns=len(panels))


def _panels(
    plt: Any,
    rows: list[dict[str, Any]],
    styles: dict[str, Any],
    panels: list[tuple[str, str | None, str, str, str]],
    columns: int,
) -> Any:
    """One log-log panel per (mode, verb, value, title, y label), a line per server."""
    lines = -(-len(panels) // columns)
    figure, axes = plt.subplots(lines, columns, figsize=(5 * columns, 3.6 * lines), squeeze=False)
    for ax, (mode, verb, value, title, ylabel) in zip(axes.flat, panels, strict=False):
        for server, points in _series(rows, mode, verb, value).items():
            ax.plot(*zip(*points, strict=True), label=server, linewidth=1.2, markersize=3.5, **styles[server])
        _log_log(ax, title, ylabel)
    _legend(figure, axes)
    return figure


def _cold_starts(plt: Any, rows: list[dict[str, Any]], record: dict[str, Any], styles: dict[str, Any]) -> Any:
    runs = {server: [s * 1000 for s in seconds] for server, seconds in record.get("cold_starts", {}).items() if seconds}
    figure, ax = plt.subplots(figsize=(10, 0.5 + 0.45 * max(1, len(runs))))
    for position, (server, times) in enumerate(runs.items()):
        colour = styles.get(server, {}).get("color", "black")
        ax.scatter(times, [position] * len(times), s=12, color=colour, alpha=0.6)
        ax.plot([statistics.median(times)] * 2, [position - 0.3, position + 0.3], color=colour, linewidth=2)
    ax.set_yticks(range(len(runs)), list(runs), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("process launch to the first correct filter answer (ms); bar: median", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    figure.tight_layout(rect=(0, 0, 1, 0.93))
    return figure


def _log_log(ax: Any, title: str, ylabel: str) -> None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted({int(x) for line in ax.get_lines() for x in line.get_xdata()})
    ax.set_xticks(sizes, [str(size) for size in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    # Between the powers of ten, 2 and 5 times them: enough to read a value, few enough not to overlap.
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}" if f"{value:g}"[0] in "25" else ""))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("nodes in the request (N)", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(which="both", alpha=0.25)


def _legend(figure: Any, axes: Any) -> None:
    handles, labels = {}, {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
            labels[label] = label
    figure.legend(list(handles.values()), list(labels), loc="lower center", ncol=3, fontsize=8, frameon=False)
    rows = (len(labels) + 2) // 3
    height = figure.get_figheight()
    figure.tight_layout(rect=(0, (0.2 * rows + 0.15) / height, 1, 1 - 0.3 / height))


def _save(figure: Any, path: Path) -> None:
    """As an indexed-palette PNG: line plots need few colours, and the file stays a few tens of kB."""
    from io import BytesIO

    from PIL import Image

    buffer = BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=64).save(path, format="PNG", optimize=True)
