"""What healthz tells about the node source, so that an uptime check catches a source that stopped listing.

A source that lists nodes (kubernetes) is healthy once it has listed and while
its last successful list is younger than ``EXTENDER_NODE_SOURCE_MAX_AGE``
(a Go duration, default 5m; ``extender.settings``): a rotated-out token or revoked RBAC shows as 503
with the API server's error, instead of a function that answers 200 while
every label rule fails (or, under failurePolicy Ignore, passes). Sources that
work from the policy alone (static, names, none) are always healthy.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import NamedTuple


class SourceHealth(NamedTuple):
    kind: str
    # Nodes in the last list; None for sources that do not list.
    nodes: int | None = None
    # Seconds since the last successful list started; None before the first (or for sources that do not list).
    age: float | None = None
    max_age: float | None = None
    # Why the latest list failed (the API server's answer, e.g. 401 Unauthorized); empty when it succeeded.
    last_error: str = ""

    @property
    def healthy(self) -> bool:
        if self.max_age is None:
            return True
        return self.age is not None and self.age <= self.max_age

    def as_json(self) -> dict[str, object]:
        body: dict[str, object] = {"kind": self.kind or "none", "healthy": self.healthy}
        if self.max_age is None:
            return body
        listed = None if self.age is None else datetime.fromtimestamp(time.time() - self.age, UTC)
        body |= {
            "nodes": self.nodes,
            "lastSuccessfulList": listed.isoformat(timespec="seconds").replace("+00:00", "Z") if listed else None,
            "ageSeconds": None if self.age is None else round(self.age, 1),
            "maxAgeSeconds": self.max_age,
            "lastError": self.last_error,
        }
        return body


def source_health(source: object, kind: str) -> SourceHealth:
    """The source's own report when it lists nodes, else a healthy one."""
    report = getattr(source, "health", None)
    return report() if callable(report) else SourceHealth(kind)
