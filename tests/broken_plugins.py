"""A plugin that fails on purpose at every extension point, loaded through the policy's ``pluginModules``.

``fail`` says how: ``raise`` (a bug), ``error`` (an Error status: it cannot decide), ``range`` (a score outside
0..100); ``nodes`` (globs) says on which nodes; the others pass, or score 50.
"""

from __future__ import annotations

import fnmatch
from typing import ClassVar

from marshmallow import Schema, fields
from marshmallow.validate import OneOf

from extender.framework import status
from extender.framework.plugin import FilterPlugin, PreemptPlugin, ScorePlugin
from extender.framework.registry import register
from extender.framework.status import Status
from extender.framework.types import Node, Pod, Victims


class BrokenArgs(Schema):
    fail = fields.String(load_default="raise", validate=OneOf(["raise", "error", "range"]))
    nodes = fields.List(fields.String(), load_default=lambda: ["*"])


@register
class Broken(FilterPlugin, ScorePlugin, PreemptPlugin):
    name: ClassVar[str] = "Broken"
    args_schema = BrokenArgs

    def reuse_key(self, pod: Pod) -> tuple[()]:
        """Whether it fails depends on the node alone: its results may be kept (and must not be, when it failed)."""
        return ()

    def _fails(self, node: str) -> bool:
        return any(fnmatch.fnmatchcase(node, glob) for glob in self.args["nodes"])

    def _failure(self, node: str) -> Status:
        if self.args["fail"] == "raise":
            raise RuntimeError(f"broken on {node}")
        return status.error(f"Broken cannot decide on {node}")

    def filter(self, pod: Pod, node: Node) -> Status:
        return self._failure(node.name) if self._fails(node.name) else status.SUCCESS

    def score(self, pod: Pod, node: Node) -> int:
        if not self._fails(node.name):
            return 50
        if self.args["fail"] == "range":
            return 500
        raise RuntimeError(f"broken on {node.name}")

    def select_victims(self, pod: Pod, node_name: str, victims: Victims) -> Status:
        return self._failure(node_name) if self._fails(node_name) else status.SUCCESS
