"""A validated ``nodeSource`` (``extender.nodesource.schema`` reads it from the policy), and the source it builds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from extender.errors import ConfigError
from extender.nodesource.base import NamesOnly, NodeSource
from extender.settings import DEFAULT_MAX_AGE

if TYPE_CHECKING:
    from extender.kube.client import KubeClient

KINDS = ("kubernetes", "static", "names")


class NodeSourceSpec(NamedTuple):
    """A validated ``nodeSource``; ``build`` makes the source once the environment (the API client) is known."""

    kind: str = ""
    settings: Any = None
    # failurePolicy Ignore: the source logs that plugins let nodes with unavailable facts pass.
    fail_open: bool = False

    def label_keys(self) -> frozenset[str] | None:
        """The node label keys this source supplies (None: every label a node has), so that the policy can reject
        a rule reading a key the source never knows, which would otherwise judge every node as lacking it."""
        if self.kind == "kubernetes":
            return None
        if self.kind == "static":
            return frozenset(key for entry in self.settings["nodes"] for key in entry.labels)
        if self.kind == "names":
            from extender.nodesource.gke_names import NODE_POOL_LABEL

            return frozenset({NODE_POOL_LABEL})
        return frozenset()

    def build(self, kube: KubeClient | None, max_age: float = DEFAULT_MAX_AGE) -> NodeSource:
        """``max_age``: the oldest node list a listing source calls healthy (EXTENDER_NODE_SOURCE_MAX_AGE)."""
        if self.kind == "kubernetes":
            if kube is None:
                raise ConfigError(
                    "the policy's nodeSource is kubernetes, but KUBERNETES_API_URL is not set: "
                    "set it, with KUBERNETES_TOKEN or KUBERNETES_TOKEN_FILE and the API server's CA"
                )
            from extender.nodesource.kubernetes import KubernetesNodes

            source = KubernetesNodes(kube, self.settings, self.fail_open, max_age=max_age)
            source.start(wait=self.settings.list_timeout)
            return source
        if self.kind == "static":
            from extender.nodesource.static import StaticInventory

            return StaticInventory(self.settings["nodes"])
        if self.kind == "names":
            from extender.nodesource.gke_names import GkeNodeNames

            return GkeNodeNames(self.settings["cluster"], self.settings["nodePools"])
        return NamesOnly()
