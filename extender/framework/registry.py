"""Plugin names -> classes, so that a policy file can enable plugins by name."""

from __future__ import annotations

from typing import TypeVar

from extender.framework.plugin import Plugin

P = TypeVar("P", bound=type[Plugin])

_PLUGINS: dict[str, type[Plugin]] = {}


def register(plugin: P) -> P:
    """Make ``plugin`` available to policies under ``plugin.name``; usable as a class decorator."""
    existing = _PLUGINS.get(plugin.name)
    if existing is not None and existing is not plugin:
        raise ValueError(f"a plugin named {plugin.name!r} is already registered ({existing.__module__})")
    _PLUGINS[plugin.name] = plugin
    return plugin


def lookup(name: str) -> type[Plugin] | None:
    return _PLUGINS.get(name)


def names() -> list[str]:
    return sorted(_PLUGINS)
