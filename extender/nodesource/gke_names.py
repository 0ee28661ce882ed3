"""names: facts that GKE node names carry, ``gke-<cluster>-<pool>-<hash>-<suffix>`` -> the node pool label.

Cluster and pool names may contain "-", so the cluster is configured and the
pool is what lies between it and the hash. GKE shortens long cluster and pool
names inside node names; listing the pools in ``nodePools`` maps a shortened
name back to the full one (the label value plugins compare against).

    nodeSource:
      names:
        cluster: prod-us
        nodePools: [default-pool, gpu-l4]   # optional

A name that does not follow the scheme (or names an unlisted pool) is
rejected by plugins that need labels rather than passing with no labels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from extender.framework.types import Node
from extender.nodesource.base import PerNameSource, unknowable

NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
# gke-<cluster>-<pool>-<8 hex: the instance group hash>-<4 characters: the instance suffix>
_GKE_NAME = re.compile(r"^gke-(?P<middle>.+)-[0-9a-f]{8}-[0-9a-z]{4}$")


class GkeNodeNames(PerNameSource):
    def __init__(self, cluster: str, node_pools: Sequence[str] = ()) -> None:
        super().__init__()
        self._cluster = cluster
        self._pools = tuple(node_pools)

    def describe(self, name: str) -> Node:
        match = _GKE_NAME.match(name)
        if match is None:
            return unknowable(name, f"node {name} is not named like a GKE node (gke-<cluster>-<pool>-<hash>-<suffix>)")
        pool = self._pool(match["middle"])
        if pool is None:
            return unknowable(name, f"node {name} is not in a known node pool of GKE cluster {self._cluster}")
        return Node(name, {NODE_POOL_LABEL: pool})

    def _pool(self, middle: str) -> str | None:
        # The longest leading part that is (a shortening of) the cluster name; the rest is the pool.
        for cut in sorted((index for index, char in enumerate(middle) if char == "-" and index), reverse=True):
            if self._cluster.startswith(middle[:cut]):
                return self._full_pool(middle[cut + 1 :])
        return None

    def _full_pool(self, shown: str) -> str | None:
        if not self._pools:
            return shown
        if shown in self._pools:
            return shown
        shortened = [pool for pool in self._pools if pool.startswith(shown)]
        return shortened[0] if len(shortened) == 1 else None
