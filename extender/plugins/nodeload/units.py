"""What a NodeLoad metric's values measure (its ``unit``), and the numbers the args compare with them.

A load is a ``ratio`` (0..1, the default) or a ``percent`` (0..100); a metric of
another unit names it and gives its bounds (``range: [0, 64]``). Every number
the args compare with a metric's values (a filter rule's ``above``, a score's
``target``) is written in the metric's unit and checked against its range when
the policy loads, so that ``above: 80`` on a ratio, which no load reaches, is
refused rather than never firing. Scores work on the load as a share of the
range (``share``): the same node scores alike whichever unit its metric uses.
An answer whose values lie far outside the range is most likely in another
unit (a percentage answered for a ratio): ``far_outside`` finds it for a WARNING.
"""

from __future__ import annotations

from collections.abc import Mapping

RATIO_NAME, PERCENT_NAME = "ratio", "percent"
# A threshold on a ratio from this up to 100 reads as a percentage (80 for 0.8); one just above 1 (1.5) does not.
PERCENTAGE_LIKE = 5.0


class Unit:
    """A metric's unit: its name and the range its values lie in (``low`` to ``high``)."""

    __slots__ = ("high", "low", "name")

    def __init__(self, name: str, low: float, high: float) -> None:
        self.name = name
        self.low = low
        self.high = high

    def __repr__(self) -> str:
        return f"Unit({self.name!r}, {self.low:g}, {self.high:g})"

    @property
    def span(self) -> float:
        """How much a whole node is (1 for a ratio, 100 for a percent): a share of the node's allocatable times
        this is the same share in this unit."""
        return self.high - self.low

    def share(self, value: float) -> float:
        """``value`` as a share of the range: 0 at its low end, 1 at its high end."""
        return (value - self.low) / self.span

    def shown(self, value: float) -> str:
        """``0.8``, ``80%``, ``12 seconds``: a value as messages write it."""
        if self.name == RATIO_NAME:
            return f"{value:g}"
        if self.name == PERCENT_NAME:
            return f"{value:g}%"
        return f"{value:g} {self.name}"

    @property
    def described(self) -> str:
        """``a ratio (0..1)``, ``a percentage (0..100)``, ``seconds (0..12)``."""
        bounds = f"({self.low:g}..{self.high:g})"
        if self.name == RATIO_NAME:
            return f"a ratio {bounds}"
        if self.name == PERCENT_NAME:
            return f"a percentage {bounds}"
        return f"{self.name} {bounds}"

    def problem(self, value: float, metric: str, field: str, *, open_range: bool = False) -> str:
        """Why ``value`` cannot be compared with this unit's values ("" when it can): outside the range (its ends
        excluded with ``open_range``), or a percentage written for a ratio."""
        low, high = self.low, self.high
        inside = low < value < high if open_range else low <= value <= high
        if inside:
            return ""
        if self.name == RATIO_NAME and PERCENTAGE_LIKE <= value <= 100:
            return (
                f"{value:g} is a percentage; a ratio is {value / 100:g}: metric {metric} measures a ratio (0..1), "
                f"so write {field}: {value / 100:g} (or give the metric unit: percent if its query answers percent)"
            )
        ends = "both excluded" if open_range else "both included"
        return (
            f"{value:g} is outside metric {metric}'s range: it measures {self.described}, so {field} must be between "
            f"{low:g} and {high:g} ({ends})"
        )

    def far_outside(self, values: Mapping[str, float]) -> tuple[int, str, float]:
        """How many of ``values`` lie far outside the range, with one of them (node, value) for the message.

        Far is below the low end by a tenth of the span, or above the high end by the whole span (a ratio above 2):
        a load above its top happens (use above allocatable, in-flight pods added), one below zero does not.
        """
        floor, ceiling = self.low - self.span / 10, self.high + self.span
        count, sample = 0, ("", 0.0)
        for node, value in values.items():
            if value < floor or value > ceiling:
                if not count:
                    sample = (node, value)
                count += 1
        return count, *sample


RATIO = Unit(RATIO_NAME, 0.0, 1.0)
PERCENT = Unit(PERCENT_NAME, 0.0, 100.0)
