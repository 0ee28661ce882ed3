"""The small interfaces a policy plugin implements.

As in the Kubernetes scheduling framework, one plugin class may implement
several extension points; the policy enables it per point. A plugin instance
is built once per profile from its validated ``pluginConfig`` args and is
shared by every request, served on several threads at once: it must hold
nothing request-specific. What a plugin works out once per request (as
upstream's PreFilter / PreScore) it returns from ``prepare``; the request's
``CycleState`` keeps that value and passes it back as the last argument of
the plugin's other calls for that request (only to plugins that override
``prepare``, so a plugin without per-request work keeps the plain signatures).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final

from marshmallow import Schema

from extender.framework.status import Status
from extender.framework.types import Facts, Node, Pod, VictimFacts, Victims
from extender.settings import Need

# Scores live on the scheduling framework's 0..100 scale until the profile
# combines them into the extender protocol's 0..10.
MIN_NODE_SCORE = 0
MAX_NODE_SCORE = 100

# What a plugin measured about one node in one request, by what it measured ("cpu"): each a mapping
# ``{"value": number, or text such as "NaN", or None when there is none; "ageSeconds": number or None}``, for the
# decision log and ``explain``. See ``Plugin.observations``.
Observed = Callable[[str], Mapping[str, Mapping[str, Any]] | None]


def rescale_scores(scores: dict[str, int], scale: Callable[[int], int]) -> None:
    """Replace every score in place by ``scale(score)``, worked out once per distinct value: thousands of nodes
    share a few raw scores, and ``normalize_scores`` runs on every request."""
    scaled = {raw: scale(raw) for raw in set(scores.values())}
    scores.update(zip(list(scores), map(scaled.__getitem__, list(scores.values())), strict=True))


class Skip:
    """The type of ``SKIP``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SKIP"


# What a filter plugin's ``prepare`` returns when it has nothing to judge in this request (no list to check, no
# window closed now): its ``filter`` is not called and every node passes it, as after a PreFilter's Skip status in
# the scheduling framework. A node-name request whose filters all skip looks up no node.
SKIP: Final = Skip()


class Plugin:
    name: ClassVar[str]
    # Node facts the plugin reads; LABELS needs full-node requests or a node source.
    facts: ClassVar[Facts] = Facts.NAME
    # Validates and loads the plugin's pluginConfig args; None means "takes no args".
    args_schema: ClassVar[type[Schema] | None] = None

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.args = args

    @classmethod
    def label_keys(cls, args: Mapping[str, Any]) -> Iterable[tuple[str, tuple[str, ...]]]:
        """The node label keys the plugin reads with these (loaded) args, for the policy's node-facts check.

        One ``(path in args, keys)`` pair per thing read: the node source must supply at least one of ``keys``, or
        the policy is rejected at ``path`` ("" names the plugin's entry). The default declares nothing, so a plugin
        with ``facts = Facts.LABELS`` that does not override it is only checked for having labels at all.
        """
        return ()

    def prepare(self, pod: Pod) -> Any:
        """Optional: what every call of this request needs, worked out once (which rules apply, the current time).

        Called once per request; the value is kept in the request's ``CycleState`` and passed as the last argument
        of ``reuse_key``, ``filter``, ``score`` and ``normalize_scores``. It must not be stored on the plugin. A filter
        plugin returns ``SKIP`` when no node can fail it in this request; its other calls of the request (``reuse_key``,
        and ``score`` if it also scores) then receive ``SKIP`` as that value.
        """
        return None

    def reuse_key(self, pod: Pod, *prepared: Any) -> Hashable | None:
        """Optional: what of the request the per-node result (filter status, raw score) depends on, if anything.

        A key other than None promises that the result is a function of that key and the node alone: anything else
        it depends on (the time, say) must be part of the key, and never the other nodes. Kept results
        (``extender.framework.kept``) may then answer for the same Node object in a later request with an equal key.
        A score plugin's ``normalize_scores`` must then also depend on the request only through the key. None (the
        default) works the result out on every request.
        """
        return None

    def changed_nodes(self, old: Hashable, new: Hashable) -> Collection[str] | None:
        """Optional: the names of the nodes whose result may differ between two of its reuse keys, or None when it
        cannot tell (the default). A collection promises that every other node's result (filter status, score) is
        the same under both keys; a score plugin that names nodes also promises that ``normalize_scores`` rescales
        each node's score on its own. Kept results (``extender.framework.kept``) then judge only the nodes named
        when a request's key differs from a kept one's only where its plugins can name the nodes.
        """
        return None

    def missing_facts(self, point: str, nodes: Sequence[Node], *prepared: Any) -> Mapping[str, Status]:
        """Optional: the nodes of ``nodes`` whose facts of its own (beyond labels: a metric, say) the plugin lacks at
        ``point`` ("filter" or "score") in this request, each with why: an Error status.

        The profile treats them as nodes whose labels are unknown: the entry's failurePolicy decides (Fail rejects
        the node or scores it 0, Ignore passes it or leaves the plugin out of its score), they are noted under
        ``skipped``, and ``filter`` / ``score`` are not called for them. Called once per extension point and request
        with the nodes still to judge; the default (no facts of its own) lacks none.
        """
        return {}

    def needs(self) -> Iterable[Need]:
        """Optional: the variables the plugin, as configured, cannot work without (``extender.settings.Need``).
        Start-up refuses to start without them and ``check-policy`` lists them; the default needs none."""
        return ()

    def notes(self) -> list[str]:
        """Optional: what an operator must know of how the plugin will judge with these args on this instance (what it
        cannot account for, say): ``check-policy`` prints it, start-up logs it at WARNING. None by default."""
        return []

    def exemption(self, pod: Pod, *prepared: Any) -> str | None:
        """Optional: why none of the plugin's filter rules applies to this request's pod though some select it
        (NodeLoad: ``"DaemonSet"``, a pod pinned to its node), for the decision log and ``explain``, where the pod's
        pass would otherwise read as judged; None (the default): nothing is exempt."""
        return None

    def incomplete(self, *prepared: Any) -> str | None:
        """Optional: why what this request judged on may be incomplete (NodeLoad: the Kubernetes API hung or refused,
        so in-flight pods may be missing), for the decision log's ``incomplete``; asked once per request, never kept
        across requests. None (the default): complete, as far as the plugin knows."""
        return None

    def observations(self, *prepared: Any) -> Observed | None:
        """Optional: what this request measured about each node it judged, by node name (``Observed``), for the
        decision log and ``explain``; None (the default) when the plugin measures nothing."""
        return None


def prepares(plugin: Plugin) -> bool:
    """Whether ``plugin`` works something out per request: its calls then take the prepared value last."""
    return type(plugin).prepare is not Plugin.prepare


def has_own_facts(plugin: Plugin) -> bool:
    """Whether ``plugin`` may lack facts of its own for some nodes (it overrides ``missing_facts``)."""
    return type(plugin).missing_facts is not Plugin.missing_facts


def exempts(plugin: Plugin) -> bool:
    """Whether ``plugin`` may exempt a pod from its rules (it overrides ``exemption``)."""
    return type(plugin).exemption is not Plugin.exemption


def tells_incomplete(plugin: Plugin) -> bool:
    """Whether ``plugin`` may say that what a request judged on is incomplete (it overrides ``incomplete``)."""
    return type(plugin).incomplete is not Plugin.incomplete


def observes(plugin: Plugin) -> bool:
    """Whether ``plugin`` reports what it measured (it overrides ``observations``)."""
    return type(plugin).observations is not Plugin.observations


class FilterPlugin(Plugin):
    def filter(self, pod: Pod, node: Node) -> Status:
        raise NotImplementedError


class ScorePlugin(Plugin):
    # True when each node's score depends on that node alone (``normalize_scores`` rescales none by the others):
    # kept scores (``extender.framework.kept``) then serve any candidate set among the nodes they hold.
    scores_per_node: ClassVar[bool] = False

    def score(self, pod: Pod, node: Node) -> int:
        """A raw score; ``normalize_scores`` must bring all of them into 0..100."""
        raise NotImplementedError

    def normalize_scores(self, pod: Pod, scores: dict[str, int], *prepared: Any) -> None:
        """Rescale ``scores`` (node name -> score) in place; by default they already fit (a plugin that prepares
        something and need not rescale keeps this default)."""


class PreemptPlugin(Plugin):
    # Victim facts the plugin reads; POD needs full-pod requests or the Kubernetes API to look victims up.
    victim_facts: ClassVar[VictimFacts] = VictimFacts.UID

    def select_victims(self, pod: Pod, node_name: str, victims: Victims) -> Status:
        """Accept (Success) or veto (any other code) evicting ``victims`` from ``node_name``."""
        raise NotImplementedError
