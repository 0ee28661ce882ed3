"""The HTTP boundary: route, read, dispatch to a verb, answer JSON; never a traceback."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import orjson
from flask import Request, Response

from extender import __version__
from extender.body import read_json
from extender.errors import RequestError
from extender.nodesource.base import NamesOnly, NodeSource
from extender.policy.loader import Policy, load_policy
from extender.routing import Route, function_names, route
from extender.verbs import Answer, bind, filter, preempt, prioritize

logger = logging.getLogger("extender")

MAX_BODY_ENV = "EXTENDER_MAX_BODY_BYTES"
# Cloud Functions' own request size cap.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass
class Extender:
    policy: Policy
    source: NodeSource
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    @classmethod
    def from_environment(cls) -> Extender:
        """Build from the environment; an invalid policy or setting raises here, stopping start-up."""
        return cls(policy=load_policy(), source=NamesOnly(), max_body_bytes=_env_int(MAX_BODY_ENV, DEFAULT_MAX_BODY_BYTES))

    def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            where = route(request.path, request.method, self.policy.profiles, function_names())
            answer = self._answer(where, request)
        except RequestError as exc:
            answer = Answer({"Error": exc.message}, status=exc.status, headers=exc.headers, error=exc.message)
        except Exception as exc:  # a bug must still answer JSON that names it, never an HTML traceback
            logger.exception("unexpected failure serving %s", request.path)
            message = f"internal error: {type(exc).__name__}: {exc}"
            answer = Answer({"Error": message}, status=500, error=message)
        elapsed_ms = (time.perf_counter() - started) * 1000
        if answer.error:
            logger.warning("%s %s -> %d in %.1f ms: %s", request.method, request.path, answer.status, elapsed_ms, answer.error)
        return Response(orjson.dumps(answer.body), status=answer.status, headers=answer.headers, mimetype="application/json")

    def _answer(self, where: Route, request: Request) -> Answer:
        if where.verb == "healthz":
            return Answer(self.health())
        payload = read_json(request, self.max_body_bytes)
        if where.verb == "bind":
            return bind.handle(payload)
        verb = {"filter": filter, "prioritize": prioritize, "preempt": preempt}[where.verb]
        return verb.handle(payload, self.policy.profiles[where.profile], self.source)

    def health(self) -> dict[str, object]:
        return {
            "status": "ok",
            "version": __version__,
            "policy": {
                "source": self.policy.source,
                "sha256": self.policy.sha256,
                "profiles": sorted(self.policy.profiles),
            },
        }


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}")
    return value
