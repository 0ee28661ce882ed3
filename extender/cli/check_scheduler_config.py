"""check-scheduler-config SCHEDULER.yaml [--policy POLICY] [--kubernetes-version VERSION]: judge a
KubeSchedulerConfiguration as the kube-scheduler of that version will (default: the newest minor this project
supports), and say where this project is stricter.

kube-scheduler's verdict, as it starts: it decodes the file (JSON when it starts with "{", else YAML as go-yaml v2
reads it, first document only; strict: a key set twice or an unknown field stops it), applies its defaults,
validates every field (each in-tree plugin's args included), builds its extenders (TLS material must parse and
match) and each profile's plugins (they must exist in that version at the extension points named, with a queue
sort and a bind plugin left). Every problem is reported at once, in kube-scheduler's words.

Stricter than kube-scheduler (each such line says so, and why): an extender whose urlPrefix is not an http(s) URL or
has a query string or fragment, enableHTTPS without a CA, an httpTimeout not above zero, no extender at all, from
1.33 on a filterVerb with nodeCacheCapable false (kubernetes/kubernetes#141781) unless
--allow-blind-resource-scoring accepts it, and, with --policy, what the function serving POLICY would refuse: each
verb field names the verb the function answers there, each urlPrefix is routed exactly as the function routes the
scheduler's calls (a profile the policy lacks is an error naming those it has), nodeCacheCapable and preempt fit
the policy.

Exit status 0 when kube-scheduler would start and the extender can work, 1 when not (each problem on stderr as
``field.path: message``), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from extender.cli.check_policy import add_function_name, deployed_settings
from extender.cli.scheduler_config.check import Verdict, check
from extender.cli.scheduler_config.extra_rules import BLIND_SCORING_ISSUE, BLIND_SCORING_SINCE
from extender.cli.scheduler_config.fielderrors import go_duration_string
from extender.cli.scheduler_config.findings import Finding
from extender.cli.scheduler_config.policy_match import VERB_FIELDS, cross_check
from extender.cli.scheduler_config.versions import NEWEST, OLDEST, Version, parse_kubernetes_version, shown
from extender.policy.loader import PolicyError, load_policy
from extender.protocol import Route


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        metavar="VERSION",
        type=kubernetes_version,
        default=NEWEST,
        help=(
            f"kube-scheduler's version (X.Y, X.Y.Z, vX.Y.Z or GKE's X.Y.Z-gke.N), {shown(OLDEST)} to "
            f"{shown(NEWEST)}; default {shown(NEWEST)}"
        ),
    )
    parser.add_argument(
        "--allow-blind-resource-scoring",
        action="store_true",
        help=f"accept nodeCacheCapable: false with a filter on kube-scheduler >= {shown(BLIND_SCORING_SINCE)} "
        f"({BLIND_SCORING_ISSUE})",
    )
    add_function_name(parser)
    parser.set_defaults(run=run)


def kubernetes_version(text: str) -> Version:
    """argparse's reading of --kubernetes-version."""
    try:
        return parse_kubernetes_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    settings = deployed_settings(args.function_name)
    version: Version = args.kubernetes_version
    policy = None
    if args.policy:
        try:
            policy = load_policy(args.policy, settings)
        except PolicyError as exc:
            print(exc, file=sys.stderr)
            return 1
    try:
        text = Path(args.config).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        verdict = Verdict([Finding("", f"cannot read the file: {exc}")], None)
    else:
        verdict = check(
            text,
            version,
            allow_blind_scoring=args.allow_blind_resource_scoring,
            blind_also_in_policy=policy is not None and policy.node_cache_capable is False,
        )
    findings = verdict.findings
    routes: list[tuple[Route, bool] | None] = []
    if policy is not None and verdict.extenders is not None:
        more, routes = cross_check(verdict.extenders, policy, settings)
        findings = findings + more
    refusals = [finding.line for finding in findings if finding.refuses]
    remarks = [f"{finding.severity.value}: {finding.line}" for finding in findings if not finding.refuses]
    if refusals:
        print(f"invalid scheduler configuration {args.config}:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in refusals + remarks), file=sys.stderr)
        return 1
    against = f" with policy {args.policy}" if args.policy else ""
    print(f"{args.config}: ok for kube-scheduler {shown(version)}{against}")
    for index, extender in enumerate(verdict.extenders or []):
        print(f"  extenders[{index}]: {describe(extender, routes[index] if routes else None)}")
    for remark in remarks:
        print(f"  {remark}")
    return 0


def describe(extender: dict[str, Any], route: tuple[Route, bool] | None = None) -> str:
    """The verbs and modes of one extender, and the profile that answers it, never its URL (which may hold the
    caller token)."""
    verbs = [verb for field, verb in VERB_FIELDS.items() if extender[field]]
    if extender["prioritizeVerb"]:
        verbs[verbs.index("prioritize")] = f"prioritize (weight {extender['weight']})"
    mode = "node names" if extender["nodeCacheCapable"] else "full nodes"
    timeout = go_duration_string(extender["httpTimeout"]) if extender["httpTimeout"] else "5s (default)"
    shown_text = f"{', '.join(verbs) or 'no verbs'}; {mode}; httpTimeout {timeout}"
    if route is not None:
        shown_text += f"; profile {route[0].profile}" + (" (past the caller token)" if route[1] else "")
    return shown_text
