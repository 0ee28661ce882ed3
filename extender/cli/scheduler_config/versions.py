"""Kubernetes versions as the tools take them (``1.31``, ``1.31.4``, ``v1.31.4``, GKE's ``1.31.4-gke.100``), and what
each kube-scheduler serves."""

from __future__ import annotations

import re

# A kube-scheduler minor version: (1, 31).
Version = tuple[int, int]

# The minors judged, oldest and newest.
OLDEST: Version = (1, 28)
NEWEST: Version = (1, 35)

GROUP = "kubescheduler.config.k8s.io"
KIND = "KubeSchedulerConfiguration"
V1 = f"{GROUP}/v1"
V1BETA3 = f"{GROUP}/v1beta3"
# KEP-785: v1beta3 is served up to 1.28 (deprecated since 1.26) and removed in 1.29.
V1BETA3_UNTIL: Version = (1, 28)

# X.Y or X.Y.Z, with an optional v; a patch version may carry a pre-release or build suffix (GKE's -gke.N).
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+(?:[-+][0-9A-Za-z.-]+)?)?")


def parse_kubernetes_version(text: str, oldest: Version = OLDEST, newest: Version = NEWEST) -> Version:
    """The minor version of ``1.31``, ``v1.31``, ``1.31.4``, ``v1.31.4`` or ``1.31.4-gke.100``; ValueError naming the
    accepted forms and range for anything else (``1.31-gke.1``, ``latest``, a minor outside [oldest, newest])."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"{text!r} is not a Kubernetes version: write X.Y, X.Y.Z, vX.Y.Z or X.Y.Z-gke.N, such as {shown(newest)}, "
            f"{shown(newest)}.4 or v{shown(newest)}.4"
        )
    version = (int(match[1]), int(match[2]))
    if not oldest <= version <= newest:
        raise ValueError(
            f"{text!r}: Kubernetes {shown(version)} is not supported, only {shown(oldest)} to {shown(newest)}"
        )
    return version


def shown(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def served_api_versions(version: Version) -> tuple[str, ...]:
    """The KubeSchedulerConfiguration apiVersions kube-scheduler ``version`` decodes."""
    return (V1, V1BETA3) if version <= V1BETA3_UNTIL else (V1,)
