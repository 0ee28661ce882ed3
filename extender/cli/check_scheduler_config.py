"""check-scheduler-config SCHEDULER.yaml [--policy POLICY] [--kubernetes-version X.Y]: judge a KubeSchedulerConfiguration
as the kube-scheduler of that version will (default: the newest minor this project supports).

kube-scheduler decodes the file strictly: a key set twice or an unknown field, at any level, stops it (its own words
are printed). It serves only the apiVersions of its version (kubescheduler.config.k8s.io/v1; v1beta3 up to 1.28,
checked against v1's fields). It applies validateExtenders to extenders[]; beyond that, what it accepts in an
extender but fails or misbehaves at run time is flagged too, among it, from 1.33 on, an extender with filterVerb
and nodeCacheCapable false: the scheduler then scores every node the extender's filter returns as idle
(kubernetes/kubernetes#141781), unless --allow-blind-resource-scoring accepts that.

With --policy, every extender of the file is taken to be this function serving POLICY: each verb field names the
verb the function answers there, each urlPrefix is routed exactly as the function routes the scheduler's calls (a
profile the policy lacks is an error naming those it has), and nodeCacheCapable and preempt fit the policy.

Exit status 0 when the file is valid, 1 when it is not (each problem on stderr as ``field.path: message``), 2 on a
usage error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from extender.cli.check_policy import add_function_name, deployed_settings
from extender.errors import ConfigError, RequestError
from extender.framework.types import Facts
from extender.http.routing import NOT_FOUND, Router
from extender.protocol import Route
from extender.policy.loader import Policy, PolicyError, load_policy
from extender.settings import CALLER_TOKEN_ENV, Settings

# The Kubernetes minor versions judged, oldest and newest.
OLDEST, NEWEST = (1, 28), (1, 35)
GROUP = "kubescheduler.config.k8s.io"
KIND = "KubeSchedulerConfiguration"
V1, V1BETA3 = f"{GROUP}/v1", f"{GROUP}/v1beta3"
# KEP-785: v1beta3 is served up to 1.28 (deprecated since 1.26), removed in 1.29.
V1BETA3_UNTIL = (1, 28)
# From this minor on, nodeCacheCapable: false blinds the scheduler's resource scoring (a side effect of #130537).
BLIND_SCORING_SINCE = (1, 33)
BLIND_SCORING_ISSUE = "kubernetes/kubernetes#141781"
# The extender's verb fields -> the verb the function answers there.
VERB_FIELDS = {"filterVerb": "filter", "prioritizeVerb": "prioritize", "preemptVerb": "preempt", "bindVerb": "bind"}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "check-scheduler-config",
        help="validate a KubeSchedulerConfiguration as kube-scheduler will (exit 1 on problems)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", metavar="SCHEDULER.yaml", help="the KubeSchedulerConfiguration (YAML or JSON)")
    parser.add_argument("--policy", metavar="POLICY", help="the policy file the function serves, to cross-check")
    parser.add_argument(
        "--kubernetes-version",
        metavar="X.Y",
        type=kubernetes_version,
        default=NEWEST,
        help=f"the kube-scheduler's minor version, {_shown(OLDEST)} to {_shown(NEWEST)} (default {_shown(NEWEST)})",
    )
    parser.add_argument(
        "--allow-blind-resource-scoring",
        action="store_true",
        help=f"accept nodeCacheCapable: false with a filter on kube-scheduler >= {_shown(BLIND_SCORING_SINCE)} "
        f"({BLIND_SCORING_ISSUE})",
    )
    add_function_name(parser)
    parser.set_defaults(run=run)


def kubernetes_version(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    version = (int(match[1]), int(match[2])) if match else None
    if version is None or not OLDEST <= version <= NEWEST:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Kubernetes minor version from {_shown(OLDEST)} to {_shown(NEWEST)}, such as "
            f"{_shown(NEWEST)}"
        )
    return version


def _shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def run(args: argparse.Namespace) -> int:
    settings = deployed_settings(args.function_name)
    version = args.kubernetes_version
    policy = None
    if args.policy:
        try:
            policy = load_policy(args.policy, settings)
        except PolicyError as exc:
            print(exc, file=sys.stderr)
            return 1
    extenders, problems, notes = check_file(args.config, version)
    blind = [index for index, extender in enumerate(extenders or []) if blind_resource_scoring(version, extender)]
    if args.allow_blind_resource_scoring:
        notes += [f"extenders[{index}]: {_blind_note(version)}, allowed" for index in blind]
    else:
        problems += [_blind_problem(index, version, policy) for index in blind]
    routes: list[tuple[Route, bool] | None] = []
    if policy is not None and extenders is not None:
        more, routes = cross_check(extenders, policy, settings)
        problems += more
    if problems:
        print(f"invalid scheduler configuration {args.config}:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in problems), file=sys.stderr)
        return 1
    against = f" with policy {args.policy}" if args.policy else ""
    print(f"{args.config}: ok for kube-scheduler {_shown(version)}{against}")
    for index, extender in enumerate(extenders or []):
        print(f"  extenders[{index}]: {describe(extender, routes[index] if routes else None)}")
    for note in notes:
        print(f"  note: {note}")
    return 0


# --- The file, as kube-scheduler decodes it --------------------------------------------------------------------------


def check_file(path: str, version: tuple[int, int]) -> tuple[list[dict[str, Any]] | None, list[str], list[str]]:
    """The extenders as written (None when there are none to cross-check), every problem of the file, and notes
    about what is accepted but worth knowing."""
    import yaml

    from extender.cli.duplicate_keys import duplicate_keys, strict_errors

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"cannot read the file: {exc}"], []
    try:
        duplicates = duplicate_keys(text)
        document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        return None, [f"not valid YAML or JSON: {exc}"], []
    if not isinstance(document, dict):
        return None, [f"the file must be a {KIND} mapping"], []
    problems = _type_problems(document, version)
    decoding, other = _schema_problems(document)
    problems += strict_errors(text, duplicates) + decoding + other
    notes = []
    if document.get("apiVersion") == V1BETA3 and V1BETA3 in served_api_versions(version):
        notes.append(f"{V1BETA3} is deprecated, and kube-scheduler 1.29 and later refuse it: use {V1}")
    if any(isinstance(config, dict) and "args" in config for config in _plugin_configs(document)):
        notes.append("pluginConfig args are left to kube-scheduler, which decodes each plugin's args its own way")
    extenders = document.get("extenders")
    if not isinstance(extenders, list) or not extenders:
        return None, [*problems, "extenders: no extenders configured: kube-scheduler would never call the function"], notes
    return [entry for entry in extenders if isinstance(entry, dict)], problems, notes


def served_api_versions(version: tuple[int, int]) -> tuple[str, ...]:
    return (V1, V1BETA3) if version <= V1BETA3_UNTIL else (V1,)


def _type_problems(document: dict[str, Any], version: tuple[int, int]) -> list[str]:
    """apiVersion and kind: which Go type decodes the file, if kube-scheduler ``version`` has one for them."""
    api_version, kind = document.get("apiVersion"), document.get("kind")
    problems = []
    if not api_version:
        problems.append(f"apiVersion: Object 'apiVersion' is missing: set apiVersion: {V1}")
    if not kind:
        problems.append(f"kind: Object 'Kind' is missing: set kind: {KIND}")
    if not api_version or not kind:
        return problems
    served = served_api_versions(version)
    if api_version not in served or kind != KIND:
        removed = " (v1beta3 was removed in 1.29)" if api_version == V1BETA3 else ""
        problems.append(
            f"apiVersion, kind: no kind {json.dumps(kind)} is registered for version {json.dumps(api_version)}: "
            f"kube-scheduler {_shown(version)} reads a {KIND} of {' or '.join(served)}{removed}"
        )
    return problems


def _schema_problems(document: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(strict decoding errors, the other problems) of the file's fields, in kube-scheduler's words."""
    from marshmallow import ValidationError

    from extender.cli.scheduler_config_schema import KubeSchedulerConfigurationSchema
    from extender.wire.errors import flatten_errors

    try:
        KubeSchedulerConfigurationSchema().load(document)
    except ValidationError as exc:
        lines = flatten_errors(exc.messages)
    else:
        return [], []
    unknown = [f'strict decoding error: unknown field "{line[: -len(_UNKNOWN)]}"' for line in lines if line.endswith(_UNKNOWN)]
    return unknown, [line for line in lines if not line.endswith(_UNKNOWN)]


_UNKNOWN = ": Unknown field."


def _plugin_configs(document: dict[str, Any]) -> list[Any]:
    profiles = document.get("profiles")
    return [
        config
        for profile in (profiles if isinstance(profiles, list) else [])
        if isinstance(profile, dict) and isinstance(profile.get("pluginConfig"), list)
        for config in profile["pluginConfig"]
    ]


# --- kube-scheduler 1.33 and later: nodeCacheCapable: false blinds resource scoring ----------------------------------


def blind_resource_scoring(version: tuple[int, int] | None, extender: dict[str, Any]) -> bool:
    """Whether kube-scheduler ``version`` scores the nodes this extender's filter returns as idle: it wraps each node
    of a full-node answer in a new, empty NodeInfo, so NodeResourcesFit and NodeResourcesBalancedAllocation see no
    pod on it."""
    return (
        version is not None
        and version >= BLIND_SCORING_SINCE
        and bool(extender.get("filterVerb"))
        and extender.get("nodeCacheCapable") is not True  # kube-scheduler's default is false
    )


def _blind_note(version: tuple[int, int]) -> str:
    return (
        f"kube-scheduler {_shown(version)} scores every node this extender's filter returns as idle "
        f"({BLIND_SCORING_ISSUE}, since {_shown(BLIND_SCORING_SINCE)})"
    )


def _blind_problem(index: int, version: tuple[int, int], policy: Policy | None) -> str:
    also = " here and in the policy" if policy is not None and policy.node_cache_capable is False else ""
    return (
        f"extenders[{index}].nodeCacheCapable: Invalid value: false: {_blind_note(version)}: NodeResourcesFit and "
        "NodeResourcesBalancedAllocation see no pod on them, so a busy node wins as often as an idle one. Set "
        f"nodeCacheCapable: true{also} (the scheduler then keeps its own node data and sends node names; the policy's "
        "label plugins need a nodeSource, see docs/policy.md), or accept it with --allow-blind-resource-scoring"
    )


# --- With --policy: the extenders as the function serving it sees them -----------------------------------------------


def cross_check(
    extenders: list[dict[str, Any]], policy: Policy, settings: Settings
) -> tuple[list[str], list[tuple[Route, bool] | None]]:
    """What the extenders expect of the function that the policy does not give, one line per problem, and where
    the function routes each extender's calls (the route, and whether past a caller token; None when it does not).

    Messages never quote ``urlPrefix``: its path may hold the caller token."""
    problems: list[str] = []
    routes: list[tuple[Route, bool] | None] = []
    for index, extender in enumerate(extenders):
        where = f"extenders[{index}]"
        verbs = []
        for field, verb in VERB_FIELDS.items():
            value = extender.get(field)
            if isinstance(value, str) and value and value.strip("/") != verb:
                shown = json.dumps(value)
                problems.append(f"{where}.{field}: Invalid value: {shown}: the function answers only {verb!r} here")
            elif value:
                verbs.append(verb)
        route = None
        url = extender.get("urlPrefix")
        if isinstance(url, str) and verbs and not {"?", "#"} & set(url):  # else the verb lands in the query: refused
            try:
                route = route_of(url, verbs[0], policy.profiles, settings)
            except RequestError as exc:
                problems.append(f"{where}.urlPrefix: every call would fail: {_route_failure(exc, url, policy, settings)}")
        routes.append(route)
        problems += _node_cache_problems(where, extender, policy)
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
    return set(settings.function_names) | ({segments[0]} if host.endswith(".cloudfunctions.net") and segments else set())


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


def _node_cache_problems(where: str, extender: dict[str, Any], policy: Policy) -> list[str]:
    sends_names = extender.get("nodeCacheCapable") is True  # kube-scheduler's default is false
    declared = policy.node_cache_capable
    if declared is not None and declared != sends_names:
        sent = "node names only" if sends_names else "full Node objects"
        return [
            f"{where}.nodeCacheCapable: Invalid value: {str(sends_names).lower()}: the scheduler sends {sent}, but the "
            f"policy declares nodeCacheCapable: {str(declared).lower()}; set both alike"
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
        f"{where}.preemptVerb: preempt requests carry no Node objects and the policy has no nodeSource, so filters "
        f"reading labels ({', '.join(blind)}) cannot run there: configure a nodeSource, or set "
        "preemptTrustsSchedulerFilter: true in the policy (see docs/policy.md)"
    ]


def describe(extender: dict[str, Any], route: tuple[Route, bool] | None = None) -> str:
    """The verbs and modes of one extender, and the profile that answers it, never its URL (which may hold the
    caller token)."""
    verbs = [verb for field, verb in VERB_FIELDS.items() if extender.get(field)]
    if extender.get("prioritizeVerb"):
        verbs[verbs.index("prioritize")] = f"prioritize (weight {extender.get('weight')})"
    mode = "node names" if extender.get("nodeCacheCapable") is True else "full nodes"
    shown = f"{', '.join(verbs) or 'no verbs'}; {mode}; httpTimeout {extender.get('httpTimeout') or '5s (default)'}"
    if route is not None:
        shown += f"; profile {route[0].profile}" + (" (past the caller token)" if route[1] else "")
    return shown
