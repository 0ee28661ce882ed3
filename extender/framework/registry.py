"""Plugin names -> classes, so that a policy file can enable plugins by name.

Built-in plugins are registered by where they live (``register_lazily``) and
imported when a policy first names one: an instance pays at start-up only for
the plugins its policy enables.
"""

from __future__ import annotations

import importlib
from typing import TypeVar

from extender.framework.plugin import Plugin

P = TypeVar("P", bound=type[Plugin])

_PLUGINS: dict[str, type[Plugin]] = {}
# Plugin name -> "module:Class", imported on first lookup (importlib serialises concurrent imports of one module).
_LAZY: dict[str, str] = {}


def register(plugin: P) -> P:
    """Make ``plugin`` available to policies under ``plugin.name``; usable as a class decorator."""
    existing = lookup(plugin.name)
    if existing is not None and existing is not plugin:
        raise ValueError(f"a plugin named {plugin.name!r} is already registered ({existing.__module__})")
    _PLUGINS[plugin.name] = plugin
    return plugin


def register_lazily(name: str, target: str) -> None:
    """Make the plugin class ``target`` ("module:Class") available under ``name``, imported on first lookup."""
    _LAZY[name] = target


def lookup(name: str) -> type[Plugin] | None:
    plugin = _PLUGINS.get(name)
    if plugin is None and name in _LAZY:
        module, _, attribute = _LAZY[name].partition(":")
        plugin = getattr(importlib.import_module(module), attribute)
        if plugin.name != name:
            raise ValueError(f"{_LAZY[name]} is named {plugin.name!r}, registered as {name!r}")
        _PLUGINS[name] = plugin
    return plugin


def names() -> list[str]:
    return sorted(_PLUGINS.keys() | _LAZY.keys())
