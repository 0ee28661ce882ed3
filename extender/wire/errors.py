"""Turn marshmallow's nested error dicts into one ``field.path[2].name: message`` line per problem, with what helps
fix it: the known name nearest an unknown one (``suggest_fields``, ``nearest``), and a hint from the document's own
text beside a value of the wrong type (``flatten_errors``'s ``hint``, ``extender.policy.yaml_hints``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from marshmallow import Schema, fields

# marshmallow's message for a key no field declares (``unknown = RAISE``).
UNKNOWN_FIELD = "Unknown field."

# Where a problem is in the document: its keys and list indexes, from the top.
Path = tuple[str | int, ...]
# A message with what the document says at ``Path`` added, or as it is.
Hint = Callable[[Path, str], str]


def entries_as_written(value: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, entry) for the mappings of a list as the document holds it, skipping whatever is no mapping.

    Checks across entries (duplicate names, one binder) read the document as written, so that they run, and report,
    beside the entries' own field errors (which already cover what this skips).
    """
    if not isinstance(value, list):
        return []
    return [(index, item) for index, item in enumerate(value) if isinstance(item, dict)]


def flatten_errors(messages: Any, path: str = "", hint: Hint | None = None, keys: Path = ()) -> list[str]:
    """One line per problem, in the schema's order; unknown keys after the rest, sorted. ``hint`` may add to each
    message what the document holds at its path (``keys``: the path as keys and indexes).

    marshmallow finds unknown keys by set difference, so their own order varies with the interpreter's hash seed:
    sorting them makes the same document give the same lines in every run.
    """
    if isinstance(messages, dict):
        lines: list[str] = []
        declared = [(key, value) for key, value in messages.items() if not _unknown(value)]
        unknown = sorted((str(key), value) for key, value in messages.items() if _unknown(value))
        for key, value in declared + unknown:
            if isinstance(key, int):
                child = f"{path}[{key}]"
            elif key == "_schema":
                child = path
            else:
                child = f"{path}.{key}" if path else str(key)
            lines.extend(flatten_errors(value, child, hint, keys if key == "_schema" else (*keys, key)))
        return lines
    if isinstance(messages, list) and all(isinstance(item, str) for item in messages):
        hinted = [hint(keys, message) for message in messages] if hint is not None else messages
        return [f"{path}: {message}" if path else message for message in hinted]
    if isinstance(messages, list):
        return [line for item in messages for line in flatten_errors(item, path, hint, keys)]
    return [f"{path}: {messages}" if path else str(messages)]


def _unknown(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 1 and str(value[0]).startswith(UNKNOWN_FIELD)


def nearest(name: str, known: Collection[str]) -> str | None:
    """The known name ``name`` most likely misspells, if one is close (case aside)."""
    import difflib  # only a document with a problem pays for it

    by_lower = {candidate.lower(): candidate for candidate in known}
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def unknown_field(name: str, known: Sequence[str]) -> str:
    close = nearest(name, known)
    if close is not None:
        return f"{UNKNOWN_FIELD} Did you mean {close}?"
    return f"{UNKNOWN_FIELD} Known fields: {', '.join(known)}" if known else UNKNOWN_FIELD


def suggest_fields(schema: Schema, messages: Any) -> Any:
    """``messages`` of a failed ``schema.load``, each unknown key's message naming the schema's nearest field: the
    schema's nested schemas (in lists too) are walked with their messages. Edits ``messages`` in place."""
    if not isinstance(messages, dict):
        return messages
    by_key = {field.data_key or name: field for name, field in schema.load_fields.items()}
    for key, value in messages.items():
        if _unknown(value) and isinstance(key, str):
            messages[key] = [unknown_field(key, list(by_key))]
        elif key in by_key:
            _suggest_in(by_key[key], value)
    return messages


def _suggest_in(field: fields.Field[Any], messages: Any) -> None:
    if isinstance(field, fields.Nested) and isinstance(field.schema, Schema):
        suggest_fields(field.schema, messages)
    elif isinstance(field, fields.List) and isinstance(messages, dict):
        for index, entry in messages.items():
            if isinstance(index, int):
                _suggest_in(field.inner, entry)
