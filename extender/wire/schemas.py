"""marshmallow schemas for the extender protocol (k8s.io/kube-scheduler/extender/v1).

The Go types have no json tags, so the scheduler sends and expects Go's
capitalised field names; it always sends both alternatives of a pair with
the unused one ``null``, so ``null`` is read exactly like a missing key.
Kubernetes objects inside (Pod, Node) use their usual camelCase JSON; only
the facts policies read are loaded, unknown fields are ignored. The preempt
and bind verbs' own types are in ``preemption`` and ``binding``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_load, pre_load, validates_schema
from marshmallow.types import UnknownOption

from extender.framework.types import Node, Pod
from extender.wire.fields import (
    BuiltNames,
    NameList,
    StringMap,
    all_strings,
    non_empty_string,
    plain_strings,
    strict_int,
)


class WireSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    @pre_load
    def drop_nulls(self, data: Any, **kwargs: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


# --- Kubernetes objects: only what policies read -------------------------------------------------


class ObjectMetaSchema(WireSchema):
    name = fields.String(load_default="")
    namespace = fields.String(load_default="")
    uid = fields.String(load_default="")
    labels = StringMap(load_default=dict)
    annotations = StringMap(load_default=dict)


class PodSpecSchema(WireSchema):
    priority = strict_int(load_default=None)


class PodSchema(WireSchema):
    metadata = fields.Nested(ObjectMetaSchema, required=True)
    spec = fields.Nested(PodSpecSchema, load_default=dict)

    @post_load(pass_original=True)
    def make_pod(self, data: dict[str, Any], original: Any, **kwargs: Any) -> Pod:
        meta, spec = data["metadata"], data["spec"]
        return Pod(
            uid=meta["uid"],
            name=meta["name"],
            namespace=meta["namespace"],
            labels=meta["labels"],
            annotations=meta["annotations"],
            priority=spec.get("priority"),
            raw=original,
        )


class NodeMetaSchema(WireSchema):
    name = non_empty_string(required=True)
    labels = StringMap(load_default=dict)


class NodeSchema(WireSchema):
    metadata = fields.Nested(NodeMetaSchema, required=True)


class EncodedNode(dict[str, Any]):
    """A node item as ``wire.fast_decoder`` decodes it: the fields NodeSchema reads, and the whole node, encoded."""

    __slots__ = ("encoded",)

    def __init__(self, fields: dict[str, Any], encoded: orjson.Fragment) -> None:
        super().__init__(fields)
        self.encoded = encoded


class NodeItems(fields.Field[list[Node]]):
    """``NodeList.items``: loads each node's facts and keeps the object itself for echoing back.

    Thousands of nodes with a plainly valid name and labels are loaded in one
    pass, exactly as NodeSchema would load them; if any is not, NodeSchema
    loads them all and says what is wrong.
    """

    _schema = NodeSchema(many=True)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> list[Node]:
        if not isinstance(value, list):
            raise ValidationError("Not a valid list.")
        plain = _plain_nodes(value)
        if plain is not None:
            return plain
        loaded = self._schema.load(value)
        return [
            Node(
                name=facts["metadata"]["name"],
                labels=facts["metadata"]["labels"],
                raw=_as_received(raw),
                allocatable=allocatable(raw),
            )
            for facts, raw in zip(loaded, value, strict=True)
        ]


_STR = {str}


def _plain_nodes(items: list[Any]) -> list[Node] | None:
    nodes = []
    for item in items:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if type(metadata) is not dict:
            return None
        name, labels = metadata.get("name"), metadata.get("labels")
        if type(name) is not str or not name:
            return None
        if labels is None:
            labels = {}
        elif type(labels) is not dict or not set(map(type, labels.values())) <= _STR:
            return None
        nodes.append(Node(name=name, labels=labels, raw=_as_received(item), allocatable=allocatable(item)))
    return nodes


def allocatable(item: Mapping[str, Any]) -> dict[str, str] | None:
    """A node item's ``status.allocatable`` when it is a map of strings (as the API server writes quantities); None
    otherwise: nothing reads a node's status but load-aware plugins, which then have no allocatable for it."""
    status = item.get("status")
    found = status.get("allocatable") if type(status) is dict else None
    if type(found) is not dict or not set(map(type, found.values())) <= _STR:
        return None
    return found


def _as_received(item: Any) -> Any:
    return item.encoded if type(item) is EncodedNode else item


class NodeListSchema(WireSchema):
    items = NodeItems(load_default=list)


# --- Requests ------------------------------------------------------------------------------------


class ExtenderArgs:
    __slots__ = ("node_names", "nodes", "pod")

    def __init__(
        self,
        pod: Pod,
        # Full-node request (nodeCacheCapable: false) when set ...
        nodes: list[Node] | None,
        # ... node-name request (nodeCacheCapable: true) otherwise.
        node_names: list[str] | None,
    ) -> None:
        self.pod = pod
        self.nodes = nodes
        self.node_names = node_names


def _check_unique(names: list[str], field: str) -> None:
    if len(set(names)) == len(names):
        return
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValidationError(f"duplicate node name {name!r}", field)
        seen.add(name)


class ExtenderArgsSchema(WireSchema):
    """Loads a plainly valid ExtenderArgs in one pass, exactly as the fields below would
    (``_plain_args``); anything else goes through them, and their messages say what is wrong."""

    Pod = fields.Nested(PodSchema, required=True)
    Nodes = fields.Nested(NodeListSchema)
    NodeNames = NameList()

    def load(
        self, data: Any, *, many: bool | None = None, partial: Any = None, unknown: UnknownOption | None = None
    ) -> Any:
        if many is None and partial is None and unknown is None:
            plain = _plain_args(data)
            if plain is not None:
                return plain
        return super().load(data, many=many, partial=partial, unknown=unknown)

    @validates_schema
    def one_node_form(self, data: dict[str, Any], **kwargs: Any) -> None:
        if ("Nodes" in data) == ("NodeNames" in data):
            raise ValidationError("exactly one of Nodes and NodeNames must be set (the other null)")
        if "Nodes" in data:
            _check_unique([node.name for node in data["Nodes"]["items"]], "Nodes")
        else:
            _check_unique(data["NodeNames"], "NodeNames")

    @post_load
    def make_args(self, data: dict[str, Any], **kwargs: Any) -> ExtenderArgs:
        nodes = data.get("Nodes")
        return ExtenderArgs(data["Pod"], nodes["items"] if nodes is not None else None, data.get("NodeNames"))


def _plain_args(data: Any) -> ExtenderArgs | None:
    """What ``ExtenderArgsSchema`` loads from ``data`` when every field is plainly valid; None for anything else."""
    if type(data) is not dict:
        return None
    pod = _plain_pod(data.get("Pod"))
    nodes, names = data.get("Nodes"), data.get("NodeNames")
    if pod is None or (nodes is None) == (names is None):
        return None
    if names is not None:
        checked = type(names) is BuiltNames and names.distinct
        names = plain_strings(names)
        return ExtenderArgs(pod, None, names) if names is not None and (checked or _unique(names, "")) else None
    if type(nodes) is not dict:
        return None
    items = nodes.get("items")
    loaded = [] if items is None else _plain_nodes(items) if type(items) is list else None
    if loaded is None or not _unique([node.name for node in loaded], None):
        return None
    return ExtenderArgs(pod, loaded, None)


def _plain_pod(pod: Any) -> Pod | None:
    """What ``PodSchema`` loads from a pod whose fields are plainly valid (``null`` read as missing); else None."""
    if type(pod) is not dict:
        return None
    meta, spec = pod.get("metadata"), pod.get("spec")
    if type(meta) is not dict or (spec is not None and type(spec) is not dict):
        return None
    texts = ["" if text is None else text for text in map(meta.get, ("uid", "name", "namespace"))]
    if set(map(type, texts)) != _STR:
        return None
    maps = [meta.get(name) for name in ("labels", "annotations")]
    if not all(value is None or (type(value) is dict and set(map(type, value.values())) <= _STR) for value in maps):
        return None
    priority = spec.get("priority") if spec is not None else None
    if priority is not None and type(priority) is not int:
        return None
    uid, name, namespace = texts
    labels, annotations = (value if value is not None else {} for value in maps)
    return Pod(uid, name, namespace, labels, annotations, priority, pod)


def _unique(names: list[str], absent: str | None) -> bool:
    """No name twice, and none is ``absent`` (the empty name, where the list may hold one)."""
    seen = set(names)
    return len(seen) == len(names) and absent not in seen


# --- Answers -------------------------------------------------------------------------------------


class ExtenderFilterResultSchema(Schema):
    # Exactly one of Nodes / NodeNames is dumped: the one of the request's mode.
    Nodes = fields.Raw()
    NodeNames = NameList()
    FailedNodes = StringMap()
    FailedAndUnresolvableNodes = StringMap()
    Error = fields.String()

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        """An answer whose Error is a string and NodeNames (if any) a list of strings, as the filter verb makes it,
        is what the fields would dump (the others pass unchanged): its fields are taken as they are, in order."""
        if not (self.many if many is None else many) and type(obj) is dict and type(obj.get("Error")) is str:
            names = obj.get("NodeNames")
            if names is None or (type(names) is list and all_strings(names)):
                return {name: obj[name] for name in self.dump_fields if name in obj}
        return super().dump(obj, many=many)
