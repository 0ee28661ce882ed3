"""InstanceCost: cheaper nodes score higher.

Prices come from a table keyed by the node's instance type label
(``node.kubernetes.io/instance-type``). Spot and preemptible GKE nodes
(``cloud.google.com/gke-spot`` or ``cloud.google.com/gke-preemptible`` = "true")
of a listed type cost ``spotDiscount`` less. A type missing from the table (or a
node without the label) costs ``defaultPrice``, which is at least the dearest
listed price and never discounted, so an unknown type never beats a listed one.
Any currency and unit works, as long as the table uses one: prices are
compared as the exact decimals written (per-second prices of 2.1e-6 and 2.4e-6
are as far apart as 2.1 and 2.4), and are at most ``MAX_PRICE``.

Scores: ``scale: relative`` (the default) is linear over the candidates, the
cheapest gets the most, the dearest none, equal prices alike; ``scale:
absolute`` scores each price against ``ceiling`` (``100 × (1 − price /
ceiling)``, 0 at or above it), so close prices get close scores whatever the
other candidates cost.

    - name: InstanceCost
      args:
        prices:                    # per hour, per node; required
          e2-standard-4: 0.134
          n2-standard-8: 0.388
        defaultPrice: 0.5          # optional, at least the dearest listed price
        spotDiscount: 0.7          # spot nodes cost 70% less
        scale: absolute            # optional: relative (default) or absolute
        ceiling: 1.0               # absolute only: the price that scores 0
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from fractions import Fraction
from typing import Any, ClassVar

from marshmallow import Schema, ValidationError, fields, validates_schema
from marshmallow.validate import Length, OneOf, Range

from extender.framework.args import Map, Number, failed_fields
from extender.framework.plugin import MAX_NODE_SCORE, ScorePlugin, rescale_scores
from extender.framework.selectors import validate_label_value
from extender.framework.types import Facts, Node, Pod

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# Clusters that predate Kubernetes 1.17 label nodes only with the beta name.
LEGACY_INSTANCE_TYPE_LABEL = "beta.kubernetes.io/instance-type"
SPOT_LABELS = ("cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible")
# The dearest price (and ceiling) a table may hold, in whatever unit it uses: larger numbers are typos (or a unit far
# too small), and a bound keeps every accepted table scorable.
MAX_PRICE = 1e15


class Price(Number):
    """A price: a finite number up to ``MAX_PRICE``, never a string that looks like one."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(example="a price such as 0.134", **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        price = super()._deserialize(value, attr, data, **kwargs)
        if price > MAX_PRICE:
            raise ValidationError(
                f"{price:g} is no price: at most {MAX_PRICE:g} (any currency and unit: choose a larger unit)"
            )
        return price


class InstanceCostArgs(Schema):
    prices = Map(
        keys=fields.String(validate=validate_label_value),
        values=Price(validate=Range(min=0)),
        required=True,
        validate=Length(min=1, error="needs at least one instance type and its price"),
    )
    defaultPrice = Price(validate=Range(min=0))
    spotDiscount = Price(load_default=0.0, validate=Range(min=0, max=1))
    scale = fields.String(load_default="relative", validate=OneOf(["relative", "absolute"]))
    ceiling = Price(validate=Range(min=0, min_inclusive=False))

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def consistent(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        errors: dict[str, list[str]] = {}
        dearest = max(data["prices"].values()) if data.get("prices") else None
        if dearest is not None and data.get("defaultPrice", dearest) < dearest:
            errors["defaultPrice"] = [
                (f"{data['defaultPrice']} is below the dearest listed price ({dearest}): "
                 "an unknown instance type would be preferred over listed ones")
            ]
        scale = data.get("scale")  # None: not a valid scale, said by its own error
        if scale == "absolute" and "ceiling" not in data.keys() | failed_fields(self, data, original):
            errors["ceiling"] = ["scale: absolute needs a ceiling, the price that scores 0"]
        if scale == "relative" and "ceiling" in data:
            errors["ceiling"] = ["only scale: absolute takes a ceiling"]
        if errors:
            raise ValidationError(errors)


class InstanceCost(ScorePlugin):
    name: ClassVar[str] = "InstanceCost"
    facts = Facts.LABELS
    args_schema = InstanceCostArgs

    @classmethod
    def label_keys(cls, args: Mapping[str, Any]) -> Iterable[tuple[str, tuple[str, ...]]]:
        yield "", (INSTANCE_TYPE_LABEL, LEGACY_INSTANCE_TYPE_LABEL)
        if args["spotDiscount"]:
            yield "spotDiscount", SPOT_LABELS

    def __init__(self, args: Mapping[str, Any]) -> None:
        super().__init__(args)
        prices = {kind: _exact(price) for kind, price in args["prices"].items()}
        spot_factor = 1 - _exact(args["spotDiscount"])
        default = _exact(args["defaultPrice"]) if "defaultPrice" in args else max(prices.values())
        ceiling = _exact(args["ceiling"]) if args["scale"] == "absolute" else None
        # Every price a node can have, as integers of one unit in which each is exact: scores stay integers, and
        # no price is rounded into another (nor a ceiling into 0).
        spot = {kind: price * spot_factor for kind, price in prices.items()}
        exact = [*prices.values(), *spot.values(), default, *([ceiling] if ceiling is not None else [])]
        unit = math.lcm(*(value.denominator for value in exact))
        self._prices = {kind: int(price * unit) for kind, price in prices.items()}
        self._spot_prices = {kind: int(price * unit) for kind, price in spot.items()}
        self._default = int(default * unit)
        self._ceiling = int(ceiling * unit) if ceiling is not None else None

    def reuse_key(self, pod: Pod) -> Hashable:
        """A node's price does not depend on the pod."""
        return ()

    def score(self, pod: Pod, node: Node) -> int:
        labels = node.labels or {}
        kind = labels.get(INSTANCE_TYPE_LABEL) or labels.get(LEGACY_INSTANCE_TYPE_LABEL)
        if kind not in self._prices:
            return self._default  # never discounted: an unknown type must not beat a listed one
        if "true" in map(labels.get, SPOT_LABELS):
            return self._spot_prices[kind]
        return self._prices[kind]

    def normalize_scores(self, pod: Pod, scores: dict[str, int]) -> None:
        """Prices in, scores out (rounded): against the ceiling, or cheapest MAX_NODE_SCORE and dearest 0."""
        if not scores:
            return
        if self._ceiling is not None:
            ceiling = self._ceiling
            rescale_scores(
                scores, lambda price: max(0, (2 * (ceiling - price) * MAX_NODE_SCORE + ceiling) // (2 * ceiling))
            )
            return
        cheapest, dearest = min(scores.values()), max(scores.values())
        spread = dearest - cheapest
        rescale_scores(
            scores,
            lambda price: (
                MAX_NODE_SCORE if spread == 0 else (2 * (dearest - price) * MAX_NODE_SCORE + spread) // (2 * spread)
            ),
        )


def _exact(number: float) -> Fraction:
    """The decimal a policy wrote (its shortest repr: 0.135 is 27/200, not the binary fraction nearest to it)."""
    return Fraction(repr(number))
