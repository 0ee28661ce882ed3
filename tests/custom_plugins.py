"""A custom plugin as a team would write one, loaded through the policy's ``pluginModules``.

LicenseSlots reproduces the recorded c1 scenario's "no license slot" rejection:
a node whose licenses are all taken is Unschedulable (FailedNodes), because
evicting a licensed pod would free a slot.
"""

from __future__ import annotations

import fnmatch
from typing import ClassVar

from marshmallow import Schema, fields

from extender.framework import status
from extender.framework.plugin import FilterPlugin
from extender.framework.registry import register
from extender.framework.status import Status
from extender.framework.types import Node, Pod


class LicenseSlotsArgs(Schema):
    full = fields.List(fields.String(), load_default=list)


@register
class LicenseSlots(FilterPlugin):
    name: ClassVar[str] = "LicenseSlots"
    args_schema = LicenseSlotsArgs

    def filter(self, pod: Pod, node: Node) -> Status:
        if any(fnmatch.fnmatchcase(node.name, glob) for glob in self.args["full"]):
            return status.unschedulable("LicenseSlots: node has no license slot")
        return status.SUCCESS
