"""bind: the extender must create the Binding itself; success without one leaves the pod Pending forever.

Any failure answers ``Error`` with the API server's message, which the
scheduler puts into the pod's events; it then retries scheduling the pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extender.framework.types import Pod
from extender.kube import note_binding
from extender.kube.errors import KubeError
from extender.verbs import Answer, load_request
from extender.wire.binding import ExtenderBindingArgsSchema, ExtenderBindingResultSchema

if TYPE_CHECKING:
    from extender.kube.client import KubeClient

_args = ExtenderBindingArgsSchema()
_result = ExtenderBindingResultSchema()

NOT_CONFIGURED = (
    "binding is not configured: this extender has no Kubernetes API access to create the Binding; "
    "set KUBERNETES_API_URL (with a token allowed to create pods/binding) or remove bindVerb from the scheduler "
    "configuration"
)


def handle(payload: Any, kube: KubeClient | None) -> Answer:
    args = load_request(_args, payload, "ExtenderBindingArgs")
    pod = Pod(uid=args.pod_uid, name=args.pod_name, namespace=args.pod_namespace)
    if kube is None:
        return Answer(_result.dump({"Error": NOT_CONFIGURED}), error=NOT_CONFIGURED, pod=pod)
    try:
        kube.bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node)
    except KubeError as exc:
        message = f"binding pod {args.pod_namespace}/{args.pod_name} to node {args.node} failed: {exc.message}"
        return Answer(_result.dump({"Error": message}), error=message, pod=pod)
    note_binding(args.pod_uid, args.node)
    return Answer(_result.dump({"Error": ""}), pod=pod)
