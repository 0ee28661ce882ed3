"""What a pod will use of a node, predicted from its spec before any metric shows it: NodeLoad's estimates.

Per container and resource, as Trimaran's TargetLoadPacking predicts a container's CPU (kubernetes-sigs/
scheduler-plugins): its limit where set (what it may use), else its request times ``requestFactor`` (1.5 for CPU,
Trimaran's default; 1 for memory), else ``default`` (a container that states neither). The containers then combine
as the scheduler counts a pod's requests (k8s.io/component-helpers ``PodRequests``): the sum of the regular
containers and the sidecars (init containers with ``restartPolicy: Always``), or, if more, what the init phase needs
at its peak (each plain init container on top of the sidecars started before it); plus the pod overhead (RuntimeClass),
taken as it is.

An estimate is a function of the pod's demand and the policy's factors alone, so that identical pods (replicas)
share it and it can be part of a reuse key.
"""

from __future__ import annotations

from typing import NamedTuple

from extender.kube.demand import CPU, MEMORY, PodDemand, Resources

RESOURCES = (CPU, MEMORY)


class ResourceEstimate(NamedTuple):
    """How one resource of a container is estimated."""

    request_factor: float
    default: float  # cores or bytes, for a container that states neither a limit nor a request


# Trimaran's CPU factor; 100m and 128Mi for a container that states nothing, as a small process uses.
DEFAULTS = {CPU: ResourceEstimate(1.5, 0.1), MEMORY: ResourceEstimate(1.0, 128 * 2**20)}


class Usage(NamedTuple):
    """A pod's predicted use: cores and bytes."""

    cpu: float = 0.0
    memory: float = 0.0

    def of(self, resource: str) -> float:
        return self.cpu if resource == CPU else self.memory


NOTHING = Usage()


class Estimator:
    """Estimates pods with the policy's factors; thread-safe (its memo is replaced, never changed in place)."""

    # Distinct demands remembered: replicas share one; a stream of distinct pods starts the memo afresh.
    MAX_REMEMBERED = 4096

    def __init__(self, estimates: dict[str, ResourceEstimate] | None = None) -> None:
        self.estimates = {**DEFAULTS, **(estimates or {})}
        self._memo: dict[PodDemand, Usage] = {}

    def usage(self, demand: PodDemand) -> Usage:
        found = self._memo.get(demand)
        if found is None:
            found = Usage(*(self._resource(demand, resource) for resource in RESOURCES))
            memo = self._memo if len(self._memo) < self.MAX_REMEMBERED else {}
            memo[demand] = found
            self._memo = memo
        return found

    def _resource(self, demand: PodDemand, resource: str) -> float:
        each = self._container
        regular = sum(each(container, resource) for container in demand.containers)
        sidecars = 0.0
        init_peak = 0.0
        for container, sidecar in demand.init_containers:
            used = each(container, resource)
            if sidecar:
                regular += used
                sidecars += used
                init_peak = max(init_peak, sidecars)
            else:
                init_peak = max(init_peak, used + sidecars)
        overhead = demand.overhead.request(resource) or 0.0
        return max(regular, init_peak) + overhead

    def _container(self, container: Resources, resource: str) -> float:
        limit = container.limit(resource)
        if limit is not None:
            return limit
        request = container.request(resource)
        estimate = self.estimates[resource]
        if request is not None:
            return request * estimate.request_factor
        return estimate.default
