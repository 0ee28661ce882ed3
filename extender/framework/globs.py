"""Node-name globs (``gke-prod-*``), as used by name filters and static inventories."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable


def compile_globs(globs: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for the whole list, so a node costs one match call however many globs; None for no globs."""
    globs = list(globs)
    return re.compile("|".join(fnmatch.translate(glob) for glob in globs)) if globs else None
