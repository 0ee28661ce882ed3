"""The keys a configuration file sets twice, as kube-scheduler's strict decoding reports them.

PyYAML and json keep the last of two equal keys without a word; kube-scheduler decodes its ``--config`` with
apimachinery's strict serializer and refuses to start. A YAML file's duplicates are found by sigs.k8s.io/yaml
(go-yaml v2 ``UnmarshalStrict``: ``line N: key "k" already set in map``, N the line of the second key's value),
anywhere in the document. A JSON file (one starting with ``{``) is decoded by the JSON serializer, whose
sigs.k8s.io/json names the field's path (``duplicate field "extenders[0].weight"``) and does not look into
``pluginConfig[].args``, which it keeps as raw bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import yaml


class Duplicate(NamedTuple):
    path: str  # extenders[0].weight
    line: int  # 1-based, of the repeated key's value
    key: Any  # as constructed: a str, or an int or bool for YAML's other scalars
    in_raw_args: bool  # under profiles[].pluginConfig[].args


def is_json(text: str) -> bool:
    """Whether kube-scheduler reads ``text`` as JSON (apimachinery's IsJSONBuffer): it starts with ``{``."""
    return text.lstrip().startswith("{")


def duplicate_keys(text: str) -> list[Duplicate]:
    """Every key set twice in one mapping of ``text`` (YAML or JSON), in document order; yaml.YAMLError when the
    text does not parse."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        found: list[Duplicate] = []
        if root is not None:
            _walk(loader, root, "", False, found)
    finally:
        loader.dispose()
    return sorted(found, key=lambda duplicate: duplicate.line)


def _walk(loader: yaml.SafeLoader, node: yaml.Node, path: str, in_args: bool, found: list[Duplicate]) -> None:
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(loader, item, f"{path}[{index}]", in_args, found)
    elif isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            child = f"{path}.{key}" if path else str(key)
            args = in_args or (key == "args" and re.fullmatch(r"profiles\[\d+\]\.pluginConfig\[\d+\]", path) is not None)
            if _hashable(key) and key in seen:
                found.append(Duplicate(child, value_node.start_mark.line + 1, key, args))
            if _hashable(key):
                seen.add(key)
            _walk(loader, value_node, child, args, found)


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def strict_errors(text: str, duplicates: list[Duplicate]) -> list[str]:
    """kube-scheduler's words for ``duplicates``, one line each (its own message joins them)."""
    if is_json(text):
        return [
            f"strict decoding error: duplicate field {json.dumps(found.path)}"
            for found in duplicates
            if not found.in_raw_args
        ]
    return [
        f"strict decoding error: yaml: unmarshal errors: line {found.line}: key {_go_value(found.key)} already set in map"
        for found in duplicates
    ]


def _go_value(key: Any) -> str:
    """A key as Go's ``%#v`` shows it: strings quoted, booleans and numbers bare."""
    if isinstance(key, str):
        return json.dumps(key, ensure_ascii=False)
    if isinstance(key, bool):
        return str(key).lower()
    return str(key)
