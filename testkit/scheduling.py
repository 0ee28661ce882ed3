"""A faithful stand-in for kube-scheduler's scheduling cycle with an extender, for burst tests and pictures.

What it does per pod, as kube-scheduler v1.28 does with one extender (``pkg/scheduler/schedule_one.go``):

1. Filter: the in-tree ``NodeResourcesFit`` (the pod's requests fit what the node's allocatable leaves beside the
   requests of the pods assigned or assumed there), then the extender's filter (node names or full Node objects).
   As ``findNodesThatPassFilters`` does, the in-tree filter stops once it found ``percentageOfNodesToScore`` of the
   nodes feasible (adaptive by default: ``numFeasibleNodesToFind``) and the next pod's search starts where this one
   stopped, so in a large cluster the extender is asked about a sample that moves round the cluster pod by pod.
   ``parallel_order`` lists the nodes as its parallel workers find them: chunks of about the square root of the nodes
   (``chunkSizeFor``), two taken at a time (two cores), their nodes interleaved, in another order each cycle.
2. Score, unless one node is left: the in-tree ``NodeResourcesFit`` (LeastAllocated, CPU and memory weighted 1) and
   ``NodeResourcesBalancedAllocation`` scores (each 0..100, weight 1), as the scheduler computes them from its own
   cache (``in_tree=False`` leaves them out), plus the extender's prioritize score × weight × 10.
3. The highest total wins, ties broken at random (reservoir sampling, as ``selectHost``).
4. The pod is assumed on the node (its requests count at once in the scheduler's cache), and bound asynchronously:
   the next pod's cycle starts at once, while the binding (by the extender's bind verb, or the API's binding
   subresource as the default binder does) lands a little later.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from extender.kube.quantity import parse_quantity

MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10
# The scheduler's defaults for a container that requests nothing (for scoring only): 100m CPU, 200 MiB.
NON_ZERO_CPU, NON_ZERO_MEMORY = 0.1, 200 * 2**20
# kube-scheduler's bounds for the feasible nodes a cycle looks for (``pkg/scheduler/schedule_one.go``).
MIN_FEASIBLE_NODES_TO_FIND, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, BASE_PERCENTAGE_OF_NODES_TO_SCORE = 100, 5, 50
# The filter's parallelism (kube-scheduler's default), the workers that run at once (two cores), and the orders kept
# per number of nodes found (the stand-in's own cycle stays cheap: an order is worked out once, then taken in turn).
PARALLELISM, RUNNING_WORKERS, ORDERS = 16, 2, 8

Call = Callable[[str, dict[str, Any]], Any]


def requests_of(pod: dict[str, Any]) -> tuple[float, float]:
    """The pod's CPU (cores) and memory (bytes) requests, summed over its containers."""
    cpu = memory = 0.0
    for container in pod["spec"].get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu += parse_quantity(requests["cpu"]) if "cpu" in requests else 0.0
        memory += parse_quantity(requests["memory"]) if "memory" in requests else 0.0
    return cpu, memory


def feasible_nodes_to_find(percentage: int, all_nodes: int) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: ``percentage`` 0 is its default, adaptive to the cluster's size."""
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return all_nodes
    if percentage == 0:
        percentage = max(BASE_PERCENTAGE_OF_NODES_TO_SCORE - all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return min(all_nodes, max(all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND))


@dataclass
class NodeState:
    obj: dict[str, Any]
    cpu: float
    memory: float
    requested_cpu: float = 0.0
    requested_memory: float = 0.0
    pods: list[str] = field(default_factory=list)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = str(self.obj["metadata"]["name"])


class Scheduler:
    """Schedules pods one after another through ``call(verb, payload)`` (the extender's answer as JSON)."""

    def __init__(
        self,
        nodes: list[dict[str, Any]],
        call: Call,
        *,
        weight: int = 5,
        node_names: bool = True,
        in_tree: bool = True,
        bind: Callable[[dict[str, Any], str], None],
        bind_delay: tuple[float, float] = (0.02, 0.15),
        seed: int = 7,
        percentage_of_nodes_to_score: int = 0,
        parallel_order: bool = False,
    ) -> None:
        self.nodes = [
            NodeState(node, *(parse_quantity(node["status"]["allocatable"][r]) for r in ("cpu", "memory")))
            for node in nodes
        ]
        self.call = call
        self.weight = weight
        self.node_names = node_names
        self.in_tree = in_tree
        self.bind = bind
        self.bind_delay = bind_delay
        self.random = random.Random(seed)
        self._by_name = {node.name: node for node in self.nodes}
        self.to_find = feasible_nodes_to_find(percentage_of_nodes_to_score, len(self.nodes))
        self.next_start = 0
        self.parallel_order = parallel_order
        self._orders: dict[int, list[list[int]]] = {}
        self._cycles = 0
        self.bindings: list[threading.Thread] = []
        # Per pod shape (CPU, memory), every node's in-tree score: a cycle changes only the node it assumed a pod on.
        self._in_tree: dict[tuple[float, float], dict[str, int]] = {}

    def schedule(self, pod: dict[str, Any]) -> str | None:
        """One scheduling cycle; the node the pod was assumed on (its binding under way), None if none fits."""
        cpu, memory = requests_of(pod)
        fitting = self._in_tree_filter(cpu, memory)
        if not fitting:
            return None
        feasible = self._extender_filter(pod, fitting)
        if not feasible:
            return None
        if len(feasible) > 1 and self.in_tree:
            in_tree = self._in_tree_scores(cpu, memory)
            totals = {node.name: in_tree[node.name] for node in feasible}
        else:
            totals = dict.fromkeys((node.name for node in feasible), 0)
        if len(feasible) > 1:
            for entry in self.call("prioritize", self._args(pod, feasible)):
                totals[entry["Host"]] += entry["Score"] * self.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
        chosen = self._select(totals)
        node = self._by_name[chosen]
        node.requested_cpu += cpu
        node.requested_memory += memory
        node.pods.append(pod["metadata"]["name"])
        for (shape_cpu, shape_memory), scores in self._in_tree.items():
            scores[chosen] = _in_tree_score(node, shape_cpu, shape_memory)
        delay = self.random.uniform(*self.bind_delay)
        thread = threading.Thread(target=self._bind_later, args=(pod, chosen, delay), daemon=True)
        thread.start()
        self.bindings.append(thread)
        return chosen

    def _in_tree_filter(self, cpu: float, memory: float) -> list[NodeState]:
        """The first ``to_find`` nodes that fit, from where the last cycle stopped, round the cluster."""
        if self.to_find == len(self.nodes):  # every node: the search starts where it stopped, at the first
            return self._as_found([node for node in self.nodes if _fits(node, cpu, memory)])
        fitting: list[NodeState] = []
        count = len(self.nodes)
        processed = 0
        while processed < count and len(fitting) < self.to_find:
            node = self.nodes[(self.next_start + processed) % count]
            processed += 1
            if _fits(node, cpu, memory):
                fitting.append(node)
        self.next_start = (self.next_start + processed) % count
        return self._as_found(fitting)

    def _as_found(self, fitting: list[NodeState]) -> list[NodeState]:
        """``fitting`` in the order the parallel filter finds them (``parallel_order``), else as walked."""
        if not self.parallel_order or len(fitting) < 2:
            return fitting
        orders = self._orders.get(len(fitting))
        if orders is None:
            orders = self._orders[len(fitting)] = [found_order(len(fitting), self.random) for _ in range(ORDERS)]
        self._cycles += 1
        return [fitting[index] for index in orders[self._cycles % ORDERS]]

    def _in_tree_scores(self, cpu: float, memory: float) -> dict[str, int]:
        scores = self._in_tree.get((cpu, memory))
        if scores is None:
            scores = {node.name: _in_tree_score(node, cpu, memory) for node in self.nodes}
            self._in_tree[(cpu, memory)] = scores
        return scores

    def wait_for_bindings(self) -> None:
        for thread in self.bindings:
            thread.join(10)

    def _bind_later(self, pod: dict[str, Any], node: str, delay: float) -> None:
        time.sleep(delay)
        self.bind(pod, node)

    def _extender_filter(self, pod: dict[str, Any], nodes: list[NodeState]) -> list[NodeState]:
        answer = self.call("filter", self._args(pod, nodes))
        assert not answer.get("Error"), answer
        if self.node_names:
            kept = set(answer["NodeNames"] or [])
        else:
            kept = {item["metadata"]["name"] for item in (answer["Nodes"] or {}).get("items") or []}
        return [node for node in nodes if node.name in kept]

    def _args(self, pod: dict[str, Any], nodes: list[NodeState]) -> dict[str, Any]:
        if self.node_names:
            return {"Pod": pod, "Nodes": None, "NodeNames": [node.name for node in nodes]}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": [node.obj for node in nodes]}, "NodeNames": None}

    def _select(self, totals: dict[str, int]) -> str:
        """The highest total; among equals, each as likely (as selectHost's reservoir sampling makes them)."""
        best = max(totals.values())
        tied = [name for name, total in totals.items() if total == best]
        return tied[self.random.randrange(len(tied))] if len(tied) > 1 else tied[0]


def chunk_size(pieces: int, parallelism: int = PARALLELISM) -> int:
    """kube-scheduler's ``chunkSizeFor``: about the square root of the pieces, at most pieces / parallelism + 1."""
    return max(1, min(math.isqrt(pieces), pieces // parallelism + 1))


def found_order(count: int, rng: random.Random) -> list[int]:
    """Positions 0..count-1 as ``RUNNING_WORKERS`` workers find them: each takes the next chunk when its own is done,
    and their finds interleave at random."""
    size = chunk_size(count)
    chunks = [range(start, min(start + size, count)) for start in range(0, count, size)]
    waiting = iter(chunks[RUNNING_WORKERS:])
    running = [iter(chunk) for chunk in chunks[:RUNNING_WORKERS]]
    found: list[int] = []
    while running:
        worker = rng.randrange(len(running))
        position = next(running[worker], None)
        if position is not None:
            found.append(position)
            continue
        chunk = next(waiting, None)
        if chunk is None:
            running.pop(worker)
        else:
            running[worker] = iter(chunk)
    return found


def _fits(node: NodeState, cpu: float, memory: float) -> bool:
    """``NodeResourcesFit``'s filter on CPU and memory."""
    return node.requested_cpu + cpu <= node.cpu + 1e-9 and node.requested_memory + memory <= node.memory


def _in_tree_score(node: NodeState, cpu: float, memory: float) -> int:
    return least_allocated(node, cpu, memory) + balanced_allocation(node, cpu, memory)


def least_allocated(node: NodeState, cpu: float, memory: float) -> int:
    """NodeResourcesFit's LeastAllocated score (CPU in millicores and memory in bytes, weight 1 each)."""
    scores = []
    for capacity, requested in (
        (round(node.cpu * 1000), round((node.requested_cpu + (cpu or NON_ZERO_CPU)) * 1000)),
        (round(node.memory), round(node.requested_memory + (memory or NON_ZERO_MEMORY))),
    ):
        scores.append(
            0 if capacity == 0 or requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity
        )
    return sum(scores) // len(scores)


def balanced_allocation(node: NodeState, cpu: float, memory: float) -> int:
    """NodeResourcesBalancedAllocation's score: 100 × (1 − the standard deviation of the requested fractions)."""
    fractions = [
        min(1.0, (node.requested_cpu + cpu) / node.cpu),
        min(1.0, (node.requested_memory + memory) / node.memory),
    ]
    mean = sum(fractions) / len(fractions)
    deviation = (sum((fraction - mean) ** 2 for fraction in fractions) / len(fractions)) ** 0.5
    return int((1 - deviation) * MAX_NODE_SCORE)


def guaranteed_pod(name: str, cpu: str = "400m", memory: str = "256Mi", namespace: str = "default") -> dict[str, Any]:
    """A pending pod of one container with requests = limits, as the scheduler's informer hands it over."""
    resources = {"cpu": cpu, "memory": memory}
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "nodeName": "",
            "schedulerName": "default-scheduler",
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }
