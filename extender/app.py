"""The HTTP boundary: route, read, dispatch to a verb, answer JSON; never a traceback."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson
from flask import Request, Response

from extender import __version__
from extender.admission import BUDGET_ENV, DEFAULT_BUDGET_BYTES, BodyBudget
from extender.body import discard_body, read_json
from extender.decision_log import log_decision
from extender.duration import DEFAULT_HTTP_TIMEOUT, http_timeout_seconds
from extender.errors import ConfigError, RequestError, bounded
from extender.kube import client_from_environment
from extender.nodesource.base import NodeSource
from extender.policy.loader import Policy, load_policy
from extender.routing import CALLER_TOKEN_ENV, Route, Router, function_names
from extender.verbs import Answer, bind, filtering, preempt, prioritize
from extender.wire.decode import decoder_for

if TYPE_CHECKING:
    from extender.kube.client import KubeClient

logger = logging.getLogger("extender")

MAX_BODY_ENV = "EXTENDER_MAX_BODY_BYTES"
# Cloud Functions' own request size cap.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass
class Extender:
    policy: Policy
    source: NodeSource
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # The scheduler's httpTimeout in seconds: each decision is logged against this budget.
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    # The secret first path segment; None serves every path openly.
    caller_token: str | None = field(default=None, repr=False)
    # The Kubernetes API (KUBERNETES_API_URL), for binding and node-name preemption; None when not configured.
    kube: KubeClient | None = field(default=None, repr=False)
    # Bodies of requests served at once, in bytes, before more wait (EXTENDER_MAX_BODY_BYTES_IN_FLIGHT).
    max_body_bytes_in_flight: int = DEFAULT_BUDGET_BYTES
    router: Router = field(init=False, repr=False)
    admission: BodyBudget = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.router = Router(self.policy.profiles, function_names(), self.caller_token)
        self.admission = BodyBudget(self.max_body_bytes_in_flight)

    @classmethod
    def from_environment(cls, policy_path: str | None = None) -> Extender:
        """Build from the environment; an invalid policy or setting raises here, stopping start-up."""
        policy = load_policy(policy_path)
        kube = client_from_environment()
        return cls(
            policy=policy,
            source=policy.node_source.build(kube),
            kube=kube,
            max_body_bytes=_env_int(MAX_BODY_ENV, DEFAULT_MAX_BODY_BYTES),
            max_body_bytes_in_flight=_env_int(BUDGET_ENV, DEFAULT_BUDGET_BYTES),
            http_timeout=http_timeout_seconds(),
            # Secret Manager values often end in a newline; whitespace is never part of a token.
            caller_token=os.environ.get(CALLER_TOKEN_ENV, "").strip() or None,
        )

    def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        where, answer = self.decide(request)
        body = orjson.dumps(answer.body)
        seconds = time.perf_counter() - started
        path = self.router.redact(request.path)
        log_decision(where, answer, seconds, self.http_timeout, method=request.method, path=path)
        headers = {name: _header_value(value) for name, value in answer.headers.items()}
        return Response(body, status=answer.status, headers=headers, mimetype="application/json")

    def decide(self, request: Request) -> tuple[Route | None, Answer]:
        """Route and answer ``request``, never raising; ``explain`` calls this too, to show the plugins' results."""
        where = None
        try:
            where = self.router.route(request.path, request.method)
            answer = self._answer(where, request)
        except RequestError as exc:
            answer = Answer({"Error": exc.message}, status=exc.status, headers=exc.headers, error=exc.message)
        except Exception as exc:  # a bug must still answer JSON that names it, never an HTML traceback
            logger.exception("unexpected failure serving %s", self.router.redact(request.path))
            message = f"internal error: {type(exc).__name__}: {exc}"
            answer = Answer({"Error": message}, status=500, error=message)
        discard_body(request)
        return where, answer

    def _answer(self, where: Route, request: Request) -> Answer:
        if where.verb == "healthz":
            return Answer(self.health())
        # A body of unknown length is counted as the largest accepted.
        declared = request.content_length
        size = self.max_body_bytes if declared is None else min(declared, self.max_body_bytes)
        with self.admission.admit(size, wait_seconds=self.http_timeout / 2):
            payload = read_json(request, self.max_body_bytes, decoder_for(where.verb))
            if where.verb == "bind":
                return bind.handle(payload, self.kube)
            profile = self.policy.profiles[where.profile]
            if where.verb == "preempt":
                return preempt.handle(payload, profile, self.source, self.kube)
            verb = {"filter": filtering, "prioritize": prioritize}[where.verb]
            return verb.handle(payload, profile, self.source)

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


def _header_value(text: str) -> str:
    """Printable ASCII, bounded: messages quote node names, which may hold newlines or any Unicode (a header may not)."""
    return bounded(text).encode("unicode_escape").decode("ascii")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
    return value
