"""What decoding a body costs in memory, known before the objects are built: charged, and bounded.

Decoding builds a Python object for every JSON value: a body of many small
values (``[],`` over and over, 3 bytes each) takes 30 to 44 times its size as
objects, and a 24 MiB one took 700 MB, past a 512 MiB instance. So before a
decoder builds anything, a ``Meter`` affords what it may build: within the
limit (``DECODE_FACTOR`` times ``EXTENDER_MAX_BODY_BYTES``), and charged to
the request's share of the body budget (``extender.http.body_budget``), where
requests served at once wait for room.

The estimates are upper bounds found at C speed: ``VALUE_BYTES`` for each
value the body can hold, a value per comma, bracket or brace (those in
strings count too), for the full decoder, which builds them all;
``RAW_ITEM_BYTES`` per comma for the fast one, which keeps each node item as
bytes (``value_cost``). Counting is a pass over the body per character, so a
body whose worst case by its size alone (``WORST_BYTES_PER_BYTE`` per byte)
is far from the limit is charged that, uncounted: node-name requests of up
to about 30,000 nodes, full-node requests of up to a few hundred.
"""

from __future__ import annotations

from collections.abc import Callable

from extender.errors import RequestError
from extender.wire.limits import DECODE_FACTOR, GIVE_BACK_SHARE, VALUE_BYTES, WORST_BYTES_PER_BYTE

MIB = 1024 * 1024


class Meter:
    """One body's decoding: what it has been charged so far, within its limit."""

    __slots__ = ("_charge", "charged", "limit", "objects")

    def __init__(self, max_body_bytes: int, charge: Callable[[int], None] | None = None) -> None:
        self._charge = charge
        self.limit = DECODE_FACTOR * max_body_bytes
        self.charged = 0
        # What of it is Python objects built (the rest: bytes kept as they are, renderings checked and dropped).
        self.objects = 0

    def afford(self, cost: int) -> bool:
        """Charge up to ``cost`` in all (what was charged before counts); False, charging nothing, if that would pass
        the limit."""
        if cost > self.limit:
            return False
        if cost > self.charged:
            if self._charge is not None:
                self._charge(cost - self.charged)
            self.charged = cost
        return True

    def afford_more(self, cost: int) -> bool:
        """``afford`` ``cost`` beyond what was charged so far."""
        return self.afford(self.charged + cost)

    def built(self, cost: int) -> None:
        """Python objects of ``cost`` (afforded) are about to be built."""
        self.objects += cost


def value_cost(body: bytes | bytearray, meter: Meter, per_value: int = VALUE_BYTES, containers: bool = True) -> int:
    """At most what decoding ``body`` builds, ``per_value`` for each value it can hold: one per comma, and with
    ``containers`` (the full decoder) one per bracket or brace too.

    A body is charged its worst case by size alone, uncounted, while that is far enough from the limit: the full
    decoder's (``WORST_BYTES_PER_BYTE`` a byte) under a quarter of it, as a decoding that costly is followed by
    giving memory back (``extender.http.memory``) and the scheduler's own large node-name bodies count far less;
    the fast decoder's, whose estimate here is only of the node items it keeps as bytes (an item and its comma
    take two bytes at least), under the limit itself.
    """
    worst = WORST_BYTES_PER_BYTE * len(body) if containers else per_value * (len(body) + 1) // 2
    if (GIVE_BACK_SHARE if containers else 1) * worst < meter.limit:
        return worst
    values = body.count(b",") + 1
    if containers:
        values += body.count(b"[") + body.count(b"{")
    return per_value * values


def too_costly(cost: int, meter: Meter) -> RequestError:
    return RequestError(
        413,
        f"body too costly to decode: it can hold {cost // VALUE_BYTES} JSON values (commas, brackets and braces), "
        f"about {cost // MIB} MiB as objects, over the {meter.limit // MIB} MiB limit ({DECODE_FACTOR} times "
        "EXTENDER_MAX_BODY_BYTES)",
    )
