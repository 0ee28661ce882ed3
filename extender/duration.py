"""Durations written the way Kubernetes writes them (``5s``, ``1m30s``, ``500ms``), in settings and the policy.

The scheduler's ``httpTimeout`` uses this format, so ``EXTENDER_HTTP_TIMEOUT``
(which mirrors it, read by ``extender.settings``) and the policy's timeouts use it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from marshmallow import fields

# time.ParseDuration: an optional sign, then one or more <decimal><unit>; "0" alone is allowed. Compiled on first
# use (re caches them): a function with no duration set never parses one.
_DURATION_PART = r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)"
_DURATION = rf"([-+]?)((?:{_DURATION_PART})+|0)"
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration string ("5s", "1m30s", "1500ms"), as kube-scheduler's metav1.Duration reads it."""
    match = re.fullmatch(_DURATION, text)
    if match is None:
        raise ValueError(f'time: invalid duration "{text}"')
    sign, body = match.group(1), match.group(2)
    seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in re.findall(_DURATION_PART, body))
    return -seconds if sign == "-" else seconds


class Duration(fields.Field[float]):
    """A policy field holding a duration string, loaded as seconds (float), at least ``minimum``."""

    default_error_messages = {  # noqa: RUF012 — marshmallow's API: a class attribute (mypy refuses ClassVar here)
        "invalid": "Not a duration: write it like 500ms, 5s or 1m30s.",
        "too_small": "Must be at least {minimum}.",
    }

    def __init__(self, *, minimum: str = "0s", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.minimum = minimum
        self._minimum_seconds = parse_go_duration(minimum)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> float:
        if not isinstance(value, str):
            raise self.make_error("invalid")
        try:
            seconds = parse_go_duration(value)
        except ValueError:
            raise self.make_error("invalid") from None
        if seconds < self._minimum_seconds:
            raise self.make_error("too_small", minimum=self.minimum)
        return seconds
