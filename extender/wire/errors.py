"""Turn marshmallow's nested error dicts into one ``field.path[2].name: message`` line per problem."""

from __future__ import annotations

from typing import Any


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
