"""Building blocks for plugin ``args`` schemas that more than one plugin needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from marshmallow import ValidationError, fields


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
