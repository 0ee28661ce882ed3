"""Map a request path onto (profile, verb).

functions-framework hands every path to the one function. The scheduler
builds paths as ``urlPrefix + "/" + verb`` without normalising, so empty
segments are ignored; a leading segment naming the function itself (the
``cloudfunctions.net/FUNCTION_NAME`` URL form) is accepted too.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass

from extender.errors import RequestError
from extender.policy.schema import DEFAULT_PROFILE

# Verb -> the HTTP methods it answers.
VERBS: dict[str, tuple[str, ...]] = {
    "filter": ("POST",),
    "prioritize": ("POST",),
    "preempt": ("POST",),
    "bind": ("POST",),
    "healthz": ("GET", "HEAD"),
}


@dataclass(frozen=True, slots=True)
class Route:
    verb: str
    profile: str


def function_names() -> frozenset[str]:
    """Names under which Cloud Functions may put the function in front of the path."""
    return frozenset(
        name for name in (os.environ.get(var) for var in ("K_SERVICE", "FUNCTION_NAME", "FUNCTION_TARGET")) if name
    )


def route(path: str, method: str, profiles: Collection[str], prefixes: Collection[str]) -> Route:
    segments = [segment for segment in path.split("/") if segment]
    if not segments or segments[-1] not in VERBS:
        got = f"unknown verb {segments[-1]!r}" if segments else "no verb in the path"
        raise RequestError(404, f"{got}: expected one of {', '.join(VERBS)} as the last path segment")
    verb, rest = segments[-1], segments[:-1]
    profile = DEFAULT_PROFILE
    if rest and rest[-1] in profiles:
        profile = rest.pop()
    if len(rest) > 1 or (rest and rest[0] not in prefixes):
        raise RequestError(404, f"unknown profile {rest[-1]!r}: this policy serves {', '.join(sorted(profiles))}")
    if profile not in profiles:
        raise RequestError(404, f"the policy has no {DEFAULT_PROFILE!r} profile: name one in the path (/<profile>/{verb})")
    allowed = VERBS[verb]
    if method not in allowed:
        raise RequestError(405, f"{verb} answers {' or '.join(allowed)}, not {method}", {"Allow": ", ".join(allowed)})
    return Route(verb, profile)
