"""How deep decoded JSON nests, measured level by level: a hostile document must not exhaust the stack."""

from __future__ import annotations

from typing import Any

from extender.wire.fields import all_strings

# What orjson decodes that holds nothing deeper.
_SCALARS = {str, int, float, bool, type(None)}


def deeper_than(payload: Any, limit: int) -> bool:
    """Whether ``payload`` nests more than ``limit`` levels (a dict or list is a level)."""
    level = [payload] if isinstance(payload, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        deeper: list[Any] = []
        for container in level:
            if type(container) is list and _holds_no_container(container):
                continue  # thousands of node names: looked over at C speed
            for child in container.values() if type(container) is dict else container:
                if type(child) is dict or type(child) is list:
                    deeper.append(child)
        level = deeper
    return False


def _holds_no_container(values: list[Any]) -> bool:
    """A list of strings is joined in one C-speed pass; any other list, its entries' types are looked at."""
    if values and type(values[0]) is str and all_strings(values):
        return True
    return set(map(type, values)) <= _SCALARS
