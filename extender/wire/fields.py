"""Fields for the shapes Kubernetes objects use, checked cheaply.

Nodes carry dozens of labels and there may be thousands of nodes: a map of
strings is checked in one pass instead of one marshmallow field per entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import fields
from marshmallow.validate import Length


class StringMap(fields.Field):
    """A ``map[string]string`` such as labels or annotations; ``null`` reads as empty."""

    default_error_messages = {
        "invalid": "Not a valid map of strings.",
        "invalid_entry": "Not a valid map of strings: the value of {label!r} is {kind}.",
    }

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        for key, entry in value.items():
            if type(entry) is not str:
                raise self.make_error("invalid_entry", label=key, kind=type(entry).__name__)
        return value


def strict_int(**kwargs: Any) -> fields.Integer:
    return fields.Integer(strict=True, **kwargs)


def non_empty_string(**kwargs: Any) -> fields.String:
    return fields.String(validate=Length(min=1), **kwargs)

