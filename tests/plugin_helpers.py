"""Build plugins from policy-style args and the pods and nodes they judge, for the plugin tests."""

from __future__ import annotations

from typing import Any

from extender.framework.plugin import Plugin
from extender.framework.types import Node, Pod


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
