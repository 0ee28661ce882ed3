"""Predicted load: what a node will carry once the pods bound to it lately, and the pod being placed, show in its
metric.

For a metric that measures a resource (cpu or memory: a share of the node's allocatable of it, in the metric's unit:
the shares below are multiplied by 100 for a percent, here and nowhere else):

    predicted = measured
              + Σ estimate(p) / allocatable   over the pods p bound to the node that the sample may not show yet
              + estimate(pod) / allocatable   the pod being placed

A pod bound at ``t`` counts until the node's sample is newer than ``t + delay`` (the metric's ``delay``): a sample
taken before the binding cannot show the pod, and one taken within ``delay`` of it may not (sampling, ingest, a rate
window). A mean over a ``window`` (RiskBalancing's ``avg_over_time``) averages the metric's points evenly over the
window's span, and the metric shows the pod from ``t + delay`` at the latest: a mean taken at ``s`` holds at least the
share ``(s − t − delay) / window`` of the pod (0 to 1), so the rest of its estimate counts, falling linearly to nothing
once the window has fully seen it (``t + delay + window``). Counting the pod whole until then would count it nearly
twice near the window's end; dropping it at ``t + delay`` would count the little the window has seen instead.

The sample's time is the one the answer gives per node. A metric that measures no resource is judged as measured.
A node whose allocatable is unknown is judged as measured too, and its facts say why; so is a request whose
in-flight pods are unknown (no Kubernetes API, the API failing): never an error, always said.

A ``Prediction`` is one request's: built once by NodeLoad's ``prepare`` and dropped with the request; what it works
out per node is memoized on it. With the result cache on, node-name requests also share ``KeptTerms`` across
requests (a cache): each node's term, kept with the node's bound pods it counted, for one base (the answers, the
allocatable list and its problem, by identity, and the pod's estimate). A term is taken from it only while the
node's pods are the same tuple (``Bindings`` shares an unchanged node's tuple from view to view), and only for a pod
that is not itself among the bindings: so a kept term is the term worked out afresh. A burst's new bindings change
a few nodes' tuples: only those nodes are worked out again. Bounded by the answers' nodes; one base at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from extender.framework.types import Node
from extender.kube.demand import Resources, resources
from extender.plugins.nodeload.args import Metric, NodeLoadConfig
from extender.plugins.nodeload.estimates import Estimator, Usage
from extender.plugins.nodeload.loads import LoadView
from extender.plugins.nodeload.units import RATIO

if TYPE_CHECKING:
    from extender.kube.bound_pods import Bindings
    from extender.kube.lists import BoundPod


class Term(NamedTuple):
    """One node's prediction for one metric."""

    measured: float
    predicted: float
    # The pod's own share and the in-flight pods' (count, share): None when not added, ``why`` saying why.
    pod_share: float | None = None
    in_flight: tuple[int, float] | None = None
    why: str = ""


class KeptTerms:
    """Terms shared by the requests of one base (module docstring): (answer, node) -> (the node's pods, term).
    Entries are replaced whole, never changed: concurrent requests at worst work one out twice."""

    __slots__ = ("base", "terms")

    def __init__(self, base: tuple[Hashable, ...]) -> None:
        self.base = base
        self.terms: dict[tuple[str, str], tuple[tuple[BoundPod, ...], Term]] = {}


class Prediction:
    """A request's view of the metrics (``LoadView``) with the in-flight pods and the pod's own estimate added."""

    __slots__ = (
        "_given",
        "_terms",
        "allocatable",
        "allocatable_problem",
        "allocatable_unknown",
        "bindings",
        "config",
        "estimator",
        "in_flight_problem",
        "kept_terms",
        "loads",
        "own",
        "pod_uid",
        "rules",
        "usage",
    )

    def __init__(
        self,
        loads: LoadView,
        config: NodeLoadConfig,
        estimator: Estimator,
        usage: Usage,
        pod_uid: str,
        rules: tuple[int, ...],
        bindings: Bindings | None,
        in_flight_problem: str,
        own: frozenset[str] = frozenset(),
        allocatable: Mapping[str, Resources] | None = None,
        allocatable_problem: str = "",
        allocatable_unknown: Callable[[], None] | None = None,
        kept_terms: KeptTerms | None = None,
    ) -> None:
        self.loads = loads
        self.config = config
        self.estimator = estimator
        # The pod's estimate, and the filter rules that apply to it (by index).
        self.usage = usage
        self.pod_uid = pod_uid
        self.rules = rules
        # The pods bound lately (None: not known, ``in_flight_problem`` says why; else it says why some may lack).
        self.bindings = bindings
        self.in_flight_problem = in_flight_problem
        # The nodes the bindings hold the pod itself on (a pod judged again: not counted twice there).
        self.own = own
        # The nodes' allocatable from the Kubernetes API, and why it may lack nodes.
        self.allocatable = allocatable
        self.allocatable_problem = allocatable_problem
        # Told when the list lacks a node asked about (it lists again).
        self.allocatable_unknown = allocatable_unknown
        # Terms kept across requests (None: the result cache is off, or the pod is among the bindings).
        self.kept_terms = kept_terms if bindings is not None and not own else None
        self._given: dict[str, Resources] = {}
        self._terms: dict[tuple[str, str], Term] = {}

    # --- what a verdict depends on ---------------------------------------------------------------------------------

    def key(self) -> tuple[tuple[Hashable, ...], Hashable, tuple[str, frozenset[str]] | None]:
        """Every input of a node's verdict besides the node, in three parts: what every node shares (the answers and
        their freshness first, the pod's estimate and rules, and the allocatable list by identity), the bindings (by
        identity: a new binding or expiry makes a new one), and the pod with the nodes the bindings hold it on, where
        it is not counted twice (None: nowhere). ``NodeLoad.changed_nodes`` names the nodes whose results may differ
        between two keys that differ only in the answers, the allocatable list, the bindings and the pod's nodes."""
        bindings = self.bindings
        own = (self.pod_uid, self.own) if bindings is not None and self.own else None
        shared = (self.loads.key(), self.usage, self.rules, identity(self.allocatable))
        return shared, bindings if bindings is not None else self.in_flight_problem, own

    def remember(self, nodes: Sequence[Node]) -> None:
        """The allocatable of full-node requests' Node objects: it wins over any other source."""
        for node in nodes:
            if node.allocatable is not None and node.name not in self._given:
                self._given[node.name] = resources(node.allocatable, None)

    # --- predicted values ------------------------------------------------------------------------------------------

    def predicted(self, metric: Metric, node: str) -> float:
        return self.term(metric, node).predicted

    def term(self, metric: Metric, node: str, sample: str | None = None, window: float = 0.0) -> Term:
        """The node's prediction for ``metric``, its measured value read from the answer ``sample`` (the metric's
        own unless given: RiskBalancing reads its mean, averaged over ``window`` seconds); only asked for nodes that
        have a value."""
        answer_name = sample or metric.name
        found = self._terms.get((answer_name, node))
        if found is not None:
            return found
        kept = self.kept_terms if not self._given else None  # full-node requests' allocatable is their own
        pods = self.bindings.on(node) if kept is not None and self.bindings is not None else ()
        if kept is not None:
            hit = kept.terms.get((answer_name, node))
            if hit is not None and hit[0] is pods:
                self._terms[(answer_name, node)] = hit[1]
                return hit[1]
        answer = self.loads.snapshot.answers[answer_name]
        measured = answer.values[node]
        resource = metric.resource
        if resource is None:
            term = Term(measured, measured)
        else:
            capacity = self._allocatable(metric, node, resource)
            if capacity is None or capacity <= 0:
                known = f" ({self.allocatable_problem})" if self.allocatable_problem else ""
                term = Term(measured, measured, why=f"the node's allocatable is unknown{known}: judged as measured")
            else:
                # Shares of the node's allocatable, in the metric's unit (a percent metric's whole node is 100).
                scale = (metric.unit or RATIO).span
                own = self.usage.of(resource) / capacity * scale
                in_flight = self._in_flight(metric, node, resource, answer.times[node], capacity / scale, window)
                extra = own + (in_flight[1] if in_flight is not None else 0.0)
                why = "" if self.bindings is not None else self.in_flight_problem
                term = Term(measured, measured + extra, own, in_flight, why)
        self._terms[(answer_name, node)] = term
        if kept is not None and (self.allocatable is None or node in self.allocatable):
            kept.terms[(answer_name, node)] = (pods, term)
        return term

    def _in_flight(
        self, metric: Metric, node: str, resource: str, sampled_at: float, capacity: float, window: float
    ) -> tuple[int, float] | None:
        bindings = self.bindings
        if bindings is None:
            return None
        count, used = 0, 0.0
        for pod in bindings.on(node):
            unseen = sampled_at - pod.bound_at - metric.delay  # how long the metric has shown the pod, if positive
            if pod.uid != self.pod_uid and unseen < window:
                count += 1
                shown = unseen / window if unseen > 0 else 0.0
                used += self.estimator.usage(pod.demand).of(resource) * (1.0 - shown)
        return count, used / capacity

    def _allocatable(self, metric: Metric, node: str, resource: str) -> float | None:
        given = self._given.get(node)
        if given is None and self.allocatable is not None:
            given = self.allocatable.get(node)
            if given is None and self.allocatable_unknown is not None:
                self.allocatable_unknown()
        if given is not None:
            return given.request(resource)
        capacity = self.loads.snapshot.answers.get(f"{metric.name}:allocatable")
        if capacity is not None:
            value = capacity.values.get(node)
            return value if value is not None and math.isfinite(value) else None
        return None

    # --- what the decision log and explain show ---------------------------------------------------------------------

    def facts(self, node: str) -> dict[str, dict[str, Any]]:
        """Per metric: the measured value and its age (``LoadView.facts``), and for resource metrics the predicted
        value with its parts: the pod's own share and the in-flight pods (count and share), or why they are not
        added."""
        shown = self.loads.facts(node)
        for metric in self.config.metrics:
            fact = shown.get(metric.name)
            answer = self.loads.snapshot.answers.get(metric.name)
            if fact is None or answer is None or node not in answer.values:
                continue
            term = self.term(metric, node)
            fact["predicted"] = _rounded(term.predicted)
            if metric.resource is None:
                continue
            fact["podShare"] = None if term.pod_share is None else _rounded(term.pod_share)
            if term.in_flight is not None:
                pods, share = term.in_flight
                fact["inFlight"] = {"pods": pods, "share": _rounded(share)}
                problem = self.bindings.problem if self.bindings is not None else ""
                if problem:
                    fact["inFlight"]["incomplete"] = problem
            else:
                fact["inFlight"] = {"unknown": term.why or self.in_flight_problem}
        return shown


def _rounded(value: float) -> float:
    return round(value, 4)


def changed_allocatable(before: Hashable, after: Hashable) -> frozenset[str] | None:
    """The nodes whose allocatable differs between two lists as a key holds them (``identity``): none for the same
    list, those whose entry differs for two lists (a relist, mostly the same), None when either list is missing (the
    first list changes every node's term)."""
    if before == after:
        return frozenset()
    if not (isinstance(before, _Identity) and isinstance(after, _Identity)):
        return None
    old, new = before.held, after.held
    if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
        return None
    return frozenset(node for node in old.keys() | new.keys() if old.get(node) != new.get(node))


def identity(held: object) -> _Identity:
    """``held`` compared and hashed by identity (an object replaced whole, never changed)."""
    return _Identity(held)


class _Identity:
    """Hashable by the identity of what it holds (a list that is replaced whole, never changed)."""

    __slots__ = ("held",)

    def __init__(self, held: object) -> None:
        self.held = held

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.held is self.held

    def __hash__(self) -> int:
        return id(self.held)
