"""Node-name globs (``gke-prod-*``), as used by name filters and static inventories: the one place they are
checked and compiled.

A node name is a lowercase RFC 1123 subdomain (``a-z``, ``0-9``, ``-``, ``.``), so a glob holding any other
character (an uppercase letter, ``_``, a space) or an unbalanced bracket can never match a node: in a deny list that
typo would silently deny nothing, so policies reject it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from marshmallow import ValidationError

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")
_META_CHARS = frozenset("*?[]!")


def glob_problem(glob: str) -> str:
    """Why ``glob`` can never match a node name, or "" when it can."""
    if not glob:
        return "a glob cannot be empty"
    foreign = sorted({char for char in glob if char not in _NAME_CHARS and char not in _META_CHARS})
    if foreign:
        shown = ", ".join(repr(char) for char in foreign)
        return (
            f"glob {glob!r} can never match a node name: {shown} cannot appear in one "
            "(node names hold lowercase letters, digits, '-' and '.'; globs add *, ? and [...])"
        )
    opened = -1  # where the open bracket is, -1 outside a bracket
    for index, char in enumerate(glob):
        if char == "[":
            if opened != -1:
                return f"glob {glob!r}: '[' at position {index} inside the bracket opened at {opened}"
            opened = index
        elif char == "]":
            if opened == -1:
                return f"glob {glob!r}: ']' at position {index} closes no bracket"
            if index == opened + 1 or (index == opened + 2 and glob[opened + 1] == "!"):
                return f"glob {glob!r}: the bracket at position {opened} is empty"
            opened = -1
        elif char == "!" and index != opened + 1:
            return f"glob {glob!r}: '!' may only negate a bracket ('[!...]'), and cannot appear in a node name"
    if opened != -1:
        return f"glob {glob!r}: the bracket opened at position {opened} is never closed"
    return ""


def validate_glob(glob: str) -> None:
    """A marshmallow validator: reject a glob that can never match a node name."""
    problem = glob_problem(glob)
    if problem:
        raise ValidationError(problem)


def compile_globs(globs: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for the whole list, so a node costs one match call however many globs; None for no globs."""
    globs = list(globs)
    return re.compile("|".join(fnmatch.translate(glob) for glob in globs)) if globs else None
