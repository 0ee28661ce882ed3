"""InstanceCost: cheaper nodes score higher.

Prices come from a table keyed by the node's instance type label; spot and
preemptible GKE nodes get a discount factor; unknown types cost ``defaultPrice``.
Scores are linear over the candidates: the cheapest gets 100, the dearest 0.

    - name: InstanceCost
      args:
        prices: {e2-standard-4: 0.134, n2-standard-8: 0.388}
        defaultPrice: 1.0
        spotDiscount: 0.3
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from marshmallow import Schema, fields
from marshmallow.validate import Range

from extender.framework.plugin import MAX_NODE_SCORE, ScorePlugin
from extender.framework.types import Facts, Node, Pod

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
SPOT_LABELS = ("cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible")
# Prices are compared as integers (micro-units) so that scores stay integers.
_MICRO = 1_000_000


class InstanceCostArgs(Schema):
    prices = fields.Dict(keys=fields.String(), values=fields.Float(validate=Range(min=0)), load_default=dict)
    defaultPrice = fields.Float(load_default=1.0, validate=Range(min=0))
    spotDiscount = fields.Float(load_default=1.0, validate=Range(min=0, max=1))


class InstanceCost(ScorePlugin):
    name: ClassVar[str] = "InstanceCost"
    facts = Facts.LABELS
    args_schema = InstanceCostArgs

    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__(args)
        self._prices = args["prices"]
        self._default = args["defaultPrice"]
        self._spot = args["spotDiscount"]

    def score(self, pod: Pod, node: Node) -> int:
        labels = node.labels or {}
        price = self._prices.get(labels.get(INSTANCE_TYPE_LABEL, ""), self._default)
        if any(labels.get(label) == "true" for label in SPOT_LABELS):
            price *= self._spot
        return round(price * _MICRO)

    def normalize_scores(self, pod: Pod, scores: dict[str, int]) -> None:
        if not scores:
            return
        cheapest, dearest = min(scores.values()), max(scores.values())
        spread = dearest - cheapest
        for name, price in scores.items():
            scores[name] = MAX_NODE_SCORE if spread == 0 else (dearest - price) * MAX_NODE_SCORE // spread
