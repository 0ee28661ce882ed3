"""The policy file format, modelled on KubeSchedulerConfiguration's profiles.

Validation happens once, when the function starts: every problem is reported
with its exact field path so that a broken policy never reaches production.
"""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Equal, Length, OneOf, Range, Regexp

from extender.framework import registry
from extender.framework.plugin import FilterPlugin, Plugin, PreemptPlugin, ScorePlugin
from extender.framework.profile import Profile, ScorePluginEntry

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
        if errors:
            raise ValidationError(errors)


def _enabled(profile: dict[str, Any], point: str) -> list[dict[str, Any]]:
    return profile.get("plugins", {}).get(point, {}).get("enabled", [])


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


def _load_args(plugin: type[Plugin], args: dict[str, Any]) -> Any:
    if plugin.args_schema is None:
        if args:
            raise ValidationError(f"plugin {plugin.name} takes no args")
        return {}
    return plugin.args_schema().load(args)


class PolicySchema(StrictSchema):
    apiVersion = fields.String(load_default=API_VERSION, validate=Equal(API_VERSION))
    kind = fields.String(load_default=KIND, validate=Equal(KIND))
    # What to do when a plugin needs node facts nobody could supply: Fail the request, or Ignore the plugin.
    failurePolicy = fields.String(load_default="Fail", validate=OneOf(["Fail", "Ignore"]))
    profiles = fields.List(fields.Nested(ProfileSchema), required=True, validate=Length(min=1))

    @validates_schema
    def unique_profiles(self, data: dict[str, Any], **kwargs: Any) -> None:
        seen: set[str] = set()
        for index, profile in enumerate(data["profiles"]):
            if profile["name"] in seen:
                raise ValidationError({"profiles": {index: {"name": [f"duplicate profile name {profile['name']!r}"]}}})
            seen.add(profile["name"])

    @post_load
    def make_profiles(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Profile]:
        fail_open = data["failurePolicy"] == "Ignore"
        return {profile["name"]: _build_profile(profile, fail_open) for profile in data["profiles"]}


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
