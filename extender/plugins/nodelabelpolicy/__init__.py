"""NodeLabelPolicy: pods matching a rule's ``pods`` may only run on nodes matching its ``nodeSelector``.

Tenancy and placement rules that pod specs cannot be trusted with (GKE has no
PodNodeSelector admission plugin). Every rule that matches the pod must hold;
a node that breaks one is UnschedulableAndUnresolvable (evicting pods cannot
change its labels), with a message naming the rule.

    - name: NodeLabelPolicy
      args:
        rules:
        - name: ml-on-gpu-pool
          pods:                              # omitted or {}: every pod
            namespaces: [ml]
            labelSelector: {matchLabels: {team: ml}}
            priority: {min: 1000}
          nodeSelector:
            matchLabels: {cloud.google.com/gke-nodepool: gpu}
        - name: others-off-gpu-pool
          pods: {excludeNamespaces: [ml]}
          nodeSelector:
            matchExpressions:
            - {key: cloud.google.com/gke-nodepool, operator: NotIn, values: [gpu]}
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

from marshmallow import Schema, fields, post_load
from marshmallow.validate import Length

from extender.framework import status
from extender.framework.args import unique_names
from extender.framework.plugin import FilterPlugin
from extender.framework.selectors import LabelSelector, LabelSelectorSchema, PodSelector, PodSelectorSchema
from extender.framework.status import Status
from extender.framework.types import Facts, Node, Pod


class Rule(NamedTuple):
    name: str
    pods: PodSelector
    node_selector: LabelSelector
    # The same text for every node that breaks the rule, so the scheduler's event aggregates them; built once.
    violation: str


class RuleSchema(Schema):
    name = fields.String(required=True, validate=Length(min=1))
    pods = fields.Nested(PodSelectorSchema, load_default=PodSelector)
    nodeSelector = fields.Nested(LabelSelectorSchema, required=True)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Rule:
        name, selector = data["name"], data["nodeSelector"]
        return Rule(name, data["pods"], selector, f"NodeLabelPolicy rule {name!r}: node does not match {selector}")


class NodeLabelPolicyArgs(Schema):
    rules = fields.List(fields.Nested(RuleSchema), required=True, validate=[Length(min=1), unique_names])


class NodeLabelPolicy(FilterPlugin):
    name: ClassVar[str] = "NodeLabelPolicy"
    facts = Facts.LABELS
    args_schema = NodeLabelPolicyArgs

    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__(args)
        self._rules: tuple[Rule, ...] = tuple(args["rules"])

    @classmethod
    def label_keys(cls, args: Mapping[str, Any]) -> Iterable[tuple[str, tuple[str, ...]]]:
        for index, rule in enumerate(args["rules"]):
            selector = f"rules[{index}].nodeSelector"
            yield from ((f"{selector}.matchLabels.{key}", (key,)) for key, _ in rule.node_selector.match_labels)
            for position, requirement in enumerate(rule.node_selector.match_expressions):
                yield f"{selector}.matchExpressions[{position}].key", (requirement.key,)

    def prepare(self, pod: Pod) -> tuple[Rule, ...]:
        """The rules that apply to the pod."""
        return tuple(rule for rule in self._rules if rule.pods.matches(pod))

    def reuse_key(self, pod: Pod, rules: tuple[Rule, ...]) -> Hashable:
        """The verdict depends on the pod only through which rules apply to it (rule names are unique)."""
        return tuple(rule.name for rule in rules)

    def filter(self, pod: Pod, node: Node, rules: tuple[Rule, ...] | None = None) -> Status:
        """``rules`` is this request's ``prepare``; a call outside a request works it out itself."""
        labels = node.labels or {}
        for rule in self.prepare(pod) if rules is None else rules:
            if not rule.node_selector.matches(labels):
                return status.unresolvable(rule.violation)
        return status.SUCCESS
