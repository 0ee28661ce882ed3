"""With ``--policy``: every extender of the file taken to be this function serving the policy. Whatever kube-scheduler
starts with but the function would answer with errors is refused (stricter than kube-scheduler): a verb field naming
a verb the function does not answer there, a ``urlPrefix`` the function does not route to a profile, a
``nodeCacheCapable`` that differs from the policy's, preempt calls whose label filters have no node facts. A weight
too low for a NodeLoad score to place a burst is warned about.

Messages never quote ``urlPrefix``: its path may hold the caller token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

from extender.cli.scheduler_config.findings import Finding, stricter, warning
from extender.errors import ConfigError, RequestError
from extender.framework.types import Facts
from extender.http.routing import NOT_FOUND, Router
from extender.policy.loader import Policy
from extender.protocol import Route
from extender.settings import CALLER_TOKEN_ENV, Settings

# The extender's verb fields -> the verb the function answers there.
VERB_FIELDS = {"filterVerb": "filter", "prioritizeVerb": "prioritize", "preemptVerb": "preempt", "bindVerb": "bind"}
# Below this weight kube-scheduler's own resource scores outweigh NodeLoad's: a burst spreads as without the extender
# (docs/plugins/nodeload.md's herding burst; Terraform's check node_load_score_weight says the same).
MIN_NODE_LOAD_WEIGHT = 3


def cross_check(
    extenders: list[dict[str, Any]], policy: Policy, settings: Settings
) -> tuple[list[Finding], list[tuple[Route, bool] | None]]:
    """What the extenders expect of the function that the policy does not give, and where the function routes each
    extender's calls (the route, and whether past a caller token; None when it does not)."""
    problems: list[Finding] = []
    routes: list[tuple[Route, bool] | None] = []
    for index, extender in enumerate(extenders):
        where = f"extenders[{index}]"
        verbs = []
        for field, verb in VERB_FIELDS.items():
            value = extender.get(field)
            if isinstance(value, str) and value and value.strip("/") != verb:
                problems.append(
                    stricter(
                        f"{where}.{field}",
                        f"Invalid value: {json.dumps(value)}: the function answers only {verb!r} here",
                    )
                )
            elif value:
                verbs.append(verb)
        route = None
        url = extender.get("urlPrefix")
        if isinstance(url, str) and verbs and not {"?", "#"} & set(url):  # else the verb lands in the query: refused
            try:
                route = route_of(url, verbs[0], policy.profiles, settings)
            except RequestError as exc:
                problems.append(
                    stricter(
                        f"{where}.urlPrefix", f"every call would fail: {_route_failure(exc, url, policy, settings)}"
                    )
                )
        routes.append(route)
        problems += _node_cache_problems(where, extender, policy)
        problems += _node_load_weight(where, extender, policy, route[0].profile if route else None)
    return problems, routes


def route_of(url: str, verb: str, profiles: Collection[str], settings: Settings) -> tuple[Route, bool]:
    """Where the function serving ``profiles`` routes the scheduler's calls to ``url`` with ``verb`` appended, and
    whether past a caller token; RequestError as the function answers them when they do not route.

    The caller tokens are the environment's as the function reads them; without any, the path segment where the
    function expects a token is taken for one when it has a token's shape and names nothing public (Terraform puts
    the token there). A cloudfunctions.net URL names the function first, and the function accepts that prefix."""
    segments = _segments(url)
    names = _function_names(url, settings)
    tokens = settings.caller_tokens
    if not tokens:
        at = 1 if segments and segments[0] in names else 0
        tokens = segments[at : at + 1] if len(segments) > at and _is_token(segments[at], profiles, names) else []
    router = Router(profiles, names, tokens)
    return router.route("/" + "/".join([*segments, verb]), "POST"), bool(tokens)


def _segments(url: str) -> list[str]:
    return [segment for segment in urlsplit(url).path.split("/") if segment]


def _function_names(url: str, settings: Settings) -> set[str]:
    segments = _segments(url)
    host = urlsplit(url).hostname or ""
    return set(settings.function_names) | (
        {segments[0]} if host.endswith(".cloudfunctions.net") and segments else set()
    )


def _is_token(segment: str, profiles: Collection[str], names: Collection[str]) -> bool:
    """Whether the function would take ``segment`` as a caller token (the router's own check)."""
    try:
        Router(profiles, names, [segment])
    except ConfigError:
        return False
    return True


def _route_failure(exc: RequestError, url: str, policy: Policy, settings: Settings) -> str:
    if exc.message == NOT_FOUND:
        return f"its path does not carry the caller token the function holds ({CALLER_TOKEN_ENV} in this environment)"
    message = exc.message
    names = _function_names(url, settings)
    for segment in _segments(url):
        if _is_token(segment, policy.profiles, names):  # a caller token where the function does not look for one
            message = re.sub(f"'{re.escape(segment[:16])}[^']*'", "'<redacted>'", message)
    return message


def _node_load_weight(where: str, extender: dict[str, Any], policy: Policy, profile: str | None) -> list[Finding]:
    """A NodeLoad score of the profile the extender reaches (any profile, where the route is not known) behind a
    weight kube-scheduler's own resource scores outweigh."""
    weight = extender.get("weight")
    if not extender.get("prioritizeVerb") or not isinstance(weight, int) or weight >= MIN_NODE_LOAD_WEIGHT:
        return []
    profiles = [policy.profiles[profile]] if profile in policy.profiles else list(policy.profiles.values())
    if not any(entry.plugin.name == "NodeLoad" for served in profiles for entry in served.scores):
        return []
    return [
        warning(
            f"{where}.weight",
            f"{weight} with a NodeLoad score: each point of the extender's score counts {weight * 10} beside "
            "kube-scheduler's own resource scores (0-100 each, favouring the emptier node), which then place a burst "
            f"as without the extender; set {MIN_NODE_LOAD_WEIGHT} or more (5 recommended) unless the load is meant "
            "as a tie-breaker (docs/plugins/nodeload.md)",
        )
    ]


def _node_cache_problems(where: str, extender: dict[str, Any], policy: Policy) -> list[Finding]:
    sends_names = extender.get("nodeCacheCapable") is True  # kube-scheduler's default is false
    declared = policy.node_cache_capable
    if declared is not None and declared != sends_names:
        sent = "node names only" if sends_names else "full Node objects"
        return [
            stricter(
                f"{where}.nodeCacheCapable",
                f"Invalid value: {str(sends_names).lower()}: the scheduler sends {sent}, but the policy declares "
                f"nodeCacheCapable: {str(declared).lower()}; set both alike",
            )
        ]
    if sends_names or not extender.get("preemptVerb"):
        return []
    if policy.node_source.kind or policy.preempt_trusts_scheduler_filter:
        return []
    blind = [
        f"{name}/{plugin.name}"
        for name, profile in sorted(policy.profiles.items())
        for plugin in profile.filters
        if plugin.facts > Facts.NAME
    ]
    if not blind:
        return []
    return [
        stricter(
            f"{where}.preemptVerb",
            "preempt requests carry no Node objects and the policy has no nodeSource, so filters reading labels "
            f"({', '.join(blind)}) cannot run there: configure a nodeSource, or set preemptTrustsSchedulerFilter: true "
            "in the policy (see docs/policy.md)",
        )
    ]
