"""bind: the extender must create the Binding itself; success without one leaves the pod Pending forever."""

from __future__ import annotations

from typing import Any

from extender.verbs import Answer, load_request
from extender.wire.schemas import ExtenderBindingArgsSchema, ExtenderBindingResultSchema

_args = ExtenderBindingArgsSchema()
_result = ExtenderBindingResultSchema()

NOT_CONFIGURED = (
    "binding is not configured: this extender has no Kubernetes API access to create the Binding; "
    "remove bindVerb from the scheduler configuration"
)


def handle(payload: Any) -> Answer:
    load_request(_args, payload, "ExtenderBindingArgs")
    return Answer(_result.dump({"Error": NOT_CONFIGURED}), error=NOT_CONFIGURED)
