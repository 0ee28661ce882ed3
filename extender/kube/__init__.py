"""The Kubernetes API, for what the scheduler leaves to the extender: node facts, victim pods, bindings, and the
pods bound lately (NodeLoad's in-flight pods).

The client (with msgspec and the TLS setup) costs start-up time, so its module
is only imported when ``KUBERNETES_API_URL`` is set, and the configuration
module when any of these variables is. The pod watch and the nodes'
allocatable resources are made by the first request of a policy that needs
them (``shared_watch``, ``shared_allocatable``): one each per API server and
process, whichever plugins read them. The verbs tell them what the function
itself answered and bound (``note_answer``, ``note_binding``), which costs
nothing while there is none.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
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


def shared_watch(client: KubeClient, horizon: float) -> PodWatch:
    """The process's watch of the pods bound on ``client``'s API server, counting bindings ``horizon`` seconds back
    (the longest any caller asked for)."""
    with _MAKING:
        watch = _WATCHES.get(client.config)
        if watch is None:
            from extender.kube.bound_pods import PodWatch

            watch = _WATCHES[client.config] = PodWatch(client, horizon)
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


# Whether the request running (on this thread) waits for the bindings on their way: prioritize only.
_EXPECTING: ContextVar[bool] = ContextVar("expecting_bindings", default=False)


@contextlib.contextmanager
def expecting_bindings() -> Iterator[None]:
    """What runs inside (a prioritize request) waits for the bindings of the pods this instance answered for before
    (``PodWatch.bindings``); filter never does."""
    token = _EXPECTING.set(True)
    try:
        yield
    finally:
        _EXPECTING.reset(token)


def expects_bindings() -> bool:
    return _EXPECTING.get()


def note_answer(uid: str, feasible: bool) -> None:
    """The function answered filter or prioritize for the pod (with feasible nodes or not): its binding may follow."""
    for watch in list(_WATCHES.values()):
        watch.note_answer(uid, feasible)


def note_binding(uid: str, node: str) -> None:
    """The function bound the pod to ``node``: the API accepted the Binding."""
    for watch in list(_WATCHES.values()):
        watch.note_binding(uid, node)
