"""Label selectors and pod selectors, with Kubernetes semantics, shared by every plugin that matches pods or nodes.

One implementation keeps ``matchLabels``/``matchExpressions`` meaning the same
in every rule of every plugin, exactly as in ``k8s.io/apimachinery/pkg/labels``
and the scheduler's node affinity: an empty selector matches everything,
``NotIn`` and ``DoesNotExist`` match objects without the key, ``Gt``/``Lt``
compare integers and never match a value that is not one. The schemas check
keys, values and operators at policy load time, so a typo fails start-up
instead of silently matching nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Length

from extender.framework.args import Map, failed_fields
from extender.framework.types import Pod

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# strconv.ParseInt(s, 10, 64) syntax: Python's int() would also take spaces and underscores.
_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def validate_label_key(key: str) -> None:
    """A qualified name, as Kubernetes requires of label and annotation keys."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValidationError(f"{key!r} is not a valid key: the prefix before '/' must be a DNS subdomain")
    if not _NAME.match(name):
        raise ValidationError(
            f"{key!r} is not a valid key: the name must be 1-63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit, optionally after a DNS subdomain prefix and '/'"
        )


def validate_label_value(value: str) -> None:
    if value and not _NAME.match(value):
        raise ValidationError(
            f"{value!r} is not a valid label value: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )


def validate_namespace(name: str) -> None:
    if not _DNS_LABEL.match(name):
        raise ValidationError(f"{name!r} is not a valid namespace name (a DNS label: lowercase letters, digits, '-')")


def _as_integer(value: str) -> int | None:
    """The value as Kubernetes reads it for Gt/Lt: a base-10 int64, else no number (and no match)."""
    if not _INTEGER.match(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


class Requirement(NamedTuple):
    """One ``matchExpressions`` entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case "In":
                return value is not None and value in self.values
            case "NotIn":
                return value is None or value not in self.values
            case "Exists":
                return value is not None
            case "DoesNotExist":
                return value is None
            case _:  # Gt, Lt
                number = _as_integer(value) if value is not None else None
                if number is None:
                    return False
                bound = int(self.values[0])
                return number > bound if self.operator == "Gt" else number < bound

    def __str__(self) -> str:
        match self.operator:
            case "In" | "NotIn":
                return f"{self.key} {self.operator.lower()} ({','.join(sorted(self.values))})"
            case "Exists":
                return self.key
            case "DoesNotExist":
                return f"!{self.key}"
            case _:
                return f"{self.key}{'>' if self.operator == 'Gt' else '<'}{self.values[0]}"


class LabelSelector(NamedTuple):
    """``matchLabels`` AND every ``matchExpressions`` entry; empty matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        # Plain loops: this runs once per node and rule, thousands of times per request.
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for requirement in self.match_expressions:
            if not requirement.matches(labels):
                return False
        return True

    def __str__(self) -> str:
        """The ``kubectl -l`` form, as Kubernetes prints selectors in messages."""
        parts = [f"{key}={value}" for key, value in self.match_labels] + [str(req) for req in self.match_expressions]
        return ",".join(parts) or "<everything>"


EVERYTHING = LabelSelector()


class PodSelector(NamedTuple):
    """Which pods a rule is about; every criterion that is set must hold, and an empty selector matches every pod."""

    namespaces: frozenset[str] | None = None
    exclude_namespaces: frozenset[str] = frozenset()
    label_selector: LabelSelector = EVERYTHING
    annotation_selector: LabelSelector = EVERYTHING
    min_priority: int | None = None
    max_priority: int | None = None

    def matches(self, pod: Pod) -> bool:
        """``pod`` must be a full pod: UID-only victims carry no labels to match (see ``Pod``)."""
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        if pod.namespace in self.exclude_namespaces:
            return False
        # Kubernetes reads a pod without spec.priority as priority 0.
        priority = pod.priority or 0
        if self.min_priority is not None and priority < self.min_priority:
            return False
        if self.max_priority is not None and priority > self.max_priority:
            return False
        return self.label_selector.matches(pod.labels or {}) and self.annotation_selector.matches(pod.annotations or {})

    def __str__(self) -> str:
        """What it selects, in the selectors' ``kubectl -l`` words: ``namespace in (payments), priority>=1000``."""
        parts = []
        if self.namespaces is not None:
            parts.append(f"namespace in ({','.join(sorted(self.namespaces))})")
        if self.exclude_namespaces:
            parts.append(f"namespace notin ({','.join(sorted(self.exclude_namespaces))})")
        if self.label_selector != EVERYTHING:
            parts.append(f"labels {self.label_selector}")
        if self.annotation_selector != EVERYTHING:
            parts.append(f"annotations {self.annotation_selector}")
        if self.min_priority is not None:
            parts.append(f"priority>={self.min_priority}")
        if self.max_priority is not None:
            parts.append(f"priority<={self.max_priority}")
        return ", ".join(parts) or "<every pod>"


# --- Policy schemas ------------------------------------------------------------------------------


class RequirementSchema(Schema):
    key = fields.String(required=True, validate=validate_label_key)
    operator = fields.String(required=True)
    values = fields.List(fields.String(), load_default=list)
    # Label selectors check values as label values; annotation values may be any string.
    check_values = True

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def operator_fits_values(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        if "operator" not in data:
            return  # missing, or not a string: its own error says so
        operator, values = data["operator"], data.get("values", [])
        if operator not in OPERATORS:
            raise ValidationError(f"unknown operator {operator!r}: use one of {', '.join(OPERATORS)}", "operator")
        if "values" in failed_fields(self, data, original):
            return
        if operator in ("In", "NotIn"):
            if not values:
                raise ValidationError(f"{operator} needs at least one value", "values")
            if self.check_values:
                problems = {}
                for index, value in enumerate(values):
                    try:
                        validate_label_value(value)
                    except ValidationError as exc:
                        problems[index] = exc.messages
                if problems:
                    raise ValidationError(problems, "values")
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                raise ValidationError(f"{operator} takes no values", "values")
        elif len(values) != 1 or _as_integer(values[0]) is None:
            raise ValidationError(f"{operator} needs exactly one value, an integer", "values")

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> Requirement:
        return Requirement(data["key"], data["operator"], tuple(data["values"]))


class AnnotationRequirementSchema(RequirementSchema):
    check_values = False


class LabelSelectorSchema(Schema):
    matchLabels = Map(
        keys=fields.String(validate=validate_label_key),
        values=fields.String(validate=validate_label_value),
        load_default=dict,
    )
    matchExpressions = fields.List(fields.Nested(RequirementSchema), load_default=list)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> LabelSelector:
        return LabelSelector(tuple(sorted(data["matchLabels"].items())), tuple(data["matchExpressions"]))


class AnnotationSelectorSchema(LabelSelectorSchema):
    """The label-selector shape over annotations, whose values are free text."""

    matchLabels = Map(keys=fields.String(validate=validate_label_key), values=fields.String(), load_default=dict)
    matchExpressions = fields.List(fields.Nested(AnnotationRequirementSchema), load_default=list)


class PriorityRangeSchema(Schema):
    min = fields.Integer(strict=True)
    max = fields.Integer(strict=True)

    @validates_schema(skip_on_field_errors=False)
    def min_not_above_max(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "min" in data and "max" in data and data["min"] > data["max"]:
            raise ValidationError(f"min ({data['min']}) is above max ({data['max']})")


class PodSelectorSchema(Schema):
    namespaces = fields.List(fields.String(validate=validate_namespace), validate=Length(min=1))
    excludeNamespaces = fields.List(fields.String(validate=validate_namespace), validate=Length(min=1))
    labelSelector = fields.Nested(LabelSelectorSchema)
    annotationSelector = fields.Nested(AnnotationSelectorSchema)
    priority = fields.Nested(PriorityRangeSchema)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> PodSelector:
        priority = data.get("priority", {})
        return PodSelector(
            namespaces=frozenset(data["namespaces"]) if "namespaces" in data else None,
            exclude_namespaces=frozenset(data.get("excludeNamespaces", ())),
            label_selector=data.get("labelSelector", EVERYTHING),
            annotation_selector=data.get("annotationSelector", EVERYTHING),
            min_priority=priority.get("min"),
            max_priority=priority.get("max"),
        )
