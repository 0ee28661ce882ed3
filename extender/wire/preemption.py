"""marshmallow schemas of the preempt verb: ExtenderPreemptionArgs in, ExtenderPreemptionResult out.

Apart from the filter's (``extender.wire.schemas``), so that an instance
imports them when it is first asked to preempt.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema

from extender.framework.types import Pod, Victims
from extender.wire.fields import non_empty_string, strict_int
from extender.wire.schemas import ObjectMetaSchema, PodSchema, WireSchema


class VictimMetaSchema(ObjectMetaSchema):
    uid = non_empty_string(required=True)


class VictimPodSchema(PodSchema):
    """A pod offered for eviction: the answer names victims by UID, so it must have one."""

    metadata = fields.Nested(VictimMetaSchema, required=True)


class VictimsSchema(WireSchema):
    Pods = fields.List(fields.Nested(VictimPodSchema), load_default=list)
    NumPDBViolations = strict_int(load_default=0)

    @post_load
    def make_victims(self, data: dict[str, Any], **kwargs: Any) -> Victims:
        return Victims(tuple(data["Pods"]), data["NumPDBViolations"])


class MetaPodSchema(WireSchema):
    UID = non_empty_string(required=True)

    @post_load
    def make_pod(self, data: dict[str, Any], **kwargs: Any) -> Pod:
        return Pod(uid=data["UID"])


class MetaVictimsSchema(VictimsSchema):
    Pods = fields.List(fields.Nested(MetaPodSchema), load_default=list)


class PreemptionArgs(NamedTuple):
    pod: Pod
    candidates: dict[str, Victims]
    # True when victims came as full pods (NodeNameToVictims, nodeCacheCapable: false).
    full_pods: bool


class ExtenderPreemptionArgsSchema(WireSchema):
    Pod = fields.Nested(PodSchema, required=True)
    NodeNameToVictims = fields.Dict(keys=non_empty_string(), values=fields.Nested(VictimsSchema))
    NodeNameToMetaVictims = fields.Dict(keys=non_empty_string(), values=fields.Nested(MetaVictimsSchema))

    @validates_schema
    def one_victim_form(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "NodeNameToVictims" in data and "NodeNameToMetaVictims" in data:
            raise ValidationError("at most one of NodeNameToVictims and NodeNameToMetaVictims may be set")

    @post_load
    def make_args(self, data: dict[str, Any], **kwargs: Any) -> PreemptionArgs:
        full = "NodeNameToVictims" in data
        candidates = data.get("NodeNameToVictims") or data.get("NodeNameToMetaVictims") or {}
        return PreemptionArgs(data["Pod"], candidates, full)


# --- Answers -------------------------------------------------------------------------------------


class MetaPodDumpSchema(Schema):
    UID = fields.String(attribute="uid")


class MetaVictimsDumpSchema(Schema):
    Pods = fields.List(fields.Nested(MetaPodDumpSchema), attribute="pods")
    NumPDBViolations = fields.Integer(attribute="num_pdb_violations")


class ExtenderPreemptionResultSchema(Schema):
    NodeNameToMetaVictims = fields.Dict(keys=fields.String(), values=fields.Nested(MetaVictimsDumpSchema))
