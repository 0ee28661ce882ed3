"""The HTTP boundary: route, read, dispatch to a verb, answer JSON; never a traceback."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import orjson
from flask import Request, Response

from extender import __version__
from extender.decision_log import log_decision
from extender.errors import ConfigError, RequestError, bounded
from extender.http.body_budget import BodyBudget
from extender.http.memory import Release
from extender.http.request_body import check_headers, finish_body, hang_up_after, read_body
from extender.http.routing import Router
from extender.kube import client_from_settings
from extender.nodesource.base import NodeSource
from extender.policy.loader import Policy, load_policy
from extender.protocol import Route
from extender.settings import CALLER_TOKEN_ENV, PREVIOUS_CALLER_TOKEN_ENV, Settings
from extender.verbs import Answer, filtering
from extender.wire.answered_names import AnsweredNames
from extender.wire.decode import decoder_for
from extender.wire.decode_cost import Meter
from extender.wire.kept_names import KeptNames
from extender.wire.kept_nodes import KeptNodes
from extender.wire.limits import GIVE_BACK_SHARE, MAX_NODES

if TYPE_CHECKING:
    from extender.kube.client import KubeClient

logger = logging.getLogger("extender")

# An empty environment's settings.
DEFAULTS = Settings()
# What each verb answers for a failure the scheduler must see as a reason (HTTP 200), not as its URL (any other status).
FAILED: dict[str, Callable[[str], dict[str, Any] | list[Any]]] = {
    "filter": lambda message: {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": message,
    },
    "bind": lambda message: {"Error": message},
    # No Error field in the preemption result: no candidate (evicting nothing) is the safe side; Error is for people.
    "preempt": lambda message: {"NodeNameToMetaVictims": {}, "Error": message},
    # Ignored by the scheduler whatever it holds: no scores at all, the reason in the header.
    "prioritize": lambda message: [],
}


class Extender:
    """The function's request handler over one policy and node source.

    A plain class: a dataclass compiles its methods from source at import, on the way to a cold instance's first
    answer. The tokens and the Kubernetes client stay out of ``repr``, which has only the policy's profile names.
    """

    def __init__(
        self, policy: Policy, source: NodeSource, settings: Settings = DEFAULTS, kube: KubeClient | None = None
    ) -> None:
        if settings.previous_caller_token and not settings.caller_token:
            raise ConfigError(
                f"{PREVIOUS_CALLER_TOKEN_ENV} is set without {CALLER_TOKEN_ENV}: set the current token too"
            )
        self.policy = policy
        self.source = source
        self.settings = settings
        # The Kubernetes API (KUBERNETES_API_URL), for binding and node-name preemption; None when not configured.
        self.kube = kube
        self.router = Router(policy.profiles, settings.function_names, settings.caller_tokens)
        self.budget = BodyBudget(settings.max_body_bytes_in_flight)
        # Full-node requests' decoded nodes, by their bytes, unless nothing may be kept across requests.
        self.kept_nodes = KeptNodes(settings.max_body_bytes) if settings.result_cache else None
        # Node-name filter answers, for the prioritize bodies that name them again: with kept results and the fast
        # decoder allowed only.
        self.answered = AnsweredNames() if settings.result_cache and not settings.full_decoder else None
        # Node names as one string each (``extender.wire.kept_names``): the node-name decoder only, as ``answered``.
        self.kept_names = KeptNames(MAX_NODES) if settings.result_cache and not settings.full_decoder else None
        # What requests leave behind goes back when the instance is quiet (process tuning on: not in tests' apps).
        forget = self.kept_nodes.forget if self.kept_nodes is not None else _nothing
        self.release = Release(forget, self.budget.idle, settings.memory_idle) if settings.process_tuning else None

    def __repr__(self) -> str:
        return f"Extender(profiles={sorted(self.policy.profiles)!r}, source={self.source!r})"

    @classmethod
    def from_environment(
        cls, policy_path: str | None = None, settings: Settings | None = None, stood_in: Collection[str] = ()
    ) -> Extender:
        """Build from ``settings`` (the environment's when None); an invalid policy or setting raises here, stopping
        start-up. ``policy_path`` overrides ``EXTENDER_POLICY``; ``stood_in``: plugins whose sources ``explain``
        stands in for, whose variables are not needed."""
        settings = Settings.from_environment() if settings is None else settings
        policy = load_policy(policy_path, settings)
        policy.check_needs(settings, stood_in)
        kube = client_from_settings(settings)
        source = policy.node_source.build(kube, settings.node_source_max_age)
        return cls(policy, source, settings, kube)

    def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        where, answer = self.decide(request)
        body = orjson.dumps(answer.body)
        seconds = time.perf_counter() - started
        path = self.router.redact(request.path)
        log_decision(where, answer, seconds, self.settings.http_timeout, method=request.method, path=path)
        headers = {name: _header_value(value) for name, value in answer.headers.items()}
        response = Response(body, status=answer.status, headers=headers, mimetype="application/json")
        hang_up_after(request, response)
        return response

    def decide(self, request: Request) -> tuple[Route | None, Answer]:
        """Route and answer ``request``, never raising; ``explain`` calls this too, to show the plugins' results."""
        where = None
        try:
            where = self.router.route(request.path, request.method)
            answer = self._answer(where, request)
        except RequestError as exc:
            answer = self._failed(where, request, exc.message, exc.status, exc.headers)
        except Exception as exc:  # a bug must still answer JSON that names it, never an HTML traceback
            logger.exception("unexpected failure serving %s", self.router.redact(request.path))
            answer = self._failed(where, request, f"internal error: {type(exc).__name__}: {exc}", 500)
        finish_body(request)
        return where, answer

    def _answer(self, where: Route, request: Request) -> Answer:
        if where.verb == "healthz":
            return self.health()
        settings = self.settings
        check_headers(request, settings.max_body_bytes)
        size, meter = 0, None
        try:
            with self.budget.hold(wait_seconds=settings.http_timeout / 2) as holding:
                # The scheduler stops waiting after its httpTimeout: a body still arriving then is of no use.
                body = read_body(request, settings.max_body_bytes, settings.http_timeout, holding)
                size, meter = len(body), Meter(settings.max_body_bytes, holding.take)
                decode = decoder_for(
                    where.verb, settings.full_decoder, self.kept_nodes, self.answered, self.kept_names
                )
                payload = decode(body, meter)
                return self._verb(where, payload)
        finally:
            if self.release is not None:
                costly = meter is not None and GIVE_BACK_SHARE * meter.objects >= meter.limit
                self.release.after(size, costly)

    def _verb(self, where: Route, payload: Any) -> Answer:
        # Verb modules other than filter are imported when first called: a cold start's first answer is a filter.
        if where.verb == "bind":
            from extender.verbs import bind

            return bind.handle(payload, self.kube)
        profile = self.policy.profiles[where.profile]
        if where.verb == "filter":
            return filtering.handle(payload, profile, self.source, self.answered)
        if where.verb == "prioritize":
            from extender.verbs import prioritize

            return prioritize.handle(payload, profile, self.source)
        from extender.verbs import preempt

        return preempt.handle(payload, profile, self.source, self.kube)

    def _failed(
        self, where: Route | None, request: Request, message: str, status: int, headers: dict[str, str] | None = None
    ) -> Answer:
        """A failure as the verb's 200 with ``Error`` on a path that carries the caller token, else as ``status``.

        kube-scheduler puts any non-200 answer into the pod's events as
        ``failed <verb> with extender at URL <url>``: with a token in the URL,
        anyone who reads events would read the token; a 200 shows the reason.
        A POST past the token that does not route (an unknown profile in the
        scheduler's urlPrefix) is the scheduler's call too.
        """
        verb = where.verb if where is not None else None
        if verb is None and request.method == "POST":
            verb = self.router.verb_past_token(request.path)
        if self.router.guarded and verb in FAILED:
            return Answer(FAILED[verb](message), headers={"X-Extender-Error": message}, error=message)
        return Answer({"Error": message}, status=status, headers=headers or {}, error=message)

    def health(self) -> Answer:
        """200 with the policy and the node source's state; 503 while the node source has no recent list."""
        from extender.nodesource.health import source_health

        source = source_health(self.source, self.policy.node_source.kind)
        body = {
            "status": "ok" if source.healthy else "unavailable",
            "version": __version__,
            "policy": {
                "source": self.policy.source,
                "sha256": self.policy.sha256,
                "profiles": sorted(self.policy.profiles),
            },
            "nodeSource": source.as_json(),
        }
        problem = "" if source.healthy else f"node source unhealthy: {source.last_error or 'no recent node list'}"
        return Answer(body, status=200 if source.healthy else 503, error=problem)


def _nothing() -> None:
    pass


def _header_value(text: str) -> str:
    """Printable ASCII, bounded: messages quote node names, which may hold newlines or any Unicode; a header may not."""
    return bounded(text).encode("unicode_escape").decode("ascii")
