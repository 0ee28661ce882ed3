"""The kube-scheduler recordings in tests/fixtures (see its README), as Python objects.

Every ``kube-scheduler-v<major>.<minor>/`` directory there is replayed, each scenario it holds, whatever its name:
a new recording is replayed by every test that replays the others by being put there. ``EXTENDER_FIXTURES`` replaces
them with other directories of the same layout (separated by the OS path separator, ``:`` on Linux).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
_RECORDED_BY = re.compile(r"kube-scheduler-v(\d+)\.(\d+)")


@dataclass(frozen=True)
class Scenario:
    """One scenario directory: the scheduler configuration it ran with, its exchanges and summary.json."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def scheduler(self) -> str:
        """The recording's kube-scheduler, ``v1.35``, or the directory's name where it does not say."""
        version = self.kubernetes_version
        return f"v{version[0]}.{version[1]}" if version else self.path.parent.name

    @property
    def kubernetes_version(self) -> tuple[int, int] | None:
        """(major, minor) of the kube-scheduler that recorded it, read from its directory's name."""
        match = _RECORDED_BY.fullmatch(self.path.parent.name)
        return (int(match[1]), int(match[2])) if match else None

    @property
    def id(self) -> str:
        return f"{self.scheduler}/{self.name}"

    @property
    def config_path(self) -> Path:
        return self.path / "scheduler-config.yaml"

    @property
    def node_cache_capable(self) -> bool:
        return "nodeCacheCapable: true" in self.config_path.read_text()

    @property
    def summary(self) -> Any:
        return json.loads((self.path / "summary.json").read_text())


@dataclass(frozen=True)
class Exchange:
    recording: Scenario
    seq: int
    verb: str
    request_path: Path
    response_path: Path
    meta: dict[str, Any]

    @property
    def scenario(self) -> str:
        return self.recording.name

    @property
    def scheduler(self) -> str:
        return self.recording.scheduler

    @property
    def id(self) -> str:
        return f"{self.recording.id}/{self.seq:03d}-{self.verb}"

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
    def answered_200(self) -> bool:
        """Whether the recording extender answered 200 (else the scheduler took the call as failed)."""
        return self.meta.get("response_status", 200) == 200

    @property
    def node_cache_capable(self) -> bool:
        return self.recording.node_cache_capable


def recording_dirs() -> tuple[Path, ...]:
    """The directories of recorded scenarios: EXTENDER_FIXTURES's, else every kube-scheduler-v*/ in tests/fixtures,
    oldest scheduler first."""
    named = os.environ.get("EXTENDER_FIXTURES")
    if named:
        return tuple(Path(path) for path in named.split(os.pathsep) if path)

    def version(path: Path) -> tuple[int, int]:
        match = _RECORDED_BY.fullmatch(path.name)
        assert match, path
        return int(match[1]), int(match[2])

    return tuple(sorted((path for path in FIXTURES.glob("kube-scheduler-v*") if path.is_dir()), key=version))


@cache
def scenarios() -> tuple[Scenario, ...]:
    found = tuple(
        Scenario(path) for directory in recording_dirs() for path in sorted(directory.iterdir()) if path.is_dir()
    )
    if not found:
        raise FileNotFoundError(f"no recordings under {', '.join(map(str, recording_dirs()))} (set EXTENDER_FIXTURES)")
    return found


def scenario(scheduler: str, name: str) -> Scenario | None:
    """The scenario ``name`` recorded by ``scheduler`` (``v1.28``), if the recordings hold it."""
    return next((found for found in scenarios() if (found.scheduler, found.name) == (scheduler, name)), None)


def schedulers() -> tuple[str, ...]:
    """Every kube-scheduler the recordings come from, oldest first."""
    return tuple(dict.fromkeys(found.scheduler for found in scenarios()))


@cache
def exchanges() -> tuple[Exchange, ...]:
    found = []
    for recording in scenarios():
        for request_path in sorted(recording.path.glob("*-request.json")):
            seq, verb, _ = request_path.name.split("-", 2)
            meta = json.loads(request_path.with_name(f"{seq}-{verb}-meta.json").read_text())
            response_path = request_path.with_name(f"{seq}-{verb}-response.json")
            found.append(Exchange(recording, int(seq), verb, request_path, response_path, meta))
    if not found:
        raise FileNotFoundError(f"no recorded requests under {', '.join(map(str, recording_dirs()))}")
    return tuple(found)
