"""What kube-scheduler checks when it builds each profile's framework (pkg/scheduler/framework/runtime/framework.go
NewFramework, pkg/scheduler/profile): every plugin exists in this version and implements the extension point it is
enabled at, none is enabled twice there, multiPoint expands without a double registration, exactly one queue sort
and at least one bind plugin remain, the score weights cannot overflow, and each plugin's New() accepts its args.

Errors read as kube-scheduler prints them: ``initializing profiles: creating profile for scheduler name X: ...``.
"""

from __future__ import annotations

from typing import Any

from extender.cli.scheduler_config import registry
from extender.cli.scheduler_config.findings import Finding, refused
from extender.cli.scheduler_config.plugin_args import AT_PLUGIN_BUILD
from extender.cli.scheduler_config.versions import Version

_MAX_NODE_SCORE = 100
_INT64 = 2**63


def build_profiles(config: dict[str, Any], version: Version) -> list[Finding]:
    findings = []
    for index, profile in enumerate(config["profiles"]):
        where = f"initializing profiles: creating profile for scheduler name {profile['schedulerName']}"
        findings += [refused(f"profiles[{index}]", f"{where}: {error}") for error in _framework(profile, version)]
    return findings


def _framework(profile: dict[str, Any], version: Version) -> list[str]:
    plugins = profile["plugins"]
    needed = {plugin["name"] for point in plugins.values() for plugin in point["enabled"]}
    built = {name: points for name in needed if (points := registry.implements(name, version)) is not None}
    errors = _plugin_build_errors(profile, built, version)
    for point, interface in registry.EXTENSION_POINTS.items():
        errors += _point_errors(plugins[point]["enabled"], point, interface, built)
    counts = {point: len(plugins[point]["enabled"]) for point in registry.EXTENSION_POINTS}
    errors += _expand_multi_point(plugins, built, counts)
    if errors:
        return errors  # kube-scheduler stops at the first; what follows reads a framework it never built
    if counts["queueSort"] != 1:
        name = _go_quote(profile["schedulerName"])
        errors.append(
            f"only one queue sort plugin required for profile with scheduler name {name}, but got {counts['queueSort']}"
        )
    if counts["bind"] == 0:
        errors.append(
            f"at least one bind plugin is needed for profile with scheduler name {_go_quote(profile['schedulerName'])}"
        )
    return errors + _score_weight_errors(plugins["score"]["enabled"] + plugins["multiPoint"]["enabled"], built)


def _plugin_build_errors(profile: dict[str, Any], built: dict[str, frozenset[str]], version: Version) -> list[str]:
    """Each enabled in-tree plugin's New() on its args; only NodeResourcesFit's validates anything the file's
    validation did not."""
    errors = []
    for entry in profile["pluginConfig"]:
        validate = AT_PLUGIN_BUILD.get(entry["kind"] or "")
        if entry["name"] in built and validate is not None and entry["args"] is not None:
            errors += [
                f'initializing plugin "{entry["name"]}": {problem.line}'
                for problem in validate("", entry["args"], version)
            ]
    return errors


def _point_errors(
    enabled: list[dict[str, Any]], point: str, interface: str, built: dict[str, frozenset[str]]
) -> list[str]:
    """updatePluginList: the plugins enabled at one extension point."""
    errors, seen = [], set()
    for plugin in enabled:
        name = plugin["name"]
        if name not in built:
            errors.append(f"{interface} {_go_quote(name)} does not exist")
        elif point not in built[name]:
            errors.append(f"plugin {_go_quote(name)} does not extend {interface} plugin")
        elif name in seen:
            errors.append(f"plugin {_go_quote(name)} already registered as {_go_quote(interface)}")
        seen.add(name)
    return errors


def _expand_multi_point(plugins: dict[str, Any], built: dict[str, frozenset[str]], counts: dict[str, int]) -> list[str]:
    """expandMultiPointPlugins: each multiPoint plugin joins every extension point it implements, unless the point
    disables it (or "*") or enables it itself; ``counts`` grows by what joins."""
    multi = plugins["multiPoint"]["enabled"]
    if not multi:
        return []
    errors: list[str] = []
    for point, interface in registry.EXTENSION_POINTS.items():
        disabled = {plugin["name"] for plugin in plugins[point]["disabled"]}
        if "*" in disabled:
            continue
        explicit = {plugin["name"] for plugin in plugins[point]["enabled"]}
        joined: set[str] = set()
        for plugin in multi:
            name = plugin["name"]
            if name not in built:
                errors.append(f"{interface} {_go_quote(name)} does not exist")
                break
            if point not in built[name] or name in disabled or name in explicit:
                continue
            if name in joined:
                errors.append(f"plugin {_go_quote(name)} already registered as {_go_quote(interface)}")
                break
            joined.add(name)
        counts[point] += len(joined)
        if errors:
            break
    return errors


def _score_weight_errors(plugins: list[dict[str, Any]], built: dict[str, frozenset[str]]) -> list[str]:
    """getScoreWeights: a weight of 0 counts as 1, and the sum of weight x 100 must fit an int64, computed in Go's
    wrapping int64 arithmetic (so one negative weight followed by any score plugin overflows)."""
    total = 0
    weights: dict[str, int] = {}
    for plugin in plugins:
        name = plugin["name"]
        if "score" not in built.get(name, frozenset()) or name in weights:
            continue
        weights[name] = plugin["weight"] or 1
        if weights[name] * _MAX_NODE_SCORE > _wrap(_INT64 - 1 - total):
            return ["total score of Score plugins could overflow"]
        total = _wrap(total + weights[name] * _MAX_NODE_SCORE)
    return []


def _wrap(value: int) -> int:
    return (value + _INT64) % (2 * _INT64) - _INT64


def _go_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
