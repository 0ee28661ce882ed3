"""Map a request path onto (profile, verb), behind the caller token when one is configured.

functions-framework hands every path to the one function. The scheduler
builds paths as ``urlPrefix + "/" + verb`` without normalising, so empty
segments are ignored; a leading segment naming the function itself (the
``cloudfunctions.net/FUNCTION_NAME`` URL form) is accepted too.

kube-scheduler cannot send an auth header (kubernetes#94106), so a caller
token travels as a path segment: ``[/<function-name>]/<token>[/<profile>]/<verb>``.
Without it every path, healthz included, answers the same bare 404, so an
unauthenticated caller learns nothing: not which verbs or profiles exist,
nor that a token is expected.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Collection, Sequence

from extender.errors import ConfigError, RequestError
from extender.protocol import DEFAULT_PROFILE, VERBS, Route
from extender.settings import CALLER_TOKEN_ENV, PREVIOUS_CALLER_TOKEN_ENV

# URL-unreserved characters only, so the token needs no escaping in urlPrefix; 16 of them carry ~96 bits.
# Compiled on first use (re caches it): only a function with a token needs it.
_TOKEN_SHAPE = r"[A-Za-z0-9._~-]{16,}"
# The one answer for every path that does not start with the token.
NOT_FOUND = "not found"
REDACTED = "<redacted>"
# Longest path segment quoted back in an error: paths come from the caller and may be huge.
_QUOTED_MAX = 64


class Router:
    def __init__(self, profiles: Collection[str], prefixes: Collection[str], caller_tokens: Sequence[str] = ()) -> None:
        """``caller_tokens``: the current token, then the previous one while a rotation is under way."""
        self.profiles = profiles
        self.prefixes = prefixes
        names = (CALLER_TOKEN_ENV, PREVIOUS_CALLER_TOKEN_ENV)
        public = {*VERBS, *profiles, *prefixes}
        self._tokens = [
            _check_token(token, name, public).encode() for name, token in zip(names, caller_tokens, strict=False)
        ]

    @property
    def guarded(self) -> bool:
        """Whether paths carry a caller token (a secret, then, that no answer may put into a pod's events)."""
        return bool(self._tokens)

    def route(self, path: str, method: str) -> Route:
        segments = [segment for segment in path.split("/") if segment]
        prefixes = self.prefixes
        if self._tokens:
            segments = self._past_token(segments)
            prefixes = ()  # the function's own name comes before the token, never after
        return _route(segments, method, self.profiles, prefixes)

    def verb_past_token(self, path: str) -> str | None:
        """The verb a path that carries the caller token ends in, even when the rest of it does not route."""
        segments = [segment for segment in path.split("/") if segment]
        try:
            rest = self._past_token(segments) if self._tokens else []
        except RequestError:
            return None
        return rest[-1] if rest and rest[-1] in VERBS else None

    def redact(self, path: str) -> str:
        """``path`` fit for a log line: with a token configured, only segments that are public names stay."""
        if not self._tokens:
            return path
        public = {*VERBS, *self.profiles, *self.prefixes}
        return "/".join(segment if not segment or segment in public else REDACTED for segment in path.split("/"))

    def _past_token(self, segments: list[str]) -> list[str]:
        at = 1 if segments and segments[0] in self.prefixes else 0
        # The token must be followed by at least the verb. Every token is compared, each in the same time wherever
        # they differ: the answer's timing tells nothing about either.
        if len(segments) > at + 1:
            given = segments[at].encode("utf-8", "surrogatepass")
            if sum(hmac.compare_digest(given, token) for token in self._tokens):
                return segments[at + 1 :]
        raise RequestError(404, NOT_FOUND)


def _check_token(token: str, name: str, public: Collection[str]) -> str:
    # Never echo the value: it is a secret, and these messages reach the deployment log.
    if not re.fullmatch(_TOKEN_SHAPE, token):
        raise ConfigError(
            f"{name} must be at least 16 characters from A-Z a-z 0-9 . _ ~ - (got {len(token)} characters)"
        )
    if token in public:
        raise ConfigError(f"{name} must not be a verb, profile or function name: paths would be ambiguous")
    return token


def _route(segments: Sequence[str], method: str, profiles: Collection[str], prefixes: Collection[str]) -> Route:
    if not segments or segments[-1] not in VERBS:
        got = f"unknown verb {_quoted(segments[-1])}" if segments else "no verb in the path"
        raise RequestError(404, f"{got}: expected one of {', '.join(VERBS)} as the last path segment")
    verb, rest = segments[-1], list(segments[:-1])
    profile = DEFAULT_PROFILE
    if rest and rest[-1] in profiles:
        profile = rest.pop()
    if len(rest) > 1 or (rest and rest[0] not in prefixes):
        raise RequestError(
            404, f"unknown profile {_quoted(rest[-1])}: this policy serves {', '.join(sorted(profiles))}"
        )
    if profile not in profiles:
        raise RequestError(
            404, f"the policy has no {DEFAULT_PROFILE!r} profile: name one in the path (/<profile>/{verb})"
        )
    allowed = VERBS[verb]
    if method not in allowed:
        raise RequestError(405, f"{verb} answers {' or '.join(allowed)}, not {method}", {"Allow": ", ".join(allowed)})
    return Route(verb, profile)


def _quoted(segment: str) -> str:
    return repr(segment if len(segment) <= _QUOTED_MAX else segment[:_QUOTED_MAX] + "...")
