"""Turn marshmallow's nested error dicts into one ``field.path[2].name: message`` line per problem."""

from __future__ import annotations

from typing import Any

# marshmallow's message for a key no field declares (``unknown = RAISE``).
_UNKNOWN_FIELD = ["Unknown field."]


def entries_as_written(value: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, entry) for the mappings of a list as the document holds it, skipping whatever is no mapping.

    Checks across entries (duplicate names, one binder) read the document as written, so that they run, and report,
    beside the entries' own field errors (which already cover what this skips).
    """
    if not isinstance(value, list):
        return []
    return [(index, item) for index, item in enumerate(value) if isinstance(item, dict)]


def flatten_errors(messages: Any, path: str = "") -> list[str]:
    """One line per problem, in the schema's order; unknown keys after the rest, sorted.

    marshmallow finds unknown keys by set difference, so their own order varies with the interpreter's hash seed:
    sorting them makes the same document give the same lines in every run.
    """
    if isinstance(messages, dict):
        lines: list[str] = []
        declared = [(key, value) for key, value in messages.items() if value != _UNKNOWN_FIELD]
        unknown = sorted((str(key), value) for key, value in messages.items() if value == _UNKNOWN_FIELD)
        for key, value in declared + unknown:
            if isinstance(key, int):
                child = f"{path}[{key}]"
            elif key == "_schema":
                child = path
            else:
                child = f"{path}.{key}" if path else str(key)
            lines.extend(flatten_errors(value, child))
        return lines
    if isinstance(messages, list) and all(isinstance(item, str) for item in messages):
        return [f"{path}: {message}" if path else message for message in messages]
    if isinstance(messages, list):
        return [line for item in messages for line in flatten_errors(item, path)]
    return [f"{path}: {messages}" if path else str(messages)]
