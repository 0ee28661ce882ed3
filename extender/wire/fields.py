"""Fields for the shapes Kubernetes objects use, checked cheaply.

Nodes carry dozens of labels and there may be thousands of nodes: a map of
strings is checked in one pass instead of one marshmallow field per entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from marshmallow import fields
from marshmallow.validate import Length


class StringMap(fields.Field[dict[str, str]]):
    """A ``map[string]string`` such as labels or annotations; ``null`` reads as empty."""

    default_error_messages = {  # noqa: RUF012 — marshmallow's API: a class attribute (mypy refuses ClassVar here)
        "invalid": "Not a valid map of strings.",
        "invalid_entry": "Not a valid map of strings: the value of {label!r} is {kind}.",
    }

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.make_error("invalid")
        for key, entry in value.items():
            if type(entry) is not str:
                raise self.make_error("invalid_entry", label=key, kind=type(entry).__name__)
        return value


class NameList(fields.Field[list[str]]):
    """A ``[]string`` of names, such as NodeNames: thousands of them are checked (or dumped) in one pass.

    Anything but a plain list of non-empty strings goes through ``fields.List``
    of non-empty strings, so its messages name each bad entry as usual.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._checked = fields.List(non_empty_string())

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> list[str]:
        plain = plain_names(value)
        if plain is not None:
            return plain
        # fields.List types its entries as optional; non_empty_string refuses None, so every entry is a str.
        return cast(list[str], self._checked.deserialize(value, attr, data, **kwargs))

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> list[str] | None:
        if type(value) is list and all_strings(value):
            return list(value)
        return self._checked._serialize(value, attr, obj, **kwargs)


def plain_names(value: Any) -> list[str] | None:
    """A copy of ``value`` if it is a plain list of non-empty strings (checked at C speed), else None."""
    names = plain_strings(value)
    return names if names is not None and "" not in names else None


class BuiltNames(list[str]):
    """Node names this instance built itself, so every entry is a ``str`` with no need to look again: a body's names
    replaced by kept strings (``extender.wire.kept_names``), or a filter answer's names taken back by the prioritize
    request that names them (``extender.wire.answered_names``). ``distinct`` where they are also known to be distinct
    and non-empty: an answer's are part of its request's names, which its schema checked so."""

    __slots__ = ("distinct",)

    def __init__(self, names: Iterable[str], distinct: bool) -> None:
        super().__init__(names)
        self.distinct = distinct


def plain_strings(value: Any) -> list[str] | None:
    """A copy of ``value`` if it is a plain list of strings, else None; ``BuiltNames`` as they are (a request's own,
    which nothing else holds: a copy would touch each string again)."""
    if type(value) is BuiltNames:
        return value
    return list(value) if type(value) is list and all_strings(value) else None


def all_strings(values: list[Any]) -> bool:
    """Whether every entry is a ``str``: joining them is one C-speed pass, and refuses anything else."""
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def strict_int(**kwargs: Any) -> fields.Integer:
    return fields.Integer(strict=True, **kwargs)


def non_empty_string(**kwargs: Any) -> fields.String:
    return fields.String(validate=Length(min=1), **kwargs)

