"""marshmallow schema of the prioritize answer: a bare array of ``{"Host": name, "Score": 0..10}``.

Apart from the filter's (``extender.wire.schemas``), so that an instance
imports it when it is first asked to prioritize.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from marshmallow import Schema, fields


class HostPrioritySchema(Schema):
    Host = fields.String()
    Score = fields.Integer()

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        """One entry per node, thousands of them: plain ``{"Host": str, "Score": int}`` entries pass as they are."""
        if (self.many if many is None else many) and type(obj) is list and _plain_priorities(obj):
            return list(obj)
        return super().dump(obj, many=many)


def _plain_priorities(entries: list[Any]) -> bool:
    """Checked at C speed, one property at a time over all entries."""
    if not entries:
        return True
    return (
        set(map(type, entries)) == {dict}
        and set(map(len, entries)) == {2}
        and set(map(type, map(dict.get, entries, repeat("Host")))) == {str}
        and set(map(type, map(dict.get, entries, repeat("Score")))) == {int}
    )
