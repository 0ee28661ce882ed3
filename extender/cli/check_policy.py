"""check-policy FILE... [--function-name NAME] [--env]: validate policy files exactly as the function does at
start-up, for CI pipelines.

Every problem of a file is reported in one run. A profile cannot be named like
a name that may prefix the function's URLs: its entry point "extender", and,
given --function-name, the name it is deployed under (Terraform's
function_name), whatever this environment sets.

A valid file's variables that the function cannot start without are listed,
one line each (``needs KUBERNETES_API_URL: ...``): the kubernetes node source's
API server and token, the project NodeLoad's gke preset queries. The policy
itself is valid without them, since the deployment sets them; --env checks them
(and the Kubernetes API variables' values) against this environment, as
start-up will, and refuses an https KUBERNETES_API_URL without a token, which
the function would call anonymously: run it where the function's environment is
known.

Exit status 0 when every file is valid, 1 when any is not (each problem on
stderr as ``field.path: message``), 2 on a usage error or, with --env, a
variable the function could not start with.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from extender.errors import ConfigError
from extender.framework.kept import KeptProfile
from extender.framework.plugin import Plugin
from extender.framework.profile import Profile
from extender.kube.variables import API_URL_ENV, TOKEN_ENV, TOKEN_FILE_ENV
from extender.policy.loader import Policy, PolicyError, load_policy, plugin_notes
from extender.settings import Settings

if TYPE_CHECKING:
    from extender.kube.config import KubeConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check-policy",
        help="validate policy files (exit 1 on problems)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="policy file (YAML or JSON)")
    add_function_name(parser)
    parser.add_argument(
        "--env",
        action="store_true",
        help="also check that this environment sets the variables the policy needs at start-up",
    )
    parser.set_defaults(run=run)


def add_function_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--function-name",
        metavar="NAME",
        help="the name the function is deployed under (Terraform's function_name), which may prefix its URLs",
    )


def deployed_settings(function_name: str | None) -> Settings:
    """The environment's settings, with the names the deployed function's URLs may start with."""
    settings = Settings.from_environment()
    if function_name:
        settings = settings._replace(function_names=settings.function_names | {function_name})
    return settings


def run(args: argparse.Namespace) -> int:
    settings = deployed_settings(args.function_name)
    status = 0
    for path in args.files:
        try:
            policy = load_policy(path, settings)
        except PolicyError as exc:
            print(exc, file=sys.stderr)
            status = 1
            continue
        print(f"{path}: ok")
        for name in sorted(policy.profiles):
            print(f"  profile {name}: {describe(policy.profiles[name])}")
            for note in plugin_notes(policy.profiles[name]):
                print(f"    note: {note}")
        for need in policy.needs():
            print(f"  needs {need}")
        if args.env:
            try:
                check_environment(policy, settings)
            except ConfigError as exc:
                print(f"{path}: {exc}", file=sys.stderr)
                status = 2
    return status


def check_environment(policy: Policy, settings: Settings) -> None:
    """What start-up checks of the environment beside the policy: the policy's needs, the Kubernetes API's
    variables; and an API server the function would call anonymously."""
    from extender.kube import client_from_settings

    policy.check_needs(settings)
    client = client_from_settings(settings)
    if client is not None:
        refuse_anonymous_api(client.config)


def refuse_anonymous_api(config: KubeConfig) -> None:
    """An https API server without a token is called anonymously, whatever the policy: it refuses to list nodes and
    pods and to bind, so every lookup fails at run time. kubectl proxy (http:// on the loopback) adds its own
    credentials."""
    if config.url.startswith("https://") and config.token is None and config.token_file is None:
        raise ConfigError(
            f"{API_URL_ENV} is set without {TOKEN_ENV} or {TOKEN_FILE_ENV}: the function would call the API server "
            "anonymously, which refuses to list nodes and pods and to bind. Set the token of the service account "
            f"deploy/kubernetes/extender-rbac.yaml makes (Terraform: kubernetes_token_secret), or unset {API_URL_ENV}"
        )


def describe(profile: Profile | KeptProfile) -> str:
    """The enabled plugins per extension point, in the order they run, with what an entry sets apart from the
    policy's defaults (its own failurePolicy, enforcement Audit)."""
    points = {
        "filter": [_entry(profile, "filter", plugin, []) for plugin in profile.filters],
        "score": [_entry(profile, "score", entry.plugin, [f"weight {entry.weight}"]) for entry in profile.scores],
        "preempt": [_entry(profile, "preempt", plugin, []) for plugin in profile.preempts],
    }
    return "; ".join(f"{point} {', '.join(names)}" for point, names in points.items() if names) or "no plugins"


def _entry(profile: Profile | KeptProfile, point: str, plugin: Plugin, notes: list[str]) -> str:
    entry = profile.entry(point, plugin)
    if entry.fail_open != profile.fail_open:
        notes.append(f"failurePolicy {'Ignore' if entry.fail_open else 'Fail'}")
    if entry.audit:
        notes.append("enforcement Audit")
    return f"{plugin.name} ({', '.join(notes)})" if notes else plugin.name
