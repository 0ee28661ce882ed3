"""The names node source: GKE node names give the node pool label."""

from __future__ import annotations

import pytest

from extender.framework.status import Code
from extender.nodesource.gke_names import NODE_POOL_LABEL, GkeNodeNames


@pytest.mark.parametrize(
    ("cluster", "pools", "name", "pool"),
    [
        ("prod-us", (), "gke-prod-us-default-pool-3b2e4a1f-8d7x", "default-pool"),
        ("prod", (), "gke-prod-gpu-l4-0a1b2c3d-abcd", "gpu-l4"),
        # GKE shortens long names; listed pools map the shortened one back.
        (
            "production-europe-west1",
            ("highmem-workloads", "default-pool"),
            "gke-production-europe-highmem-wo-9f8e7d6c-q1w2",
            "highmem-workloads",
        ),
        ("a-b", ("c-d",), "gke-a-b-c-d-01234567-zz99", "c-d"),
    ],
)
def test_the_pool_between_cluster_and_hash(cluster, pools, name, pool):
    [node] = GkeNodeNames(cluster, pools).lookup([name])
    assert node.labels == {NODE_POOL_LABEL: pool}


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("node-a", "node node-a is not named like a GKE node (gke-<cluster>-<pool>-<hash>-<suffix>)"),
        ("gke-prod-us-pool-XYZ12345-abcd", "is not named like a GKE node"),
        (
            "gke-other-pool-3b2e4a1f-8d7x",
            "node gke-other-pool-3b2e4a1f-8d7x is not in a known node pool of GKE cluster prod-us",
        ),
        ("gke-prod-us-batch-3b2e4a1f-8d7x", "is not in a known node pool"),
    ],
)
def test_other_names_are_unknowable(name, reason):
    [node] = GkeNodeNames("prod-us", ("default-pool", "gpu")).lookup([name])
    assert node.labels is None and node.why_unknown is not None
    assert node.why_unknown.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert reason in node.why_unknown.reason


def test_the_bench_workloads_gke_names_parse():
    from bench.workload import CLUSTER, POOLS, Workload

    workload = Workload(200)
    names = GkeNodeNames(CLUSTER, [pool.name for pool in POOLS]).lookup(workload.names(200))
    expected = [node["metadata"]["labels"][NODE_POOL_LABEL] for node in workload.nodes]
    assert [node.labels[NODE_POOL_LABEL] for node in names] == expected
