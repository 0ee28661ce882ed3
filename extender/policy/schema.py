"""The policy file format, modelled on KubeSchedulerConfiguration's profiles.

Validation happens once, when the function starts: every problem is reported
with its exact field path so that a broken policy never reaches production.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import replace
from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Equal, Length, OneOf, Range, Regexp

from extender.framework import registry
from extender.framework.plugin import FilterPlugin, Plugin, PreemptPlugin, ScorePlugin
from extender.framework.profile import Profile, ScorePluginEntry
from extender.framework.types import Facts, VictimFacts
from extender.nodesource.schema import NodeSourceSchema, NodeSourceSpec
from extender.wire.errors import flatten_errors

API_VERSION = "extender.scheduling.gcf/v1alpha1"
KIND = "ExtenderPolicy"
DEFAULT_PROFILE = "default"

# Extension point in the file -> the interface an enabled plugin must implement.
EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "filter": FilterPlugin,
    "score": ScorePlugin,
    "preempt": PreemptPlugin,
}

# A profile name is a URL path segment.
_PROFILE_NAME = Regexp(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", error="must be a DNS label (lowercase letters, digits, '-')")
_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class StrictSchema(Schema):
    class Meta:
        unknown = RAISE


class PluginRefSchema(StrictSchema):
    name = fields.String(required=True, validate=Length(min=1))
    weight = fields.Integer(strict=True, validate=Range(min=1, max=100))


class ExtensionPointSchema(StrictSchema):
    enabled = fields.List(fields.Nested(PluginRefSchema))


class PluginsSchema(StrictSchema):
    filter = fields.Nested(ExtensionPointSchema)
    score = fields.Nested(ExtensionPointSchema)
    preempt = fields.Nested(ExtensionPointSchema)


class PluginConfigSchema(StrictSchema):
    name = fields.String(required=True, validate=Length(min=1))
    args = fields.Dict(keys=fields.String(), load_default=dict)


class ProfileSchema(StrictSchema):
    name = fields.String(required=True, validate=_PROFILE_NAME)
    plugins = fields.Nested(PluginsSchema)
    pluginConfig = fields.List(fields.Nested(PluginConfigSchema), load_default=list)

    @validates_schema
    def plugins_exist_and_args_fit(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, Any] = {}
        enabled: set[str] = set()
        for point, interface in EXTENSION_POINTS.items():
            seen: set[str] = set()
            for index, ref in enumerate(_enabled(data, point)):
                problem = _check_plugin_ref(point, interface, ref, seen)
                if problem:
                    errors.setdefault("plugins", {}).setdefault(point, {}).setdefault("enabled", {})[index] = problem
                seen.add(ref["name"])
            enabled |= seen
        configured: set[str] = set()
        for index, config in enumerate(data["pluginConfig"]):
            problem = _check_plugin_config(config, enabled, configured)
            if problem:
                errors.setdefault("pluginConfig", {})[index] = problem
            configured.add(config["name"])
        for point, index, ref in _enabled_refs(data):
            problem = _check_default_args(ref["name"], configured)
            if problem:
                where = errors.setdefault("plugins", {}).setdefault(point, {}).setdefault("enabled", {})
                where.setdefault(index, problem)
            configured.add(ref["name"])  # report a plugin enabled at several points once
        if errors:
            raise ValidationError(errors)


def _enabled(profile: dict[str, Any], point: str) -> list[dict[str, Any]]:
    return profile.get("plugins", {}).get(point, {}).get("enabled", [])


def _enabled_refs(profile: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(extension point, index, plugin ref) for every enabled plugin, in file order."""
    return [(point, index, ref) for point in EXTENSION_POINTS for index, ref in enumerate(_enabled(profile, point))]


def _check_plugin_ref(point: str, interface: type[Plugin], ref: dict[str, Any], seen: set[str]) -> dict[str, list[str]]:
    name = ref["name"]
    plugin = registry.lookup(name)
    if plugin is None:
        return {"name": [f"unknown plugin {name!r}; known plugins: {', '.join(registry.names())}"]}
    if not issubclass(plugin, interface):
        return {"name": [f"plugin {name} does not implement the {point} extension point"]}
    if name in seen:
        return {"name": [f"plugin {name} is enabled twice"]}
    if point == "score" and "weight" not in ref:
        return {"weight": ["score plugins need a weight (1..100)"]}
    if point != "score" and "weight" in ref:
        return {"weight": ["only score plugins take a weight"]}
    return {}


def _check_plugin_config(config: dict[str, Any], enabled: set[str], configured: set[str]) -> dict[str, Any]:
    name = config["name"]
    if name not in enabled:
        return {"name": [f"plugin {name} is not enabled in this profile"]}
    if name in configured:
        return {"name": [f"plugin {name} is configured twice"]}
    plugin = registry.lookup(name)
    assert plugin is not None  # enabled plugins exist, checked above
    try:
        config["args"] = _load_args(plugin, config["args"])
    except ValidationError as exc:
        return {"args": exc.messages}
    return {}


def _check_default_args(name: str, configured: set[str]) -> dict[str, list[str]]:
    """A plugin enabled without a pluginConfig entry runs on its default args: they must be complete."""
    plugin = registry.lookup(name)
    if plugin is None or name in configured:
        return {}
    try:
        _load_args(plugin, {})
    except ValidationError as exc:
        missing = "; ".join(flatten_errors(exc.messages, "args"))
        return {"name": [f"plugin {name} needs a pluginConfig entry in this profile ({missing})"]}
    return {}


def _load_args(plugin: type[Plugin], args: dict[str, Any]) -> Any:
    if plugin.args_schema is None:
        if args:
            raise ValidationError(f"plugin {plugin.name} takes no args")
        return {}
    return plugin.args_schema().load(args)


class PluginModule(fields.String):
    """A Python module imported for its side effect: registering plugins with ``extender.framework.registry``."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        name = super()._deserialize(value, attr, data, **kwargs)
        if not _MODULE_NAME.match(name):
            raise ValidationError(f"{name!r} is not a Python module name such as acme_plugins or acme.scheduling")
        try:
            importlib.import_module(name)
        except Exception as exc:  # whatever the module does wrong must become a message, not a traceback
            raise ValidationError(f"cannot import {name!r}: {type(exc).__name__}: {exc}") from None
        return name


class PolicySchema(StrictSchema):
    apiVersion = fields.String(load_default=API_VERSION, validate=Equal(API_VERSION))
    kind = fields.String(load_default=KIND, validate=Equal(KIND))
    # What to do when a plugin needs node facts nobody could supply: Fail the request, or Ignore the plugin.
    failurePolicy = fields.String(load_default="Fail", validate=OneOf(["Fail", "Ignore"]))
    # The scheduler's extenders[].nodeCacheCapable. Only an explicit false promises full nodes (and victim pods)
    # in every request; otherwise plugins that read more than node names need a nodeSource.
    nodeCacheCapable = fields.Boolean(truthy={True}, falsy={False})
    # Declared before profiles: marshmallow loads fields in declaration order, and the profiles look up the
    # plugins these modules register.
    pluginModules = fields.List(PluginModule(), load_default=list)
    # Where node-name requests get node facts (and which failurePolicy applies when it cannot answer).
    nodeSource = fields.Nested(NodeSourceSchema)
    profiles = fields.List(fields.Nested(ProfileSchema), required=True, validate=Length(min=1))

    @validates_schema
    def unique_profiles(self, data: dict[str, Any], **kwargs: Any) -> None:
        seen: set[str] = set()
        for index, profile in enumerate(data["profiles"]):
            if profile["name"] in seen:
                raise ValidationError({"profiles": {index: {"name": [f"duplicate profile name {profile['name']!r}"]}}})
            seen.add(profile["name"])

    @validates_schema
    def facts_available(self, data: dict[str, Any], **kwargs: Any) -> None:
        """Fail at start-up, not per request, when a plugin needs facts that node-name requests cannot supply."""
        if data.get("nodeCacheCapable") is False:
            return
        source = data.get("nodeSource")
        errors: dict[str, Any] = {}
        for profile_index, profile in enumerate(data["profiles"]):
            for point, index, ref in _enabled_refs(profile):
                problem = _facts_problem(ref["name"], source)
                if problem:
                    where = errors.setdefault(profile_index, {}).setdefault("plugins", {}).setdefault(point, {})
                    where.setdefault("enabled", {})[index] = {"name": [problem]}
        if errors:
            raise ValidationError({"profiles": errors})

    @post_load
    def make_policy(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """``profiles`` (name -> Profile) and ``node_source`` (a NodeSourceSpec, built once the environment is read)."""
        fail_open = data["failurePolicy"] == "Ignore"
        return {
            "profiles": {profile["name"]: _build_profile(profile, fail_open) for profile in data["profiles"]},
            "node_source": replace(data.get("nodeSource") or NodeSourceSpec(), fail_open=fail_open),
        }


def _facts_problem(name: str, source: NodeSourceSpec | None) -> str:
    plugin = registry.lookup(name)
    assert plugin is not None  # enabled plugins exist, checked per profile
    full_nodes = "or set nodeCacheCapable: false if the scheduler sends full nodes"
    if plugin.facts > Facts.NAME and source is None:
        return (
            f"plugin {name} reads node labels, which node-name requests (nodeCacheCapable: true) do not carry: "
            f"configure a nodeSource, {full_nodes}"
        )
    victims_known = source is not None and source.kind == "kubernetes"  # its API client looks victims up
    if issubclass(plugin, PreemptPlugin) and plugin.victim_facts > VictimFacts.UID and not victims_known:
        return (
            f"plugin {name} reads victim pods, which node-name preempt requests (nodeCacheCapable: true) name by UID "
            f"only: configure the kubernetes nodeSource to look them up, {full_nodes}"
        )
    return ""


def _build_profile(data: dict[str, Any], fail_open: bool) -> Profile:
    args = {config["name"]: config["args"] for config in data["pluginConfig"]}
    instances: dict[str, Plugin] = {}

    def instance(name: str) -> Any:
        # One instance per plugin per profile, shared by the extension points it is enabled at.
        if name not in instances:
            plugin = registry.lookup(name)
            assert plugin is not None
            instances[name] = plugin(args.get(name) or _load_args(plugin, {}))
        return instances[name]

    return Profile(
        name=data["name"],
        filters=[instance(ref["name"]) for ref in _enabled(data, "filter")],
        scores=[ScorePluginEntry(instance(ref["name"]), ref["weight"]) for ref in _enabled(data, "score")],
        preempts=[instance(ref["name"]) for ref in _enabled(data, "preempt")],
        fail_open=fail_open,
    )
