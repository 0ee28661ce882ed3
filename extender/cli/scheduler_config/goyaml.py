"""YAML as kube-scheduler reads it: sigs.k8s.io/yaml's YAML-to-JSON conversion over go-yaml v2.

PyYAML reads YAML 1.1 with its own resolver; go-yaml v2 does not: ``y``, ``n``, ``on`` and ``off`` are booleans,
``1e3`` and ``08`` are floats, ``0x10`` and ``1_000`` are integers, ``1:30`` and timestamps stay strings. A merge key
``<<`` sets the merged keys over those written before it and under those written after it. Only the first document
of a stream is read. This module parses with PyYAML (a libyaml port like go-yaml) but resolves every scalar and
builds every mapping as go-yaml v2 does, then converts the result to JSON values as sigs.k8s.io/yaml does
(``gojson.Number`` for numbers). kube-scheduler's strict decoding also runs go-yaml's UnmarshalStrict over the file:
its ``line N: key "k" already set in map`` errors come back beside the value.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any, NamedTuple

import yaml

from extender.cli.scheduler_config.gojson import Number

_PLAIN = "!go-yaml/plain"  # an untagged plain scalar: go-yaml resolves it
_QUOTED = "!go-yaml/quoted"  # an untagged quoted or block scalar: a string
_TAG = "tag:yaml.org,2002:"
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_MAPPED: dict[str, tuple[str, Any]] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), ("bool", True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), ("bool", False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), ("null", None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), ("float", math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), ("float", math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), ("float", -math.inf)),
}
_RESOLVABLE = {"", "str", "bool", "int", "float", "null", "timestamp"}
_MAX_ALIAS_DEPTH = 100


class YAMLError(ValueError):
    """The file is not YAML go-yaml reads, in sigs.k8s.io/yaml's words."""


class Decoded(NamedTuple):
    value: Any  # the JSON value of the first document (None when empty)
    duplicates: list[str]  # go-yaml UnmarshalStrict's "line N: key K already set in map", in document order


def decode(text: str) -> Decoded:
    """The first document of ``text`` as JSON values, and the keys go-yaml's strict mode finds set twice."""
    loader = _Loader(text)
    try:
        node = loader.get_node() if loader.check_node() else None
        if loader.yaml_version not in (None, (1, 1)):  # go-yaml v2 reads %YAML 1.1 documents only
            raise yaml.YAMLError("found incompatible YAML document")
    except yaml.YAMLError as exc:
        raise YAMLError(f"error converting YAML to JSON: yaml: {_problem(exc)}") from None
    finally:
        loader.dispose()
    builder = _Builder()
    go_value = builder.value(node, 0) if node is not None else None
    try:
        return Decoded(_to_json(go_value), builder.duplicates)
    except ValueError as exc:
        raise YAMLError(str(exc)) from None


def go_float_json(value: float) -> str:
    """How Go's encoding/json writes a float64: shortest digits, fixed notation from 1e-6 to 1e21."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if 1e-6 <= abs(value) < 1e21:
        text = format(Decimal(repr(value)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, _, exponent = repr(value).partition("e")
    mantissa = mantissa.removesuffix(".0")
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa}e{sign}{int(exponent.lstrip('+-'))}"


def go_quote(value: Any) -> str:
    """A go-yaml map key as fmt's %#v shows it in "key %#v already set in map"."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return f'"{escaped}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float):
        return go_float_json(value)
    return str(value)


class _Resolver(yaml.resolver.BaseResolver):
    """Leaves every implicit scalar to go-yaml's rules (``_resolve``)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            return _PLAIN if implicit[0] else _QUOTED
        return f"{_TAG}seq" if kind is yaml.SequenceNode else f"{_TAG}map"


class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, _Resolver):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Resolver.__init__(self)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.NodeEvent) and not isinstance(event, yaml.AliasEvent) and event.anchor:
            self.anchors.pop(event.anchor, None)  # go-yaml lets an anchor name be used again; the later one counts
        return super().compose_node(parent, index)


def _problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        return f"line {mark.line + 1}: {problem}" if mark is not None else problem
    return str(exc)


# A go-yaml map[interface{}]interface{}: the key's Go identity (type, value) -> (key, value).
_GoMap = dict[tuple[str, Any], tuple[Any, Any]]


class _Builder:
    """go-yaml v2's decoder into interface{}: maps keyed by Go values, merges and duplicates as it handles them."""

    def __init__(self) -> None:
        self.duplicates: list[str] = []

    def value(self, node: yaml.Node, depth: int) -> Any:
        if depth > _MAX_ALIAS_DEPTH:
            raise YAMLError(
                "error converting YAML to JSON: yaml: document nests too deep (an alias containing itself?)"
            )
        if isinstance(node, yaml.ScalarNode):
            return _resolve(node)[1]
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item, depth + 1) for item in node.value]
        assert isinstance(node, yaml.MappingNode)
        mapping: _GoMap = {}
        self.fill(mapping, node, depth)
        return mapping

    def fill(self, mapping: _GoMap, node: yaml.MappingNode, depth: int) -> None:
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _PLAIN and key_node.value == "<<":
                self.merge(mapping, value_node, depth)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise YAMLError("error converting YAML to JSON: yaml: invalid map key: a mapping or sequence")
            kind, key = _resolve(key_node)
            identity = (kind, key)
            if identity in mapping:
                self.duplicates.append(f"line {value_node.start_mark.line + 1}: key {go_quote(key)} already set in map")
            mapping[identity] = (key, self.value(value_node, depth + 1))

    def merge(self, mapping: _GoMap, node: yaml.Node, depth: int) -> None:
        if isinstance(node, yaml.MappingNode):
            self.fill(mapping, node, depth + 1)
        elif isinstance(node, yaml.SequenceNode) and all(isinstance(item, yaml.MappingNode) for item in node.value):
            for item in reversed(node.value):  # earlier mappings take precedence
                self.fill(mapping, item, depth + 1)
        else:
            raise YAMLError(
                "error converting YAML to JSON: yaml: map merge requires map or sequence of maps as the value"
            )


def _resolve(node: yaml.ScalarNode) -> tuple[str, Any]:
    """(kind, value) of a scalar as go-yaml v2's resolve reads it; kind names the Go type for key identity."""
    text = node.value
    if node.tag == _QUOTED:
        return "str", text
    if node.tag == _PLAIN:
        tag = ""
    elif node.tag.startswith(_TAG) and node.tag.removeprefix(_TAG) in _RESOLVABLE:
        tag = node.tag.removeprefix(_TAG)
    else:
        return "str", text  # a tag go-yaml does not resolve: the text
    if tag == "str":
        return "str", text
    kind, value = _resolve_plain(text)
    if tag in ("", kind):
        return ("str", text) if kind == "timestamp" else (kind, value)  # into interface{}, a timestamp stays text
    if tag == "float" and kind == "int":
        return "float", float(value)
    raise YAMLError(f"error converting YAML to JSON: yaml: cannot decode !!{kind} `{text}` as a !!{tag}")


def _resolve_plain(text: str) -> tuple[str, Any]:
    if text in _MAPPED:
        return _MAPPED[text]
    hint = text[:1]
    if hint == "." and re.fullmatch(r"\.[0-9]+([eE][-+]?[0-9]+)?", text):
        number = _go_parse_float(text)
        return ("float", number) if number is not None else ("str", text)
    if hint and hint in "+-0123456789":
        if _is_timestamp(text):
            return "timestamp", text
        plain = text.replace("_", "")
        integer = _go_parse_int(plain)
        if integer is not None:
            return "int", integer
        if _FLOAT.fullmatch(plain):
            number = _go_parse_float(plain)
            if number is not None:
                return "float", number
    return "str", text


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), else ParseUint(text, 0, 64): a Go int64 or uint64, or None."""
    negative = text.startswith("-")
    body = text[1:] if text[:1] in "+-" else text
    if not body:
        return None
    base = 10
    if body[0] == "0":
        prefix = body[1:2].lower()
        if len(body) >= 3 and prefix in ("b", "o", "x"):
            base, body = {"b": 2, "o": 8, "x": 16}[prefix], body[2:]
        else:
            base, body = 8, body[1:]
    if body and not all(char.lower() in "0123456789abcdef"[:base] for char in body):
        return None
    value = int(body, base) if body else 0
    if negative:
        return -value if value <= 2**63 else None
    if text.startswith("+") and value >= 2**63:
        return None  # past int64, only ParseUint would take it, and it takes no sign
    return value if value < 2**64 else None


def _go_parse_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) for the decimal forms go-yaml passes it; None when it overflows."""
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isinf(value) else value


def _is_timestamp(text: str) -> bool:
    """go-yaml v2's parseTimestamp: four digits, '-', then one of its formats; such scalars stay strings."""
    if not re.match(r"[0-9]{4}-", text):
        return False
    date = r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    clock = r"[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?"
    zone = r"(Z|[-+][0-9]{2}:[0-9]{2})"
    return bool(
        re.fullmatch(date, text)
        or re.fullmatch(rf"{date}[Tt]{clock}{zone}", text)
        or re.fullmatch(rf"{date} {clock}", text)
    )


def _to_json(value: Any) -> Any:
    """sigs.k8s.io/yaml's convertToJSONableObject, then json.Marshal's view of the result."""
    if isinstance(value, dict):
        return {_json_key(key): _to_json(item) for key, item in value.values()}
    if isinstance(value, list):
        return [_to_json(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return Number(str(value))
    if math.isnan(value) or math.isinf(value):
        shown = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        raise ValueError(f"json: unsupported value: {shown}")
    return Number(go_float_json(value))


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        if math.isnan(key):
            return ".nan"
        if math.isinf(key):
            return ".inf" if key > 0 else "-.inf"
        return go_float_json(key)
    raise ValueError(f"unsupported map key of type: {type(key).__name__}, key: {key!r}")
