"""The Kubernetes API, for what the scheduler leaves to the extender: node facts, victim pods, bindings, and the
pods bound lately (NodeLoad's in-flight pods).

The client (with msgspec and the TLS setup) costs start-up time, so its module
is only imported when ``KUBERNETES_API_URL`` is set, and the configuration
module when any of these variables is. The pod watch and the nodes'
allocatable resources are made by the first request of a policy that needs
them (``shared_watch``, ``shared_allocatable``): one each per API server and
process, whichever plugins read them. The verbs tell them where the
function's answer sends a pod, which pods it answered without placing them,
and what it bound (``assume``, ``expect``, ``note_binding``), which costs
nothing while there is none.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

from extender.kube.variables import API_URL_ENV, CREDENTIAL_ENVS
from extender.settings import Settings

if TYPE_CHECKING:
    from extender.kube.allocatable import NodeAllocatable
    from extender.kube.bound_pods import PodWatch
    from extender.kube.client import KubeClient
    from extender.kube.config import KubeConfig

# This process's pod watches and allocatable lists, by API server (its configuration).
_WATCHES: dict[KubeConfig, PodWatch] = {}
_ALLOCATABLE: dict[KubeConfig, NodeAllocatable] = {}
_MAKING = threading.Lock()


def client_from_settings(settings: Settings) -> KubeClient | None:
    """The client the ``KUBERNETES_*`` variables configure, or None without ``KUBERNETES_API_URL``; a bad setting
    raises ValueError."""
    environ = settings.kubernetes
    if not any(environ.get(name) for name in (API_URL_ENV, *CREDENTIAL_ENVS)):
        return None
    from extender.kube.config import KubeConfig

    config = KubeConfig.from_environment(environ)
    if config is None:
        return None
    from extender.kube.client import KubeClient

    # Calls made while the scheduler waits get half its httpTimeout: the rest is for deciding and answering.
    return KubeClient(config, timeout=settings.http_timeout / 2)


def shared_watch(client: KubeClient, horizon: float, assumes: bool = True) -> PodWatch:
    """The process's watch of the pods bound on ``client``'s API server, counting bindings ``horizon`` seconds back
    (the longest any caller asked for); ``assumes``: answered pods count until bound (EXTENDER_ASSUME_PODS)."""
    with _MAKING:
        watch = _WATCHES.get(client.config)
        if watch is None:
            from extender.kube.bound_pods import PodWatch

            watch = _WATCHES[client.config] = PodWatch(client, horizon, assumes)
        watch.horizon = max(watch.horizon, horizon)
        return watch


def shared_allocatable(client: KubeClient) -> NodeAllocatable:
    """The process's list of the nodes' allocatable resources on ``client``'s API server."""
    with _MAKING:
        found = _ALLOCATABLE.get(client.config)
        if found is None:
            from extender.kube.allocatable import NodeAllocatable

            found = _ALLOCATABLE[client.config] = NodeAllocatable(client)
        return found


def expect(uid: str) -> None:
    """The function answered the pod's filter with several feasible nodes: its binding follows, placed by whichever
    instance answers its prioritize (``PodWatch.expect``)."""
    for watch in list(_WATCHES.values()):
        watch.expect(uid)


# Whether the request running (on this thread) waits for the bindings of pods placed elsewhere: prioritize only.
_EXPECTING: ContextVar[bool] = ContextVar("expecting_bindings", default=False)


@contextlib.contextmanager
def expecting_bindings() -> Iterator[None]:
    """What runs inside (a prioritize request) waits for the bindings of the pods whose filter this instance answered
    and another instance placed (``PodWatch.bindings``); filter never does."""
    token = _EXPECTING.set(True)
    try:
        yield
    finally:
        _EXPECTING.reset(token)


def expects_bindings() -> bool:
    return _EXPECTING.get()


def assuming() -> bool:
    """Whether answered pods are assumed on a node (a pod watch counts in-flight pods): costs nothing without."""
    return bool(_WATCHES)


def assume(uid: str, nodes: Collection[str]) -> str | None:
    """kube-scheduler will bind the pod to one of ``nodes`` (none: no binding follows): assumed on the one with the
    fewest pods bound lately until its binding shows (``PodWatch.assume``). That node, None when not assumed."""
    chosen = None
    for watch in list(_WATCHES.values()):
        chosen = watch.assume(uid, nodes) or chosen
    return chosen


def note_binding(uid: str, node: str) -> None:
    """The function bound the pod to ``node``: the API accepted the Binding."""
    for watch in list(_WATCHES.values()):
        watch.note_binding(uid, node)
