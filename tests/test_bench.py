"""The benchmark harness works end to end on a tiny cluster (a smoke test: nothing here is timed)."""

from __future__ import annotations

import orjson

from bench.__main__ import main
from bench.run import EXTENDER, EXTENDER_ALL, EXTENDER_NODELOAD, FLOOR_ORJSON, FLOOR_WSGI, TYPICAL
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
            for server in (EXTENDER, EXTENDER_ALL, EXTENDER_NODELOAD, TYPICAL, FLOOR_WSGI, FLOOR_ORJSON):
                assert any(
                    line.split()[:2] == [mode, "3"] and f" {verb} " in line and server in line for line in rows
                ), (mode, verb, server)
    lines = out.splitlines()
    for server in (EXTENDER, EXTENDER_ALL, EXTENDER_NODELOAD, TYPICAL, FLOOR_WSGI):
        assert any(line.strip().startswith(server) and "runs:" in line for line in lines), server
        # The launch's CPU: the master's start-up and the worker's first answer, each a positive time.
        split = next(line for line in lines if line.strip().startswith(server) and " / " in line)
        assert all(float(part.split()[-2]) > 0 for part in split.split(" / ")), split
    for server in (EXTENDER, EXTENDER_ALL):
        assert any(line.strip().startswith(server) and "quicker in" in line for line in lines), server
    assert "Machine:" in out and "Load average" in out
    assert "do not enable" not in out  # every built-in plugin is measured
