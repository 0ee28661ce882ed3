"""Requests exactly as kube-scheduler sends them, for a GKE-like cluster of N nodes.

Nodes look like what a GKE kubelet reports and an informer hands the
scheduler: ~26 labels, taints on spot and GPU pools, capacity/allocatable,
5 conditions, addresses, nodeInfo, ``managedFields`` and 50 ``status.images``
(kubelet's default report size), about 18.6 kB each as compact JSON. Bodies
are compact JSON carrying both alternatives, the unused one ``null``.
Generated deterministically at bench time; never committed.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

CLUSTER = "prod-us"
REGION = "us-central1"
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")
STAMP = "2026-11-20T08:14:07Z"


@dataclass(frozen=True)
class Pool:
    name: str
    machine: str
    cpu: int
    memory_gi: int
    spot: bool = False
    gpu: bool = False


POOLS = (
    Pool("default-pool", "e2-standard-4", 4, 16),
    Pool("general", "n2-standard-8", 8, 32),
    Pool("highmem", "n2-highmem-16", 16, 128),
    Pool("spot", "e2-standard-8", 8, 32, spot=True),
    Pool("batch-spot", "c3-standard-22", 22, 88, spot=True),
    Pool("gpu", "g2-standard-8", 8, 32, gpu=True),
)
# Share of the cluster in each pool, same order as POOLS.
POOL_WEIGHTS = (25, 30, 15, 15, 10, 5)

_IMAGES = (
    "gke.gcr.io/gke-metrics-agent",
    "gke.gcr.io/fluent-bit",
    "gke.gcr.io/fluent-bit-gke-exporter",
    "gke.gcr.io/kube-proxy-amd64",
    "gke.gcr.io/prometheus-to-sd",
    "gke.gcr.io/csi-node-driver-registrar",
    "gke.gcr.io/gcp-compute-persistent-disk-csi-driver",
    "gke.gcr.io/netd-amd64",
    "gke.gcr.io/ip-masq-agent",
    "gke.gcr.io/cluster-proportional-autoscaler",
    "gke.gcr.io/k8s-dns-node-cache",
    "gke.gcr.io/gke-metadata-server",
    "gke.gcr.io/addon-resizer",
    "gke.gcr.io/pause",
    "registry.k8s.io/metrics-server/metrics-server",
    "registry.k8s.io/kube-state-metrics/kube-state-metrics",
    "docker.io/library/nginx",
    "docker.io/library/redis",
    "docker.io/library/postgres",
    "docker.io/bitnami/kafka",
    "quay.io/prometheus/node-exporter",
    "quay.io/jetstack/cert-manager-controller",
    "ghcr.io/open-telemetry/opentelemetry-collector-releases/otelcol",
    "us-docker.pkg.dev/prod-platform/apps/checkout",
    "us-docker.pkg.dev/prod-platform/apps/payments",
)


def _sha(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def _uid(*parts: object) -> str:
    digest = _sha(*parts)
    return f"{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"


def node_name(index: int, pool: Pool) -> str:
    # GKE's 4-character instance suffix, made unique per index (7919 is coprime with 36**4).
    code, suffix = index * 7919 % 36**4, ""
    for _ in range(4):
        code, digit = divmod(code, 36)
        suffix += "0123456789abcdefghijklmnopqrstuvwxyz"[digit]
    return f"gke-{CLUSTER}-{pool.name}-{_sha(pool.name)[:8]}-{suffix}"


def _labels(name: str, pool: Pool, zone: str) -> dict[str, str]:
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": pool.machine,
        "beta.kubernetes.io/os": "linux",
        "cloud.google.com/gke-boot-disk": "pd-balanced",
        "cloud.google.com/gke-container-runtime": "containerd",
        "cloud.google.com/gke-cpu-scaling-level": str(pool.cpu),
        "cloud.google.com/gke-logging-variant": "DEFAULT",
        "cloud.google.com/gke-max-pods-per-node": "110",
        "cloud.google.com/gke-nodepool": pool.name,
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/gke-provisioning": "spot" if pool.spot else "standard",
        "cloud.google.com/gke-stack-type": "IPV4",
        "cloud.google.com/machine-family": pool.machine.split("-")[0],
        "cloud.google.com/private-node": "false",
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "iam.gke.io/gke-metadata-server-enabled": "true",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": pool.machine,
        "node.kubernetes.io/masq-agent-ds-ready": "true",
        "topology.gke.io/zone": zone,
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": zone,
        "team": "platform",
    }
    if pool.spot:
        labels["cloud.google.com/gke-spot"] = "true"
    if pool.gpu:
        labels["cloud.google.com/gke-accelerator"] = "nvidia-l4"
    return dict(sorted(labels.items()))  # Go encodes map keys sorted


def _taints(pool: Pool) -> list[dict[str, str]]:
    taints = []
    if pool.spot:
        taints.append({"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"})
    if pool.gpu:
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    return taints


def _resources(pool: Pool, allocatable: bool) -> dict[str, str]:
    cpu = f"{pool.cpu * 1000 - 60 - 10 * pool.cpu}m" if allocatable else str(pool.cpu)
    memory = f"{pool.memory_gi * 1024 * 1024 * 87 // 100}Ki" if allocatable else f"{pool.memory_gi * 1024 * 1024}Ki"
    resources = {
        "cpu": cpu,
        "ephemeral-storage": "47060071478" if allocatable else "98831908Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": memory,
        "pods": "110",
    }
    if pool.gpu:
        resources["nvidia.com/gpu"] = "1"
    return dict(sorted(resources.items()))


def _conditions() -> list[dict[str, str]]:
    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": STAMP,
            "lastTransitionTime": "2026-11-02T11:40:51Z",
            "reason": reason,
            "message": message,
        }

    return [
        condition("NetworkUnavailable", "False", "RouteCreated", "NodeController create implicit route"),
        condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled"),
    ]


def _images(rng: random.Random) -> list[dict[str, Any]]:
    images = []
    for slot in range(50):
        repo = _IMAGES[slot % len(_IMAGES)]
        tag = f"v{slot // len(_IMAGES) + 1}.{rng.randrange(30)}.{rng.randrange(10)}-gke.{rng.randrange(3000)}"
        digest = _sha(repo, tag)
        images.append(
            {"names": [f"{repo}@sha256:{digest}", f"{repo}:{tag}"], "sizeBytes": rng.randrange(2_000_000, 900_000_000)}
        )
    images.sort(key=lambda image: -image["sizeBytes"])  # kubelet reports the largest first
    return images


def _fields(*paths: str) -> dict[str, Any]:
    """A FieldsV1 tree for paths such as ``f:status|f:conditions|k:{"type":"Ready"}|f:reason``."""
    tree: dict[str, Any] = {}
    for path in paths:
        at = tree
        for part in path.split("|"):
            at = at.setdefault(part, {".": {}} if part != path.split("|")[-1] else {})
    return tree


def _managed_fields(pool: Pool) -> list[dict[str, Any]]:
    condition_fields = [
        f'f:status|f:conditions|k:{{"type":"{kind}"}}|f:{field}'
        for kind in ("DiskPressure", "MemoryPressure", "PIDPressure", "Ready")
        for field in ("lastHeartbeatTime", "lastTransitionTime", "message", "reason", "status", "type")
    ]
    kubelet_status = [
        *condition_fields,
        *(
            f"f:status|f:{kind}|f:{resource}"
            for kind in ("allocatable", "capacity")
            for resource in _resources(pool, False)
        ),
        *(
            f'f:status|f:addresses|k:{{"type":"{kind}"}}|f:{field}'
            for kind in ("Hostname", "InternalIP", "ExternalIP")
            for field in ("address", "type")
        ),
        "f:status|f:daemonEndpoints|f:kubeletEndpoint|f:Port",
        "f:status|f:images",
        *(
            f"f:status|f:nodeInfo|f:{field}"
            for field in (
                "architecture",
                "bootID",
                "containerRuntimeVersion",
                "kernelVersion",
                "kubeProxyVersion",
                "kubeletVersion",
                "machineID",
                "operatingSystem",
                "osImage",
                "systemUUID",
            )
        ),
    ]
    kubelet_meta = [
        *(
            f"f:metadata|f:annotations|f:{key}"
            for key in (
                "alpha.kubernetes.io/provided-node-ip",
                "container.googleapis.com/instance_id",
                "node.alpha.kubernetes.io/ttl",
                "volumes.kubernetes.io/controller-managed-attach-detach",
            )
        ),
        *(f"f:metadata|f:labels|f:{key}" for key in _labels("x", pool, ZONES[0])),
        "f:spec|f:providerID",
    ]

    def entry(manager: str, fields: list[str], subresource: str | None = None) -> dict[str, Any]:
        item: dict[str, Any] = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields(*fields),
        }
        if subresource:
            item["subresource"] = subresource
        return item

    return [
        entry("kubelet", kubelet_meta),
        entry(
            "kube-controller-manager",
            ["f:metadata|f:annotations|f:node.alpha.kubernetes.io/ttl", "f:spec|f:podCIDR", "f:spec|f:podCIDRs"],
        ),
        entry(
            "node-problem-detector",
            [
                f'f:status|f:conditions|k:{{"type":"{kind}"}}|f:{field}'
                for kind in (
                    "CorruptDockerOverlay2",
                    "FrequentContainerdRestart",
                    "FrequentKubeletRestart",
                    "KernelDeadlock",
                    "ReadonlyFilesystem",
                )
                for field in ("lastHeartbeatTime", "lastTransitionTime", "message", "reason", "status", "type")
            ],
            "status",
        ),
        entry("gce-pd-csi-driver", ["f:metadata|f:annotations|f:csi.volume.kubernetes.io/nodeid"]),
        entry("kubelet", kubelet_status, "status"),
    ]


def make_node(index: int) -> dict[str, Any]:
    rng = random.Random(index)
    pool = rng.choices(POOLS, POOL_WEIGHTS)[0]
    zone = ZONES[index % len(ZONES)]
    name = node_name(index, pool)
    labels = _labels(name, pool, zone)
    instance_id = str(rng.randrange(10**18, 10**19))
    ip = f"10.{128 + index // 65536}.{index // 256 % 256}.{index % 256}"
    node_labels_annotation = ",".join(
        f"{key}={value}" for key, value in labels.items() if key.startswith("cloud.google.com/")
    )
    spec: dict[str, Any] = {
        "podCIDR": f"10.{index // 256 % 64}.{index % 256}.0/24",
        "podCIDRs": [f"10.{index // 256 % 64}.{index % 256}.0/24"],
        "providerID": f"gce://prod-platform/{zone}/{name}",
    }
    taints = _taints(pool)
    if taints:
        spec["taints"] = taints
    return {
        "metadata": {
            "name": name,
            "uid": _uid("node", index),
            "resourceVersion": str(1_000_000 + index * 7),
            "creationTimestamp": "2026-11-02T11:39:12Z",
            "labels": labels,
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": ip,
                "container.googleapis.com/instance_id": instance_id,
                "csi.volume.kubernetes.io/nodeid": orjson.dumps(
                    {"pd.csi.storage.gke.io": f"projects/prod-platform/zones/{zone}/instances/{name}"}
                ).decode(),
                "node.alpha.kubernetes.io/ttl": "0",
                "node.gke.io/last-applied-node-labels": node_labels_annotation,
                "node.gke.io/last-applied-node-taints": ",".join(
                    f"{t['key']}={t['value']}:{t['effect']}" for t in taints
                ),
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "managedFields": _managed_fields(pool),
        },
        "spec": spec,
        "status": {
            "capacity": _resources(pool, False),
            "allocatable": _resources(pool, True),
            "conditions": _conditions(),
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "ExternalIP", "address": f"34.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _sha("machine", index)[:32],
                "systemUUID": _sha("system", index)[:32],
                "bootID": _sha("boot", index)[:32],
                "kernelVersion": "6.1.100+",
                "osImage": "Container-Optimized OS from Google",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.30.5-gke.1014001",
                "kubeProxyVersion": "v1.30.5-gke.1014001",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": _images(rng),
        },
    }


def make_pod(index: int) -> dict[str, Any]:
    """A Deployment's pending pod as the scheduler's informer holds it."""
    app = ("checkout", "payments", "search", "ledger")[index % 4]
    name = f"{app}-7d9f8c6b5-{_sha('pod', index)[:5]}"
    return {
        "metadata": {
            "name": name,
            "generateName": f"{app}-7d9f8c6b5-",
            "namespace": "shop",
            "uid": _uid("pod", index),
            "resourceVersion": str(5_000_000 + index),
            "creationTimestamp": STAMP,
            "labels": {"app": app, "pod-template-hash": "7d9f8c6b5", "tier": "backend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": STAMP},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-7d9f8c6b5",
                    "uid": _uid("rs", app),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": STAMP,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": _fields(
                        "f:metadata|f:generateName",
                        "f:metadata|f:labels|f:app",
                        "f:metadata|f:labels|f:tier",
                        f'f:metadata|f:ownerReferences|k:{{"uid":"{_uid("rs", app)}"}}',
                        f'f:spec|f:containers|k:{{"name":"{app}"}}|f:image',
                        f'f:spec|f:containers|k:{{"name":"{app}"}}|f:resources|f:requests|f:cpu',
                        "f:spec|f:dnsPolicy",
                        "f:spec|f:enableServiceLinks",
                        "f:spec|f:restartPolicy",
                        "f:spec|f:schedulerName",
                    ),
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": app,
                    "image": f"us-docker.pkg.dev/prod-platform/apps/{app}:v2.14.{index % 7}",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "512Mi"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": app,
            "serviceAccount": app,
            "securityContext": {},
            "schedulerName": "extended-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


class Workload:
    """Nodes are generated once for the largest N; smaller clusters are its prefixes."""

    def __init__(self, max_nodes: int) -> None:
        self.nodes = [make_node(index) for index in range(max_nodes)]
        self.encoded_nodes = [orjson.dumps(node) for node in self.nodes]
        self.pods = [make_pod(index) for index in range(8)]

    def names(self, count: int) -> list[str]:
        return [node["metadata"]["name"] for node in self.nodes[:count]]

    def body(self, count: int, full_nodes: bool, pod: int = 0) -> bytes:
        """An ExtenderArgs body (filter and prioritize send the same one).

        The nodes come in another order for each pod, as kube-scheduler hands them over (``scheduler_order``).
        """
        pod_json = orjson.dumps(self.pods[pod % len(self.pods)])
        order = scheduler_order(self.nodes[:count], cycle=pod)
        if full_nodes:
            items = b",".join(self.encoded_nodes[index] for index in order)
            return b'{"Pod":' + pod_json + b',"Nodes":{"metadata":{},"items":[' + items + b"]}" + b',"NodeNames":null}'
        names = [self.nodes[index]["metadata"]["name"] for index in order]
        return b'{"Pod":' + pod_json + b',"Nodes":null,"NodeNames":' + orjson.dumps(names) + b"}"


# kube-scheduler's parallelism (its default) and its chunks of work (workqueue.ParallelizeUntil via chunkSizeFor).
SCHEDULER_WORKERS = 16


def scheduler_order(nodes: list[dict[str, Any]], cycle: int) -> list[int]:
    """The order in which kube-scheduler hands feasible nodes to an extender in one scheduling cycle (by index).

    Its snapshot lists the nodes zone by zone in turn (the node tree); its parallel filters have 16 workers take
    chunks of about √N consecutive snapshot nodes, and each feasible node is appended as its check finishes. So the
    list is 16 interleaved runs through the snapshot, interleaved differently every cycle.
    """
    by_zone: dict[str, list[int]] = {}
    for index, node in enumerate(nodes):
        by_zone.setdefault(node["metadata"]["labels"]["topology.kubernetes.io/zone"], []).append(index)
    snapshot = [index for turn in itertools.zip_longest(*by_zone.values()) for index in turn if index is not None]
    size = max(1, min(math.isqrt(len(snapshot)), len(snapshot) // SCHEDULER_WORKERS + 1))
    chunks = [iter(snapshot[start : start + size]) for start in range(0, len(snapshot), size)]
    rng = random.Random(cycle)
    working: list[Iterator[int]] = []
    order: list[int] = []
    while chunks or working:
        while chunks and len(working) < SCHEDULER_WORKERS:
            working.append(chunks.pop(0))
        worker = rng.randrange(len(working))
        index = next(working[worker], None)
        if index is None:
            working.pop(worker)
        else:
            order.append(index)
    return order
