"""The policy file format, modelled on KubeSchedulerConfiguration's profiles.

Validation happens once, when the function starts: every problem is reported
with its exact field path so that a broken policy never reaches production.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Collection
from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Equal, Length, OneOf, Range, Regexp

from extender.framework import registry
from extender.framework.plugin import FilterPlugin, Plugin, PreemptPlugin, ScorePlugin
from extender.framework.profile import EntryPolicy, Profile, ScorePluginEntry
from extender.framework.types import Facts, VictimFacts
from extender.nodesource.spec import NodeSourceSpec
from extender.protocol import ENTRY_POINT, VERBS
from extender.wire.errors import entries_as_written, flatten_errors, nearest, suggest_fields

API_VERSION = "extender.scheduling.gcf/v1alpha1"
KIND = "ExtenderPolicy"

# Extension point in the file -> the interface an enabled plugin must implement.
EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "filter": FilterPlugin,
    "score": ScorePlugin,
    "preempt": PreemptPlugin,
}

# A profile name is a URL path segment.
_PROFILE_NAME = Regexp(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", error="must be a DNS label (lowercase letters, digits, '-')"
)
# Compiled on first use (re caches it): only a policy that names plugin modules needs it.
_MODULE_NAME = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"


def _not_a_verb(name: str) -> None:
    """A profile name is the URL segment before the verb: one named like a verb shadows a route."""
    if name in VERBS:
        raise ValidationError(f"{name!r} is a verb of the extender's URLs ({', '.join(VERBS)}): choose another name")


class StrictSchema(Schema):
    class Meta:
        unknown = RAISE


FAILURE_POLICIES = ["Fail", "Ignore"]
ENFORCEMENTS = ["Enforce", "Audit"]


class PluginRefSchema(StrictSchema):
    name = fields.String(required=True, validate=Length(min=1))
    weight = fields.Integer(strict=True, validate=Range(min=1, max=100))
    # When this plugin lacks a node's facts; unset: the policy's failurePolicy.
    failurePolicy = fields.String(validate=OneOf(FAILURE_POLICIES))
    # Audit: decide and log, never reject, veto or score.
    enforcement = fields.String(load_default="Enforce", validate=OneOf(ENFORCEMENTS))


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
    name = fields.String(required=True, validate=[_PROFILE_NAME, _not_a_verb])
    plugins = fields.Nested(PluginsSchema)
    pluginConfig = fields.List(fields.Nested(PluginConfigSchema), load_default=list)

    # The checks below read the file as written (``original``), so that they run, and report, even where other
    # fields of the profile have errors: one run of check-policy shows every problem.
    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def plugins_exist_and_args_fit(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        raw = original if isinstance(original, dict) else {}
        errors: dict[str, Any] = {}
        enabled: set[str] = set()
        # An unknown name is reported where it first appears, once: its other entries cannot be checked either.
        unknown: set[str] = set()
        for point, interface in EXTENSION_POINTS.items():
            seen: set[str] = set()
            for index, ref in _raw_enabled(raw, point):
                problem = _check_plugin_ref(point, interface, ref, seen, unknown)
                if problem:
                    errors.setdefault("plugins", {}).setdefault(point, {}).setdefault("enabled", {})[index] = problem
                seen.add(ref["name"])
            enabled |= seen
        configured: set[str] = set()
        loaded = data.get("pluginConfig")  # the loaded entries, when every one of them loaded
        for index, config in _raw_configs(raw):
            problem, args = _check_plugin_config(config, enabled, configured, unknown)
            if problem:
                errors.setdefault("pluginConfig", {})[index] = problem
            elif loaded is not None:
                loaded[index]["args"] = args
            configured.add(config["name"])
        for point, index, ref in _raw_enabled_refs(raw):
            problem = _check_default_args(ref["name"], configured)
            if problem:
                where = errors.setdefault("plugins", {}).setdefault(point, {}).setdefault("enabled", {})
                for key, messages in problem.items():
                    where.setdefault(index, {}).setdefault(key, []).extend(messages)
            configured.add(ref["name"])  # report a plugin enabled at several points once
        if errors:
            raise ValidationError(errors)


def _enabled(profile: dict[str, Any], point: str) -> list[dict[str, Any]]:
    enabled: list[dict[str, Any]] = profile.get("plugins", {}).get(point, {}).get("enabled", [])
    return enabled


def _raw_named(value: Any) -> list[tuple[int, dict[str, Any]]]:
    return [
        (index, item) for index, item in entries_as_written(value) if isinstance(item.get("name"), str) and item["name"]
    ]


def _raw_enabled(profile: dict[str, Any], point: str) -> list[tuple[int, dict[str, Any]]]:
    plugins = profile.get("plugins")
    at = plugins.get(point) if isinstance(plugins, dict) else None
    return _raw_named(at.get("enabled") if isinstance(at, dict) else None)


def _raw_configs(profile: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    configs = _raw_named(profile.get("pluginConfig"))
    return [(index, config) for index, config in configs if isinstance(config.get("args", {}), dict)]


def _raw_enabled_refs(profile: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(extension point, index, plugin ref) for every enabled plugin, in file order."""
    return [(point, index, ref) for point in EXTENSION_POINTS for index, ref in _raw_enabled(profile, point)]


def _check_plugin_ref(
    point: str, interface: type[Plugin], ref: dict[str, Any], seen: set[str], unknown: set[str]
) -> dict[str, list[str]]:
    name = ref["name"]
    plugin = registry.lookup(name)
    if plugin is None:
        return _unknown_plugin(name, unknown)
    if not issubclass(plugin, interface):
        return {"name": [f"plugin {name} does not implement the {point} extension point"]}
    if name in seen:
        return {"name": [f"plugin {name} is enabled twice"]}
    if point == "score" and "weight" not in ref:
        return {"weight": ["score plugins need a weight (1..100)"]}
    if point != "score" and "weight" in ref:
        return {"weight": ["only score plugins take a weight"]}
    return {}


def _check_plugin_config(
    config: dict[str, Any], enabled: set[str], configured: set[str], unknown: set[str]
) -> tuple[dict[str, Any], Any]:
    """The problems of one pluginConfig entry, else its loaded args."""
    name = config["name"]
    plugin = registry.lookup(name)
    if plugin is None:  # its args cannot be checked
        return _unknown_plugin(name, unknown), None
    if name not in enabled:
        return {"name": [f"plugin {name} is not enabled in this profile"]}, None
    if name in configured:
        return {"name": [f"plugin {name} is configured twice"]}, None
    try:
        return {}, _load_args(plugin, config.get("args", {}))
    except ValidationError as exc:
        return {"args": exc.messages}, None


def _unknown_plugin(name: str, reported: set[str]) -> dict[str, list[str]]:
    """The problem of an unknown plugin name, the first time the profile names it (``reported``), with the nearest
    known name."""
    if name in reported:
        return {}
    reported.add(name)
    known = registry.names()
    close = nearest(name, known)
    guess = f": did you mean {close}?" if close is not None else ""
    return {"name": [f"unknown plugin {name!r}{guess} (known plugins: {', '.join(known)})"]}


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
    schema = plugin.args_schema()
    try:
        return schema.load(args)
    except ValidationError as exc:
        suggest_fields(schema, exc.messages)  # its own schema knows the args' field names
        raise


class PluginModule(fields.String):
    """A Python module imported for its side effect: registering plugins with ``extender.framework.registry``."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        name = super()._deserialize(value, attr, data, **kwargs)
        if not re.fullmatch(_MODULE_NAME, name):
            raise ValidationError(f"{name!r} is not a Python module name such as acme_plugins or acme.scheduling")
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 — a user's module: whatever it does wrong is a message, not a traceback
            raise ValidationError(f"cannot import {name!r}: {type(exc).__name__}: {exc}") from None
        return name


def _node_source_schema() -> Schema:
    """Imported with the first policy that has a ``nodeSource``: the others do not load its parsing."""
    from extender.nodesource.schema import NodeSourceSchema

    return NodeSourceSchema()


class PolicySchema(StrictSchema):
    apiVersion = fields.String(load_default=API_VERSION, validate=Equal(API_VERSION))
    kind = fields.String(load_default=KIND, validate=Equal(KIND))
    # What to do when a plugin needs node facts nobody could supply: Fail the request, or Ignore the plugin.
    failurePolicy = fields.String(load_default="Fail", validate=OneOf(FAILURE_POLICIES))
    # The scheduler's extenders[].nodeCacheCapable. Only an explicit false promises full nodes (and victim pods)
    # in every request; otherwise plugins that read more than node names need a nodeSource.
    nodeCacheCapable = fields.Boolean(truthy={True}, falsy={False})
    # Declared before profiles: marshmallow loads fields in declaration order, and the profiles look up the
    # plugins these modules register.
    pluginModules = fields.List(PluginModule(), load_default=list)
    # Where node-name requests get node facts (and which failurePolicy applies when it cannot answer).
    nodeSource = fields.Nested(_node_source_schema)
    # Full-node mode without a nodeSource: preempt requests carry no Node objects, so filters reading labels cannot
    # run there. True accepts that, relying on the scheduler's own filter result (see docs/policy.md).
    preemptTrustsSchedulerFilter = fields.Boolean(truthy={True}, falsy={False}, load_default=False)
    profiles = fields.List(fields.Nested(ProfileSchema), required=True, validate=Length(min=1))

    def __init__(self, *, function_names: Collection[str] = (), **kwargs: Any) -> None:
        """``function_names``: the names that may prefix the function's URLs (``Settings.function_names``), beside
        the entry point, which does wherever the function is deployed."""
        super().__init__(**kwargs)
        self.function_names = function_names

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def unique_profiles(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        """Each profile name is its own URL segment, distinct from the others and from the function's name."""
        seen: set[str] = set()
        errors: dict[int, Any] = {}
        for index, profile in _raw_named(original.get("profiles") if isinstance(original, dict) else None):
            name = profile["name"]
            if name in seen:
                errors[index] = {"name": [f"duplicate profile name {name!r}"]}
            elif name == ENTRY_POINT:
                message = (
                    f"{name!r} is the function's entry point (FUNCTION_TARGET wherever it is deployed), which may "
                    "prefix its URLs: choose another name"
                )
                errors[index] = {"name": [message]}
            elif name in self.function_names:
                message = f"{name!r} is the function's own name, which may prefix its URLs: choose another name"
                errors[index] = {"name": [message]}
            seen.add(name)
        if errors:
            raise ValidationError({"profiles": errors})

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def facts_available(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        """Fail at start-up, not per request, when a plugin needs facts that requests and the node source lack."""
        raw = original if isinstance(original, dict) else {}
        declared = ("nodeSource", "nodeCacheCapable", "preemptTrustsSchedulerFilter")
        wrong = any(key in raw and key not in data for key in declared)
        if wrong or not isinstance(data.get("nodeSource", NodeSourceSpec()), NodeSourceSpec):
            return  # what the facts depend on is itself wrong: its own errors say so
        facts = _FactsAvailable(
            data.get("nodeCacheCapable") is False,
            data.get("nodeSource"),
            data.get("preemptTrustsSchedulerFilter", False),
        )
        errors: dict[int, Any] = {}
        for profile_index, profile in entries_as_written(raw.get("profiles")):
            problems = facts.problems(profile)
            if problems:
                errors[profile_index] = problems
        if errors:
            raise ValidationError({"profiles": errors})

    @post_load
    def make_policy(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """``profiles`` (name -> Profile), ``node_source`` (a NodeSourceSpec, built once the environment is read) and
        what the policy declares about the scheduler's requests."""
        fail_open = data["failurePolicy"] == "Ignore"
        # The opt-in matters only where preempt cannot see a filter's labels: full nodes, and no node source or one
        # that lacks some of its keys (a policy that declares node-name requests has every key checked).
        trusts, source = data["preemptTrustsSchedulerFilter"], data.get("nodeSource")
        return {
            "profiles": {
                profile["name"]: _build_profile(profile, fail_open, source, trusts) for profile in data["profiles"]
            },
            "node_source": (data.get("nodeSource") or NodeSourceSpec())._replace(fail_open=fail_open),
            "node_cache_capable": data.get("nodeCacheCapable"),
            "preempt_trusts_scheduler_filter": data["preemptTrustsSchedulerFilter"],
        }


_FULL_NODES = "or set nodeCacheCapable: false if the scheduler sends full nodes"


class _FactsAvailable:
    """What node facts each kind of request brings, for checking the plugins of one profile (as written)."""

    __slots__ = ("full_nodes", "source", "trust_scheduler_filter")

    def __init__(self, full_nodes: bool, source: NodeSourceSpec | None, trust_scheduler_filter: bool) -> None:
        self.full_nodes = full_nodes  # nodeCacheCapable: false: filter and prioritize requests carry whole Nodes
        self.source = source
        self.trust_scheduler_filter = trust_scheduler_filter

    def problems(self, profile: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, Any] = {}
        keys_checked: set[str] = set()
        # A profile that enables preempt plugins surely takes part in preemption, where its filters run too. (Every
        # profile answers preempt: check-scheduler-config applies this to each one the scheduler calls so.)
        preempts = bool(_raw_enabled(profile, "preempt"))
        for point, index, ref in _raw_enabled_refs(profile):
            name = ref["name"]
            plugin = registry.lookup(name)
            if plugin is None:
                continue  # reported by the profile's own checks
            entry = ("plugins", point, "enabled", index, "name")
            problem = "" if self.full_nodes else _facts_problem(name, plugin, self.source)
            if not problem and preempts and point == "filter" and plugin.facts > Facts.NAME and self.source is None:
                problem = "" if self.trust_scheduler_filter else _preempt_blind(name)
            if problem:
                _put(errors, entry, problem)
            elif plugin.facts > Facts.NAME and self._reads_source(point) and name not in keys_checked:
                keys_checked.add(name)
                for path, message in self._missing_keys(profile, plugin):
                    _put(errors, path or entry, message)
        return errors

    def _reads_source(self, point: str) -> bool:
        """Whether the plugin at ``point`` judges nodes by the node source's labels: always with node-name requests;
        with full nodes, a filter still does in preempt (whose requests carry no Node objects, in every profile),
        unless the policy trusts the scheduler's filter there."""
        if self.source is None:
            return False
        return not self.full_nodes or (point == "filter" and not self.trust_scheduler_filter)

    def _missing_keys(self, profile: dict[str, Any], plugin: type[Plugin]) -> list[tuple[tuple[Any, ...], str]]:
        """Each label key the plugin reads that the node source never supplies, with where the policy names it."""
        assert self.source is not None
        found = _loaded_args(profile, plugin)
        if found is None:
            return []  # args with errors of their own
        config_index, args = found
        missing = []
        for path, keys, has in _unsupplied_keys(plugin, args, self.source):
            where: tuple[Any, ...] = ()
            if path and config_index is not None:
                where = ("pluginConfig", config_index, f"args.{path}")
            shown = " or ".join(keys)
            during, remedy = "", ""
            if self.full_nodes:
                during = "preempt requests (which carry no Node objects) take labels from the nodeSource, and "
                remedy = (
                    ": add it to the nodeSource, or set preemptTrustsSchedulerFilter: true to rely on the scheduler's "
                    "own filter there (see docs/policy.md)"
                )
            problem = (
                f"plugin {plugin.name} reads node label {shown}: {during}the {self.source.kind} nodeSource "
                f"does not supply it (it supplies: {has}), so the rule would judge every node as lacking it{remedy}"
            )
            missing.append((where, problem))
        return missing


def _unsupplied_keys(
    plugin: type[Plugin], args: Any, source: NodeSourceSpec
) -> list[tuple[str, tuple[str, ...], str]]:
    """(path in args, keys, the keys the source supplies) for each thing ``plugin`` reads of which ``source``
    supplies none of the keys."""
    supplied = source.label_keys()
    if supplied is None:
        return []
    has = ", ".join(sorted(supplied)) or "none"
    return [(path, keys, has) for path, keys in plugin.label_keys(args) if supplied.isdisjoint(keys)]


def _put(errors: dict[str, Any], path: tuple[Any, ...], message: str) -> None:
    where: Any = errors
    for key in path[:-1]:
        where = where.setdefault(key, {})
    messages = where.setdefault(path[-1], [])
    if message not in messages:
        messages.append(message)


def _loaded_args(profile: dict[str, Any], plugin: type[Plugin]) -> tuple[int | None, Any] | None:
    """(index of its pluginConfig entry or None, loaded args) of a plugin in a profile as written; None when its
    args do not load (their own errors are reported)."""
    configs = [(index, config) for index, config in _raw_configs(profile) if config["name"] == plugin.name]
    index, args = configs[0] if configs else (None, {})
    try:
        return index, _load_args(plugin, args.get("args", {}) if configs else {})
    except ValidationError:
        return None


def _preempt_blind(name: str) -> str:
    return (
        f"plugin {name} reads node labels, which preempt requests never carry (they hold victims, not Node objects), "
        "so preempt could not evaluate it: configure a nodeSource, or set preemptTrustsSchedulerFilter: true to rely "
        "on the scheduler having excluded the nodes this filter rejected (see docs/policy.md)"
    )


def _facts_problem(name: str, plugin: type[Plugin], source: NodeSourceSpec | None) -> str:
    if plugin.facts > Facts.NAME and source is None:
        return (
            f"plugin {name} reads node labels, which node-name requests (nodeCacheCapable: true) do not carry: "
            f"configure a nodeSource, {_FULL_NODES}"
        )
    victims_known = source is not None and source.kind == "kubernetes"  # its API client looks victims up
    if issubclass(plugin, PreemptPlugin) and plugin.victim_facts > VictimFacts.UID and not victims_known:
        return (
            f"plugin {name} reads victim pods, which node-name preempt requests (nodeCacheCapable: true) name by UID "
            f"only: configure the kubernetes nodeSource to look them up, {_FULL_NODES}"
        )
    return ""


def _build_profile(
    data: dict[str, Any], fail_open: bool, source: NodeSourceSpec | None, trust_scheduler_filter: bool
) -> Profile:
    """``trust_scheduler_filter``: preempt passes the filters whose labels it cannot see
    (preemptTrustsSchedulerFilter)."""
    args = {config["name"]: config["args"] for config in data["pluginConfig"]}
    instances: dict[str, Plugin] = {}

    def instance(name: str) -> Any:
        # One instance per plugin per profile, shared by the extension points it is enabled at.
        if name not in instances:
            plugin = registry.lookup(name)
            assert plugin is not None
            instances[name] = plugin(args.get(name) or _load_args(plugin, {}))
        return instances[name]

    filters = [instance(ref["name"]) for ref in _enabled(data, "filter")]
    return Profile(
        name=data["name"],
        filters=filters,
        scores=[ScorePluginEntry(instance(ref["name"]), ref["weight"]) for ref in _enabled(data, "score")],
        preempts=[instance(ref["name"]) for ref in _enabled(data, "preempt")],
        fail_open=fail_open,
        entries={
            (point, ref["name"]): EntryPolicy(
                fail_open=ref.get("failurePolicy", "Ignore" if fail_open else "Fail") == "Ignore",
                audit=ref["enforcement"] == "Audit",
            )
            for point in EXTENSION_POINTS
            for ref in _enabled(data, point)
        },
        preempt_trusted=_blind_in_preempt(filters, source) if trust_scheduler_filter else {},
    )


def _blind_in_preempt(filters: list[FilterPlugin], source: NodeSourceSpec | None) -> dict[str, str]:
    """The filters preempt cannot evaluate (with why): reading labels with no node source, or keys it lacks."""
    blind = {}
    for plugin in filters:
        if plugin.facts == Facts.NAME:
            continue
        if source is None:
            blind[plugin.name] = "preempt requests carry no Node objects and no nodeSource is configured"
            continue
        lacking = dict.fromkeys(" or ".join(keys) for _, keys, _ in _unsupplied_keys(type(plugin), plugin.args, source))
        if lacking:
            blind[plugin.name] = (
                f"preempt requests carry no Node objects and the {source.kind} nodeSource does not supply "
                f"{', '.join(lacking)}"
            )
    return blind
