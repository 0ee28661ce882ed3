"""ValidateKubeSchedulerConfiguration (pkg/scheduler/apis/config/validation/validation.go and component-base's
leader election and client connection rules), on the defaulted configuration."""

from __future__ import annotations

import json
from typing import Any

from extender.cli.scheduler_config import fielderrors as fe
from extender.cli.scheduler_config import registry
from extender.cli.scheduler_config.findings import Finding, refused
from extender.cli.scheduler_config.names import is_extended_resource_name, qualified_name_errors
from extender.cli.scheduler_config.plugin_args import AT_VALIDATION
from extender.cli.scheduler_config.registry import PLUGIN_SETS
from extender.cli.scheduler_config.versions import Version

_JITTER_FACTOR = 1.2  # client-go's leaderelection.JitterFactor
# queueSort's message as each release words it.
_QUEUE_SORT_WORDING: tuple[tuple[Version, str], ...] = (
    ((1, 35), "must be the same for all profiles"),
    ((1, 31), "queueSort must be the same for all profiles"),
    ((1, 28), "has to match for all profiles"),
)


def validate(config: dict[str, Any], api_version: str, version: Version) -> list[Finding]:
    errors = _client_connection(config["clientConnection"], version) + _leader_election(
        config["leaderElection"], version
    )
    if config["parallelism"] <= 0:
        errors.append(
            fe.invalid("parallelism", config["parallelism"], "should be an integer value greater than zero", version)
        )
    seen: dict[str, int] = {}
    for index, profile in enumerate(config["profiles"]):
        errors += _profile(f"profiles[{index}]", profile, api_version, version)
        name = profile["schedulerName"]
        if name in seen:
            errors.append(
                fe.duplicate(
                    f"profiles[{index}].schedulerName",
                    fe.GoValue(f"profiles[{seen[name]}].schedulerName", name),
                    version,
                )
            )
        seen[name] = index
    errors += _common_queue_sort(config["profiles"], version)
    errors += _percentage("percentageOfNodesToScore", config["percentageOfNodesToScore"], version)
    if config["podInitialBackoffSeconds"] <= 0:
        errors.append(
            fe.invalid(
                "podInitialBackoffSeconds", config["podInitialBackoffSeconds"], "must be greater than 0", version
            )
        )
    if config["podMaxBackoffSeconds"] < config["podInitialBackoffSeconds"]:
        errors.append(
            fe.invalid(
                "podMaxBackoffSeconds",
                config["podMaxBackoffSeconds"],
                "must be greater than or equal to PodInitialBackoffSeconds",
                version,
            )
        )
    return errors + _extenders(config["extenders"], version)


def _client_connection(client: dict[str, Any], version: Version) -> list[Finding]:
    if client["burst"] < 0:
        return [fe.invalid("clientConnection.burst", client["burst"], "must be non-negative", version)]
    return []


def _leader_election(election: dict[str, Any], version: Version) -> list[Finding]:
    if not election["leaderElect"]:
        return []
    errors = []
    for name in ("leaseDuration", "renewDeadline", "retryPeriod"):
        if election[name] <= 0:
            errors.append(
                fe.invalid(f"leaderElection.{name}", fe.duration(election[name]), "must be greater than zero", version)
            )
    if election["leaseDuration"] <= election["renewDeadline"]:
        if version >= (1, 35):
            errors.append(
                fe.invalid(
                    "leaderElection.leaseDuration",
                    fe.duration(election["renewDeadline"]),
                    "must be greater than `RenewDeadline`",
                    version,
                )
            )
        else:
            errors.append(
                fe.invalid(
                    "leaderElection.leaseDuration",
                    fe.duration(election["renewDeadline"]),
                    "LeaseDuration must be greater than RenewDeadline",
                    version,
                )
            )
    for name in ("resourceLock", "resourceNamespace", "resourceName"):
        if not election[name]:
            errors.append(fe.invalid(f"leaderElection.{name}", "", f"{name} is required", version))
    if election["resourceLock"] != "leases":
        errors.append(
            fe.invalid(
                "leaderElection.resourceLock", election["resourceLock"], 'resourceLock value must be "leases"', version
            )
        )
    if not errors and election["renewDeadline"] <= int(_JITTER_FACTOR * election["retryPeriod"]):
        # Not validation: client-go's NewLeaderElector, when kube-scheduler starts campaigning.
        errors.append(
            refused(
                "leaderElection.renewDeadline",
                "couldn't create leader elector: renewDeadline must be greater than retryPeriod*JitterFactor "
                f"(JitterFactor is {_JITTER_FACTOR})",
            )
        )
    return errors


def _percentage(path: str, value: int | None, version: Version) -> list[Finding]:
    if value is not None and not 0 <= value <= 100:
        return [fe.invalid(path, value, "not in valid range [0-100]", version)]
    return []


def _profile(path: str, profile: dict[str, Any], api_version: str, version: Version) -> list[Finding]:
    errors = []
    if not profile["schedulerName"]:
        errors.append(fe.required(f"{path}.schedulerName"))
    errors += _percentage(f"{path}.percentageOfNodesToScore", profile["percentageOfNodesToScore"], version)
    for point in PLUGIN_SETS:
        if point == "multiPoint":
            continue  # not validated: a removed plugin there fails when the profile is built
        for index, plugin in enumerate(profile["plugins"][point]["enabled"]):
            errors += _invalid_plugin(f"{path}.plugins.{point}.enabled[{index}]", plugin["name"], api_version, version)
    seen: set[str] = set()
    for index, entry in enumerate(profile["pluginConfig"]):
        at = f"{path}.pluginConfig[{index}]"
        if entry["name"] in seen:
            errors.append(fe.duplicate(at, entry["name"], version))
        seen.add(entry["name"])
        invalid = _invalid_plugin(at, entry["name"], api_version, version)
        if invalid:
            errors += invalid
        elif entry["kind"] in AT_VALIDATION and entry["args"] is not None:
            errors += AT_VALIDATION[entry["kind"]](f"{at}.args", entry["args"], version)
    return errors


def _invalid_plugin(path: str, name: str, api_version: str, version: Version) -> list[Finding]:
    since = registry.invalid_in(api_version, name, version)
    if since is None:
        return []
    detail = (
        f"was invalid in version {json.dumps(since)} (KubeSchedulerConfiguration is version {json.dumps(api_version)})"
    )
    return [fe.invalid(path, name, detail, version)]


def _common_queue_sort(profiles: list[dict[str, Any]], version: Version) -> list[Finding]:
    errors = []
    canon = profiles[0]["plugins"]["queueSort"]
    enabled = canon["enabled"]
    if len(enabled) > 1:
        errors.append(
            fe.invalid(
                "profiles[0].plugins.queueSort.Enabled",
                len(enabled),
                "only one queue sort plugin can be enabled",
                version,
            )
        )
    name = enabled[0]["name"] if enabled else ""
    canon_args = None
    for entry in profiles[0]["pluginConfig"]:
        if name and entry["name"] == name:
            canon_args = args_of(entry)
    wording = next(text for since, text in _QUEUE_SORT_WORDING if version >= since)
    for index in range(1, len(profiles)):
        current = profiles[index]["plugins"]["queueSort"]
        if current != canon:
            errors.append(fe.invalid(f"profiles[{index}].plugins.queueSort", _plugin_set(current), wording, version))
        for entry in profiles[index]["pluginConfig"]:
            if entry["name"] == name and args_of(entry) != canon_args:
                errors.append(
                    fe.invalid(
                        f"profiles[{index}].pluginConfig.args",
                        fe.GoValue("...", args_of(entry)),
                        "queueSort must be the same for all profiles",
                        version,
                    )
                )
    return errors


def args_of(entry: dict[str, Any]) -> Any:
    """A pluginConfig entry's args as kube-scheduler compares them: decoded for in-tree kinds, else as written."""
    return entry["args"] if entry["kind"] else entry["raw"]


def _plugin_set(plugins: dict[str, list[dict[str, Any]]]) -> fe.GoValue:
    """A PluginSet as %#v and as JSON print it."""

    def go(entries: list[dict[str, Any]]) -> str:
        if not entries:
            return "[]config.Plugin(nil)"
        inner = ", ".join(f"config.Plugin{{Name:{json.dumps(p['name'])}, Weight:{p['weight']}}}" for p in entries)
        return f"[]config.Plugin{{{inner}}}"

    def as_json(entries: list[dict[str, Any]]) -> Any:
        return [{"Name": p["name"], "Weight": p["weight"]} for p in entries] or None

    return fe.GoValue(
        f"config.PluginSet{{Enabled:{go(plugins['enabled'])}, Disabled:{go(plugins['disabled'])}}}",
        {"Enabled": as_json(plugins["enabled"]), "Disabled": as_json(plugins["disabled"])},
    )


def _extenders(extenders: list[dict[str, Any]], version: Version) -> list[Finding]:
    errors = []
    binders = 0
    names: set[str] = set()
    for index, extender in enumerate(extenders):
        path = f"extenders[{index}]"
        if extender["prioritizeVerb"] and extender["weight"] <= 0:
            errors.append(
                fe.invalid(f"{path}.weight", extender["weight"], "must have a positive weight applied to it", version)
            )
        if extender["bindVerb"]:
            binders += 1
        for position, resource in enumerate(extender["managedResources"]):
            at = f"{path}.managedResources[{position}].name"
            name = resource["name"]
            messages = qualified_name_errors(name, version)
            errors += [fe.invalid(at, fe.bare_string(name), message, version) for message in messages]
            if not messages and not is_extended_resource_name(name, version):
                errors.append(fe.invalid(at, name, "is an invalid extended resource name", version))
            if name in names:
                errors.append(fe.invalid(at, name, "duplicate extender managed resource name", version))
            names.add(name)
    if binders > 1:
        errors.append(
            fe.invalid(
                "extenders",
                f"found {binders} extenders implementing bind",
                "only one extender can implement bind",
                version,
            )
        )
    return errors
