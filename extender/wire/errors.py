"""Turn marshmallow's nested error dicts into one ``field.path[2].name: message`` line per problem."""

from __future__ import annotations

from typing import Any


def entries_as_written(value: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, entry) for the mappings of a list as the document holds it, skipping whatever is no mapping.

    Checks across entries (duplicate names, one binder) read the document as written, so that they run, and report,
    beside the entries' own field errors (which already cover what this skips).
    """
    if not isinstance(value, list):
        return []
    return [(index, item) for index, item in enumerate(value) if isinstance(item, dict)]


def flatten_errors(messages: Any, path: str = "") -> list[str]:
    if isinstance(messages, dict):
        lines: list[str] = []
        for key, value in messages.items():
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
