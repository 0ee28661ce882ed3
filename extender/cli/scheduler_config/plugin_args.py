"""Each in-tree plugin's args validation (pkg/scheduler/apis/config/validation/validation_pluginargs.go), on the
defaulted args.

kube-scheduler runs these for every ``pluginConfig`` entry when it validates the file, enabled plugin or not, except
NodeResourcesFit's: a bug in validation.go registers them under "NodeResourcesFitArgs", so they are checked only when
the plugin is built (``initializing plugin "NodeResourcesFit": ...``), that is, when the profile enables it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extender.cli.scheduler_config import fielderrors as fe
from extender.cli.scheduler_config.findings import Finding
from extender.cli.scheduler_config.names import label_value_errors, qualified_name_errors
from extender.cli.scheduler_config.versions import Version

Validator = Callable[[str, dict[str, Any], Version], list[Finding]]
_MAX_CUSTOM_PRIORITY_SCORE = 10
_SCORING_STRATEGIES = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def default_preemption(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    percentage, absolute = args["minCandidateNodesPercentage"], args["minCandidateNodesAbsolute"]
    percentage_path, absolute_path = (
        _child(path, "minCandidateNodesPercentage"),
        _child(path, "minCandidateNodesAbsolute"),
    )
    errors = []
    if not 0 <= percentage <= 100:
        errors.append(fe.invalid(percentage_path, percentage, "not in valid range [0, 100]", version))
    if absolute < 0:
        errors.append(fe.invalid(absolute_path, absolute, "not in valid range [0, inf)", version))
    if percentage == 0 and absolute == 0:
        errors += [
            fe.invalid(percentage_path, 0, "cannot be zero at the same time as minCandidateNodesAbsolute", version),
            fe.invalid(absolute_path, 0, "cannot be zero at the same time as minCandidateNodesPercentage", version),
        ]
    return errors


def inter_pod_affinity(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    weight = args["hardPodAffinityWeight"]
    if not 0 <= weight <= 100:
        return [fe.invalid(_child(path, "hardPodAffinityWeight"), weight, "not in valid range [0, 100]", version)]
    return []


def pod_topology_spread(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    errors = []
    defaulting, constraints = args["defaultingType"], args.get("defaultConstraints") or []
    if defaulting not in ("System", "List"):
        errors.append(fe.not_supported(_child(path, "defaultingType"), defaulting, ["System", "List"], version))
    elif defaulting == "System" and constraints:
        errors.append(
            fe.invalid(_child(path, "defaultingType"), defaulting, "when .defaultConstraints are not empty", version)
        )
    seen: list[tuple[str, str]] = []
    for index, constraint in enumerate(constraints):
        at = f"{_child(path, 'defaultConstraints')}[{index}]"
        if constraint["maxSkew"] <= 0:
            errors.append(fe.invalid(f"{at}.maxSkew", constraint["maxSkew"], "not in valid range (0, inf)", version))
        key = constraint["topologyKey"]
        if not key:
            errors.append(fe.required(f"{at}.topologyKey", "can not be empty"))
        else:
            errors += [
                fe.invalid(f"{at}.topologyKey", key, message, version)
                for message in qualified_name_errors(key, version)
            ]
        action = constraint["whenUnsatisfiable"]
        if not action:
            errors.append(fe.required(f"{at}.whenUnsatisfiable", "can not be empty"))
        elif action not in ("DoNotSchedule", "ScheduleAnyway"):
            errors.append(
                fe.not_supported(f"{at}.whenUnsatisfiable", action, ["DoNotSchedule", "ScheduleAnyway"], version)
            )
        if constraint["labelSelector"] is not None:
            errors.append(
                fe.forbidden(
                    f"{at}.labelSelector", "constraint must not define a selector, as they deduced for each pod"
                )
            )
        if (key, action) in seen:
            errors.append(fe.duplicate(at, f"{{{key}, {action}}}", version))
        seen.append((key, action))
    return errors


def balanced_allocation(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    errors = []
    seen = set()
    for index, resource in enumerate(args["resources"]):
        at = f"{_child(path, 'resources')}[{index}]"
        if resource["name"] in seen:
            errors.append(fe.duplicate(f"{at}.name", resource["name"], version))
        seen.add(resource["name"])
        if resource["weight"] != 1:
            errors.append(fe.invalid(f"{at}.weight", resource["weight"], "must be 1", version))
    return errors


def node_affinity(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    affinity = args["addedAffinity"]
    if affinity is None:
        return []
    base = _child(path, "addedAffinity")
    errors = []
    required = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
    if required is not None:
        terms_path = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        for index, term in enumerate(required["nodeSelectorTerms"]):
            errors += _selector_term(f"{terms_path}[{index}]", term, version)
    for index, preferred in enumerate(affinity["preferredDuringSchedulingIgnoredDuringExecution"]):
        if preferred["weight"] == 0:
            continue
        at = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{index}].preference"
        errors += _selector_term(at, preferred["preference"], version)
    return errors


def _selector_term(path: str, term: dict[str, Any], version: Version) -> list[Finding]:
    """component-helpers' nodeaffinity.newNodeSelectorTerm: each requirement as labels.NewRequirement reads it."""
    errors = []
    for index, requirement in enumerate(term["matchExpressions"]):
        at = f"{path}.matchExpressions[{index}]"
        operator, values, key = requirement["operator"], requirement["values"], requirement["key"]
        operators = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
        if operator not in operators:
            errors.append(fe.not_supported(f"{at}.operator", operator, operators, version))
            continue
        errors += [
            fe.invalid(f"{at}.key", key, "; ".join(messages), version)
            for messages in [qualified_name_errors(key, version)]
            if messages
        ]
        if operator in ("In", "NotIn") and not values:
            errors.append(
                fe.invalid(
                    f"{at}.values",
                    fe.strings(values),
                    "for 'in', 'notin' operators, values set can't be empty",
                    version,
                )
            )
        if operator in ("Exists", "DoesNotExist") and values:
            errors.append(
                fe.invalid(
                    f"{at}.values",
                    fe.strings(values),
                    "values set must be empty for exists and does not exist",
                    version,
                )
            )
        if operator in ("Gt", "Lt"):
            if len(values) != 1:
                errors.append(
                    fe.invalid(
                        f"{at}.values",
                        fe.strings(values),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                        version,
                    )
                )
            for value_index, value in enumerate(values):
                if not _is_int64(value):
                    errors.append(
                        fe.invalid(
                            f"{at}.values[{value_index}]",
                            value,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                            version,
                        )
                    )
        for value_index, value in enumerate(values):
            messages = label_value_errors(value, version)
            if messages:
                errors.append(fe.invalid(f"{at}.values[{value_index}][{key}]", value, "; ".join(messages), version))
    for index, requirement in enumerate(term["matchFields"]):
        at = f"{path}.matchFields[{index}]"
        if requirement["operator"] not in ("In", "NotIn"):
            errors.append(fe.not_supported(f"{at}.operator", requirement["operator"], ["In", "NotIn"], version))
        elif len(requirement["values"]) != 1:
            errors.append(
                fe.invalid(f"{at}.values", fe.strings(requirement["values"]), "must have one element", version)
            )
    return errors


def _is_int64(text: str) -> bool:
    digits = text[1:] if text[:1] in "+-" else text
    return digits.isascii() and digits.isdigit() and -(2**63) <= int(text) < 2**63


def volume_binding(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    errors = []
    if args["bindTimeoutSeconds"] < 0:
        errors.append(
            fe.invalid(
                _child(path, "bindTimeoutSeconds"),
                args["bindTimeoutSeconds"],
                "invalid BindTimeoutSeconds, should not be a negative value",
                version,
            )
        )
    if args.get("shape"):
        gate = "StorageCapacityScoring" if version >= (1, 33) else "VolumeCapacityPriority"
        errors.append(
            fe.invalid(
                _child(path, "shape"),
                fe.GoValue("[]config.UtilizationShapePoint{...}", args["shape"]),
                f"unexpected field `shape`, remove it or turn on the feature gate {gate}",
                version,
            )
        )
    return errors


def node_resources_fit(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    errors = []
    for index, name in enumerate(args.get("ignoredResources") or []):
        errors += [
            fe.invalid(f"{_child(path, 'ignoredResources')}[{index}]", name, message, version)
            for message in qualified_name_errors(name, version)
        ]
    for index, group in enumerate(args.get("ignoredResourceGroups") or []):
        at = f"{_child(path, 'ignoredResourceGroups')}[{index}]"
        if "/" in group:
            errors.append(fe.invalid(at, group, "resource group name can't contain '/'", version))
        errors += [fe.invalid(at, group, message, version) for message in qualified_name_errors(group, version)]
    strategy = args["scoringStrategy"]
    at = _child(path, "scoringStrategy")
    if strategy["type"] not in _SCORING_STRATEGIES:
        errors.append(fe.not_supported(f"{at}.type", strategy["type"], _SCORING_STRATEGIES, version))
    for index, resource in enumerate(strategy["resources"]):
        if not 0 < resource["weight"] <= 100:
            errors.append(
                fe.invalid(
                    f"{at}.resources[{index}].weight",
                    resource["weight"],
                    f"resource weight of {resource['name']} not in valid range (0, 100]",
                    version,
                )
            )
    ratio = strategy.get("requestedToCapacityRatio")
    if strategy["type"] == "RequestedToCapacityRatio":
        if ratio is None:
            errors.append(
                fe.required(f"{at}.requestedToCapacityRatio", "must be specified when type is RequestedToCapacityRatio")
            )
        else:
            errors += _function_shape(f"{at}.requestedToCapacityRatio.shape", ratio["shape"], version)
    elif ratio is not None:
        errors.append(
            fe.forbidden(f"{at}.requestedToCapacityRatio", "must be nil when type is not RequestedToCapacityRatio")
        )
    return errors


def _function_shape(path: str, shape: list[dict[str, Any]], version: Version) -> list[Finding]:
    if not shape:
        return [fe.required(path, "at least one point must be specified")]
    errors = []
    for index in range(1, len(shape)):
        if shape[index - 1]["utilization"] >= shape[index]["utilization"]:
            errors.append(
                fe.invalid(
                    f"{path}[{index}].utilization",
                    shape[index]["utilization"],
                    "values must be sorted in increasing order",
                    version,
                )
            )
            break
    for index, point in enumerate(shape):
        if not 0 <= point["utilization"] <= 100:
            errors.append(
                fe.invalid(f"{path}[{index}].utilization", point["utilization"], "not in valid range [0, 100]", version)
            )
        if not 0 <= point["score"] <= _MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(
                fe.invalid(
                    f"{path}[{index}].score",
                    point["score"],
                    f"not in valid range [0, {_MAX_CUSTOM_PRIORITY_SCORE}]",
                    version,
                )
            )
    return errors


def dynamic_resources(path: str, args: dict[str, Any], version: Version) -> list[Finding]:
    timeout = args.get("filterTimeout")
    if timeout is not None and timeout < 0:
        return [fe.invalid(_child(path, "filterTimeout"), fe.duration(timeout), "must be zero or positive", version)]
    return []


# validatePluginConfig's table: the args kinds validated with the file (NodeResourcesFit's is not, see above).
AT_VALIDATION: dict[str, Validator] = {
    "DefaultPreemptionArgs": default_preemption,
    "InterPodAffinityArgs": inter_pod_affinity,
    "NodeAffinityArgs": node_affinity,
    "NodeResourcesBalancedAllocationArgs": balanced_allocation,
    "PodTopologySpreadArgs": pod_topology_spread,
    "VolumeBindingArgs": volume_binding,
    "DynamicResourcesArgs": dynamic_resources,
}
# What each plugin's New() validates again when the profile builds it; only NodeResourcesFit adds anything.
AT_PLUGIN_BUILD: dict[str, Validator] = {"NodeResourcesFitArgs": node_resources_fit}
