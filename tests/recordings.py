"""The kube-scheduler v1.28 recordings in tests/fixtures (see its README), as Python objects."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(os.environ.get("EXTENDER_FIXTURES", Path(__file__).resolve().parent / "fixtures" / "kube-scheduler-v1.28"))


@dataclass(frozen=True)
class Exchange:
    scenario: str
    seq: int
    verb: str
    request_path: Path
    response_path: Path
    meta: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.scenario}/{self.seq:03d}-{self.verb}"

    @property
    def body(self) -> bytes:
        # The scheduler sends compact JSON; the recordings were re-indented for reading.
        return json.dumps(self.request, separators=(",", ":")).encode()

    @property
    def request(self) -> Any:
        return json.loads(self.request_path.read_text())

    @property
    def recorded_response(self) -> Any:
        return json.loads(self.response_path.read_text())

    @property
    def node_cache_capable(self) -> bool:
        return "nodeCacheCapable: true" in (self.request_path.parent / "scheduler-config.yaml").read_text()


@cache
def exchanges() -> tuple[Exchange, ...]:
    found = []
    for request_path in sorted(FIXTURES.glob("*/*-request.json")):
        seq, verb, _ = request_path.name.split("-", 2)
        meta = json.loads(request_path.with_name(f"{seq}-{verb}-meta.json").read_text())
        found.append(
            Exchange(request_path.parent.name, int(seq), verb, request_path, request_path.with_name(f"{seq}-{verb}-response.json"), meta)
        )
    if not found:
        raise FileNotFoundError(f"no recordings under {FIXTURES} (set EXTENDER_FIXTURES)")
    return tuple(found)
