"""ProtectedVictims: veto preemption that would evict a protected pod.

A candidate node whose victims include a pod matched by any ``protect``
entry is dropped from the preemption answer, so the scheduler evicts nothing
there; with every candidate dropped it gives up preempting for this pod.
Matching needs the victims' pod objects. kube-scheduler sends them only to
extenders configured with ``nodeCacheCapable: false``; in node-name mode they
are looked up in the Kubernetes API, so the policy must either say
``nodeCacheCapable: false`` or configure a ``nodeSource``.

    - name: ProtectedVictims
      args:
        protect:
        - name: system
          pods: {namespaces: [kube-system]}
        - name: opted-out
          pods:
            annotationSelector:
              matchLabels: {example.com/preemptible: "false"}
        - name: databases
          pods: {labelSelector: {matchExpressions: [{key: app, operator: In, values: [postgres, redis]}]}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from marshmallow import Schema, fields, post_load
from marshmallow.validate import Length

from extender.framework import status
from extender.framework.args import unique_names
from extender.framework.plugin import PreemptPlugin
from extender.framework.selectors import PodSelector, PodSelectorSchema
from extender.framework.status import Status
from extender.framework.types import Pod, VictimFacts, Victims


class Protection(NamedTuple):
    name: str
    pods: PodSelector


class ProtectionSchema(Schema):
    name = fields.String(required=True, validate=Length(min=1))
    pods = fields.Nested(PodSelectorSchema, load_default=PodSelector)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Protection:
        return Protection(data["name"], data["pods"])


class ProtectedVictimsArgs(Schema):
    protect = fields.List(fields.Nested(ProtectionSchema), required=True, validate=[Length(min=1), unique_names])


class ProtectedVictims(PreemptPlugin):
    name: ClassVar[str] = "ProtectedVictims"
    victim_facts = VictimFacts.POD
    args_schema = ProtectedVictimsArgs

    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__(args)
        self._protect: tuple[Protection, ...] = tuple(args["protect"])

    def select_victims(self, pod: Pod, node_name: str, victims: Victims) -> Status:
        for victim in victims.pods:
            for protection in self._protect:
                if protection.pods.matches(victim):
                    return status.unresolvable(
                        f"ProtectedVictims rule {protection.name!r} protects victim {victim.namespace}/{victim.name}"
                    )
        return status.SUCCESS
