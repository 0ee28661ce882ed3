"""InstanceCost: cheaper nodes score higher.

Prices come from a table keyed by the node's instance type label
(``node.kubernetes.io/instance-type``). Spot and preemptible GKE nodes
(``cloud.google.com/gke-spot`` or ``cloud.google.com/gke-preemptible`` = "true")
cost ``spotDiscount`` less. A type missing from the table costs ``defaultPrice``,
which defaults to the dearest listed price so that an unknown type is never
preferred over a known one. Scores are linear over the candidates: the
cheapest gets the most, the dearest none; equal prices score alike. Any
currency and unit works, as long as the table uses one.

    - name: InstanceCost
      args:
        prices:                    # per hour, per node
          e2-standard-4: 0.134
          n2-standard-8: 0.388
        defaultPrice: 0.5          # optional
        spotDiscount: 0.7          # spot nodes cost 70% less
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from marshmallow import Schema, fields
from marshmallow.validate import Range

from extender.framework.args import Map
from extender.framework.plugin import MAX_NODE_SCORE, ScorePlugin, rescale_scores
from extender.framework.selectors import validate_label_value
from extender.framework.types import Facts, Node, Pod

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# Clusters that predate Kubernetes 1.17 label nodes only with the beta name.
LEGACY_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"
SPOT_LABELS = ("cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible")
# Prices are compared as integers (micro-units) so that scores stay integers.
_MICRO = 1_000_000


class InstanceCostArgs(Schema):
    prices = Map(
        keys=fields.String(validate=validate_label_value), values=fields.Float(validate=Range(min=0)), load_default=dict
    )
    defaultPrice = fields.Float(validate=Range(min=0))
    spotDiscount = fields.Float(load_default=0.0, validate=Range(min=0, max=1))


class InstanceCost(ScorePlugin):
    name: ClassVar[str] = "InstanceCost"
    facts = Facts.LABELS
    args_schema = InstanceCostArgs

    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__(args)
        prices: Mapping[str, float] = args["prices"]
        self._prices = {kind: round(price * _MICRO) for kind, price in prices.items()}
        default = args.get("defaultPrice", max(prices.values(), default=0.0))
        self._default = round(default * _MICRO)
        self._spot_factor = 1.0 - args["spotDiscount"]

    def reuse_key(self, pod: Pod) -> Hashable:
        """A node's price does not depend on the pod."""
        return ()

    def score(self, pod: Pod, node: Node) -> int:
        labels = node.labels or {}
        kind = labels.get(INSTANCE_TYPE_LABEL) or labels.get(LEGACY_INSTANCE_TYPE_LABEL)
        price = self._prices.get(kind, self._default) if kind is not None else self._default
        if "true" in map(labels.get, SPOT_LABELS):
            price = round(price * self._spot_factor)
        return price

    def normalize_scores(self, pod: Pod, scores: dict[str, int]) -> None:
        """Prices in, scores out: cheapest MAX_NODE_SCORE, dearest 0, linear (rounded) between."""
        if not scores:
            return
        cheapest, dearest = min(scores.values()), max(scores.values())
        spread = dearest - cheapest
        rescale_scores(
            scores,
            lambda price: (
                MAX_NODE_SCORE if spread == 0 else (2 * (dearest - price) * MAX_NODE_SCORE + spread) // (2 * spread)
            ),
        )
