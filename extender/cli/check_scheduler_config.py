"""check-scheduler-config SCHEDULER.yaml [--policy POLICY]: check a KubeSchedulerConfiguration's extenders.

It applies kube-scheduler's own rules for ``extenders[]`` (strict decoding,
pkg/scheduler/apis/config/validation validateExtenders, the TLS set-up) with
its wording, and flags settings kube-scheduler accepts but that fail or
misbehave at run time. With --policy, every extender of the file is taken to
be this function serving POLICY, and they are checked against each other.

Exit status 0 when the file is valid, 1 when it is not (each problem on
stderr as ``field.path: message``), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from extender.framework.types import Facts
from extender.policy.loader import Policy, PolicyError, load_policy

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
# The extender's verb fields -> the verb the function answers there.
VERB_FIELDS = {"filterVerb": "filter", "prioritizeVerb": "prioritize", "preemptVerb": "preempt", "bindVerb": "bind"}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "check-scheduler-config",
        help="validate a KubeSchedulerConfiguration's extenders (exit 1 on problems)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", metavar="SCHEDULER.yaml", help="the KubeSchedulerConfiguration (YAML or JSON)")
    parser.add_argument("--policy", metavar="POLICY", help="the policy file the function serves, to cross-check")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    policy = None
    if args.policy:
        try:
            policy = load_policy(args.policy)
        except PolicyError as exc:
            print(exc, file=sys.stderr)
            return 1
    extenders, problems = check_file(args.config)
    if policy is not None and extenders is not None:
        problems += cross_check(extenders, policy)
    if problems:
        print(f"invalid scheduler configuration {args.config}:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in problems), file=sys.stderr)
        return 1
    against = f" with policy {args.policy}" if args.policy else ""
    print(f"{args.config}: ok{against}")
    for index, extender in enumerate(extenders or []):
        print(f"  extenders[{index}]: {describe(extender)}")
    return 0


def check_file(path: str) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """The extenders as written (None when there are none to cross-check) and every problem of the file."""
    import yaml

    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"cannot read the file: {exc}"]
    except yaml.YAMLError as exc:
        return None, [f"not valid YAML or JSON: {exc}"]
    if not isinstance(document, dict):
        return None, [f"the file must be a {KIND} mapping"]
    problems = []
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        problems.append(f"apiVersion, kind: must be {API_VERSION}, {KIND} (extenders are validated as that version)")
    extenders = document.get("extenders")
    if not isinstance(extenders, list) or not extenders:
        return None, [*problems, "extenders: no extenders configured: kube-scheduler would never call the function"]
    return [entry for entry in extenders if isinstance(entry, dict)], problems + extender_problems(extenders)


def extender_problems(extenders: list[Any]) -> list[str]:
    from marshmallow import ValidationError

    from extender.cli.scheduler_config_schema import ExtendersSchema
    from extender.wire.errors import flatten_errors

    try:
        ExtendersSchema().load({"extenders": extenders})
    except ValidationError as exc:
        return [_kube_wording(line) for line in flatten_errors(exc.messages)]
    return []


def _kube_wording(line: str) -> str:
    """kube-scheduler's strict decoder names an unknown field by its path."""
    path, _, message = line.rpartition(": ")
    if message == "Unknown field.":
        return f'strict decoding error: unknown field "{path}"'
    return line


def cross_check(extenders: list[dict[str, Any]], policy: Policy) -> list[str]:
    """What the extenders expect of the function that the policy does not give, one line per problem.

    Messages never quote ``urlPrefix``: its path may hold the caller token."""
    problems: list[str] = []
    for index, extender in enumerate(extenders):
        where = f"extenders[{index}]"
        for field, verb in VERB_FIELDS.items():
            value = extender.get(field)
            if isinstance(value, str) and value and value.strip("/") != verb:
                shown = json.dumps(value)
                problems.append(f"{where}.{field}: Invalid value: {shown}: the function answers only {verb!r} here")
        problems += _profile_problems(where, extender, policy)
        problems += _node_cache_problems(where, extender, policy)
    return problems


def _profile_problems(where: str, extender: dict[str, Any], policy: Policy) -> list[str]:
    url = extender.get("urlPrefix")
    if not isinstance(url, str):
        return []
    segments = [segment for segment in urlsplit(url).path.split("/") if segment]
    if (segments and segments[-1] in policy.profiles) or "default" in policy.profiles:
        return []
    return [
        f"{where}.urlPrefix: selects no profile of the policy: its last path segment is not one of "
        f"{', '.join(sorted(policy.profiles))}, and the policy has no default profile"
    ]


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


def describe(extender: dict[str, Any]) -> str:
    """The verbs and modes of one extender, never its URL (which may hold the caller token)."""
    verbs = [verb for field, verb in VERB_FIELDS.items() if extender.get(field)]
    if extender.get("prioritizeVerb"):
        verbs[verbs.index("prioritize")] = f"prioritize (weight {extender.get('weight')})"
    mode = "node names" if extender.get("nodeCacheCapable") is True else "full nodes"
    return f"{', '.join(verbs) or 'no verbs'}; {mode}; httpTimeout {extender.get('httpTimeout') or '5s (default)'}"
