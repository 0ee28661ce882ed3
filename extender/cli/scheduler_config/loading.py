"""The file as kube-scheduler's ``--config`` loader reads it (loadConfig over apimachinery's strict codec): JSON or
YAML, the first document only, apiVersion and kind, the registered types, strict field decoding, then each
``pluginConfig[].args`` decoded as its plugin's args kind.

Errors come back in kube-scheduler's words, with the fields Go left at their zero value (``broken``): what later
checks say about those fields would only repeat the decoding error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extender.cli.scheduler_config import godecode, gojson, goyaml
from extender.cli.scheduler_config.findings import Finding, refused
from extender.cli.scheduler_config.types import args_types, configuration_type
from extender.cli.scheduler_config.versions import GROUP, KIND, V1, V1BETA3, Version, served_api_versions, shown

EMBEDDED_NAMES_SINCE: Version = (1, 35)  # Go 1.24's decoder names embedded structs in a field's path
_FIND_KIND = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
_PARSE_ERROR = "couldn't get version/kind; json parse error: "


@dataclass
class PluginArgs:
    """One ``pluginConfig[]`` entry's args as kube-scheduler decoded them."""

    kind: str  # the args kind ("NodeResourcesFitArgs")
    value: dict[str, Any] | None  # the decoded args (Go's value); None when they did not decode


@dataclass
class Loaded:
    api_version: str = ""
    config: dict[str, Any] | None = None  # Go's value of the KubeSchedulerConfiguration; None when it did not decode
    args: dict[tuple[int, int], PluginArgs] = field(default_factory=dict)  # by (profile, pluginConfig) index
    findings: list[Finding] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # the fields that did not decode, by path
    written: set[str] = field(default_factory=set)  # the fields the file sets, by path


def load(text: str, version: Version) -> Loaded:
    loaded = Loaded()
    duplicates: list[str] = []
    try:
        if gojson.is_json_buffer(text):
            document: Any = gojson.parse(text)
        else:
            document, duplicates = goyaml.decode(text)
    except gojson.JSONSyntaxError as exc:
        return _stopped(loaded, f"{_PARSE_ERROR}{exc}")
    except goyaml.YAMLError as exc:
        return _stopped(loaded, str(exc))
    type_meta = _type_meta(document)
    if isinstance(type_meta, str):
        return _stopped(loaded, type_meta)
    api_version, kind = type_meta
    if not kind:
        return _stopped(
            loaded, f"Object 'Kind' is missing in '{_start(text)}': set kind: {KIND}{_first_document(text)}"
        )
    if not api_version:
        return _stopped(loaded, f"Object 'apiVersion' is missing in '{_start(text)}': set apiVersion: {V1}")
    problem = _unregistered(api_version, kind, version)
    if problem:
        served = served_api_versions(version)
        removed = " (v1beta3 was removed in 1.29)" if api_version == V1BETA3 else ""
        return _stopped(
            loaded, f"{problem}: kube-scheduler {shown(version)} reads a {KIND} of {' or '.join(served)}{removed}"
        )
    if kind != KIND:
        return _stopped(loaded, f"couldn't decode as {KIND}, got {api_version}, Kind={kind}")
    loaded.api_version = api_version
    result = godecode.decode(
        document, configuration_type(api_version, version), embedded_names=version >= EMBEDDED_NAMES_SINCE
    )
    loaded.config, loaded.written = result.value, result.written
    loaded.findings += [refused(path, message) for path, message in result.fatal]
    loaded.broken += [path for path, _ in result.fatal]
    # kube-scheduler prints them in one error, a line each.
    loaded.findings += [refused("", f"strict decoding error: yaml: unmarshal errors: {line}") for line in duplicates]
    loaded.findings += [refused("", f"strict decoding error: {message}") for message in result.strict]
    _load_plugin_args(loaded, version)
    return loaded


def _stopped(loaded: Loaded, message: str) -> Loaded:
    loaded.findings.append(refused("", message))
    return loaded


def _type_meta(document: Any) -> tuple[str, str] | str:
    """(apiVersion, kind) as apimachinery's Interpret reads them with encoding/json: field names matched whatever
    their case, null leaving them empty; else its error."""
    if document is not None and not isinstance(document, (dict, gojson.Pairs)):
        return f"{_PARSE_ERROR}json: cannot unmarshal {godecode.json_kind(document)} into Go value of type {_FIND_KIND}"
    found = {"apiversion": "", "kind": ""}
    names = {"apiversion": "apiVersion", "kind": "kind"}
    for key, value in document if isinstance(document, gojson.Pairs) else (document or {}).items():
        if key.lower() not in found or value is None:
            continue
        if godecode.json_kind(value) != "string":
            what = godecode.json_kind(value)
            return (
                f"{_PARSE_ERROR}json: cannot unmarshal {what} into Go struct field .{names[key.lower()]} of type string"
            )
        found[key.lower()] = value
    return found["apiversion"], found["kind"]


def _unregistered(api_version: str, kind: str, version: Version) -> str | None:
    """runtime.Scheme's refusal of an apiVersion and kind kube-scheduler ``version`` does not register, or None."""
    if api_version.count("/") > 1:
        return f"unexpected GroupVersion string: {api_version}"
    group, _, package = api_version.rpartition("/")
    registered = api_version in served_api_versions(version) and (kind == KIND or kind in args_types(package, version))
    return None if registered and group == GROUP else f'no kind "{kind}" is registered for version "{api_version}"'


def _start(text: str) -> str:
    """The start of the file, as kube-scheduler quotes the whole of it."""
    flat = " / ".join(text.splitlines())
    return flat if len(flat) <= 80 else flat[:77] + "..."


def _first_document(text: str) -> str:
    if any(line.startswith("---") for line in text.splitlines()):
        return " (kube-scheduler reads the first YAML document of the file only)"
    return ""


def _load_plugin_args(loaded: Loaded, version: Version) -> None:
    """DecodeNestedObjects: each pluginConfig's args as its plugin's args kind; the args of a plugin without one
    (out of tree, or with no args) are left as written."""
    assert loaded.config is not None
    package = loaded.api_version.rpartition("/")[2]
    for profile_index, profile in enumerate(loaded.config["profiles"]):
        for entry_index, entry in enumerate(profile["pluginConfig"]):
            kind = f"{entry['name']}Args"
            if kind not in args_types(package, version):
                continue
            where = f"decoding .profiles[{profile_index}].pluginConfig[{entry_index}]"
            path = f"profiles[{profile_index}].pluginConfig[{entry_index}].args"
            value = _decode_args(entry["args"], kind, package, version, where, loaded)
            if value is None:
                loaded.broken.append(path)
            loaded.args[(profile_index, entry_index)] = PluginArgs(kind, value)


def _decode_args(
    raw: Any, kind: str, package: str, version: Version, where: str, loaded: Loaded
) -> dict[str, Any] | None:
    """The args as their kind (apiVersion and kind default to the plugin's), or None with the error."""
    plugin = kind.removesuffix("Args")
    decoding = f"{where}: decoding args for plugin {plugin}"
    type_meta = _type_meta(raw)
    if isinstance(type_meta, str):
        loaded.findings.append(refused("", f"{decoding}: {type_meta}"))
        return None
    api_version, written_kind = type_meta
    api_version, written_kind = api_version or f"{GROUP}/{package}", written_kind or kind
    problem = _unregistered(api_version, written_kind, version)
    if problem:
        loaded.findings.append(refused("", f"{decoding}: {problem}"))
        return None
    if written_kind != kind:
        got = f"{written_kind}.{GROUP}"
        loaded.findings.append(
            refused("", f"{where}: args for plugin {plugin} were not of type {kind}.{GROUP}, got {got}")
        )
        return None
    go_type = args_types(api_version.rpartition("/")[2], version)[kind]
    result = godecode.decode(raw, go_type, embedded_names=version >= EMBEDDED_NAMES_SINCE)
    loaded.findings += [refused("", f"{decoding}: {message}") for _, message in result.fatal]
    loaded.findings += [
        refused("", f"strict decoding error: {decoding}: strict decoding error: {message}") for message in result.strict
    ]
    return None if result.fatal else result.value
