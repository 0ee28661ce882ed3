"""apimachinery's field errors as kube-scheduler prints them: ``path: Invalid value: 101: not in valid range``.

Until 1.33 a value is printed Go's way (strings quoted, ``v1.Duration{Duration:15000000000}``, a resource name
bare); from 1.34 every value is printed as JSON (``"15s"``).
"""

from __future__ import annotations

import json
from typing import Any

from extender.cli.scheduler_config.findings import Finding, refused
from extender.cli.scheduler_config.versions import Version

JSON_VALUES_SINCE: Version = (1, 34)


class GoValue:
    """A value whose Go rendering is not the default one: (up to 1.33's) %#v text and its JSON."""

    def __init__(self, go: str, as_json: Any) -> None:
        self.go = go
        self.as_json = as_json


def duration(nanoseconds: int) -> GoValue:
    return GoValue(f"v1.Duration{{Duration:{nanoseconds}}}", go_duration_string(nanoseconds))


def bare_string(text: str) -> GoValue:
    """A string type with a String() method (v1.ResourceName): printed without quotes up to 1.33."""
    return GoValue(text, text)


def strings(values: list[str]) -> GoValue:
    inner = ", ".join(json.dumps(value) for value in values)
    return GoValue(f"[]string{{{inner}}}" if values else "[]string(nil)", values or None)


def render(value: Any, version: Version) -> str:
    if version >= JSON_VALUES_SINCE:
        shown = value.as_json if isinstance(value, GoValue) else value
        return json.dumps(shown, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, GoValue):
        return value.go
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def invalid(path: str, value: Any, detail: str, version: Version) -> Finding:
    return refused(path, f"Invalid value: {render(value, version)}: {detail}")


def required(path: str, detail: str = "") -> Finding:
    return refused(path, f"Required value: {detail}" if detail else "Required value")


def forbidden(path: str, detail: str) -> Finding:
    return refused(path, f"Forbidden: {detail}")


def duplicate(path: str, value: Any, version: Version) -> Finding:
    return refused(path, f"Duplicate value: {render(value, version)}")


def not_supported(path: str, value: Any, supported: list[str], version: Version) -> Finding:
    listed = ", ".join(json.dumps(choice) for choice in supported)
    return refused(path, f"Unsupported value: {render(value, version)}: supported values: {listed}")


def go_duration_string(nanoseconds: int) -> str:
    """Go's time.Duration.String(): ``15s``, ``1m30s``, ``500ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    value = abs(nanoseconds)
    if value < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if value >= size:
                return f"{sign}{_decimal(value, size)}{unit}"
    hours, rest = divmod(value, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{_decimal(rest, 10**9)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
