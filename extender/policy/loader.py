"""Read, validate and build the policy the function serves."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Collection
from pathlib import Path

import orjson
from marshmallow import ValidationError

from extender.framework.args import loading_for
from extender.framework.kept import ServedProfile, keeping_results
from extender.nodesource.spec import NodeSourceSpec
from extender.settings import Need, Settings, unmet
from extender.wire.errors import Hint, flatten_errors, suggest_fields

EMBEDDED = "embedded default"
# The embedded policy's files sit beside this module (a deployed function is a directory, never a zip).
_HERE = Path(__file__).parent


class PolicyError(Exception):
    """The policy cannot be served; ``problems`` holds one ``field.path: message`` line each."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"invalid policy {source}:\n" + "\n".join(f"  {line}" for line in problems))


class Policy:
    __slots__ = ("node_cache_capable", "node_source", "preempt_trusts_scheduler_filter", "profiles", "sha256", "source")

    def __init__(
        self,
        # Each profile as served: with kept results unless EXTENDER_RESULT_CACHE=off.
        profiles: dict[str, ServedProfile],
        source: str,
        sha256: str,
        # The configured nodeSource; ``node_source.build(kube_client)`` makes it at start-up.
        node_source: NodeSourceSpec,
        # As declared: the scheduler's nodeCacheCapable (None: not said), and the preempt opt-in (docs/policy.md).
        node_cache_capable: bool | None,
        preempt_trusts_scheduler_filter: bool,
    ) -> None:
        self.profiles = profiles
        self.source = source
        self.sha256 = sha256
        self.node_source = node_source
        self.node_cache_capable = node_cache_capable
        self.preempt_trusts_scheduler_filter = preempt_trusts_scheduler_filter

    def needs(self, stood_in: Collection[str] = ()) -> list[Need]:
        """The variables the function cannot start without, with this policy: its node source's, then its plugins',
        each variable once; none for the plugins named in ``stood_in`` (``explain`` judges them on saved answers)."""
        plugins = [
            plugin for profile in self.profiles.values() for plugin in profile.plugins if plugin.name not in stood_in
        ]
        unique: dict[tuple[str, ...], Need] = {}
        for need in [*self.node_source.needs(), *(need for plugin in plugins for need in plugin.needs())]:
            unique.setdefault(need.names, need)
        return list(unique.values())

    def check_needs(self, settings: Settings, stood_in: Collection[str] = ()) -> None:
        """ConfigError naming each of ``needs`` that ``settings`` leave unmet: start-up refuses to start then."""
        problem = unmet(self.needs(stood_in), settings)
        if problem is not None:
            raise problem


def load_policy(path: str | os.PathLike[str] | None = None, settings: Settings | None = None) -> Policy:
    """Load ``path``, else the file named by ``EXTENDER_POLICY``, else the embedded default.

    ``settings``: the instance's (the environment's when None), which say whether results are kept and which
    names the function's URLs may start with.
    """
    settings = Settings.from_environment() if settings is None else settings
    path = path or settings.policy_path
    if path is None:
        return embedded_default(settings)
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(source, [f"cannot read the file: {exc}"]) from None
    return parse_policy(text, source, settings)


def embedded_default(settings: Settings | None = None) -> Policy:
    """``default.yaml``, the policy as people read and copy it, loaded from ``default.json``, its document as JSON.

    The YAML parser costs an instance's start-up more than the rest of loading the policy; the JSON form is
    written from the YAML (tests/test_policy.py checks that they hold the same document and says how to rewrite
    it), and the policy's identity stays the YAML's text.
    """
    text = (_HERE / "default.yaml").read_text(encoding="utf-8")
    return build_policy(orjson.loads((_HERE / "default.json").read_bytes()), text, EMBEDDED, settings)


def parse_policy(text: str, source: str, settings: Settings | None = None) -> Policy:
    import yaml  # JSON is YAML too; imported here so that only a policy file pays for it

    from extender.policy.yaml_hints import yaml_hint

    try:
        document = yaml.load(text, Loader=_policy_loader())
    except yaml.YAMLError as exc:
        raise PolicyError(source, [f"not valid YAML or JSON: {exc}"]) from None
    return build_policy(document, text, source, settings, yaml_hint(text, _policy_loader()))


@functools.cache
def _policy_loader() -> type:
    """PyYAML's safe loader, reading numbers as JSON, YAML 1.2 and Kubernetes' own YAML do: PyYAML (YAML 1.1) reads
    ``2e-6`` and ``1e303`` as strings, so that a JSON policy's prices would be rejected as text."""
    import yaml

    class PolicyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # libyaml's, if built
        pass

    exponent = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")
    PolicyLoader.add_implicit_resolver("tag:yaml.org,2002:float", exponent, list("-+0123456789."))
    return PolicyLoader


def build_policy(
    document: object, text: str, source: str, settings: Settings | None = None, hint: Hint | None = None
) -> Policy:
    """The policy ``document`` describes, validated; ``text`` is what it was read from, for its sha256 (and ``hint``
    for what it says where a value has the wrong type)."""
    from extender import plugins  # noqa: F401  (registers the built-in plugins)
    from extender.policy.schema import PolicySchema

    if not isinstance(document, dict):
        raise PolicyError(source, ["the policy must be a mapping with a 'profiles' list"])
    settings = Settings.from_environment() if settings is None else settings
    schema = PolicySchema(function_names=settings.function_names)
    try:
        with loading_for(settings):
            loaded = schema.load(document)
    except ValidationError as exc:
        raise PolicyError(source, flatten_errors(suggest_fields(schema, exc.messages), hint=hint)) from None
    return Policy(
        profiles={
            name: keeping_results(profile, settings.result_cache) for name, profile in loaded["profiles"].items()
        },
        source=source,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        node_source=loaded["node_source"],
        node_cache_capable=loaded["node_cache_capable"],
        preempt_trusts_scheduler_filter=loaded["preempt_trusts_scheduler_filter"],
    )


def plugin_notes(profile: ServedProfile) -> list[str]:
    """What a profile's plugins say an operator must know (``Plugin.notes``), each once: check-policy prints them,
    start-up logs them."""
    plugins = [*profile.filters, *(entry.plugin for entry in profile.scores), *profile.preempts]
    unique = {id(plugin): plugin for plugin in plugins}.values()
    return list(dict.fromkeys(note for plugin in unique for note in plugin.notes()))
