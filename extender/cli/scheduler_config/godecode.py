"""JSON values into Go types as kube-scheduler's strict decoder (sigs.k8s.io/json over encoding/json) puts them.

A type is plain data (``Struct``, ``Slice``, ``Pointer``, ...). Decoding yields Go's value (a struct is a dict of
every field, absent ones at their zero value; a nil pointer is None) and two kinds of errors, as kube-scheduler has
them: *fatal* ones (a wrong JSON type, a bad duration or base64: ``json: cannot unmarshal string into Go struct field
Extender.extenders.ignorable of type bool``), where Go leaves the field at its zero value, and *strict* ones
(``unknown field "extenders[0].ignorabel"``, ``duplicate field "extenders[0].weight"``), which stop kube-scheduler too
but after the whole file is decoded. Field names are case-sensitive; ``null`` leaves a value as it is, except a
pointer, slice or map, which it sets to nil, and a metav1.Duration, whose decoder reads it as ``""``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from extender.cli.scheduler_config.gobase64 import Base64Error, decode_std
from extender.cli.scheduler_config.goduration import DurationError, parse_duration
from extender.cli.scheduler_config.gojson import Number, Pairs

_INT_RANGES = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}
_FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class Scalar:
    """A Go string, bool, intN or floatN; ``go_name`` as Go prints the type (``int32``, ``v1.ScoringStrategyType``)."""

    kind: str  # "string", "bool", "int", "float"
    go_name: str
    bits: int = 64


@dataclass(frozen=True)
class Duration:
    """A metav1.Duration: a JSON string time.ParseDuration reads; decoded to nanoseconds."""


@dataclass(frozen=True)
class Bytes:
    """A []byte: a JSON string of standard, padded base64."""


@dataclass(frozen=True)
class Raw:
    """A runtime.RawExtension: any JSON value, kept as it is (None for null or absent)."""


@dataclass(frozen=True)
class Pointer:
    elem: GoType


@dataclass(frozen=True)
class Slice:
    elem: GoType
    go_name: str


@dataclass(frozen=True)
class Map:
    elem: GoType
    go_name: str


@dataclass(frozen=True)
class Field:
    type: GoType
    embedded_in: str = ""  # the embedded struct holding it (Go 1.24's errors name it in the field's path)


@dataclass(frozen=True)
class Struct:
    name: str  # the struct's own name, in "Go struct field <name>.<path>"
    go_name: str  # the type as Go prints it, "v1.Extender"
    fields: dict[str, Field] = field(default_factory=dict)


GoType = Scalar | Duration | Bytes | Raw | Pointer | Slice | Map | Struct

STRING = Scalar("string", "string")
BOOL = Scalar("bool", "bool")
INT32 = Scalar("int", "int32", 32)
INT64 = Scalar("int", "int64", 64)
FLOAT32 = Scalar("float", "float32", 32)


@dataclass
class Result:
    value: Any
    fatal: list[tuple[str, str]] = field(default_factory=list)  # (field path, Go's error text)
    strict: list[str] = field(default_factory=list)  # 'unknown field "a.b"', 'duplicate field "a"'
    written: set[str] = field(default_factory=set)  # the paths of the fields the JSON sets (null included)


def decode(value: Any, go_type: GoType, *, embedded_names: bool = False) -> Result:
    """Go's value of ``go_type`` for the JSON ``value`` (as gojson or goyaml give it), with the errors a strict
    decode reports. ``embedded_names``: errors name embedded structs in a field's path (Go 1.24 and later)."""
    result = Result(None)
    decoder = _Decoder(result, embedded_names)
    result.value = decoder.value(value, go_type, zero(go_type), _Context("", None, ()))
    return result


def zero(go_type: GoType) -> Any:
    """Go's zero value of ``go_type``, in this module's representation."""
    if isinstance(go_type, Scalar):
        return {"string": "", "bool": False, "int": 0, "float": 0.0}[go_type.kind]
    if isinstance(go_type, Duration):
        return 0
    if isinstance(go_type, Bytes):
        return b""
    if isinstance(go_type, Slice):
        return []
    if isinstance(go_type, Map):
        return {}
    if isinstance(go_type, Struct):
        return {name: zero(member.type) for name, member in go_type.fields.items()}
    return None


@dataclass(frozen=True)
class _Context:
    path: str  # the field path with indices, for strict errors and the checks after decoding
    struct: Struct | None  # the innermost struct a field was entered from
    stack: tuple[str, ...]  # Go's field stack for type errors (no indices)


def json_kind(value: Any) -> str:
    """The JSON type Go's decoder names in "cannot unmarshal <type> into ..."."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Number):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (dict, Pairs)):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null"


class _Decoder:
    def __init__(self, result: Result, embedded_names: bool) -> None:
        self.result = result
        self.embedded_names = embedded_names

    def type_error(self, what: str, go_name: str, context: _Context) -> None:
        if context.struct is None or not context.stack:
            message = f"json: cannot unmarshal {what} into Go value of type {go_name}"
        else:
            location = ".".join((context.struct.name, *context.stack))
            message = f"json: cannot unmarshal {what} into Go struct field {location} of type {go_name}"
        self.result.fatal.append((context.path, message))

    def value(self, value: Any, go_type: GoType, current: Any, context: _Context) -> Any:
        if isinstance(go_type, Raw):
            return value
        if isinstance(go_type, Duration):
            return self.duration(value, context)
        if value is None:
            return (
                None
                if isinstance(go_type, Pointer)
                else []
                if isinstance(go_type, Slice)
                else ({} if isinstance(go_type, Map) else current)
            )
        if isinstance(go_type, Pointer):
            inner = current if current is not None else zero(go_type.elem)
            return self.value(value, go_type.elem, inner, context)
        if isinstance(go_type, Scalar):
            return self.scalar(value, go_type, current, context)
        if isinstance(go_type, Bytes):
            return self.bytes(value, current, context)
        if isinstance(go_type, Slice):
            if not isinstance(value, list):
                self.type_error(json_kind(value), go_type.go_name, context)
                return current
            return [
                self.value(
                    item,
                    go_type.elem,
                    zero(go_type.elem),
                    _Context(f"{context.path}[{index}]", context.struct, context.stack),
                )
                for index, item in enumerate(value)
            ]
        if isinstance(go_type, Map):
            if not isinstance(value, (dict, Pairs)):
                self.type_error(json_kind(value), go_type.go_name, context)
                return current
            items = value if isinstance(value, Pairs) else list(value.items())
            out = dict(current)
            for key, item in items:
                child = _Context(f"{context.path}.{key}", context.struct, context.stack)
                if key in out and isinstance(value, Pairs):
                    self.result.strict.append(f'duplicate field "{child.path}"')
                out[key] = self.value(item, go_type.elem, zero(go_type.elem), child)
            return out
        return self.struct(value, go_type, current, context)

    def struct(self, value: Any, go_type: Struct, current: Any, context: _Context) -> Any:
        if not isinstance(value, (dict, Pairs)):
            self.type_error(json_kind(value), go_type.go_name, context)
            return current
        out = dict(current) if isinstance(current, dict) else zero(go_type)
        seen: set[str] = set()
        items = value if isinstance(value, Pairs) else list(value.items())
        for key, item in items:
            path = f"{context.path}.{key}" if context.path else key
            member = go_type.fields.get(key)
            if member is None:
                self.result.strict.append(f'unknown field "{path}"')
                continue
            if key in seen:
                self.result.strict.append(f'duplicate field "{path}"')
            seen.add(key)
            self.result.written.add(path)
            stack = (
                (*context.stack, member.embedded_in, key)
                if member.embedded_in and self.embedded_names
                else (*context.stack, key)
            )
            out[key] = self.value(item, member.type, out[key], _Context(path, go_type, stack))
        return out

    def scalar(self, value: Any, go_type: Scalar, current: Any, context: _Context) -> Any:
        kind = json_kind(value)
        if go_type.kind == "string" and kind == "string":
            return str(value)
        if go_type.kind == "bool" and kind == "bool":
            return value
        if kind == "number" and go_type.kind in ("int", "float"):
            parsed = _number(value, go_type)
            if parsed is not None:
                return parsed
            self.type_error(f"number {value}", go_type.go_name, context)
            return current
        self.type_error(kind, go_type.go_name, context)
        return current

    def duration(self, value: Any, context: _Context) -> int:
        if value is None:
            value = ""
        elif not isinstance(value, str) or isinstance(value, Number):
            self.type_error(json_kind(value), "string", context)
            return 0
        try:
            return parse_duration(value)
        except DurationError as exc:
            self.result.fatal.append((context.path, str(exc)))
            return 0

    def bytes(self, value: Any, current: Any, context: _Context) -> Any:
        if isinstance(value, str) and not isinstance(value, Number):
            try:
                return decode_std(value)
            except Base64Error as exc:
                hint = "a *Data field holds base64 of the PEM file, such as base64 -w0 ca.pem writes"
                self.result.fatal.append((context.path, f"{exc}: {hint}"))
                return current
        self.type_error(json_kind(value), "[]uint8", context)
        return current


def _number(text: str, go_type: Scalar) -> int | float | None:
    """The value of a JSON number literal in an intN or floatN, or None where Go's decoder refuses it."""
    if go_type.kind == "int":
        digits = text[1:] if text.startswith("-") else text
        if not digits.isdigit():
            return None  # a fraction or an exponent: strconv.ParseInt(text, 10, 64) refuses it
        number = int(text)
        bound = _INT_RANGES[go_type.bits]
        return number if -bound <= number < bound else None
    number_value = float(text)
    if math.isinf(number_value) or (go_type.bits == 32 and abs(number_value) > _FLOAT32_MAX):
        return None
    return number_value
