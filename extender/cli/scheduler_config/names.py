"""apimachinery's name validation (k8s.io/apimachinery/pkg/util/validation), in its words: qualified names (label
keys, topology keys, resource names), label values, DNS subdomains, and extended resource names."""

from __future__ import annotations

import re

from extender.cli.scheduler_config.versions import Version

BYTES_WORDING_SINCE: Version = (1, 35)  # "must be no more than 63 bytes" (was "characters")

_QUALIFIED_PART = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + "(\\." + _LABEL + ")*"
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character"
)
_LABEL_VALUE = f"({_QUALIFIED_PART})?"
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character"
)


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _too_long(limit: int, version: Version) -> str:
    return f"must be no more than {limit} {'bytes' if version >= BYTES_WORDING_SINCE else 'characters'}"


def _length(text: str) -> int:
    return len(text.encode("utf-8"))


def dns1123_subdomain_errors(value: str, version: Version) -> list[str]:
    errors = []
    if _length(value) > 253:
        errors.append(_too_long(253, version))
    if not re.fullmatch(_SUBDOMAIN, value):
        errors.append(_regex_error(_SUBDOMAIN_MESSAGE, _SUBDOMAIN, "example.com"))
    return errors


def qualified_name_errors(value: str, version: Version) -> list[str]:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name part of at most 63 characters."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_MESSAGE, _QUALIFIED_PART, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {message}" for message in dns1123_subdomain_errors(prefix, version)]
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif _length(name) > 63:
        errors.append(f"name part {_too_long(63, version)}")
    if not re.fullmatch(_QUALIFIED_PART, name):
        errors.append("name part " + _regex_error(_QUALIFIED_MESSAGE, _QUALIFIED_PART, "MyName", "my.name", "123-abc"))
    return errors


def label_value_errors(value: str, version: Version) -> list[str]:
    errors = []
    if _length(value) > 63:
        errors.append(_too_long(63, version))
    if not re.fullmatch(_LABEL_VALUE, value):
        errors.append(_regex_error(_LABEL_VALUE_MESSAGE, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errors


def is_extended_resource_name(name: str, version: Version) -> bool:
    """v1helper.IsExtendedResourceName: not native (it has a '/' and no "kubernetes.io/"), not "requests."-prefixed,
    and still a qualified name with "requests." before it (the quota name)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not qualified_name_errors(f"requests.{name}", version)
