"""marshmallow schema of kube-scheduler's configuration file (KubeSchedulerConfiguration v1, as kube-scheduler 1.28 to
1.35 decode it), behind ``python -m extender check-scheduler-config``.

It refuses what stops kube-scheduler from starting, in kube-scheduler's words: strict decoding of unknown fields and
wrong types at every level of the file (``pluginConfig[].args`` excepted: kube-scheduler decodes those per plugin),
and the rules of ``pkg/scheduler/apis/config/validation`` validateExtenders for ``extenders[]``. Beyond that, it
refuses what the scheduler accepts in an extender but that fails or silently misbehaves: a ``urlPrefix`` that is not an http(s) URL (every call
fails), ``enableHTTPS`` without a CA (certificate verification off), a client certificate without its key (dropped),
both data and file of one TLS item (the file is ignored), a query string in ``urlPrefix`` (the verb lands in the
query) and a non-positive ``httpTimeout`` (0 becomes 5s, a negative one disables the timeout).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from marshmallow import Schema, ValidationError, fields, pre_load, validates_schema

from extender.duration import parse_go_duration
from extender.wire.errors import entries_as_written

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)

# k8s.io/apimachinery/pkg/util/validation: IsQualifiedName and IsDNS1123Subdomain.
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _qualified_name_errors(name: str) -> list[str]:
    """validation.IsQualifiedName: an optional DNS subdomain prefix and a name part of at most 63 characters."""
    parts = name.split("/")
    if len(parts) > 2:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'"]
    errors: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            errors.append("prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters")
    short = parts[-1]
    if not short:
        errors.append("name part must be non-empty")
    elif len(short) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME_PART.fullmatch(short):
        errors.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")
    return errors


def extended_resource_name_errors(name: str) -> list[str]:
    """validateExtendedResourceName: qualified, prefixed by a domain, and not a native ("kubernetes.io/") resource."""
    errors = _qualified_name_errors(name)
    if errors:
        return errors
    # v1helper.IsExtendedResourceName: not native, not "requests."-prefixed, and still qualified as a quota name.
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests.") or _qualified_name_errors(f"requests.{name}"):
        return ["is an invalid extended resource name"]
    return []


def _go_quote(text: str) -> str:
    """A string as Kubernetes field errors show an invalid value: double-quoted, escaped like Go's strconv.Quote."""
    return json.dumps(text, ensure_ascii=False)


def _json_kind(value: Any) -> str:
    """The JSON kind Go's decoder names in "cannot unmarshal <kind> into Go value of type T"."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _go_field(field: fields.Field) -> str:
    """How Go's JSON decoder names a field of kube-scheduler's config types: the struct holding it, then its path from
    the top without indices, ``Extender.extenders.weight``."""
    schema = field.parent
    go_struct, go_path = getattr(schema, "GO_STRUCT", "Extender"), getattr(schema, "GO_PATH", "extenders")
    return ".".join(part for part in (go_struct, go_path, field.data_key or field.name) if part)


def _unmarshal_error(field: fields.Field, kind: str, go_type: str) -> ValidationError:
    return ValidationError(f"json: cannot unmarshal {kind} into Go struct field {_go_field(field)} of type {go_type}")


class GoString(fields.String):
    """A Go ``string``: a JSON string only."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        if not isinstance(value, str):
            raise _unmarshal_error(self, _json_kind(value), "string")
        return value


class GoBool(fields.Field):
    """A Go ``bool``: JSON true/false only (no "true" strings, no 0/1)."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> bool:
        if type(value) is not bool:
            raise _unmarshal_error(self, _json_kind(value), "bool")
        return value


class GoInt(fields.Field):
    """A Go ``int32`` or ``int64``. YAML configs pass through JSON floats, so an integral 2.0 is still 2; bools and 1.5
    are not."""

    def __init__(self, bits: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bits = bits

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> int:
        integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        bound = 2 ** (self.bits - 1)
        if isinstance(value, bool) or not integral or not -bound <= value < bound:
            # Go names the offending number, and only the kind of anything else.
            kind = _json_kind(value)
            raise _unmarshal_error(self, f"{kind} {value}" if kind == "number" else kind, f"int{self.bits}")
        return int(value)


class GoFloat32(fields.Field):
    """A Go ``float32``: any JSON number."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _unmarshal_error(self, _json_kind(value), "float32")
        return float(value)


class GoDuration(GoString):
    """A metav1.Duration: a string ("5s"), never a number, that time.ParseDuration accepts; with ``positive``, above 0."""

    default_error_messages: ClassVar[dict[str, str]] = {
        "duration": 'time: invalid duration "{value}" (e.g. "5s", "1500ms", "1m30s")',
        "positive": "must be positive: kube-scheduler turns 0 into 5s and a negative timeout disables it",
    }

    def __init__(self, *, positive: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.positive = positive

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            seconds = parse_go_duration(text)
        except ValueError:
            raise self.make_error("duration", value=text) from None
        if self.positive and seconds <= 0:
            raise self.make_error("positive")
        return text


class PemData(GoString):
    """A ``[]byte`` of PEM: base64 in the configuration (standard alphabet, padded), holding a block of ``kinds``."""

    default_error_messages: ClassVar[dict[str, str]] = {
        "base64": (
            "illegal base64 data at input byte {offset}: the *Data fields hold base64 of the PEM file, "
            "e.g. base64 -w0 ca.pem"
        ),
        "pem": "unable to parse bytes as PEM block: expected base64 of a PEM {expected}",
    }

    def __init__(self, *, kinds: re.Pattern[bytes], expected: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kinds = kinds
        self.expected = expected

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            # Go's base64.StdEncoding skips line breaks and is otherwise strict, like validate=True.
            pem = base64.b64decode(re.sub(r"[\r\n]", "", text), validate=True)
        except (binascii.Error, ValueError):
            raise self.make_error("base64", offset=_base64_error_offset(text)) from None
        if not any(self.kinds.fullmatch(block.group(1)) and _valid_base64(block.group(2)) for block in _PEM_BLOCK.finditer(pem)):
            raise self.make_error("pem", expected=self.expected)
        return text


def _base64_error_offset(text: str) -> int:
    """Where Go's base64.StdEncoding reports corrupt input: the first byte outside the alphabet (line breaks are
    skipped), else the start of the incomplete last quantum."""
    seen = 0  # characters of the alphabet read so far, padding included
    for offset, char in enumerate(text):
        if char in "\r\n":
            continue
        if not (char.isascii() and (char.isalnum() or char in "+/=")):
            return offset
        seen += 1
    return seen - seen % 4 if seen % 4 else max(seen - 4, 0)


def _valid_base64(body: bytes) -> bool:
    try:
        base64.b64decode(re.sub(rb"\s", b"", body), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _certificate(**kwargs: Any) -> PemData:
    return PemData(kinds=re.compile(rb"CERTIFICATE"), expected="certificate", **kwargs)


class ConfigSchema(Schema):
    """Decodes like kube-scheduler: unknown fields are errors (marshmallow's RAISE), ``null`` is the zero value."""

    @pre_load
    def drop_nulls(self, data: Any, **kwargs: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


class ExtenderManagedResourceSchema(ConfigSchema):
    GO_STRUCT, GO_PATH = "ExtenderManagedResource", "extenders.managedResources"

    name = GoString(required=True)
    ignoredByScheduler = GoBool()

    @validates_schema
    def extended_resource_name(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors = extended_resource_name_errors(data["name"])
        if errors:
            raise ValidationError([f"Invalid value: {_go_quote(data['name'])}: {error}" for error in errors], "name")


class ExtenderTLSConfigSchema(ConfigSchema):
    GO_STRUCT, GO_PATH = "ExtenderTLSConfig", "extenders.tlsConfig"

    insecure = GoBool()
    serverName = GoString()
    certFile = GoString()
    keyFile = GoString()
    caFile = GoString()
    certData = _certificate()
    keyData = PemData(kinds=re.compile(rb"([A-Z]+ )?PRIVATE KEY"), expected="private key")
    caData = _certificate()

    @validates_schema
    def consistent(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, list[str]] = {}
        if data.get("insecure") and (data.get("caData") or data.get("caFile")):
            errors.setdefault("insecure", []).append("specifying a root certificates file with the insecure flag is not allowed")
        for data_key, file_key in (("caData", "caFile"), ("certData", "certFile"), ("keyData", "keyFile")):
            if data.get(data_key) and data.get(file_key):
                errors.setdefault(file_key, []).append(f"set {data_key} or {file_key}, not both: {data_key} silently wins")
        has_cert = bool(data.get("certData") or data.get("certFile"))
        has_key = bool(data.get("keyData") or data.get("keyFile"))
        if has_cert != has_key:
            missing = "keyData/keyFile" if has_cert else "certData/certFile"
            errors.setdefault("_schema", []).append(f"a client certificate needs both certificate and key: {missing} is missing, and client-go would silently send none")
        if errors:
            raise ValidationError(errors)


def _check_url_prefix(value: str) -> None:
    url = urlsplit(value)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValidationError("must be an http:// or https:// URL: kube-scheduler accepts it, but every call fails")
    if "?" in value or "#" in value:
        raise ValidationError('must not have a query string or fragment: the scheduler appends "/<verb>" verbatim')


class ExtenderSchema(ConfigSchema):
    urlPrefix = GoString(required=True, validate=_check_url_prefix)
    filterVerb = GoString()
    preemptVerb = GoString()
    prioritizeVerb = GoString()
    weight = GoInt(64)
    bindVerb = GoString()
    enableHTTPS = GoBool()
    tlsConfig = fields.Nested(ExtenderTLSConfigSchema)
    httpTimeout = GoDuration(positive=True)
    nodeCacheCapable = GoBool()
    managedResources = fields.List(fields.Nested(ExtenderManagedResourceSchema))
    ignorable = GoBool()

    # The checks below run beside field errors too (kube-scheduler reports every problem at once); they skip what a
    # field error already covers.
    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def weight_with_prioritize(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        if "weight" in original and "weight" not in data:
            return
        weight = data.get("weight", 0)
        if data.get("prioritizeVerb") and weight <= 0:
            raise ValidationError(f"Invalid value: {weight}: must have a positive weight applied to it", "weight")

    @validates_schema(skip_on_field_errors=False)
    def verified_https(self, data: dict[str, Any], **kwargs: Any) -> None:
        tls = data.get("tlsConfig", {})
        if data.get("enableHTTPS") and not (tls.get("caData") or tls.get("caFile")) and not tls.get("insecure"):
            raise ValidationError(
                "enableHTTPS without tlsConfig.caData or caFile turns certificate verification off: give a CA, drop "
                "enableHTTPS to verify an https:// urlPrefix against the system roots, or set tlsConfig.insecure: true",
                "enableHTTPS",
            )


def _duplicate_resources(extenders: list[dict[str, Any]]) -> dict[int, dict[int, dict[str, list[str]]]]:
    """{extender index: {resource index: errors}}: a managed resource name may appear once across all extenders."""
    seen: set[str] = set()
    found: dict[int, dict[int, dict[str, list[str]]]] = {}
    for index, extender in entries_as_written(extenders):
        for position, resource in entries_as_written(extender.get("managedResources")):
            if not isinstance(resource.get("name"), str):
                continue  # a field error of its own
            if resource["name"] in seen:
                message = f"Invalid value: {_go_quote(resource['name'])}: duplicate extender managed resource name"
                found.setdefault(index, {})[position] = {"name": [message]}
            seen.add(resource["name"])
    return found


class ExtendersSchema(ConfigSchema):
    """The ``extenders:`` list of a KubeSchedulerConfiguration, with the rules that span extenders."""

    extenders = fields.List(fields.Nested(ExtenderSchema), required=True)

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def across_extenders(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        extenders = original.get("extenders") if isinstance(original, dict) else None
        binders = sum(1 for _, extender in entries_as_written(extenders) if extender.get("bindVerb"))
        duplicates = _duplicate_resources(extenders)
        errors: dict[Any, Any] = {index: {"managedResources": found} for index, found in duplicates.items()}
        if binders > 1:
            found = f'"found {binders} extenders implementing bind"'
            errors["_schema"] = [f"Invalid value: {found}: only one extender can implement bind"]
        if errors:
            raise ValidationError(errors, "extenders")


# --- The rest of the file: decoded strictly, not validated beyond its types -----------------------------------------

# The extension points of a profile's plugins, in kube-scheduler 1.28 to 1.35.
EXTENSION_POINTS = (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
    "preBind", "bind", "postBind", "multiPoint",
)  # fmt: skip


class LeaderElectionSchema(ConfigSchema):
    GO_STRUCT, GO_PATH = "LeaderElectionConfiguration", "leaderElection"

    leaderElect = GoBool()
    leaseDuration = GoDuration()
    renewDeadline = GoDuration()
    retryPeriod = GoDuration()
    resourceLock = GoString()
    resourceName = GoString()
    resourceNamespace = GoString()


class ClientConnectionSchema(ConfigSchema):
    GO_STRUCT, GO_PATH = "ClientConnectionConfiguration", "clientConnection"

    kubeconfig = GoString()
    acceptContentTypes = GoString()
    contentType = GoString()
    qps = GoFloat32()
    burst = GoInt(32)


class PluginSchema(ConfigSchema):
    GO_STRUCT = "Plugin"

    name = GoString()
    weight = GoInt(32)


def _plugin_set(point: str) -> fields.Nested:
    """The PluginSet of one extension point; its plugins' fields are named as Go names them, by their path
    (``Plugin.profiles.plugins.score.enabled.weight``)."""
    members = {}
    for part in ("enabled", "disabled"):
        plugin = type(f"Plugin_{point}_{part}", (PluginSchema,), {"GO_PATH": f"profiles.plugins.{point}.{part}"})
        members[part] = fields.List(fields.Nested(plugin))
    return fields.Nested(ConfigSchema.from_dict(members, name=f"PluginSet_{point}"))


class PluginConfigSchema(ConfigSchema):
    GO_STRUCT, GO_PATH = "PluginConfig", "profiles.pluginConfig"

    name = GoString()
    args = fields.Raw()  # a runtime.RawExtension: kube-scheduler decodes it per plugin


class ProfileSchema(ConfigSchema):
    GO_STRUCT, GO_PATH = "KubeSchedulerProfile", "profiles"

    schedulerName = GoString()
    percentageOfNodesToScore = GoInt(32)
    plugins = fields.Nested(ConfigSchema.from_dict({point: _plugin_set(point) for point in EXTENSION_POINTS}, name="Plugins"))
    pluginConfig = fields.List(fields.Nested(PluginConfigSchema))


class KubeSchedulerConfigurationSchema(ExtendersSchema):
    """The whole file. apiVersion and kind are checked beside it (they say which types decode the rest); a file
    without extenders decodes, and the command says what that means."""

    GO_STRUCT, GO_PATH = "KubeSchedulerConfiguration", ""

    apiVersion = GoString()
    kind = GoString()
    parallelism = GoInt(32)
    leaderElection = fields.Nested(LeaderElectionSchema)
    clientConnection = fields.Nested(ClientConnectionSchema)
    enableProfiling = GoBool()
    enableContentionProfiling = GoBool()
    percentageOfNodesToScore = GoInt(32)
    podInitialBackoffSeconds = GoInt(64)
    podMaxBackoffSeconds = GoInt(64)
    profiles = fields.List(fields.Nested(ProfileSchema))
    extenders = fields.List(fields.Nested(ExtenderSchema))
    delayCacheUntilActive = GoBool()
