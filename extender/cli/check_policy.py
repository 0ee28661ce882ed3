"""check-policy FILE: validate a policy file exactly as the function does at start-up."""

from __future__ import annotations

import argparse
import sys

from extender.policy.loader import PolicyError, load_policy


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("check-policy", help="validate a policy file (exit 1 on problems)")
    parser.add_argument("file", help="policy file (YAML or JSON)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.file)
    except PolicyError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{args.file}: ok, profiles: {', '.join(sorted(policy.profiles))}")
    return 0
