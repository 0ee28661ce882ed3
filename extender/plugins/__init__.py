"""Built-in plugins, one folder each; importing this package registers them.

Each is imported when a policy first names it (or when it is read from this
package, ``extender.plugins.NodeNameFilter``): start-up pays only for the
plugins the policy enables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extender.framework.registry import lookup, register_lazily

if TYPE_CHECKING:
    from extender.framework.plugin import Plugin

BUILT_IN = {
    "InstanceCost": "extender.plugins.instancecost:InstanceCost",
    "NodeLabelPolicy": "extender.plugins.nodelabelpolicy:NodeLabelPolicy",
    "NodeLoad": "extender.plugins.nodeload:NodeLoad",
    "NodeNameFilter": "extender.plugins.nodenamefilter:NodeNameFilter",
    "ProtectedVictims": "extender.plugins.protectedvictims:ProtectedVictims",
    "TopologyPreference": "extender.plugins.topologypreference:TopologyPreference",
}

for _name, _target in BUILT_IN.items():
    register_lazily(_name, _target)


def __getattr__(name: str) -> type[Plugin]:
    plugin = lookup(name) if name in BUILT_IN else None
    if plugin is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return plugin
