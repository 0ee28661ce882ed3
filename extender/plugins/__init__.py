"""Built-in plugins, one folder each; importing this package registers them."""

from extender.framework.registry import register
from extender.plugins.instancecost import InstanceCost
from extender.plugins.nodenamefilter import NodeNameFilter

for _plugin in (InstanceCost, NodeNameFilter):
    register(_plugin)
