"""One module per protocol verb: decode the wire request, run the profile, encode the answer."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson
from marshmallow import Schema, ValidationError

from extender.errors import RequestError
from extender.framework.profile import FilterResult, PreemptResult, ScoreResult
from extender.framework.types import Pod
from extender.wire.errors import flatten_errors

# Longest error text we put into one answer: the scheduler shows it verbatim in the pod's events.
_MAX_PROBLEMS = 10


_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class Answer:
    __slots__ = ("body", "error", "headers", "nodes_in", "nodes_out", "pod", "result", "status")

    def __init__(
        self,
        body: Any,
        status: int = 200,
        headers: Mapping[str, str] = _NO_HEADERS,
        # What the decision log and ``explain`` say beyond the wire answer (counts, per-plugin times, errors).
        error: str = "",
        nodes_in: int = 0,
        nodes_out: int = 0,
        pod: Pod | None = None,
        # The profile's own result (per-node statuses with plugin names, per-plugin scores and times).
        result: FilterResult | ScoreResult | PreemptResult | None = None,
    ) -> None:
        self.body = body
        self.status = status
        self.headers = headers
        self.error = error
        self.nodes_in = nodes_in
        self.nodes_out = nodes_out
        self.pod = pod
        self.result = result

    def json(self) -> Any:
        """The body as the scheduler reads it: parts kept encoded (echoed nodes, prioritize entries) decoded."""
        return orjson.loads(orjson.dumps(self.body))


def load_request(schema: Schema, payload: Any, what: str) -> Any:
    try:
        return schema.load(payload)
    except ValidationError as exc:
        problems = flatten_errors(exc.messages)
        shown = "; ".join(problems[:_MAX_PROBLEMS])
        more = f" (and {len(problems) - _MAX_PROBLEMS} more)" if len(problems) > _MAX_PROBLEMS else ""
        raise RequestError(400, f"invalid {what}: {shown}{more}") from None
