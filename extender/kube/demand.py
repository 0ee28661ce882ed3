"""What a pod asks of a node: each container's CPU and memory requests and limits, as the pod spec states them.

Read from a pod object as JSON decodes it (the request's pod, or one the API lists). Only what estimates of a pod's
usage need is kept: the regular containers, the init containers in order with whether each is a sidecar
(``restartPolicy: Always``: it runs beside the regular containers), and the pod overhead. A quantity that cannot be
read counts as not set: the API server validated the pod, and one odd value must not stop its scheduling.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from extender.kube.quantity import parse_quantity

CPU, MEMORY = "cpu", "memory"


class Resources(NamedTuple):
    """One container's (or the overhead's) requests and limits: cores and bytes, None when not set."""

    cpu_request: float | None = None
    cpu_limit: float | None = None
    memory_request: float | None = None
    memory_limit: float | None = None

    def request(self, resource: str) -> float | None:
        return self.cpu_request if resource == CPU else self.memory_request

    def limit(self, resource: str) -> float | None:
        return self.cpu_limit if resource == CPU else self.memory_limit


class PodDemand(NamedTuple):
    containers: tuple[Resources, ...] = ()
    # In spec order, each with whether it is a sidecar (restartPolicy Always).
    init_containers: tuple[tuple[Resources, bool], ...] = ()
    overhead: Resources = Resources()


NO_DEMAND = PodDemand()


def demand_of(pod: Mapping[str, Any] | None) -> PodDemand:
    """The demand a pod object (``{"metadata": ..., "spec": ...}``) states; empty for anything that is not one."""
    spec = pod.get("spec") if isinstance(pod, Mapping) else None
    if not isinstance(spec, Mapping):
        return NO_DEMAND
    return demand_from_spec(spec)


def demand_from_spec(spec: Mapping[str, Any]) -> PodDemand:
    containers = tuple(_container(item) for item in _list(spec.get("containers")))
    inits = tuple(
        (_container(item), isinstance(item, Mapping) and item.get("restartPolicy") == "Always")
        for item in _list(spec.get("initContainers"))
    )
    overhead = spec.get("overhead")
    return PodDemand(containers, inits, resources(overhead, None) if isinstance(overhead, Mapping) else Resources())


def resources(requests: Any, limits: Any) -> Resources:
    """A container's Resources from its ``resources.requests`` and ``resources.limits`` maps (either may be None)."""
    return Resources(_read(requests, CPU), _read(limits, CPU), _read(requests, MEMORY), _read(limits, MEMORY))


def owned_by_daemon_set(pod: Mapping[str, Any] | None) -> bool:
    """Whether the pod's controller is a DaemonSet (an ownerReference of kind DaemonSet): pinned to its one node."""
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    owners = metadata.get("ownerReferences") if isinstance(metadata, Mapping) else None
    return any(isinstance(owner, Mapping) and owner.get("kind") == "DaemonSet" for owner in _list(owners))


def _container(item: Any) -> Resources:
    if not isinstance(item, Mapping):
        return Resources()
    given = item.get("resources")
    if not isinstance(given, Mapping):
        return Resources()
    return resources(given.get("requests"), given.get("limits"))


def _read(quantities: Any, resource: str) -> float | None:
    if not isinstance(quantities, Mapping):
        return None
    text = quantities.get(resource)
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)  # JSON numbers are quantities too (the API server writes strings)
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
