"""Building blocks for plugin ``args`` schemas that more than one plugin needs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from marshmallow import Schema, ValidationError, fields

from extender.settings import Settings

# The settings of the instance whose policy is being loaded: args that depend on them (a default URL naming the
# project, a deadline within the scheduler's httpTimeout) are worked out, and checked, where the args load.
_loading_for: ContextVar[Settings | None] = ContextVar("loading_for", default=None)


@contextlib.contextmanager
def loading_for(settings: Settings) -> Iterator[None]:
    """Load plugin args, in this block, for an instance with ``settings`` (``instance_settings`` returns them)."""
    token = _loading_for.set(settings)
    try:
        yield
    finally:
        _loading_for.reset(token)


def instance_settings() -> Settings:
    """The settings args are loaded for: the instance's while its policy loads, else those of an empty environment."""
    return _loading_for.get() or Settings()


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
            loaded: dict[Any, Any] = super()._deserialize(value, attr, data, **kwargs)
        except ValidationError as exc:
            if not isinstance(exc.messages, dict):
                raise
            raise ValidationError(
                {
                    key: [message for part in problems.values() for message in part]
                    for key, problems in exc.messages.items()
                }
            ) from None
        return loaded


class Number(fields.Float):
    """A YAML/JSON number, never a string that looks like one (a quoted "0.134" is a typo to report), nor NaN or
    infinity; ``example`` completes the message ("a price such as 0.134")."""

    def __init__(self, *, example: str, **kwargs: Any) -> None:
        super().__init__(allow_nan=False, **kwargs)
        self.example = example

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError(f"must be a number ({self.example}), not a string or a boolean")
        return super()._deserialize(value, attr, data, **kwargs)


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
