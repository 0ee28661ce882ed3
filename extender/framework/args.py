"""Building blocks for plugin ``args`` schemas that more than one plugin needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from marshmallow import Schema, ValidationError, fields


def unique_names(items: Sequence[Any]) -> None:
    """Rules are named so that messages can point at them: a name must say which rule."""
    seen: set[str] = set()
    problems: dict[int, dict[str, list[str]]] = {}
    for index, item in enumerate(items):
        if item.name in seen:
            problems[index] = {"name": [f"duplicate rule name {item.name!r}"]}
        seen.add(item.name)
    if problems:
        raise ValidationError(problems)


class Map(fields.Dict):
    """A ``fields.Dict`` reporting problems under the entry's key (``prices.e2-std``), not ``.key``/``.value``."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> dict[Any, Any]:
        try:
            return super()._deserialize(value, attr, data, **kwargs)
        except ValidationError as exc:
            if not isinstance(exc.messages, dict):
                raise
            raise ValidationError(
                {
                    key: [message for part in problems.values() for message in part]
                    for key, problems in exc.messages.items()
                }
            ) from None


def failed_fields(schema: Schema, data: Mapping[str, Any], original: Any) -> set[str]:
    """The fields (by attribute) the input gave whose value did not load: each has an error of its own already.

    A schema's cross-field checks run beside its field errors, so that one run reports every problem of a policy
    (``validates_schema(skip_on_field_errors=False, pass_original=True)``: marshmallow skips them by default); they
    leave out what depends on a field in this set, and count it as given where only its presence matters.
    """
    if not isinstance(original, Mapping):
        return set()
    return {
        field.attribute or name
        for name, field in schema.load_fields.items()
        if (field.data_key or name) in original and (field.attribute or name) not in data
    }
