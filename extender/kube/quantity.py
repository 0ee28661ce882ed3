"""Kubernetes resource quantities (``resource.Quantity``) as numbers: ``"500m"`` CPU is 0.5 cores, ``"1Gi"`` is
1073741824 bytes.

The grammar is apimachinery's: an optional sign, a decimal number (digits with at most one point), then one suffix:
a binary SI one (``Ki Mi Gi Ti Pi Ei``), a decimal SI one (``n u m "" k M G T P E``) or a decimal exponent (``e3``,
``E-2``). Anything else, spaces included, is not a quantity: ValueError, never a guess (``1g``, ``1 Gi``, ``0x10``).
"""

from __future__ import annotations

import functools
import re

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)")
# Longest quantity read: Kubernetes' own serialisations are short, and a number of thousands of digits is an attack.
_MAX_CHARS = 64


@functools.lru_cache(maxsize=1024)
def parse_quantity(text: str) -> float:
    """The quantity's value in base units (cores, bytes); ValueError when ``text`` is not a quantity. Remembered
    for the few texts pods repeat (``"500m"``, ``"1Gi"``)."""
    if not isinstance(text, str) or len(text) > _MAX_CHARS:
        raise ValueError(f"not a Kubernetes quantity: {str(text)[:_MAX_CHARS]!r}")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, exponent, suffix = match.groups()
    if exponent is not None:
        return float(number + exponent)
    suffix = suffix or ""
    if suffix in _BINARY:
        return float(number) * _BINARY[suffix]
    return float(number) * _DECIMAL[suffix]
