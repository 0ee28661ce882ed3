"""The benchmark harness works end to end on a tiny cluster (a smoke test: nothing here is timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from bench import __main__ as bench_main
from bench import burst, report
from bench.__main__ import main
from bench.run import (
    EXTENDER,
    EXTENDER_ALL,
    EXTENDER_NODELOAD,
    FLOOR_ECHO,
    FLOOR_ORJSON,
    FLOOR_WSGI,
    TYPICAL,
    Results,
    Row,
)
from bench.workload import Workload, make_node


def test_nodes_look_like_gke_nodes_of_the_documented_size():
    node = make_node(7)
    assert len(node["status"]["images"]) == 50
    assert len(node["status"]["conditions"]) == 5
    assert len(node["metadata"]["labels"]) >= 26 and node["metadata"]["managedFields"]
    sizes = [len(encoded) for encoded in Workload(200).encoded_nodes]
    assert 18_000 < sum(sizes) / len(sizes) < 19_200


def test_requests_carry_both_alternatives_the_unused_one_null():
    workload = Workload(3)
    full, names = orjson.loads(workload.body(3, full_nodes=True)), orjson.loads(workload.body(3, full_nodes=False))
    assert full["NodeNames"] is None and len(full["Nodes"]["items"]) == 3
    assert names["Nodes"] is None and sorted(names["NodeNames"]) == sorted(workload.names(3))
    assert b" " not in workload.body(3, full_nodes=False)  # compact, as Go encodes it


def test_each_pod_gets_the_same_nodes_in_another_order_in_both_modes():
    workload = Workload(50)
    orders = []
    for pod in range(2):
        full = [node["metadata"]["name"] for node in orjson.loads(workload.body(50, True, pod))["Nodes"]["items"]]
        assert orjson.loads(workload.body(50, False, pod))["NodeNames"] == full
        orders.append(full)
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1]) == sorted(workload.names(50))


def test_the_bench_runs_and_reports_every_server_verb_and_mode(capsys):
    assert main(["--sizes", "3", "--reps", "2", "--cold-starts", "1", "--no-save"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("names ", "full "))]
    for mode in ("names", "full"):
        for verb in ("filter", "prioritize"):
            for server in (EXTENDER, EXTENDER_ALL, EXTENDER_NODELOAD, TYPICAL, FLOOR_ECHO, FLOOR_WSGI, FLOOR_ORJSON):
                assert any(
                    line.split()[:2] == [mode, "3"] and f" {verb} " in line and server in line for line in rows
                ), (mode, verb, server)
    lines = out.splitlines()
    for server in (EXTENDER, EXTENDER_ALL, EXTENDER_NODELOAD, TYPICAL, FLOOR_ECHO, FLOOR_WSGI):
        assert any(line.strip().startswith(server) and "runs:" in line for line in lines), server
        # The launch's CPU: the master's start-up and the worker's first answer, each a positive time.
        split = next(line for line in lines if line.strip().startswith(server) and " / " in line)
        assert all(float(part.split()[-2]) > 0 for part in split.split(" / ")), split
    for server in (EXTENDER, EXTENDER_ALL):
        assert any(line.strip().startswith(server) and "quicker in" in line for line in lines), server
    assert "Machine:" in out and "Load average" in out
    # Every figure against both floors, and each verb, mode and size of the extender against the echo floor's goal.
    assert all(line.split()[-2:] != ["-", "-"] for line in rows if FLOOR_ECHO not in line and FLOOR_WSGI not in line)
    for mode in ("names", "full"):
        for verb in ("filter", "prioritize"):
            assert any(
                line.startswith(f"{mode} N=3 {verb}, default policy") and "x echo floor" in line for line in lines
            )
    assert "do not enable" not in out  # every built-in plugin is measured


def _saved_run(directory):
    """A run's results as ``python -m bench`` saves them, for two sizes of each mode (made up, not measured)."""
    results = Results(cold_starts={server: [0.2, 0.25, 0.3] for server in (EXTENDER, TYPICAL, FLOOR_ECHO, FLOOR_WSGI)})
    for mode in ("names", "full"):
        for nodes in (100, 1000):
            for verb in ("filter", "prioritize"):
                for scale, server in enumerate((FLOOR_WSGI, FLOOR_ECHO, EXTENDER, TYPICAL, FLOOR_ORJSON), start=1):
                    seconds = [scale * nodes * 1e-6 * (2 if mode == "full" else 1) * factor for factor in (1, 1.1)]
                    rss = None if server == FLOOR_ORJSON else 20.0 * scale + nodes / 50
                    results.rows.append(Row(mode, nodes, verb, server, nodes * 40, seconds, peak_rss_mb=rss))
    return report.save(results, "Date: 2026-11-25 10:00 UTC\nMachine: test", directory)


def test_plot_draws_latency_rss_and_cold_starts_from_a_saved_run(tmp_path, capsys):
    saved = _saved_run(tmp_path / "results")
    assert main(["--plot", str(tmp_path / "pictures"), "--results", str(saved)]) == 0
    written = capsys.readouterr().out.split()
    assert [Path(path).name for path in written] == ["latency.png", "rss.png", "cold-start.png"]
    for path in map(Path, written):
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and 2_000 < len(data) < 100_000, (path, len(data))


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    saved = _saved_run(tmp_path / "results")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed: importing it raises ImportError
    assert main(["--plot", str(tmp_path / "pictures"), "--results", str(saved)]) == 2
    assert "pip install -r bench/requirements.txt" in capsys.readouterr().err
    assert not (tmp_path / "pictures" / "latency.png").exists()


def test_plot_without_a_saved_run_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_main, "RESULTS", tmp_path / "none")
    assert main(["--plot", str(tmp_path / "pictures")]) == 2
    assert "no saved run" in capsys.readouterr().err


def test_the_burst_bench_runs_every_way_with_a_healthy_and_a_hung_api(tmp_path, capsys):
    """A tiny burst of pods of two shapes (nothing timed is asserted): every way placed and bound its pods through the
    cycle's stand-in, the table and the picture are written."""
    figures, picture = tmp_path / "burst.json", tmp_path / "burst.png"
    argv = ["--sizes", "40", "--pods", "4", "--warm-up", "1", "--max-seconds", "2", "--shapes", "2"]
    assert burst.main([*argv, "--json", str(figures), "--plot", str(picture)]) == 0
    out = capsys.readouterr().out
    runs = orjson.loads(figures.read_bytes())["runs"]
    kinds = {(run["way"], run["api"]) for run in runs}
    assert kinds == {(way, api) for way in burst.WAYS for api in (burst.HEALTHY, burst.HUNG)} - {
        (way, burst.HUNG) for way in burst.NO_API
    }
    for run in runs:
        # A hung API may cost a run its pace, never its bindings: whatever it placed is bound.
        assert run["pods"] >= (1 if run["api"] == burst.HUNG else 4), run
        assert (run["way"] == burst.NONE) == (not run["extender_ms"]) == (run["cpu_ms"] is None), run
    assert "| 40 nodes | " in out and "| 40 nodes, hung API | " in out and "pods/s (" in out
    assert "Machine:" in out and "client qps 50, burst 100" in out and "2 pod shape(s)" in out
    assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
