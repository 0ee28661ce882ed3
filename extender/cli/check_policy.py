"""check-policy FILE... [--function-name NAME] [--env] [--probe [--nodes FILE]]: validate policy files exactly as
the function does at start-up, for CI pipelines.

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

--probe asks the configured Prometheus each NodeLoad metric's query (and the
capacity queries) once, as the function would (its URL and authentication from
the policy and this environment), and prints per query the series answered,
the nodes matched (those of --nodes FILE, else the Kubernetes API's when
KUBERNETES_API_URL is set) and on which label, the labels present when none
matched, the values' range and the samples' age.

Exit status 0 when every file is valid, 1 when any is not (each problem on
stderr as ``field.path: message``) or, with --probe, when a metric's query
matches no node, 2 on a usage error or, with --env, a variable the function
could not start with.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection
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

# How long --probe may take to list the Kubernetes API's nodes.
PROBE_LIST_SECONDS = 30.0


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
    parser.add_argument(
        "--probe",
        action="store_true",
        help="also ask Prometheus each NodeLoad query once and say what it answers (exit 1 when one matches no node)",
    )
    parser.add_argument(
        "--nodes",
        metavar="FILE",
        help="with --probe: the cluster's nodes (`kubectl get nodes -o json`, or Node manifests) the answers should "
        "name; without it, the Kubernetes API's (KUBERNETES_API_URL), if set",
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
    if args.nodes and not args.probe:
        print("check-policy: --nodes is read by --probe only: add --probe", file=sys.stderr)
        return 2
    settings = deployed_settings(args.function_name)
    status = 0
    nodes: list[str] | None = None
    if args.nodes:
        from extender.cli.explain import InputError, node_names, read_nodes

        try:
            nodes = node_names(read_nodes(args.nodes))
        except InputError as exc:
            print(f"check-policy: --nodes {exc}", file=sys.stderr)
            return 2
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
        if args.probe and not probe_policy(policy, settings, nodes):
            status = status or 1
    return status


def probe_policy(policy: Policy, settings: Settings, nodes: Collection[str] | None) -> bool:
    """Each NodeLoad of the policy's profiles asked its queries once (``extender.plugins.nodeload.probe``), what
    they answer printed; False when a metric's query matches no node."""
    from extender.plugins.nodeload import NodeLoad
    from extender.plugins.nodeload.probe import probe

    loads = {
        id(plugin): (name, plugin)
        for name in sorted(policy.profiles)
        for plugin in policy.profiles[name].plugins
        if isinstance(plugin, NodeLoad)
    }
    if not loads:
        print("  probe: no profile enables NodeLoad: nothing to ask")
        return True
    if nodes is None:
        nodes = api_node_names(settings)
    matched = True
    for name, plugin in loads.values():
        print(f"  profile {name}: probing {plugin.config.url}")
        for finding in probe(plugin, nodes):
            print("\n".join(f"    {line}" for line in finding.lines))
            matched = matched and not finding.failed
    return matched


def api_node_names(settings: Settings) -> list[str] | None:
    """The nodes' names the Kubernetes API lists (KUBERNETES_*), None when it is not set or fails (said)."""
    from extender.kube import client_from_settings
    from extender.kube.errors import KubeError

    try:
        client = client_from_settings(settings)
        return sorted(client.node_allocatable(total=PROBE_LIST_SECONDS)) if client is not None else None
    except (KubeError, ValueError) as exc:
        print(f"  probe: listing the Kubernetes API's nodes failed, answers not checked against them: {exc}")
        return None


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
