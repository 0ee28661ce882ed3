"""explain POD --nodes FILE | --node-names NAMES [--victims FILE]: what filter, prioritize and preempt answer.

The function's own code answers: explain builds the requests kube-scheduler
would send and passes them through the same routing, body decoding, verb
handlers and profile as a served request. Prioritize gets the nodes filter
kept, as the scheduler sends them. With --victims, preempt is asked about the
victim pods on each node they name (spec.nodeName), as the scheduler asks
after its own dry run.

With --nodes, explain works offline and decides from the facts the function
would use. A policy that does not declare nodeCacheCapable: false gets node
names, as kube-scheduler sends them, and the labels come from its node source:
static and names work offline, and for kubernetes the file stands in for the
API's node list. A full-node policy gets the file's nodes; its preempt requests
(which carry no nodes) read the node source as the function does. Whatever
stands in for what the function would read is said on stderr. With --metrics,
NodeLoad judges on saved Prometheus answers (``curl '<url>/api/v1/query?query=...'``)
and asks no Prometheus; its in-flight pods come from --in-flight (``kubectl get
pods -A --field-selector spec.nodeName!= -o json``: the pods bound to nodes, each
at its PodScheduled time) and the nodes' allocatable from --nodes, and it asks no
Kubernetes API either.

Every plugin judges at one instant: --at's (an RFC 3339 timestamp), else with
--metrics the newest saved sample's time, else now. A maintenance window is
checked at the time it should be open; the instant reaches the plugins as the
request's (``extender.framework.clock``), as it does in the function. NodeLoad
asked live would answer the load of now, so at --at without --metrics it is
not judged: the table says so, and how to save answers of that instant.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import sys
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import orjson
import yaml
from flask import Request
from werkzeug.test import EnvironBuilder

from extender.decision_log import plugin_ms
from extender.framework.clock import judged_at, parse_instant
from extender.framework.kept import ServedProfile
from extender.framework.plugin import SKIP, FilterPlugin, Skip
from extender.framework.profile import FilterResult, PreemptResult, ScoreResult
from extender.framework.status import Code
from extender.framework.types import Node, Pod, VictimFacts
from extender.http.handler import Extender
from extender.nodesource.base import NodeSource, PerNameSource, unavailable
from extender.policy.loader import PolicyError, load_policy
from extender.protocol import DEFAULT_PROFILE
from extender.settings import Settings, unmet
from extender.verbs import Answer

if TYPE_CHECKING:
    from extender.plugins.nodeload import NodeLoad

STDIN = "-"
# Where a node is in the filter answer.
KEPT = "kept"
FAILED = "FailedNodes"
UNRESOLVABLE = "FailedAndUnresolvableNodes"
_VERDICTS = {
    Code.SUCCESS: "pass",
    Code.UNSCHEDULABLE: "unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "unresolvable",
    Code.ERROR: "error",
}


class InputError(Exception):
    """A manifest explain cannot read; the message names the file and the problem."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show what filter and prioritize answer for a pod, per node and per plugin",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("pod", help="pod manifest, YAML or JSON ('-' reads stdin); namespace defaults to 'default'")
    nodes = parser.add_mutually_exclusive_group(required=True)
    nodes.add_argument(
        "--nodes",
        metavar="FILE",
        help="`kubectl get nodes -o json` output, or Node manifests (YAML or JSON, '-' reads stdin): sent in full "
        "to a policy that declares nodeCacheCapable: false, else by name (labels from the policy's node source)",
    )
    nodes.add_argument(
        "--node-names",
        metavar="NAME,...",
        help="comma-separated node names, sent as with nodeCacheCapable: true (facts come from the node source)",
    )
    parser.add_argument(
        "--victims",
        metavar="FILE",
        help="victim Pod manifests, each with spec.nodeName: also explain the preempt answer for them",
    )
    parser.add_argument(
        "--policy", metavar="FILE", help="policy file (default: $EXTENDER_POLICY, else the embedded one)"
    )
    parser.add_argument(
        "--metrics",
        metavar="[METRIC=]FILE",
        action="append",
        help="a saved Prometheus /api/v1/query answer: NodeLoad judges on it instead of asking Prometheus (at its "
        "newest sample's time, unless --at says); METRIC= says which of NodeLoad's metrics it answers (needed when "
        "it queries several)",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        type=_instant,
        help="judge at this RFC 3339 timestamp (2026-03-01T02:30:00Z) instead of now: maintenance windows, and the "
        "age of --metrics samples (without --metrics, NodeLoad is shown not judged)",
    )
    parser.add_argument(
        "--in-flight",
        metavar="FILE",
        help="with --metrics: the pods bound to nodes (a List or manifests, each with spec.nodeName) that NodeLoad "
        "counts as in flight, instead of the Kubernetes API's",
    )
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=f"policy profile (default: {DEFAULT_PROFILE})")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        if [args.pod, args.nodes, args.victims].count(STDIN) > 1:
            raise InputError("only one of the pod, the nodes and the victims can be read from stdin")
        pod = read_pod(args.pod)
        nodes = read_nodes(args.nodes) if args.nodes else None
        names = [name.strip() for name in args.node_names.split(",") if name.strip()] if args.nodes is None else None
        victims = read_victims(args.victims) if args.victims else None
        # Saved answers (--metrics) or not judging it (--at) stand in for what NodeLoad queries: it needs nothing set.
        stood_in = [NotJudged.name] if args.metrics or args.at else []
        extender = (
            offline(args.policy, nodes)
            if nodes is not None
            else Extender.from_environment(args.policy, stood_in=stood_in)
        )
        if args.in_flight and not args.metrics:
            raise InputError("--in-flight needs --metrics: it stands in for the API beside saved Prometheus answers")
        at: dt.datetime | None = args.at
        not_judged = Unjudged()
        if args.metrics:
            in_flight = _manifests(args.in_flight, "Pod") if args.in_flight else None
            newest = judge_on_saved_metrics(extender, args.profile, args.metrics, in_flight, nodes)
            if at is None and newest is not None:
                at = dt.datetime.fromtimestamp(newest, dt.UTC)
            when = "their newest sample's time" if newest is not None else "now (they hold no sample)"
            when = "--at" if args.at else when
            bound = (
                "the --in-flight pods for the pods bound to nodes it reads from the Kubernetes API"
                if args.in_flight
                else "no --in-flight file: no pod bound since the samples is counted"
            )
            loads = _node_loads(extender, args.profile)
            sources = " and ".join(sorted({plugin.source for plugin in loads}))
            print(
                f"explain: the --metrics answers stand in for what NodeLoad reads from {sources}, judged at {when}; "
                f"{bound}",
                file=sys.stderr,
            )
            if nodes is None:
                note = unknown_allocatable(loads, args.metrics)
                if note:
                    print(f"explain: {note}", file=sys.stderr)
        elif args.at is not None:
            not_judged = leave_live_loads_unjudged(extender, args.profile)
        if nodes is not None:  # built offline: what stands in for the node source and the metrics needs nothing set
            check_plugin_needs(extender, args.profile, stood_in)
    except (InputError, PolicyError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    if nodes is not None:
        allocatable = bool(args.metrics) and bool(_node_loads(extender, args.profile))
        for note in stand_ins(extender, args.profile, victims is not None, allocatable):
            print(f"explain: {note}", file=sys.stderr)
        if extender.policy.node_cache_capable is not False:  # kube-scheduler sends this policy names only
            names = [_node_name(node) for node in nodes]
            nodes = None
    explanation = explain(extender, args.profile, pod, nodes, names, victims, at)
    explanation.not_judged = not_judged
    _print(
        orjson.dumps(explanation.as_json(), option=orjson.OPT_INDENT_2).decode() if args.json else explanation.table()
    )
    return 1 if explanation.failed else 0


def _instant(text: str) -> dt.datetime:
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _print(text: str) -> None:
    try:
        print(text, flush=True)
    except BrokenPipeError:  # the reader (head, less) stopped early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# --- Asking the function --------------------------------------------------------------------------


class GivenNodes(PerNameSource):
    """The --nodes file standing in for the kubernetes node source's list: the labels it shows; a node it lacks is
    one the list lacks (its facts are missing, and each plugin's failurePolicy decides)."""

    def __init__(self, nodes: Sequence[dict[str, Any]]) -> None:
        super().__init__()
        self._labels = {_node_name(node): dict((node.get("metadata") or {}).get("labels") or {}) for node in nodes}

    def describe(self, name: str) -> Node:
        labels = self._labels.get(name)
        if labels is None:
            why = f"node {name} is not in the --nodes file, which stands in for the Kubernetes API's node list"
            return unavailable(name, why)
        return Node(name, labels)


def offline(policy_path: str | None, nodes: Sequence[dict[str, Any]]) -> Extender:
    """The function serving the policy with its own node source, built offline: static and names need nothing, and
    the --nodes file stands in for the kubernetes source's list (no Kubernetes API needed)."""
    settings = Settings.from_environment()
    policy = load_policy(policy_path, settings)
    spec = policy.node_source
    source: NodeSource = GivenNodes(nodes) if spec.kind == "kubernetes" else spec.build(None)
    return Extender(policy, source, settings)


def stand_ins(extender: Extender, profile_name: str, victims: bool, allocatable: bool = False) -> list[str]:
    """What explain reads where the function would read something else, and where the facts come from;
    ``allocatable``: NodeLoad judges offline, with the --nodes file's allocatable."""
    policy = extender.policy
    kind, full = policy.node_source.kind, policy.node_cache_capable is False
    profile = policy.profiles.get(profile_name)
    notes = []
    if not full:
        labels = f"the {kind} nodeSource their labels, as for the function" if kind else "no labels (no nodeSource)"
        notes.append(
            "the policy does not declare nodeCacheCapable: false, so explain asks by node name as kube-scheduler with "
            f"nodeCacheCapable: true does: --nodes gives the names, {labels}"
        )
    elif kind and victims:
        notes.append(f"preempt requests carry no nodes: labels come from the {kind} nodeSource, as for the function")
    if allocatable and not full:  # full nodes carry their allocatable, which NodeLoad reads as the function does
        notes.append(
            "the --nodes file's status.allocatable stands in for the nodes' allocatable NodeLoad reads from the "
            "Kubernetes API"
        )
    if kind == "kubernetes":
        notes.append("the --nodes file stands in for the node list the function reads from the Kubernetes API")
        if victims and not full and profile is not None and profile.victim_facts > VictimFacts.UID:
            notes.append("the --victims file stands in for the victim pods the function reads from the Kubernetes API")
    return notes


def _node_loads(extender: Extender, profile_name: str) -> list[NodeLoad]:
    from extender.plugins.nodeload import NodeLoad

    profile = extender.policy.profiles.get(profile_name)
    return [plugin for plugin in profile.plugins if isinstance(plugin, NodeLoad)] if profile is not None else []


def check_plugin_needs(extender: Extender, profile_name: str, stood_in: Collection[str]) -> None:
    """ConfigError for a variable a plugin of the profile asks with, unless what it asks is stood in for (the plugins
    named in ``stood_in``)."""
    profile = extender.policy.profiles.get(profile_name)
    plugins = [plugin for plugin in profile.plugins if plugin.name not in stood_in] if profile is not None else []
    problem = unmet([need for plugin in plugins for need in plugin.needs()], extender.settings)
    if problem is not None:
        raise problem


class NotJudged(FilterPlugin):
    """Stands in for a NodeLoad explain cannot judge (--at without --metrics): every node passes it, and the table
    says it was not judged. Its score entry is left out, so the scores are the other plugins'."""

    name: ClassVar[str] = "NodeLoad"

    def __init__(self, plugin: NodeLoad) -> None:
        super().__init__(plugin.args)

    def prepare(self, pod: Pod) -> Skip:
        return SKIP


@dataclass
class Unjudged:
    """The plugins explain left unjudged (``NotJudged``): each with how to judge it, and the weights of their score
    entries, left out of the scores."""

    hints: dict[str, str] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)


def leave_live_loads_unjudged(extender: Extender, profile_name: str) -> Unjudged:
    """--at without --metrics: NodeLoad would ask for the load of now and judge it as the load of then, so the
    profile's NodeLoad is not judged (``NotJudged``) while every other plugin judges at --at."""
    from extender.framework.kept import KeptProfile
    from extender.framework.profile import Profile

    served = extender.policy.profiles.get(profile_name)
    loads = _node_loads(extender, profile_name)
    if served is None or not loads:
        return Unjudged()
    plain = served.plain if isinstance(served, KeptProfile) else served
    stand_in = {id(plugin): NotJudged(plugin) for plugin in loads}
    extender.policy.profiles[profile_name] = Profile(
        plain.name,
        filters=[stand_in.get(id(plugin), plugin) for plugin in plain.filters],
        scores=[entry for entry in plain.scores if id(entry.plugin) not in stand_in],
        preempts=plain.preempts,
        fail_open=plain.fail_open,
        entries=plain.entries,
        preempt_trusted=plain.preempt_trusted,
    )
    unjudged = Unjudged()
    for plugin in loads:
        metrics = " ".join(f"--metrics {metric.name}=FILE" for metric in plugin.config.metrics)
        unjudged.hints[plugin.name] = (
            f"it reads the nodes' load now, not at --at: give answers saved at that time ({metrics}; {plugin.source} "
            "answers curl '<url>/api/v1/query' --data-urlencode 'query=<query>' --data-urlencode 'time=<--at>')"
        )
        unjudged.weights.update({entry.plugin.name: entry.weight for entry in plain.scores if entry.plugin is plugin})
    return unjudged


def unknown_allocatable(loads: Sequence[NodeLoad], given: Sequence[str]) -> str:
    """What --metrics without --nodes leaves NodeLoad without: the nodes' allocatable, unless the capacity answers
    are given ("" when nothing is missing)."""
    from extender.plugins.nodeload.args import capacity_query

    resources = [metric for plugin in loads for metric in plugin.config.metrics if metric.resource]
    capacities = [capacity_query(metric).name for metric in resources if metric.capacity]
    named = {spec.split("=", 1)[0] for spec in given if "=" in spec}
    if not resources or named & set(capacities):
        return ""
    instead = f" nor saved capacity answer (--metrics {capacities[0]}=FILE)" if capacities else ""
    return (
        f"no --nodes file{instead}: NodeLoad knows no node's allocatable, so it judges each node as measured, without "
        "the pods in flight or the pod's own share"
    )


def judge_on_saved_metrics(
    extender: Extender,
    profile_name: str,
    given: Sequence[str],
    in_flight: Sequence[dict[str, Any]] | None = None,
    nodes: Sequence[dict[str, Any]] | None = None,
) -> float | None:
    """--metrics: each NodeLoad of the profile judges on the saved answers (``[METRIC=]FILE``), asking no Prometheus,
    with the ``in_flight`` pods (--in-flight; none counted without) and the allocatable of ``nodes`` (--nodes).
    Returns the newest saved sample's time (None: they hold no sample)."""
    import msgspec

    from extender.kube.bound_pods import Bindings, by_node, collect
    from extender.kube.demand import resources
    from extender.kube.lists import decode_bound_pod_page
    from extender.plugins.nodeload.answers import AnswerError

    loads = _node_loads(extender, profile_name)
    if not loads:
        raise InputError(f"--metrics: profile {profile_name} has no NodeLoad plugin")
    files: dict[str | None, str] = {}
    for spec in given:
        named = re.fullmatch(r"([a-z][a-z0-9_:-]*)=(.+)", spec)
        metric, path = (named.group(1), named.group(2)) if named else (None, spec)
        if metric in files:
            raise InputError(f"--metrics: two answers for {'one unnamed metric' if metric is None else metric}")
        files[metric] = path
    times: list[float] = []
    for plugin in loads:
        metrics = [metric.name for metric in plugin.config.metrics]
        if None in files and len(metrics) > 1:
            raise InputError(
                f"--metrics: NodeLoad queries {', '.join(metrics)}: name each answer's metric, {metrics[0]}=FILE"
            )
        paths = {metric: files.get(metric) or files.get(None) for metric in metrics}
        missing = [metric for metric, path in paths.items() if path is None]
        if missing:
            raise InputError(f"--metrics: no answer for NodeLoad's {', '.join(missing)} (give {missing[0]}=FILE)")
        derived = [metric.name for metric in plugin.config.queried if metric.name not in metrics]
        paths.update({name: files[name] for name in derived if files.get(name)})
        unknown = sorted(name for name in files if name is not None and name not in metrics and name not in derived)
        if unknown:
            queried = ", ".join(metrics + derived)
            raise InputError(f"--metrics: NodeLoad has no metric {unknown[0]} (it queries {queried})")
        answers = {}
        for metric, path in paths.items():
            try:
                answers[metric] = Path(str(path)).read_bytes()
            except OSError as exc:
                raise InputError(f"{path}: cannot read: {exc.strerror}") from None
        bindings = None
        if in_flight is not None:
            try:
                listed, _, _ = decode_bound_pod_page(orjson.dumps({"items": list(in_flight)}), len(in_flight))
            except msgspec.DecodeError as exc:  # a manifest of another shape
                raise InputError(f"--in-flight: not pods the API would list: {exc}") from None
            sampled = max((float(row[0]) for row in _sample_times(answers)), default=0.0)
            kept, _ = collect(listed, sampled, plugin.horizon)
            bindings = Bindings(by_node(kept))
        allocatable = {
            _node_name(node): resources(((node.get("status") or {}).get("allocatable")), None) for node in nodes or ()
        }
        try:
            newest = plugin.judge_offline(answers, bindings, allocatable or None)
        except AnswerError as exc:
            raise InputError(f"--metrics: not a usable Prometheus /api/v1/query answer: {exc}") from None
        times += [] if newest is None else [newest]
    return max(times, default=None)


@dataclass
class NodeRow:
    """One node: each plugin's verdict and score, and what the wire answers say about it."""

    name: str
    answer: str = ""
    reason: str = ""
    # Filter plugin -> {"code": ..., "reason": ...}, for the plugins the node reached (policy order).
    filter: dict[str, dict[str, str]] = field(default_factory=dict)
    # Score plugin -> normalized 0..100 score; final is the 0..10 score of the prioritize answer.
    scores: dict[str, int] = field(default_factory=dict)
    score: int | None = None
    # Plugin -> what it measured of the node (NodeLoad: {metric: {"value", "ageSeconds"}}).
    measured: dict[str, Any] = field(default_factory=dict)


@dataclass
class Explanation:
    extender: Extender
    profile_name: str
    pod: dict[str, Any]
    node_names: list[str]
    filter: Answer
    prioritize: Answer | None = None
    preempt: Answer | None = None
    # Candidate node -> its victim pods, as given with --victims.
    victims: dict[str, list[dict[str, Any]]] | None = None
    # The instant every plugin judged at; None: when explain ran.
    at: dt.datetime | None = None
    # The plugins not judged (NodeLoad at --at without --metrics), with how to judge them.
    not_judged: Unjudged = field(default_factory=Unjudged)

    @property
    def profile(self) -> ServedProfile | None:
        return self.extender.policy.profiles.get(self.profile_name)

    @property
    def failed(self) -> bool:
        """Filter did not answer a decision: the scheduler would fail this scheduling attempt."""
        return bool(self.filter.error) or self.filter.status != 200

    def rows(self) -> list[NodeRow]:
        rows = {name: NodeRow(name) for name in self.node_names}
        if self.failed:
            return list(rows.values())
        body = self.filter.json()
        kept = [node["metadata"]["name"] for node in body["Nodes"]["items"]] if "Nodes" in body else body["NodeNames"]
        for name in kept:
            rows[name].answer = KEPT
        for answer in (FAILED, UNRESOLVABLE):
            for name, reason in body[answer].items():
                rows[name].answer, rows[name].reason = answer, reason
        if isinstance(self.filter.result, FilterResult) and self.profile is not None:
            self._add_filter_verdicts(rows, self.filter.result, [plugin.name for plugin in self.profile.filters])
        for plugin, hint in self.not_judged.hints.items():
            for row in rows.values():
                if plugin in row.filter:
                    row.filter[plugin] = {"code": Code.SUCCESS.value, "notJudged": hint}
        for answered in (self.filter, self.prioritize):
            if answered is not None and isinstance(answered.result, (FilterResult, ScoreResult)):
                for plugin, facts in answered.result.observed.items():
                    for row in rows.values():
                        row.measured.setdefault(plugin, facts(row.name))
        if self.prioritize is not None:
            for entry in self.prioritize.json():
                rows[entry["Host"]].score = entry["Score"]
            if isinstance(self.prioritize.result, ScoreResult):
                for plugin, scores in self.prioritize.result.by_plugin.items():
                    for name, score in scores.items():
                        rows[name].scores[plugin] = score
        return list(rows.values())

    @staticmethod
    def _add_filter_verdicts(rows: dict[str, NodeRow], result: FilterResult, plugins: list[str]) -> None:
        # Plugins run in policy order and a node stops at the first that rejects it.
        for row in rows.values():
            status = result.rejected.get(row.name)
            reached = plugins[: plugins.index(status.plugin)] if status and status.plugin in plugins else plugins
            row.filter = {plugin: {"code": Code.SUCCESS.value} for plugin in reached}
            if status is not None:
                row.filter[status.plugin] = {"code": status.code.value, "reason": status.reason}
            # What did not apply: plugins that did not judge the node, audited plugins' held-back verdicts.
            for note in result.skipped.get(row.name, ()):
                if note.plugin in row.filter and note.code is Code.SUCCESS:
                    row.filter[note.plugin] = {"code": note.code.value, "reason": note.reason, "skipped": "yes"}
            for note in (*result.would_reject.get(row.name, ()), *result.audit_failed.get(row.name, ())):
                if note.plugin in row.filter:
                    row.filter[note.plugin] = {"code": note.code.value, "reason": note.reason, "enforcement": "Audit"}
            for plugin, why in result.exempt.items():
                if row.filter.get(plugin) == {"code": Code.SUCCESS.value}:  # passed, not skipped nor held back
                    row.filter[plugin] = {"code": Code.SUCCESS.value, "exempt": why}

    def as_json(self) -> dict[str, Any]:
        policy = self.extender.policy
        return {
            "policy": {"source": policy.source, "sha256": policy.sha256},
            "profile": self.profile_name,
            "pod": self.pod_identity(),
            "at": self.at.isoformat() if self.at is not None else None,
            "filter": _call_json(self.filter),
            "prioritize": _call_json(self.prioritize) if self.prioritize is not None else None,
            "nodes": [asdict(row) for row in self.rows()],
            "preempt": _call_json(self.preempt) if self.preempt is not None else None,
            "candidates": self.candidates(),
            "notJudged": self.not_judged.hints,
        }

    def candidates(self) -> dict[str, dict[str, str]]:
        """Each preemption candidate: accepted (its victims may be evicted) or vetoed, with the reason."""
        if self.preempt is None or self.preempt.status != 200:
            return {}
        accepted = self.preempt.json().get("NodeNameToMetaVictims") or {}
        result = self.preempt.result if isinstance(self.preempt.result, PreemptResult) else None
        rejected = result.rejected if result is not None else {}
        verdicts: dict[str, dict[str, str]] = {}
        for name in self.preempt_nodes:
            if name in accepted:
                verdicts[name] = {"answer": "accepted", "victims": str(len(accepted[name].get("Pods") or []))}
                held = result.would_veto.get(name) if result is not None else None
                if held:  # an audited plugin would have vetoed it
                    verdicts[name]["wouldVeto"] = "; ".join(f"{note.plugin}: {note.reason}" for note in held)
            elif name in rejected:
                verdicts[name] = {"answer": "vetoed", "plugin": rejected[name].plugin, "reason": rejected[name].reason}
            else:
                verdicts[name] = {"answer": "vetoed", "reason": self.preempt.error or "not in the answer"}
        return verdicts

    @property
    def preempt_nodes(self) -> list[str]:
        return list(self.victims or {})

    def pod_identity(self) -> dict[str, str]:
        metadata = self.pod.get("metadata") or {}
        return {key: str(metadata.get(key, "")) for key in ("namespace", "name", "uid")}

    def table(self) -> str:
        pod = self.pod_identity()
        policy = self.extender.policy
        title = f"pod {pod['namespace']}/{pod['name']} · profile {self.profile_name} · policy {policy.source}"
        title += f" (sha256 {policy.sha256[:12]})"
        if self.at is not None:
            title += f" · at {self.at.isoformat()}"
        lines = [title, ""]
        if self.failed:
            lines.append(f"filter answered {self.filter.status} with Error: {self.filter.error}")
            lines.append("kube-scheduler fails this scheduling attempt (unless the extender is ignorable: true).")
            return "\n".join(lines + self._preempt_lines())
        profile = self.profile
        assert profile is not None  # filter succeeded, so routing found it
        filters = [plugin.name for plugin in profile.filters]
        scores = [(entry.plugin.name, entry.weight) for entry in profile.scores]
        audited = {entry.plugin.name for entry in profile.scores if profile.entry("score", entry.plugin).audit}
        weights = [
            f"{name} ×{weight}" + (" (audit: not counted)" if name in audited else "") for name, weight in scores
        ]
        unjudged = list(self.not_judged.weights.items())
        weights += [f"{name} ×{weight} (not counted)" for name, weight in unjudged]
        rows = self.rows()
        measuring = any(row.measured for row in rows)
        header = ["NODE", *filters, *weights, "SCORE", *(["MEASURED"] if measuring else []), "ANSWER"]
        table = [header]
        for row in rows:
            verdicts = [_verdict(row.filter.get(plugin)) for plugin in filters]
            plugin_scores = [self._score_cell(row, name) for name, _ in scores]
            plugin_scores += ["not judged" if row.score is not None else "" for _ in unjudged]
            measured = [_measured(row.measured)] if measuring else []
            answer = f"{row.answer}: {row.reason}" if row.reason else row.answer
            score = "" if row.score is None else str(row.score)
            table.append([row.name, *verdicts, *plugin_scores, score, *measured, answer])
        widths = [max(len(line[column]) for line in table) for column in range(len(header) - 1)]
        for line in table:
            cells = (cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=True))
            lines.append("  ".join(cells) + "  " + line[-1])
        return "\n".join([*lines, "", *self._summary(), *self._preempt_lines()])

    def _score_cell(self, row: NodeRow, plugin: str) -> str:
        if plugin in row.scores:
            return str(row.scores[plugin])
        if row.score is None or self.prioritize is None:
            return ""
        if self.prioritize.error:
            failed = self.prioritize.result.error if self.prioritize.result is not None else None
            return "error" if failed is not None and failed.plugin == plugin else ""
        return "skipped"  # its node facts are unknown and the policy's failurePolicy is Ignore

    def _preempt_lines(self) -> list[str]:
        if self.preempt is None:
            return []
        if self.preempt.status != 200 or self.preempt.error:
            return ["", f"preempt answered {self.preempt.status} with Error: {self.preempt.error}"]
        lines = ["", "preempt (the candidates kube-scheduler proposed, with their victims):"]
        for name, verdict in self.candidates().items():
            if verdict["answer"] == "accepted":
                audit = f" (audit, would veto: {verdict['wouldVeto']})" if "wouldVeto" in verdict else ""
                lines.append(f"  {name}: accepted, {verdict['victims']} victim(s) may be evicted{audit}")
            else:
                lines.append(f"  {name}: vetoed: {verdict['reason']}")
        return lines

    def _summary(self) -> list[str]:
        kept = self.filter.nodes_out
        times = _plugin_times(self.filter, left_out=self.not_judged.hints)
        lines = [f"filter: kept {kept} of {self.filter.nodes_in} nodes{times}"]
        lines += [f"{plugin}: not judged: {hint}" for plugin, hint in self.not_judged.hints.items()]
        if self.prioritize is None:
            lines.append("prioritize: not called, no node is left to score")
        elif self.prioritize.error:
            lines.append(
                f"prioritize: Error: {self.prioritize.error} "
                "(answered with every node at 0, which kube-scheduler ignores silently)"
            )
        else:
            lines.append(
                "prioritize: plugin scores 0..100 combined by weight into 0..10, "
                f"counted score × extender weight × 10 by kube-scheduler{_plugin_times(self.prioritize)}"
            )
            if kept == 1:
                lines.append("note: kube-scheduler skips prioritize when only one node is feasible")
        return lines


def explain(
    extender: Extender,
    profile: str,
    pod: dict[str, Any],
    nodes: Sequence[dict[str, Any]] | None,
    names: Sequence[str] | None,
    victims: dict[str, list[dict[str, Any]]] | None = None,
    at: dt.datetime | None = None,
) -> Explanation:
    """The function's answers for ``pod``, every request judged at ``at`` (None: now)."""
    with judged_at(at) if at is not None else contextlib.nullcontext():
        node_names = [_node_name(node) for node in nodes] if nodes is not None else list(names or ())
        filtered = call(extender, profile, "filter", extender_args(pod, nodes, names))
        explanation = Explanation(extender, profile, pod, node_names, filtered, victims=victims, at=at)
        if victims is not None:
            explanation.preempt = call(extender, profile, "preempt", preemption_args(pod, victims))
        if explanation.failed or not filtered.nodes_out:
            return explanation
        body = filtered.body
        kept_nodes, kept_names = (body["Nodes"]["items"], None) if "Nodes" in body else (None, body["NodeNames"])
        explanation.prioritize = call(extender, profile, "prioritize", extender_args(pod, kept_nodes, kept_names))
        return explanation


def extender_args(
    pod: dict[str, Any], nodes: Sequence[dict[str, Any]] | None, names: Sequence[str] | None
) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends it: both node forms present, the unused one null."""
    return {
        "Pod": pod,
        "Nodes": {"metadata": {}, "items": list(nodes)} if nodes is not None else None,
        "NodeNames": list(names or ()) if nodes is None else None,
    }


def preemption_args(pod: dict[str, Any], victims: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """ExtenderPreemptionArgs with full victim pods, as kube-scheduler sends them with nodeCacheCapable: false."""
    return {
        "Pod": pod,
        "NodeNameToVictims": {node: {"Pods": pods, "NumPDBViolations": 0} for node, pods in victims.items()},
        "NodeNameToMetaVictims": None,
    }


def call(extender: Extender, profile: str, verb: str, payload: dict[str, Any]) -> Answer:
    """POST ``payload`` to ``verb`` the way the scheduler does, into the function's request handling."""
    path = "/".join(["", *([extender.settings.caller_token] if extender.settings.caller_token else []), profile, verb])
    environ = EnvironBuilder(path=path, method="POST", data=orjson.dumps(payload), content_type="application/json")
    return extender.decide(Request(environ.get_environ()))[1]


def _sample_times(answers: dict[str, bytes]) -> list[list[Any]]:
    """The [time, value] samples of saved answers (for the instant they are judged at)."""
    samples = []
    for body in answers.values():
        try:
            result = orjson.loads(body)["data"]["result"]
            values = (item.get("value") for item in result if isinstance(item, dict))
            samples += [value for value in values if isinstance(value, list) and value]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
    return samples


def _node_name(node: dict[str, Any]) -> str:
    metadata = node.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""


def _call_json(answer: Answer) -> dict[str, Any]:
    call_json: dict[str, Any] = {"status": answer.status, "answer": answer.json()}
    if answer.error:
        call_json["error"] = answer.error
    if answer.result is not None:
        call_json["pluginMs"] = plugin_ms(answer.result)
    if isinstance(answer.result, FilterResult) and answer.result.exempt:
        call_json["exempt"] = answer.result.exempt
    if isinstance(answer.result, FilterResult | ScoreResult) and answer.result.incomplete:
        call_json["incomplete"] = answer.result.incomplete  # as the decision entry's: plugin -> why
    return call_json


def _verdict(verdict: dict[str, str] | None) -> str:
    if not verdict:
        return ""
    if "notJudged" in verdict:
        return "not judged"
    if "exempt" in verdict:
        return f"exempt ({verdict['exempt']})"
    if verdict.get("enforcement") == "Audit":
        code = Code(verdict["code"])
        return "audit: failed" if code is Code.ERROR else f"audit: would be {_VERDICTS[code]}"
    return "skipped" if verdict.get("skipped") else _VERDICTS[Code(verdict["code"])]


def _measured(measured: dict[str, Any]) -> str:
    """What plugins measured of a node: ``cpu 0.93 (12.5 s old)``, with what NodeLoad predicts from it where it adds
    something (``cpu 0.5 (3 s old) +2 in flight 0.2 +pod 0.1 = 0.8``); each measure prefixed by its plugin when
    several plugins measure."""
    parts = []
    for plugin, facts in measured.items():
        prefix = f"{plugin} " if len(measured) > 1 else ""
        for name, fact in (facts or {}).items():
            value, age = fact.get("value"), fact.get("ageSeconds")
            shown = "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
            text = f"{prefix}{name} {shown}" + (f" ({age:g} s old)" if age is not None else "")
            in_flight, own = fact.get("inFlight") or {}, fact.get("podShare")
            if "pods" in in_flight:
                text += f" +{in_flight['pods']} in flight {in_flight['share']:g}"
            if own is not None:
                text += f" +pod {own:g}"
            if "predicted" in fact and fact["predicted"] != value:
                text += f" = {fact['predicted']:g}"
            parts.append(text)
    return ", ".join(parts)


def _plugin_times(answer: Answer, left_out: Collection[str] = ()) -> str:
    """Each plugin's time but those ``left_out`` (not judged: they did not run)."""
    if answer.result is None:
        return ""
    times = [(name, seconds) for name, seconds in answer.result.seconds_by_plugin.items() if name not in left_out]
    if not times:
        return ""
    spent = ", ".join(f"{name} {seconds * 1000:.3f} ms" for name, seconds in times)
    return f" ({spent})"


# --- Reading manifests -----------------------------------------------------------------------------


def read_pod(path: str) -> dict[str, Any]:
    documents = _documents(path)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise InputError(f"{path}: expected one Pod manifest")
    pod = documents[0]
    if pod.get("kind", "Pod") != "Pod":
        raise InputError(f"{path}: expected a Pod manifest, got kind {pod['kind']}")
    metadata = pod.get("metadata")
    if isinstance(metadata, dict) and not metadata.get("namespace"):
        # Where kubectl would create it.
        pod = {**pod, "metadata": {**metadata, "namespace": "default"}}
    return pod


def node_names(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """The names of ``read_nodes``' nodes, those that have one."""
    return [name for name in map(_node_name, nodes) if name]


def read_nodes(path: str) -> list[dict[str, Any]]:
    """Nodes from a List (``kubectl get nodes -o json``), Node manifests, or a YAML sequence of them."""
    nodes = _manifests(path, "Node")
    if not nodes:
        raise InputError(f"{path}: no nodes found")
    return nodes


def read_victims(path: str) -> dict[str, list[dict[str, Any]]]:
    """Victim pods by the node they run on (spec.nodeName); a pod without a UID gets namespace/name as one."""
    victims: dict[str, list[dict[str, Any]]] = {}
    for pod in _manifests(path, "Pod"):
        metadata = given if isinstance(given := pod.get("metadata"), dict) else {}
        node = (pod.get("spec") or {}).get("nodeName") if isinstance(pod.get("spec"), dict) else None
        if not node or not isinstance(node, str):
            raise InputError(f"{path}: victim pod {metadata.get('name', '?')} has no spec.nodeName")
        namespace = metadata.get("namespace") or "default"
        uid = metadata.get("uid") or f"{namespace}/{metadata.get('name', '')}"
        victims.setdefault(node, []).append({**pod, "metadata": {**metadata, "namespace": namespace, "uid": uid}})
    if not victims:
        raise InputError(f"{path}: no victim pods found")
    return victims


def _manifests(path: str, kind: str) -> list[dict[str, Any]]:
    """The ``kind`` objects of a file: manifests, Lists of them, or YAML sequences of them.

    An object that leaves its kind out is taken as one."""
    manifests: list[dict[str, Any]] = []
    for document in _documents(path):
        items = document.get("items") if isinstance(document, dict) and "items" in document else document
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, dict) or item.get("kind", kind) != kind:
                found = item.get("kind") if isinstance(item, dict) else type(item).__name__
                raise InputError(f"{path}: expected {kind} manifests or a List of them, found {found}")
            manifests.append(item)
    return manifests


def _documents(path: str) -> list[Any]:
    try:
        text = sys.stdin.read() if path == STDIN else Path(path).read_text(encoding="utf-8")
        return [
            doc for doc in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if doc is not None
        ]
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid YAML or JSON: {exc}") from None
