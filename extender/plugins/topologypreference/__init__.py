"""TopologyPreference: prefer nodes by the values of one label (zone, node pool, machine family).

Each preference gives weights (0..100) to values of a node label, optionally
only for the pods its ``pods`` selector matches. A node's raw score is the sum
of the weights of its label values over the preferences that apply to the pod;
as with the scheduler's preferred node affinity, scores are then scaled so
that the best candidate gets the most, and a node with nothing preferred gets 0.
Nodes without the label, or with an unlisted value, add 0.

    - name: TopologyPreference
      args:
        preferences:
        - label: topology.kubernetes.io/zone
          weights: {europe-west1-b: 100, europe-west1-c: 50}
        - label: cloud.google.com/machine-family
          weights: {c3: 100, n2: 40}
          pods: {namespaces: [batch]}        # omitted or {}: every pod
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

from marshmallow import Schema, fields, post_load
from marshmallow.validate import Length, Range

from extender.framework.args import Map
from extender.framework.plugin import MAX_NODE_SCORE, ScorePlugin, rescale_scores
from extender.framework.selectors import PodSelector, PodSelectorSchema, validate_label_key, validate_label_value
from extender.framework.types import Facts, Node, Pod


class Preference(NamedTuple):
    label: str
    weights: Mapping[str, int]
    pods: PodSelector


class PreferenceSchema(Schema):
    label = fields.String(required=True, validate=validate_label_key)
    weights = Map(
        keys=fields.String(validate=validate_label_value),
        values=fields.Integer(strict=True, validate=Range(min=0, max=100)),
        required=True,
        validate=Length(min=1),
    )
    pods = fields.Nested(PodSelectorSchema, load_default=PodSelector)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Preference:
        return Preference(data["label"], data["weights"], data["pods"])


class TopologyPreferenceArgs(Schema):
    preferences = fields.List(fields.Nested(PreferenceSchema), required=True, validate=Length(min=1))


class TopologyPreference(ScorePlugin):
    name: ClassVar[str] = "TopologyPreference"
    facts = Facts.LABELS
    args_schema = TopologyPreferenceArgs

    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__(args)
        self._preferences: tuple[Preference, ...] = tuple(args["preferences"])

    @classmethod
    def label_keys(cls, args: Mapping[str, Any]) -> Iterable[tuple[str, tuple[str, ...]]]:
        return ((f"preferences[{index}].label", (pref.label,)) for index, pref in enumerate(args["preferences"]))

    def prepare(self, pod: Pod) -> tuple[int, ...]:
        """The indexes of the preferences that apply to the pod: also the key its raw scores are kept under."""
        return tuple(i for i, preference in enumerate(self._preferences) if preference.pods.matches(pod))

    def reuse_key(self, pod: Pod, applying: tuple[int, ...]) -> Hashable:
        return applying

    def score(self, pod: Pod, node: Node, applying: tuple[int, ...] | None = None) -> int:
        """``applying`` is this request's ``prepare``; a call outside a request works it out itself."""
        labels = node.labels or {}
        total = 0
        for index in self.prepare(pod) if applying is None else applying:
            preference = self._preferences[index]
            # A node without the label is not one with an empty value: it scores 0, whatever the weights say of "".
            value = labels.get(preference.label)
            if value is not None:
                total += preference.weights.get(value, 0)
        return total

    def normalize_scores(self, pod: Pod, scores: dict[str, int], applying: tuple[int, ...] | None = None) -> None:
        """Scale so that the best candidate gets MAX_NODE_SCORE (rounded), keeping 0 at 0."""
        best = max(scores.values(), default=0)
        if best == 0:
            return
        rescale_scores(scores, lambda raw: (2 * raw * MAX_NODE_SCORE + best) // (2 * best))
