"""A validated ``nodeSource`` (``extender.nodesource.schema`` reads it from the policy), and the source it builds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from extender.errors import ConfigError
from extender.kube.variables import API_URL_ENV, TOKEN_ENV, TOKEN_FILE_ENV
from extender.nodesource.base import NamesOnly, NodeSource
from extender.settings import DEFAULT_MAX_AGE, Need, Settings

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

    def needs(self) -> tuple[Need, ...]:
        """What the source needs set at start-up: the kubernetes source lists the nodes before the function serves."""
        if self.kind != "kubernetes":
            return ()
        return (
            Need((API_URL_ENV,), "the policy's kubernetes nodeSource lists the nodes from the API server"),
            Need(
                (TOKEN_ENV, TOKEN_FILE_ENV),
                "the API server refuses to list nodes for an anonymous caller (only an http:// KUBERNETES_API_URL, "
                "kubectl proxy on the loopback, needs none)",
                waived=_through_kubectl_proxy,
            ),
        )

    def build(self, kube: KubeClient | None, max_age: float = DEFAULT_MAX_AGE) -> NodeSource:
        """``max_age``: the oldest node list a listing source calls healthy (EXTENDER_NODE_SOURCE_MAX_AGE). Start-up
        checks ``needs`` first: the kubernetes source gets a client."""
        if self.kind == "kubernetes":
            if kube is None:
                raise ConfigError(f"the policy's kubernetes nodeSource needs the Kubernetes API: set {API_URL_ENV}")
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


def _through_kubectl_proxy(settings: Settings) -> bool:
    """KUBERNETES_API_URL takes http:// only on the loopback, where kubectl proxy adds its own credentials."""
    return settings.kubernetes.get(API_URL_ENV, "").strip().startswith("http://")
