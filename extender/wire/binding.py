"""marshmallow schemas of the bind verb: ExtenderBindingArgs in, ExtenderBindingResult out.

Apart from the filter's (``extender.wire.schemas``), so that an instance
imports them when it is first asked to bind.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from marshmallow import Schema, fields, post_load

from extender.wire.fields import non_empty_string
from extender.wire.schemas import WireSchema


class BindingArgs(NamedTuple):
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


class ExtenderBindingArgsSchema(WireSchema):
    PodName = non_empty_string(required=True)
    PodNamespace = non_empty_string(required=True)
    PodUID = non_empty_string(required=True)
    Node = non_empty_string(required=True)

    @post_load
    def make_args(self, data: dict[str, Any], **kwargs: Any) -> BindingArgs:
        return BindingArgs(data["PodName"], data["PodNamespace"], data["PodUID"], data["Node"])


class ExtenderBindingResultSchema(Schema):
    Error = fields.String()
