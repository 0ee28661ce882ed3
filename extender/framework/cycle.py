"""One request's scheduling cycle, as the scheduling framework's ``CycleState``.

What a plugin works out for the request's pod (which rules apply to it, which
maintenance windows are closed at the instant the request is judged) is worked
out once per request by the plugin's ``prepare`` and kept here, with the
plugin's reuse key. A ``CycleState`` is created for one request, passed down
to every plugin call of it and dropped with it: shared plugin instances hold
nothing request-specific, so concurrent requests can never see each other's
values, and the key a result is kept under is always the one it was worked out
with.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from extender.framework.plugin import SKIP, Plugin, prepares
from extender.framework.types import Pod


class CycleState:
    __slots__ = ("_extra", "_keys", "pod")

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        # Per plugin (by identity: plugins live as long as their profile), the extra arguments of its calls.
        self._extra: dict[int, tuple[Any, ...]] = {}
        self._keys: dict[int, Hashable | None] = {}

    def extra(self, plugin: Plugin) -> tuple[Any, ...]:
        """The arguments after (pod, node) of ``plugin``'s calls: ``(prepared,)`` if it prepares, else ``()``.

        ``prepare`` runs on the first call of the request; an exception in it propagates to the caller, which
        reports it as the plugin's failure.
        """
        extra = self._extra.get(id(plugin))
        if extra is None:
            extra = (plugin.prepare(self.pod),) if prepares(plugin) else ()
            self._extra[id(plugin)] = extra
        return extra

    def skips(self, plugin: Plugin) -> bool:
        """Whether ``plugin``'s ``prepare`` returned ``SKIP`` for this request; False when it failed (the plugin then
        runs per node, and reports its failure there)."""
        try:
            extra = self.extra(plugin)
        except Exception:  # noqa: BLE001 — plugin code (custom plugins too): its prepare failing is reported where it runs
            return False
        return bool(extra) and extra[0] is SKIP

    def reuse_key(self, plugin: Plugin) -> Hashable | None:
        """The plugin's reuse key for this request, worked out once; None when it has none or working it out fails
        (the plugin then runs per node, and reports its failure there)."""
        if id(plugin) in self._keys:
            return self._keys[id(plugin)]
        try:
            key = plugin.reuse_key(self.pod, *self.extra(plugin))
        except Exception:  # noqa: BLE001 — plugin code (custom plugins too): no key, so nothing kept
            key = None
        self._keys[id(plugin)] = key
        return key
