"""NodeNameFilter: allow and deny lists of node-name globs.

Works from node names alone, so it needs no node source in node-name mode.

    - name: NodeNameFilter
      args:
        allow: ["gke-prod-*"]       # when set, only matching nodes pass
        deny: ["*-canary-*"]        # matching nodes never pass
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from marshmallow import Schema, fields

from extender.framework import status
from extender.framework.plugin import FilterPlugin
from extender.framework.status import Status
from extender.framework.types import Node, Pod


class NodeNameFilterArgs(Schema):
    allow = fields.List(fields.String(), load_default=list)
    deny = fields.List(fields.String(), load_default=list)


def _compile(globs: list[str]) -> re.Pattern[str] | None:
    # One regex for the whole list: one match call per node, however many globs.
    return re.compile("|".join(fnmatch.translate(glob) for glob in globs)) if globs else None


class NodeNameFilter(FilterPlugin):
    name: ClassVar[str] = "NodeNameFilter"
    args_schema = NodeNameFilterArgs

    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__(args)
        self._allow = _compile(args["allow"])
        self._deny = _compile(args["deny"])

    def filter(self, pod: Pod, node: Node) -> Status:
        if self._deny is not None and self._deny.match(node.name):
            return status.unresolvable("node name is on the NodeNameFilter deny list")
        if self._allow is not None and not self._allow.match(node.name):
            return status.unresolvable("node name is not on the NodeNameFilter allow list")
        return status.SUCCESS
