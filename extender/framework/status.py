"""Plugin outcomes, named as in the Kubernetes scheduling framework."""

from __future__ import annotations

import enum
from typing import NamedTuple


class Code(enum.Enum):
    SUCCESS = "Success"
    # The node does not fit now; preemption may make it fit (-> FailedNodes).
    UNSCHEDULABLE = "Unschedulable"
    # The node cannot fit whatever is evicted (-> FailedAndUnresolvableNodes).
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    # The plugin could not decide; the whole answer carries the error.
    ERROR = "Error"

    # Members are compared by identity: hashing by it too is a C-level call, where Enum's own hashes the name in
    # Python (statuses are hashed per rejected node when a decision is logged).
    __hash__ = object.__hash__


# Read once: an Enum member read from its class is a lookup each time (Python 3.11), and statuses are tested per node.
_SUCCESS_CODE = Code.SUCCESS


class Status(NamedTuple):
    code: Code = Code.SUCCESS
    reason: str = ""
    plugin: str = ""

    @property
    def is_success(self) -> bool:
        return self.code is _SUCCESS_CODE

    def with_plugin(self, plugin: str) -> Status:
        return Status(self.code, self.reason, plugin)


SUCCESS = Status()


def unschedulable(reason: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reason)


def unresolvable(reason: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)


def error(reason: str) -> Status:
    return Status(Code.ERROR, reason)
