"""The Kubernetes API, for what the scheduler leaves to the extender: node facts, victim pods, bindings.

The client (with msgspec and the TLS setup) costs start-up time, so its module
is only imported when ``KUBERNETES_API_URL`` is set, and the configuration
module when any of these variables is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extender.kube.variables import API_URL_ENV, CREDENTIAL_ENVS
from extender.settings import Settings

if TYPE_CHECKING:
    from extender.kube.client import KubeClient


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
