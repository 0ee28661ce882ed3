"""Built-in plugins, one folder each; importing this package registers them."""

from extender.framework.registry import register
from extender.plugins.instancecost import InstanceCost
from extender.plugins.nodelabelpolicy import NodeLabelPolicy
from extender.plugins.nodenamefilter import NodeNameFilter
from extender.plugins.protectedvictims import ProtectedVictims
from extender.plugins.topologypreference import TopologyPreference

for _plugin in (InstanceCost, NodeLabelPolicy, NodeNameFilter, ProtectedVictims, TopologyPreference):
    register(_plugin)
