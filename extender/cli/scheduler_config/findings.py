"""What a check finds, one line each: kube-scheduler's own refusals, the project's stricter rules, warnings and
notes."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class Severity(Enum):
    REFUSED = "refused"  # kube-scheduler of that version exits with this error
    STRICTER = "stricter"  # kube-scheduler starts, but the extender cannot work: refused here, with the reason
    WARNING = "warning"  # kube-scheduler starts and the extender works, not as well as it could
    NOTE = "note"  # worth knowing, nothing to fix


STRICTER_PREFIX = "stricter than kube-scheduler: "


class Finding(NamedTuple):
    path: str  # the field it is about, in kube-scheduler's words ("extenders[0].weight"); "" for the whole file
    message: str
    severity: Severity = Severity.REFUSED

    @property
    def line(self) -> str:
        message = STRICTER_PREFIX + self.message if self.severity is Severity.STRICTER else self.message
        return f"{self.path}: {message}" if self.path else message

    @property
    def refuses(self) -> bool:
        return self.severity in (Severity.REFUSED, Severity.STRICTER)


def refused(path: str, message: str) -> Finding:
    return Finding(path, message, Severity.REFUSED)


def stricter(path: str, message: str) -> Finding:
    return Finding(path, message, Severity.STRICTER)


def warning(path: str, message: str) -> Finding:
    return Finding(path, message, Severity.WARNING)


def note(path: str, message: str) -> Finding:
    return Finding(path, message, Severity.NOTE)


def under(path: str, prefixes: list[str]) -> bool:
    """Whether ``path`` is one of ``prefixes`` or a field below one (``a.b[0]`` is below ``a.b``, ``a.bc`` is not)."""
    return any(path == prefix or path.startswith((f"{prefix}.", f"{prefix}[")) for prefix in prefixes if prefix)
