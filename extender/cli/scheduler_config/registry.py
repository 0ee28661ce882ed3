"""kube-scheduler's in-tree plugins per version, as plain data: which exist, at which extension points, which are
enabled by default, and which a v1 configuration may no longer name.

Sources: pkg/scheduler/framework/plugins/registry.go, each plugin's ``var _ framework.XPlugin`` assertions,
pkg/scheduler/apis/config/v1/default_plugins.go and validation.go's invalidPluginsByVersion, release by release.
"""

from __future__ import annotations

from typing import NamedTuple

from extender.cli.scheduler_config.versions import V1, V1BETA3, Version

# The plugin sets of a profile's ``plugins``, as KubeSchedulerConfiguration names them.
PLUGIN_SETS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
               "preBind", "bind", "postBind", "multiPoint")  # fmt: skip
# A profile's extension points, as kube-scheduler's framework walks them, and the Go interface each asks for.
EXTENSION_POINTS = {
    "preFilter": "PreFilterPlugin",
    "filter": "FilterPlugin",
    "postFilter": "PostFilterPlugin",
    "reserve": "ReservePlugin",
    "preScore": "PreScorePlugin",
    "score": "ScorePlugin",
    "preBind": "PreBindPlugin",
    "bind": "BindPlugin",
    "postBind": "PostBindPlugin",
    "permit": "PermitPlugin",
    "preEnqueue": "PreEnqueuePlugin",
    "queueSort": "QueueSortPlugin",
}


class Span(NamedTuple):
    """Extension points a plugin implements from ``since`` to ``until`` (inclusive; None: still)."""

    since: Version
    until: Version | None
    points: frozenset[str]


def _points(*names: str) -> frozenset[str]:
    return frozenset(names)


_ALL: Version = (1, 28)
_FILTERS = _points("preFilter", "filter")
_SCORING = _points("preFilter", "filter", "preScore", "score")
_PLUGINS: dict[str, tuple[Span, ...]] = {
    "PrioritySort": (Span(_ALL, None, _points("queueSort")),),
    "DefaultBinder": (Span(_ALL, None, _points("bind")),),
    "DefaultPreemption": (
        Span(_ALL, (1, 31), _points("postFilter")),
        Span((1, 32), None, _points("postFilter", "preEnqueue")),  # asynchronous preemption
    ),
    "SchedulingGates": (Span(_ALL, None, _points("preEnqueue")),),
    "ImageLocality": (Span(_ALL, None, _points("score")),),
    "InterPodAffinity": (Span(_ALL, None, _SCORING),),
    "NodeAffinity": (Span(_ALL, None, _SCORING),),
    "NodeName": (Span(_ALL, None, _points("filter")),),
    "NodePorts": (Span(_ALL, None, _FILTERS),),
    "NodeResourcesBalancedAllocation": (Span(_ALL, None, _points("preScore", "score")),),
    "NodeResourcesFit": (Span(_ALL, None, _SCORING),),
    "NodeUnschedulable": (Span(_ALL, None, _points("filter")),),
    "NodeVolumeLimits": (Span(_ALL, None, _FILTERS),),
    "PodTopologySpread": (Span(_ALL, None, _SCORING),),
    "TaintToleration": (Span(_ALL, None, _points("filter", "preScore", "score")),),
    "VolumeBinding": (Span(_ALL, None, _points("preFilter", "filter", "reserve", "preBind", "preScore", "score")),),
    "VolumeRestrictions": (Span(_ALL, None, _FILTERS),),
    "VolumeZone": (Span(_ALL, None, _FILTERS),),
    "DynamicResources": (
        Span(
            _ALL,
            (1, 31),
            _points("preEnqueue", "preFilter", "filter", "postFilter", "preScore", "reserve", "preBind", "postBind"),
        ),
        Span((1, 32), None, _points("preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind")),
    ),
    # Removed: SelectorSpread after 1.28 (PodTopologySpread replaces it), the non-CSI volume limits after 1.31.
    "SelectorSpread": (Span(_ALL, (1, 28), _points("preScore", "score")),),
    "EBSLimits": (Span(_ALL, (1, 31), _FILTERS),),
    "GCEPDLimits": (Span(_ALL, (1, 31), _FILTERS),),
    "AzureDiskLimits": (Span(_ALL, (1, 31), _FILTERS),),
    "CinderLimits": (Span(_ALL, (1, 31), _FILTERS),),
    # Alpha in 1.35, registered whatever their feature gates say.
    "GangScheduling": (Span((1, 35), None, _points("preEnqueue", "reserve", "permit")),),
    "NodeDeclaredFeatures": (Span((1, 35), None, _FILTERS),),
}

# v1's default plugins (all under multiPoint), in order, with their weights.
_DEFAULTS_128 = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("EBSLimits", None),
    ("GCEPDLimits", None),
    ("NodeVolumeLimits", None),
    ("AzureDiskLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)
_NON_CSI_LIMITS = ("EBSLimits", "GCEPDLimits", "AzureDiskLimits")
NON_CSI_LIMITS_DEFAULT_UNTIL: Version = (1, 30)
DRA_DEFAULT_SINCE: Version = (1, 34)  # DynamicResourceAllocation GA, its plugin before DefaultPreemption


def implements(name: str, version: Version) -> frozenset[str] | None:
    """The extension points plugin ``name`` implements in kube-scheduler ``version``; None when it is not registered."""
    for span in _PLUGINS.get(name, ()):
        if span.since <= version and (span.until is None or version <= span.until):
            return span.points
    return None


def default_plugins(version: Version) -> list[tuple[str, int | None]]:
    """(name, weight) of the default multiPoint plugins of kube-scheduler ``version``."""
    plugins = list(_DEFAULTS_128)
    if version > NON_CSI_LIMITS_DEFAULT_UNTIL:
        plugins = [plugin for plugin in plugins if plugin[0] not in _NON_CSI_LIMITS]
    if version >= DRA_DEFAULT_SINCE:
        at = [name for name, _ in plugins].index("DefaultPreemption")
        plugins.insert(at, ("DynamicResources", None))
    return plugins


def invalid_plugins(version: Version) -> list[tuple[str, list[str]]]:
    """validation.go's invalidPluginsByVersion: (apiVersion, plugins no longer valid there), oldest first."""
    if version <= (1, 28):
        return [(V1BETA3, []), (V1, ["SelectorSpread"])]
    if version <= (1, 31):
        return [(V1, [])]
    return [(V1, ["AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"])]


def invalid_in(api_version: str, name: str, version: Version) -> str | None:
    """The apiVersion in which plugin ``name`` became invalid, when a configuration of ``api_version`` may not use
    it (validation.go's isPluginInvalid)."""
    for group_version, plugins in invalid_plugins(version):
        if name in plugins:
            return group_version
        if api_version == group_version:
            break
    return None
