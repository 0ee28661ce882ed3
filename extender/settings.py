"""Every setting the function reads from its environment, read and checked in one place when an instance starts.

    EXTENDER_POLICY                     path of the policy file; unset: the embedded default
    EXTENDER_CALLER_TOKEN               the secret first path segment (docs/security.md)
    EXTENDER_CALLER_TOKEN_PREVIOUS      also accepted while a rotation is under way
    EXTENDER_HTTP_TIMEOUT               the scheduler's httpTimeout, a Go duration (default 5s)
    EXTENDER_MAX_BODY_BYTES             largest request body (default 32 MiB, Cloud Functions' own cap)
    EXTENDER_MAX_BODY_BYTES_IN_FLIGHT   bodies of requests served at once before more wait (default 96 MiB)
    EXTENDER_NODE_SOURCE_MAX_AGE        oldest node list healthz accepts, a Go duration (default 5m)
    EXTENDER_RESULT_CACHE    on | off   results kept across requests (extender.framework.kept)
    EXTENDER_ASSUME_PODS     on | off   answered pods counted where they go until bound (extender.verbs.assumed)
    EXTENDER_DECODER      fast | full   full-node bodies decoded in part, or all by the full decoder
    EXTENDER_PROCESS_TUNING  on | off   collector and allocator tuned at start-up (extender.startup)
    EXTENDER_MEMORY_IDLE                quiet time before large requests' memory goes back, a Go duration (default 30s)
    KUBERNETES_*                        the API server and its credentials (extender.kube.config checks them)
    PROMETHEUS_*                        secrets NodeLoad's Prometheus auth names (tokenEnv, passwordEnv)

and what the platform sets: K_SERVICE, FUNCTION_NAME and FUNCTION_TARGET (names that may prefix the URL path),
K_SERVICE with K_REVISION (running on Cloud Run, so logging as Cloud Logging reads it), GOOGLE_CLOUD_PROJECT; and
PYTHONMALLOC and GLIBC_TUNABLES, which the interpreter and the C library read when the process starts
(ALLOCATOR_ENVIRONMENT: memory comes back after large requests), only to say so when they are not set so.

A value that is not one of a setting's words, not a positive number or not a duration is a ConfigError naming
the variable, which stops start-up. Nothing else in the package reads the environment: the settings are passed
down, so a request never depends on a variable changed after the instance started.

What a policy needs set (``Need``: the Kubernetes API for the kubernetes node source, the project for NodeLoad's gke
preset) is declared by the part of the policy that needs it; ``unmet`` is the error start-up stops with when the
settings leave one unmet, and ``check-policy --env`` reports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from extender.errors import ConfigError

POLICY_ENV = "EXTENDER_POLICY"
CALLER_TOKEN_ENV = "EXTENDER_CALLER_TOKEN"
# Accepted beside the current token during a rotation: the scheduler's urlPrefix changes after the function's setting.
PREVIOUS_CALLER_TOKEN_ENV = "EXTENDER_CALLER_TOKEN_PREVIOUS"
HTTP_TIMEOUT_ENV = "EXTENDER_HTTP_TIMEOUT"
MAX_BODY_ENV = "EXTENDER_MAX_BODY_BYTES"
BUDGET_ENV = "EXTENDER_MAX_BODY_BYTES_IN_FLIGHT"
MAX_AGE_ENV = "EXTENDER_NODE_SOURCE_MAX_AGE"
MEMORY_IDLE_ENV = "EXTENDER_MEMORY_IDLE"
RESULT_CACHE_ENV = "EXTENDER_RESULT_CACHE"
ASSUME_ENV = "EXTENDER_ASSUME_PODS"
DECODER_ENV = "EXTENDER_DECODER"
TUNING_ENV = "EXTENDER_PROCESS_TUNING"
KUBERNETES_PREFIX = "KUBERNETES_"
# Variables a NodeLoad policy may name for its Prometheus credentials (extender.plugins.nodeload.auth).
PROMETHEUS_PREFIX = "PROMETHEUS_"
# Names under which Cloud Functions may put the function in front of the path.
FUNCTION_NAME_ENVS = ("K_SERVICE", "FUNCTION_NAME", "FUNCTION_TARGET")
# Set together by Cloud Run, and so by Cloud Functions (2nd gen), in every instance: google-cloud-logging detects
# Cloud Run by them too. K_SERVICE alone may be set elsewhere, to name the function in front of the path.
CLOUD_RUN_ENVS = ("K_SERVICE", "K_REVISION")
PROJECT_ENV = "GOOGLE_CLOUD_PROJECT"
# How the function is served (Terraform sets these, and so do the README's command, the tests and the bench), read
# by the interpreter and the C library when the process starts: every object from glibc's allocator, which returns
# memory by the page, and per-thread caches of one freed chunk per size instead of seven, whose chunks keep pages of
# the shared heap in use after large requests (extender.http.memory).
ALLOCATOR_ENVIRONMENT = MappingProxyType({"PYTHONMALLOC": "malloc", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=1"})

# kube-scheduler's default httpTimeout.
DEFAULT_HTTP_TIMEOUT = 5.0
# Cloud Functions' own request size cap.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
# With 512 MiB, room for ~100 MB of baseline (modules, google-cloud-logging, a 5000-node cache) and the peaks.
DEFAULT_BUDGET_BYTES = 96 * 1024 * 1024
DEFAULT_MAX_AGE = 300.0
# Longer than the gaps between the requests of one burst of pending pods (and the bench's rounds), so a burst keeps
# what the first request decoded; an instance that is not scheduling needs none of it.
DEFAULT_MEMORY_IDLE = 30.0


class Settings(NamedTuple):
    """The settings of one instance; the defaults are those of an empty environment."""

    policy_path: str | None = None
    caller_token: str | None = None
    previous_caller_token: str | None = None
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_body_bytes_in_flight: int = DEFAULT_BUDGET_BYTES
    node_source_max_age: float = DEFAULT_MAX_AGE
    result_cache: bool = True
    assume_pods: bool = True
    full_decoder: bool = False
    process_tuning: bool = True
    memory_idle: float = DEFAULT_MEMORY_IDLE
    # The KUBERNETES_* variables that are set, as given: extender.kube.config checks and reads them.
    kubernetes: Mapping[str, str] = MappingProxyType({})
    # The PROMETHEUS_* variables that are set: secrets, never shown.
    prometheus: Mapping[str, str] = MappingProxyType({})
    function_names: frozenset[str] = frozenset()
    on_google_cloud: bool = False
    project: str | None = None
    # The allocator is set up as deployed (ALLOCATOR_ENVIRONMENT): the memory of large requests comes back.
    allocator_as_deployed: bool = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings ``environ`` (the process environment when None) gives; ConfigError for a wrong value."""
        environ = os.environ if environ is None else environ
        return cls(
            policy_path=environ.get(POLICY_ENV) or None,
            # Secret Manager values often end in a newline; whitespace is never part of a token.
            caller_token=environ.get(CALLER_TOKEN_ENV, "").strip() or None,
            previous_caller_token=environ.get(PREVIOUS_CALLER_TOKEN_ENV, "").strip() or None,
            http_timeout=_duration(environ, HTTP_TIMEOUT_ENV, DEFAULT_HTTP_TIMEOUT, "5s"),
            max_body_bytes=_positive_int(environ, MAX_BODY_ENV, DEFAULT_MAX_BODY_BYTES),
            max_body_bytes_in_flight=_positive_int(environ, BUDGET_ENV, DEFAULT_BUDGET_BYTES),
            node_source_max_age=_duration(environ, MAX_AGE_ENV, DEFAULT_MAX_AGE, "5m"),
            result_cache=_choice(environ, RESULT_CACHE_ENV, {"on": True, "off": False}, "on"),
            assume_pods=_choice(environ, ASSUME_ENV, {"on": True, "off": False}, "on"),
            full_decoder=_choice(environ, DECODER_ENV, {"fast": False, "full": True}, "fast"),
            process_tuning=_choice(environ, TUNING_ENV, {"on": True, "off": False}, "on"),
            memory_idle=_duration(environ, MEMORY_IDLE_ENV, DEFAULT_MEMORY_IDLE, "30s"),
            kubernetes=MappingProxyType(
                {name: value for name, value in environ.items() if name.startswith(KUBERNETES_PREFIX) and value}
            ),
            prometheus=MappingProxyType(
                {name: value for name, value in environ.items() if name.startswith(PROMETHEUS_PREFIX) and value}
            ),
            function_names=frozenset(name for name in map(environ.get, FUNCTION_NAME_ENVS) if name),
            on_google_cloud=all(environ.get(name) for name in CLOUD_RUN_ENVS),
            project=environ.get(PROJECT_ENV) or None,
            allocator_as_deployed=_allocator_as_deployed(environ),
        )

    def has(self, name: str) -> bool:
        """Whether the environment set the variable ``name`` (one a ``Need`` names)."""
        if name.startswith(KUBERNETES_PREFIX):
            return name in self.kubernetes
        if name.startswith(PROMETHEUS_PREFIX):
            return bool(self.prometheus.get(name, "").strip())
        if name == PROJECT_ENV:
            return self.project is not None
        raise ValueError(f"{name} is not a variable a policy can need")

    @property
    def caller_tokens(self) -> list[str]:
        """The tokens a path may carry: the current one, then the one before a rotation, accepted too until the
        scheduler's urlPrefix carries the new one; none serves every path openly."""
        return [token for token in (self.caller_token, self.previous_caller_token) if token]

    def __repr__(self) -> str:
        # The tokens are secrets, and the Kubernetes variables may hold one: neither is ever shown.
        shown: dict[str, object] = {
            name: ("<set>" if value else None) if name in _SECRET_FIELDS else value
            for name, value in zip(self._fields, self, strict=True)
        }
        shown["kubernetes"] = sorted(self.kubernetes)
        shown["prometheus"] = sorted(self.prometheus)
        return "Settings(" + ", ".join(f"{name}={value!r}" for name, value in shown.items()) + ")"


_SECRET_FIELDS = ("caller_token", "previous_caller_token")


class Need(NamedTuple):
    """A variable the function cannot start without, given its policy: any one of ``names``, and why; or, with
    ``check``, a file (``names`` holds its path) that must be there and usable."""

    names: tuple[str, ...]
    why: str
    # Settings that meet the need without any of ``names`` (kubectl proxy authenticates for the function), as ``why``
    # says.
    waived: Callable[[Settings], bool] | None = None
    # A file's need: what is wrong with the file at this path here ("" when nothing), never what it holds.
    check: Callable[[str], str] | None = None

    def __str__(self) -> str:
        return f"{'file ' if self.check else ''}{' or '.join(self.names)}: {self.why}"

    def met(self, settings: Settings) -> bool:
        if self.check is not None:
            return not self.problem()
        return any(map(settings.has, self.names)) or (self.waived is not None and self.waived(settings))

    def problem(self) -> str:
        """A file's problem here ("" for a variable, or a file without one)."""
        return next((found for found in map(self.check, self.names) if found), "") if self.check else ""


def unmet(needs: Iterable[Need], settings: Settings) -> ConfigError | None:
    """The error start-up stops with when ``settings`` leave some of ``needs`` unmet: one line per need."""
    needs = list(needs)
    variables = [f"  {need}" for need in needs if need.check is None and not need.met(settings)]
    files = [f"  {need}: {problem}" for need in needs if (problem := need.problem())]
    parts = []
    if variables:
        parts.append("the policy needs variables the environment does not set:\n" + "\n".join(variables))
    if files:
        parts.append("the policy needs files this environment cannot use:\n" + "\n".join(files))
    return ConfigError("\n".join(parts)) if parts else None


def in_a_pod(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs in a Kubernetes pod: the kubelet sets KUBERNETES_SERVICE_HOST in every container."""
    return bool((os.environ if environ is None else environ).get("KUBERNETES_SERVICE_HOST"))


def _choice(environ: Mapping[str, str], name: str, words: Mapping[str, bool], default: str) -> bool:
    raw = environ.get(name, "")
    word = raw.strip().lower() or default
    if word not in words:
        raise ConfigError(f"{name} must be {' or '.join(words)}, got {raw!r}")
    return words[word]


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
    return value


def _duration(environ: Mapping[str, str], name: str, default: float, example: str) -> float:
    """Seconds of the positive Go duration in ``name``; ``default`` when unset or empty."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    from extender.duration import parse_go_duration

    try:
        seconds = parse_go_duration(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc} (e.g. {example})") from None
    if seconds <= 0:
        raise ConfigError(f"{name} must be positive, got {raw!r}")
    return seconds


def _allocator_as_deployed(environ: Mapping[str, str]) -> bool:
    """Whether each variable of ALLOCATOR_ENVIRONMENT holds its value (GLIBC_TUNABLES may hold other tunables too)."""
    return all(value in environ.get(name, "").split(":") for name, value in ALLOCATOR_ENVIRONMENT.items())
