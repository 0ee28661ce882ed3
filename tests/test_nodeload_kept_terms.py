"""Each node's predicted term kept across requests (``predicted.KeptTerms``) is a cache: a burst of bindings changes a
few nodes' pods, only those are worked out again, and every term equals the one worked out afresh."""

from __future__ import annotations

import random

from extender.kube.bound_pods import Bindings, by_node
from extender.kube.demand import PodDemand, Resources
from extender.kube.lists import BoundPod
from extender.plugins.nodeload import NodeLoad
from extender.plugins.nodeload.estimates import Usage
from extender.plugins.nodeload.loads import LoadView
from extender.plugins.nodeload.predicted import KeptTerms, Prediction
from tests.test_nodeload_inflight import GI, NOW, answer, bound, plugin

NAMES = [f"n{index}" for index in range(20)]
ALLOCATABLE = {name: Resources(4.0, None, 16 * GI, None) for name in NAMES}


def node_load() -> NodeLoad:
    args = {"filter": [{"metric": "cpu", "above": 0.9}], "score": {"metric": "cpu", "strategy": "LeastLoaded"}}
    profile = plugin(args)
    found = next(p for p in profile.filters if isinstance(p, NodeLoad))
    rng = random.Random(3)
    found.judge_offline({"cpu": answer({name: rng.random() * 0.8 for name in NAMES}, at=NOW - 30)}, None, ALLOCATABLE)
    return found


def prediction(
    plugin_: NodeLoad,
    view: LoadView,
    bindings: Bindings,
    kept: KeptTerms | None,
    uid: str = "the-pod",
    own: frozenset[str] = frozenset(),
) -> Prediction:
    return Prediction(
        view, plugin_.config, plugin_.estimator, Usage(0.4, GI), uid, (0,), bindings, "", own, ALLOCATABLE, "", None,
        kept,
    )


def test_kept_terms_equal_fresh_ones_and_only_changed_nodes_are_worked_out_again():
    plugin_ = node_load()
    view = LoadView(plugin_.loads.snapshot(NOW), NOW, plugin_.config.max_age)
    metric = plugin_.config.metrics[0]
    kept = KeptTerms(("base",))
    rng = random.Random(7)
    pods: dict[str, BoundPod] = {}
    nodes = dict(by_node(pods))
    previous: dict[str, object] = {}
    previous_bindings = Bindings({})
    reused = 0
    for step in range(30):
        changed = rng.sample(NAMES, rng.randint(0, 3))
        for name in changed:  # a binding arrives, or one goes: the node's tuple is replaced, the others are shared
            if pods and rng.random() < 0.3:
                gone = rng.choice(list(pods))
                del pods[gone]
            pods[f"u{step}-{name}"] = bound(f"u{step}-{name}", name, NOW - rng.choice([0, 10, 60]), cpu="300m")
        fresh_nodes = by_node(pods)
        nodes = {name: nodes[name] if nodes.get(name) == pods_ else pods_ for name, pods_ in fresh_nodes.items()}
        bindings = Bindings(dict(nodes))
        cached = prediction(plugin_, view, bindings, kept)
        plain = prediction(plugin_, view, bindings, None)
        for name in NAMES:
            assert cached.term(metric, name) == plain.term(metric, name)
            if name not in changed and name in previous and bindings.on(name) is previous_bindings.on(name):
                assert cached.term(metric, name) is previous[name]  # kept, not worked out again
                reused += 1
        previous = {name: cached.term(metric, name) for name in NAMES}
        previous_bindings = bindings
    assert reused > 200


def test_no_term_is_kept_for_a_pod_among_the_bindings_nor_without_them():
    plugin_ = node_load()
    view = LoadView(plugin_.loads.snapshot(NOW), NOW, plugin_.config.max_age)
    kept = KeptTerms(("base",))
    mine = BoundPod("the-pod", "n0", NOW, PodDemand())
    own = Prediction(
        view, plugin_.config, plugin_.estimator, Usage(0.4, GI), "the-pod", (0,), Bindings(by_node({"x": mine})), "",
        frozenset({"n0"}), ALLOCATABLE, "", None, kept,
    )
    unknown = Prediction(
        view, plugin_.config, plugin_.estimator, Usage(0.4, GI), "p", (0,), None, "no API", frozenset(), ALLOCATABLE,
        "", None, kept,
    )
    assert own.kept_terms is None and unknown.kept_terms is None


def test_a_pod_judged_again_differs_only_on_the_nodes_it_is_bound_or_assumed_on():
    """kube-scheduler judges a pod again when its binding failed, and the function counts it where its answer sent it:
    its key differs from another pod's of the same shape only on that node (``NodeLoad.changed_nodes``), so kept
    verdicts and scores are derived, not worked out for every node again; every other node's term is the same."""
    plugin_ = node_load()
    view = LoadView(plugin_.loads.snapshot(NOW), NOW, plugin_.config.max_age)
    metric = plugin_.config.metrics[0]
    pods = {"the-pod": bound("the-pod", "n0", NOW - 5), "other": bound("other", "n1", NOW - 5)}
    bindings = Bindings(by_node(pods))
    again = prediction(plugin_, view, bindings, None, own=frozenset({"n0"}))
    another = prediction(plugin_, view, bindings, None, uid="another-pod")
    assert plugin_.changed_nodes(another.key(), again.key()) == {"n0"}
    assert plugin_.changed_nodes(again.key(), another.key()) == {"n0"}
    differ = {name for name in NAMES if again.term(metric, name) != another.term(metric, name)}
    assert differ == {"n0"}
    # Counted on another node since (assumed there, or bound there after all): both nodes differ.
    moved = Bindings({"n1": bindings.on("n1"), "n2": (bound("the-pod", "n2", NOW - 5),)})  # n1's pods as they were
    elsewhere = prediction(plugin_, view, moved, None, own=frozenset({"n2"}))
    assert plugin_.changed_nodes(again.key(), elsewhere.key()) == {"n0", "n2"}
