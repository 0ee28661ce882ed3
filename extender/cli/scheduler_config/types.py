"""The Go types kube-scheduler decodes its configuration into, per apiVersion and version, as plain data
(k8s.io/kube-scheduler/config/v1 and v1beta3, k8s.io/component-base/config/v1alpha1, and the core/v1 and meta/v1
types plugin args embed).

Fields come and go with versions: ``delayCacheUntilActive`` (v1 from 1.28) and a profile's
``percentageOfNodesToScore`` exist in v1 only; DynamicResourcesArgs exists from 1.34.
"""

from __future__ import annotations

from functools import cache

from extender.cli.scheduler_config.godecode import (
    BOOL,
    FLOAT32,
    INT32,
    INT64,
    STRING,
    Bytes,
    Duration,
    Field,
    GoType,
    Map,
    Pointer,
    Raw,
    Scalar,
    Slice,
    Struct,
)
from extender.cli.scheduler_config.registry import PLUGIN_SETS
from extender.cli.scheduler_config.versions import V1, V1BETA3, Version

DYNAMIC_RESOURCES_ARGS_SINCE: Version = (1, 34)


def _struct(name: str, package: str, /, **fields: GoType | Field) -> Struct:
    members = {key: value if isinstance(value, Field) else Field(value) for key, value in fields.items()}
    return Struct(name, f"{package}.{name}", members)


def _type_meta() -> dict[str, GoType | Field]:
    return {"apiVersion": STRING, "kind": STRING}


def _slice(elem: GoType) -> Slice:
    return Slice(elem, f"[]{elem.go_name}" if isinstance(elem, (Scalar, Struct)) else "[]")


# --- core/v1 and meta/v1, as plugin args embed them ---------------------------------------------------------------

_REQUIREMENT = _struct(
    "NodeSelectorRequirement",
    "v1",
    key=STRING,
    operator=Scalar("string", "v1.NodeSelectorOperator"),
    values=_slice(STRING),
)
_TERM = _struct("NodeSelectorTerm", "v1", matchExpressions=_slice(_REQUIREMENT), matchFields=_slice(_REQUIREMENT))
NODE_AFFINITY = _struct(
    "NodeAffinity",
    "v1",
    requiredDuringSchedulingIgnoredDuringExecution=Pointer(
        _struct("NodeSelector", "v1", nodeSelectorTerms=_slice(_TERM))
    ),
    preferredDuringSchedulingIgnoredDuringExecution=_slice(
        _struct("PreferredSchedulingTerm", "v1", weight=INT32, preference=_TERM)
    ),
)
_LABEL_SELECTOR = _struct(
    "LabelSelector",
    "v1",
    matchLabels=Map(STRING, "map[string]string"),
    matchExpressions=_slice(
        _struct(
            "LabelSelectorRequirement",
            "v1",
            key=STRING,
            operator=Scalar("string", "v1.LabelSelectorOperator"),
            values=_slice(STRING),
        )
    ),
)
TOPOLOGY_SPREAD_CONSTRAINT = _struct(
    "TopologySpreadConstraint",
    "v1",
    maxSkew=INT32,
    topologyKey=STRING,
    whenUnsatisfiable=Scalar("string", "v1.UnsatisfiableConstraintAction"),
    labelSelector=Pointer(_LABEL_SELECTOR),
    minDomains=Pointer(INT32),
    nodeAffinityPolicy=Pointer(Scalar("string", "v1.NodeInclusionPolicy")),
    nodeTaintsPolicy=Pointer(Scalar("string", "v1.NodeInclusionPolicy")),
    matchLabelKeys=_slice(STRING),
)


# --- plugin args ------------------------------------------------------------------------------------------------------


@cache
def args_types(package: str, version: Version) -> dict[str, Struct]:
    """The args kinds the scheme of kube-scheduler ``version`` registers for ``package`` (v1 or v1beta3), by kind."""
    resource = _struct("ResourceSpec", package, name=STRING, weight=INT64)
    shape = _slice(_struct("UtilizationShapePoint", package, utilization=INT32, score=INT32))
    kinds = {
        "DefaultPreemptionArgs": _struct(
            "DefaultPreemptionArgs",
            package,
            **_type_meta(),
            minCandidateNodesPercentage=Pointer(INT32),
            minCandidateNodesAbsolute=Pointer(INT32),
        ),
        "InterPodAffinityArgs": _struct(
            "InterPodAffinityArgs",
            package,
            **_type_meta(),
            hardPodAffinityWeight=Pointer(INT32),
            ignorePreferredTermsOfExistingPods=BOOL,
        ),
        "NodeResourcesFitArgs": _struct(
            "NodeResourcesFitArgs",
            package,
            **_type_meta(),
            ignoredResources=_slice(STRING),
            ignoredResourceGroups=_slice(STRING),
            scoringStrategy=Pointer(
                _struct(
                    "ScoringStrategy",
                    package,
                    type=Scalar("string", f"{package}.ScoringStrategyType"),
                    resources=_slice(resource),
                    requestedToCapacityRatio=Pointer(_struct("RequestedToCapacityRatioParam", package, shape=shape)),
                )
            ),
        ),
        "PodTopologySpreadArgs": _struct(
            "PodTopologySpreadArgs",
            package,
            **_type_meta(),
            defaultConstraints=_slice(TOPOLOGY_SPREAD_CONSTRAINT),
            defaultingType=Scalar("string", f"{package}.PodTopologySpreadConstraintsDefaulting"),
        ),
        "NodeResourcesBalancedAllocationArgs": _struct(
            "NodeResourcesBalancedAllocationArgs", package, **_type_meta(), resources=_slice(resource)
        ),
        "VolumeBindingArgs": _struct(
            "VolumeBindingArgs", package, **_type_meta(), bindTimeoutSeconds=Pointer(INT64), shape=shape
        ),
        "NodeAffinityArgs": _struct("NodeAffinityArgs", package, **_type_meta(), addedAffinity=Pointer(NODE_AFFINITY)),
    }
    if package == "v1" and version >= DYNAMIC_RESOURCES_ARGS_SINCE:
        kinds["DynamicResourcesArgs"] = _struct(
            "DynamicResourcesArgs", package, **_type_meta(), filterTimeout=Pointer(Duration())
        )
    return kinds


# --- KubeSchedulerConfiguration ---------------------------------------------------------------------------------------


@cache
def configuration_type(api_version: str, version: Version) -> Struct:
    """KubeSchedulerConfiguration of ``api_version`` as kube-scheduler ``version`` decodes it."""
    package = {V1: "v1", V1BETA3: "v1beta3"}[api_version]
    plugin = _struct("Plugin", package, name=STRING, weight=Pointer(INT32))
    plugin_set = _struct("PluginSet", package, enabled=_slice(plugin), disabled=_slice(plugin))
    plugins = _struct("Plugins", package, **dict.fromkeys(PLUGIN_SETS, plugin_set))
    profile_fields: dict[str, GoType | Field] = {
        "schedulerName": Pointer(STRING),
        "plugins": Pointer(plugins),
        "pluginConfig": _slice(_struct("PluginConfig", package, name=STRING, args=Raw())),
    }
    if package == "v1":
        profile_fields["percentageOfNodesToScore"] = Pointer(INT32)
    extender = _struct(
        "Extender",
        package,
        urlPrefix=STRING,
        filterVerb=STRING,
        preemptVerb=STRING,
        prioritizeVerb=STRING,
        weight=INT64,
        bindVerb=STRING,
        enableHTTPS=BOOL,
        tlsConfig=Pointer(
            _struct(
                "ExtenderTLSConfig",
                package,
                insecure=BOOL,
                serverName=STRING,
                certFile=STRING,
                keyFile=STRING,
                caFile=STRING,
                certData=Bytes(),
                keyData=Bytes(),
                caData=Bytes(),
            )
        ),
        httpTimeout=Duration(),
        nodeCacheCapable=BOOL,
        managedResources=_slice(_struct("ExtenderManagedResource", package, name=STRING, ignoredByScheduler=BOOL)),
        ignorable=BOOL,
    )
    top: dict[str, GoType | Field] = {
        **_type_meta(),
        "parallelism": Pointer(INT32),
        "leaderElection": _struct(
            "LeaderElectionConfiguration",
            "v1alpha1",
            leaderElect=Pointer(BOOL),
            leaseDuration=Duration(),
            renewDeadline=Duration(),
            retryPeriod=Duration(),
            resourceLock=STRING,
            resourceName=STRING,
            resourceNamespace=STRING,
        ),
        "clientConnection": _struct(
            "ClientConnectionConfiguration",
            "v1alpha1",
            kubeconfig=STRING,
            acceptContentTypes=STRING,
            contentType=STRING,
            qps=FLOAT32,
            burst=INT32,
        ),
        "enableProfiling": Field(Pointer(BOOL), "DebuggingConfiguration"),
        "enableContentionProfiling": Field(Pointer(BOOL), "DebuggingConfiguration"),
        "percentageOfNodesToScore": Pointer(INT32),
        "podInitialBackoffSeconds": Pointer(INT64),
        "podMaxBackoffSeconds": Pointer(INT64),
        "profiles": _slice(_struct("KubeSchedulerProfile", package, **profile_fields)),
        "extenders": _slice(extender),
    }
    if package == "v1":
        top["delayCacheUntilActive"] = BOOL
    return _struct("KubeSchedulerConfiguration", package, **top)
