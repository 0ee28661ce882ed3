"""The names a request path is made of: the protocol's verbs, the profile a path without one selects, the
function's entry point, which may come first, and the ``Route`` a path resolves to.

A leaf module: the router reads them to route, the policy schema to refuse
profile names that would shadow a route, the decision log to say where a
request went.
"""

from __future__ import annotations

# Verb -> the HTTP methods it answers.
VERBS: dict[str, tuple[str, ...]] = {
    "filter": ("POST",),
    "prioritize": ("POST",),
    "preempt": ("POST",),
    "bind": ("POST",),
    "healthz": ("GET", "HEAD"),
}

# The profile that answers a path naming none (``/filter``).
DEFAULT_PROFILE = "default"

# The function's entry point (main.py, Terraform's entry_point): FUNCTION_TARGET wherever the function is deployed, so
# a path may start with it (``/extender/filter``) wherever the function runs.
ENTRY_POINT = "extender"


class Route:
    """Where a request path leads: a verb of a profile."""

    __slots__ = ("profile", "verb")

    def __init__(self, verb: str, profile: str) -> None:
        self.verb = verb
        self.profile = profile
