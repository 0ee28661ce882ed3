"""Go's time.ParseDuration, errors included: kube-scheduler's reading of ``httpTimeout`` and the leader election's
durations (metav1.Duration), in integer nanoseconds.

``5`` has no unit (``time: missing unit in duration "5"``), ``5sec`` and ``5S`` have unknown ones, ``""`` (an empty
``httpTimeout:``) is invalid, and ``0`` alone is zero.
"""

from __future__ import annotations

_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_MAX = 1 << 63


class DurationError(ValueError):
    """time.ParseDuration's error text."""


def parse_duration(text: str) -> int:
    """Nanoseconds of a Go duration string, or DurationError worded as Go words it."""
    invalid = DurationError(f"time: invalid duration {_quote(text)}")
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not (rest[0] == "." or (rest[0].isascii() and rest[0].isdigit())):
            raise invalid
        whole_digits = _leading_digits(rest)
        rest = rest[len(whole_digits) :]
        whole = int(whole_digits) if whole_digits else 0
        if whole > _MAX:
            raise invalid
        fraction, scale, has_fraction = 0, 1.0, False
        if rest.startswith("."):
            rest = rest[1:]
            fraction_digits = _leading_digits(rest)
            rest = rest[len(fraction_digits) :]
            has_fraction = bool(fraction_digits)
            for digit in fraction_digits:
                if fraction > (_MAX - 1) // 10:
                    break  # Go stops accumulating, keeping the precision it has
                fraction, scale = fraction * 10 + int(digit), scale * 10
        if not whole_digits and not has_fraction:
            raise invalid
        unit_length = 0
        while unit_length < len(rest) and not (
            rest[unit_length] == "." or (rest[unit_length].isascii() and rest[unit_length].isdigit())
        ):
            unit_length += 1
        if unit_length == 0:
            raise DurationError(f"time: missing unit in duration {_quote(text)}")
        unit_text, rest = rest[:unit_length], rest[unit_length:]
        if unit_text not in _UNITS:
            raise DurationError(f"time: unknown unit {_quote(unit_text)} in duration {_quote(text)}")
        unit = _UNITS[unit_text]
        if whole > _MAX // unit:
            raise invalid
        value = whole * unit
        if fraction > 0:
            value += int(float(fraction) * (float(unit) / scale))
            if value > _MAX:
                raise invalid
        total += value
        if total > _MAX:
            raise invalid
    if negative:
        return -total
    if total > _MAX - 1:
        raise invalid
    return total


def _leading_digits(text: str) -> str:
    end = 0
    while end < len(text) and text[end].isascii() and text[end].isdigit():
        end += 1
    return text[:end]


def _quote(text: str) -> str:
    """Go's time.quote: double quotes, backslash before quotes and backslashes, \\x escapes past ASCII."""
    out = ['"']
    for char in text:
        if ord(char) >= 0x80 or char < " ":
            out += [f"\\x{byte:02x}" for byte in char.encode("utf-8")]
        else:
            out.append("\\" + char if char in '"\\' else char)
    out.append('"')
    return "".join(out)
