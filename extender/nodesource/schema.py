"""The policy's ``nodeSource``: where node-name (nodeCacheCapable: true) requests get node facts from.

Exactly one of ``kubernetes``, ``static`` or ``names`` (like a Kubernetes
volume source); without ``nodeSource`` only node names are known. Unknown
keys are rejected (marshmallow's default), so a typo fails start-up. Each
kind's module is imported only when a policy chooses it, and this one only
when a policy has a ``nodeSource``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Length

from extender.duration import Duration
from extender.framework.args import Map, failed_fields
from extender.framework.globs import validate_glob
from extender.nodesource.spec import KINDS, NodeSourceSpec

if TYPE_CHECKING:
    from extender.nodesource.kubernetes import KubernetesSettings
    from extender.nodesource.static import InventoryEntry


class KubernetesSourceSchema(Schema):
    # Unset ones keep KubernetesSettings' defaults.
    cacheTTL = Duration(minimum="1s")
    maxWait = Duration(minimum="10ms")
    listTimeout = Duration(minimum="1s")
    minRefreshInterval = Duration(minimum="1s")

    @post_load
    def make_settings(self, data: dict[str, Any], **kwargs: Any) -> KubernetesSettings:
        from extender.nodesource.kubernetes import KubernetesSettings

        given = {
            "cache_ttl": data.get("cacheTTL"),
            "max_wait": data.get("maxWait"),
            "list_timeout": data.get("listTimeout"),
            "min_refresh_interval": data.get("minRefreshInterval"),
        }
        return KubernetesSettings(**{name: value for name, value in given.items() if value is not None})


def _label_key(key: str) -> None:
    from extender.framework.selectors import validate_label_key

    validate_label_key(key)


def _label_value(value: str) -> None:
    from extender.framework.selectors import validate_label_value

    validate_label_value(value)


class InventoryEntrySchema(Schema):
    names = fields.List(fields.String(validate=validate_glob), required=True, validate=Length(min=1))
    labels = Map(keys=fields.String(validate=_label_key), values=fields.String(validate=_label_value), required=True)

    @post_load
    def make_entry(self, data: dict[str, Any], **kwargs: Any) -> InventoryEntry:
        from extender.nodesource.static import InventoryEntry

        return InventoryEntry(tuple(data["names"]), data["labels"])


class StaticSourceSchema(Schema):
    nodes = fields.List(fields.Nested(InventoryEntrySchema), required=True, validate=Length(min=1))


class NamesSourceSchema(Schema):
    cluster = fields.String(required=True, validate=Length(min=1))
    nodePools = fields.List(fields.String(validate=Length(min=1)), load_default=list)


class NodeSourceSchema(Schema):
    kubernetes = fields.Nested(KubernetesSourceSchema)
    static = fields.Nested(StaticSourceSchema)
    names = fields.Nested(NamesSourceSchema)

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def exactly_one(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        given = data.keys() | failed_fields(self, data, original)  # a kind with errors of its own is still chosen
        chosen = [kind for kind in KINDS if kind in given]
        if not chosen and isinstance(original, dict) and original:
            return  # only unknown keys, each reported with the kind it is nearest
        if len(chosen) != 1:
            got = f"got {', '.join(chosen)}" if chosen else "got none"
            raise ValidationError(f"set exactly one of {', '.join(KINDS)} ({got})")

    @post_load
    def make_spec(self, data: dict[str, Any], **kwargs: Any) -> NodeSourceSpec:
        kind = next(kind for kind in KINDS if kind in data)
        return NodeSourceSpec(kind, data[kind])
