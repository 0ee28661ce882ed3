"""Build plugins from policy-style args and the pods and nodes they judge, for the plugin tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from extender.framework.plugin import Plugin
from extender.framework.types import Node, Pod
from extender.nodesource.base import unknowable


def build(plugin: type[Plugin], args: dict[str, Any], **kwargs: Any) -> Any:
    """The plugin as a profile builds it: args validated and loaded by its own schema."""
    assert plugin.args_schema is not None
    return plugin(plugin.args_schema().load(args), **kwargs)


def node(name: str, **labels: str) -> Node:
    return Node(name, labels=labels)


def pod(
    name: str = "web-1",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority: int | None = None,
) -> Pod:
    return Pod(
        uid=f"uid-{namespace}-{name}",
        name=name,
        namespace=namespace,
        labels=labels or {},
        annotations=annotations or {},
        priority=priority,
    )


class ListedNodes:
    """A node source that answers from a list of Node objects, as the kubernetes source does between refreshes.

    ``list`` swaps in a new list (a new generation); ``looked_up`` counts the names each lookup was asked for.
    """

    def __init__(self, nodes: list[Node]) -> None:
        self.looked_up: list[int] = []
        self.list(nodes)

    def list(self, nodes: list[Node]) -> None:
        self._nodes = {node.name: node for node in nodes}

    def lookup(self, names: Sequence[str]) -> list[Node]:
        self.looked_up.append(len(names))
        return [self._nodes.get(name) or unknowable(name, f"node {name} is not listed") for name in names]

    def generation(self) -> object:
        return self._nodes
