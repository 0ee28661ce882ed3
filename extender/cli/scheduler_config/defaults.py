"""kube-scheduler's defaulting of a decoded configuration (pkg/scheduler/apis/config/v1/defaults.go and
default_plugins.go), which runs before any validation: the validation rules see the defaulted values.

So ``leaseDuration: 0s`` becomes 15s and passes; a single profile without ``schedulerName`` is
``default-scheduler`` but a second one stays nameless; ``podInitialBackoffSeconds: 20`` alone meets the default
``podMaxBackoffSeconds`` of 10; a ``resources`` weight of 0 is 1; ``defaultConstraints`` without a
``defaultingType`` are under ``System`` defaulting. Each profile's plugins are the version's defaults merged with
the profile's (mergePluginSet), and every enabled plugin with args kind gets default args when it has none.
"""

from __future__ import annotations

import copy
from typing import Any

from extender.cli.scheduler_config import registry
from extender.cli.scheduler_config.godecode import zero
from extender.cli.scheduler_config.loading import Loaded
from extender.cli.scheduler_config.registry import PLUGIN_SETS
from extender.cli.scheduler_config.types import args_types
from extender.cli.scheduler_config.versions import Version

SECOND = 10**9
_DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]


def defaulted(loaded: Loaded, version: Version) -> dict[str, Any]:
    """The configuration kube-scheduler ``version`` validates: ``loaded`` with its defaults, plugin weights and
    names as internal types hold them (a missing weight is 0, a missing name "")."""
    assert loaded.config is not None
    config = copy.deepcopy(loaded.config)
    config["parallelism"] = _or(config["parallelism"], 16)
    profiles = config["profiles"] or [
        {"schedulerName": None, "percentageOfNodesToScore": None, "plugins": None, "pluginConfig": []}
    ]
    if len(profiles) == 1 and profiles[0]["schedulerName"] is None:
        profiles[0]["schedulerName"] = "default-scheduler"
    config["profiles"] = [_profile(profile, index, loaded, version) for index, profile in enumerate(profiles)]
    config["percentageOfNodesToScore"] = _or(config["percentageOfNodesToScore"], 0)
    election = config["leaderElection"]
    election["resourceLock"] = election["resourceLock"] or "leases"
    election["resourceNamespace"] = election["resourceNamespace"] or "kube-system"
    election["resourceName"] = election["resourceName"] or "kube-scheduler"
    election["leaseDuration"] = election["leaseDuration"] or 15 * SECOND
    election["renewDeadline"] = election["renewDeadline"] or 10 * SECOND
    election["retryPeriod"] = election["retryPeriod"] or 2 * SECOND
    election["leaderElect"] = _or(election["leaderElect"], True)
    client = config["clientConnection"]
    client["contentType"] = client["contentType"] or "application/vnd.kubernetes.protobuf"
    client["qps"] = client["qps"] or 50.0
    client["burst"] = client["burst"] or 100
    config["podInitialBackoffSeconds"] = _or(config["podInitialBackoffSeconds"], 1)
    config["podMaxBackoffSeconds"] = _or(config["podMaxBackoffSeconds"], 10)
    return config


def _or(value: Any, default: Any) -> Any:
    """A pointer's value, or its default when nil."""
    return default if value is None else value


def _profile(profile: dict[str, Any], index: int, loaded: Loaded, version: Version) -> dict[str, Any]:
    """A profile with its plugins merged into the defaults and default args for each enabled plugin without any.
    Each pluginConfig entry keeps its args kind (None for plugins without registered args) and its args as
    written, which kube-scheduler compares across profiles for the queue sort plugin."""
    plugins = merge_plugins(version, profile["plugins"])
    kinds = args_types(loaded.api_version.rpartition("/")[2], version)
    configs = []
    for entry_index, entry in enumerate(profile["pluginConfig"]):
        args = loaded.args.get((index, entry_index))
        value = default_args(args.kind, copy.deepcopy(args.value)) if args and args.value is not None else None
        configs.append(
            {"name": entry["name"], "kind": args.kind if args else None, "args": value, "raw": entry["args"]}
        )
    named = {entry["name"] for entry in configs}
    for name in enabled_names(plugins):
        kind = f"{name}Args"
        if name not in named and kind in kinds:
            configs.append({"name": name, "kind": kind, "args": default_args(kind, zero(kinds[kind])), "raw": None})
    return {
        "schedulerName": profile["schedulerName"] or "",
        "percentageOfNodesToScore": profile.get("percentageOfNodesToScore"),
        "plugins": plugins,
        "pluginConfig": configs,
    }


def merge_plugins(version: Version, custom: dict[str, Any] | None) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """mergePlugins of the version's defaults and a profile's ``plugins`` (None: the defaults alone); weights as
    internal int32 (nil is 0), disabled entries by name only."""
    defaults: dict[str, dict[str, list[dict[str, Any]]]] = {
        point: {"enabled": [], "disabled": []} for point in PLUGIN_SETS
    }
    defaults["multiPoint"]["enabled"] = [
        {"name": name, "weight": weight or 0} for name, weight in registry.default_plugins(version)
    ]
    if custom is None:
        return defaults
    return {point: _merge_set(defaults[point], custom[point]) for point in PLUGIN_SETS}


def _merge_set(default: dict[str, list[dict[str, Any]]], custom: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """mergePluginSet: defaults not disabled (all of them with "*") stay in place, a custom entry of the same name
    replacing one; the other custom entries follow, repeats included (the framework refuses those)."""
    custom_enabled = [{"name": plugin["name"], "weight": plugin["weight"] or 0} for plugin in custom["enabled"]]
    disabled = [{"name": plugin["name"], "weight": 0} for plugin in custom["disabled"]] + default["disabled"]
    disabled_names = {plugin["name"] for plugin in disabled}
    by_name = {plugin["name"]: index for index, plugin in enumerate(custom_enabled)}
    replaced: set[int] = set()
    enabled = []
    if "*" not in disabled_names:
        for plugin in default["enabled"]:
            if plugin["name"] in disabled_names:
                continue
            if plugin["name"] in by_name:
                replaced.add(by_name[plugin["name"]])
                plugin = custom_enabled[by_name[plugin["name"]]]
            enabled.append(plugin)
    enabled += [plugin for index, plugin in enumerate(custom_enabled) if index not in replaced]
    return {"enabled": enabled, "disabled": disabled}


def enabled_names(plugins: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """pluginsNames: every plugin enabled at some extension point, multiPoint included, sorted."""
    return sorted({plugin["name"] for point in PLUGIN_SETS for plugin in plugins[point]["enabled"]})


def default_args(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    """SetDefaults_<kind> on decoded args (an empty dict for args not written)."""
    if kind == "DefaultPreemptionArgs":
        args["minCandidateNodesPercentage"] = _or(args.get("minCandidateNodesPercentage"), 10)
        args["minCandidateNodesAbsolute"] = _or(args.get("minCandidateNodesAbsolute"), 100)
    elif kind == "InterPodAffinityArgs":
        args["hardPodAffinityWeight"] = _or(args.get("hardPodAffinityWeight"), 1)
    elif kind == "VolumeBindingArgs":
        args["bindTimeoutSeconds"] = _or(args.get("bindTimeoutSeconds"), 600)
    elif kind == "NodeResourcesBalancedAllocationArgs":
        args["resources"] = _resources(args.get("resources"))
    elif kind == "PodTopologySpreadArgs":
        args["defaultingType"] = args.get("defaultingType") or "System"
    elif kind == "NodeResourcesFitArgs":
        strategy = args.get("scoringStrategy")
        if strategy is None:
            strategy = {"type": "LeastAllocated", "resources": [], "requestedToCapacityRatio": None}
        strategy["resources"] = _resources(strategy.get("resources"))
        args["scoringStrategy"] = strategy
    return args


def _resources(resources: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if not resources:
        return copy.deepcopy(_DEFAULT_RESOURCES)
    return [{**resource, "weight": resource["weight"] or 1} for resource in resources]
