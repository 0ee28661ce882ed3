"""A small Kubernetes API client for the three calls the extender makes: list nodes, list a node's pods, bind.

Every call has a bounded time, a bounded answer size and, for lists, a
bounded number of pages, and fails with a KubeError whose message can go
into a pod's events as it is: the API server's own Status message, plus a
hint for the two errors that mean "fix the deployment" (401, 403). The API
server is trusted with the cluster, not with this process: an answer that
drips, grows without end, pages forever or has the wrong shape is an error,
never a stalled thread, an exhausted instance or a traceback.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any
from urllib.parse import quote

import orjson
import requests

from extender import __version__
from extender.bounded_read import AnswerTooLarge, read_within
from extender.errors import bounded
from extender.kube.config import KubeConfig
from extender.kube.errors import KubeError
from extender.kube.nodelist import decode_node_list
from extender.kube.variables import TOKEN_ENV, TOKEN_FILE_ENV
from extender.urls import failure_cause

# Metadata-only lists (names and labels): a GKE node's metadata is about a third of its ~18 kB (status.images).
# A server that cannot answer in this form falls back to the plain list, which parses the same way.
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_JSON = "application/json"
# kubectl's page size: bounded answers even for 5000-node clusters.
PAGE_SIZE = 500
# Preemption may offer dozens of candidate nodes; their pods are listed in parallel, this many at a time.
_MAX_PARALLEL_LISTS = 8
# Largest answer read from one call: a page of 500 full nodes is ~10 MB, one node's pods ~2 MB.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
# Pages of one list: 65,536 nodes (past GKE's largest cluster) in pages of PAGE_SIZE, twice over.
MAX_PAGES = 2 * 65_536 // PAGE_SIZE

# Longest API message quoted: it goes into a pod's events.
_MESSAGE_CHARS = 1000
_HINTS = {
    401: f" (check {TOKEN_ENV} / {TOKEN_FILE_ENV})",
    403: " (grant the extender the RBAC in deploy/kubernetes/extender-rbac.yaml)",
}


class KubeClient:
    """Thread-safe: one pooled session serves the request threads and the background node refresh."""

    def __init__(self, config: KubeConfig, timeout: float, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.config = config
        # Default for each whole call, answer included: calls made while the scheduler waits must fit its budget.
        self.timeout = timeout
        self.max_answer_bytes = max_answer_bytes
        self._verify: str | bool = _ca_bundle(config)
        self._session = _session()
        _LIVE.add(self)

    def _reconnect(self) -> None:
        """In a forked child: pooled connections are shared with the parent, whose threads may still use them."""
        self._session = _session()

    def list_nodes(self, timeout: float | None = None, labels_only: bool = False) -> list[dict[str, Any]]:
        """Every node's metadata, in at most MAX_PAGES pages; ``timeout`` bounds each page's call.

        ``labels_only`` decodes just each node's name and labels: a 5000-node list
        is ~45 MB of metadata, mostly managedFields, that the node source never reads.
        """
        decode = decode_node_list if labels_only else orjson.loads
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": PAGE_SIZE}
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = self._call(
                "GET", "/api/v1/nodes", params=params, accept=_METADATA_LIST, timeout=timeout, decode=decode
            )
            items.extend(_items(page, "nodes"))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            if not isinstance(token, str) or token in seen:
                raise KubeError("the Kubernetes API repeated a continue token while listing nodes: the list never ends")
            seen.add(token)
            params = {"limit": PAGE_SIZE, "continue": token}
        raise KubeError(f"the Kubernetes API listed nodes in more than {MAX_PAGES} pages of {PAGE_SIZE}: stopped there")

    def pods_on_node(self, node: str, timeout: float | None = None) -> list[dict[str, Any]]:
        page = self._call("GET", "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={node}"}, timeout=timeout)
        return _items(page, f"pods on node {node}")

    def pods_on_nodes(self, nodes: Sequence[str], budget: float | None = None) -> dict[str, list[dict[str, Any]] | KubeError]:
        """Each node's pods, listed in parallel; a node not answered within ``budget`` seconds gets a KubeError."""
        budget = self.timeout if budget is None else budget
        if not nodes:
            return {}
        pool = ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL_LISTS, len(nodes)), thread_name_prefix="kube-pods")
        futures = {node: pool.submit(self.pods_on_node, node, budget) for node in nodes}
        done, _ = wait(futures.values(), timeout=budget)
        pool.shutdown(wait=False, cancel_futures=True)
        found: dict[str, list[dict[str, Any]] | KubeError] = {}
        for node, future in futures.items():
            failure = future.exception() if future in done else KubeError(f"listing the pods on node {node} took longer than {budget:g} s")
            if isinstance(failure, KubeError):
                found[node] = failure
            else:
                found[node] = future.result()  # raises what is not a KubeError: a bug must not pass for "unavailable"
        return found

    def bind(self, namespace: str, name: str, uid: str, node: str, timeout: float | None = None) -> None:
        """Create the pod's Binding, as kube-scheduler's DefaultBinder does; the UID guards against a recreated pod."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/binding"
        self._call("POST", path, body=binding, timeout=timeout)

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        accept: str = _JSON,
        timeout: float | None = None,
        decode: Callable[[bytes], Any] = orjson.loads,
    ) -> dict[str, Any]:
        seconds = self.timeout if timeout is None else timeout
        headers = {"Accept": accept}
        token = self.config.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = _JSON
        started = time.monotonic()
        try:
            response = self._session.request(
                method,
                self.config.url + path,
                params=params,
                data=data,
                headers=headers,
                timeout=seconds,
                verify=self._verify,
                allow_redirects=False,  # a redirect would carry the token elsewhere
                stream=True,
            )
            with response:
                content = self._read(response, seconds - (time.monotonic() - started), f"{method} {path}")
        except requests.Timeout:
            raise KubeError(f"the Kubernetes API did not answer {method} {path} within {seconds:g} s") from None
        except requests.RequestException as exc:
            raise KubeError(f"cannot reach the Kubernetes API at {self.config.url}: {failure_cause(exc)}") from None
        if response.status_code >= 300:
            raise _status_error(response, content)
        try:
            answer = decode(content)
        except orjson.JSONDecodeError:
            raise KubeError(f"the Kubernetes API answered {method} {path} with a body that is not JSON", response.status_code) from None
        if not isinstance(answer, dict):
            raise KubeError(f"the Kubernetes API answered {method} {path} with JSON that is not an object", response.status_code)
        return answer


    def _read(self, response: requests.Response, seconds: float, call: str) -> bytes:
        """The answer's body, within what is left of the call's time and within the size cap: the read ends whether
        the server stalls, drips a byte just inside each socket read's timeout, or sends without end."""
        try:
            return read_within(response, seconds, self.max_answer_bytes)
        except AnswerTooLarge as exc:
            raise KubeError(f"the Kubernetes API answered {call} with more than {exc.limit} bytes: not read") from None


def _items(page: dict[str, Any], what: str) -> list[dict[str, Any]]:
    """A list answer's items, each an object: anything else is named, never half-used."""
    items = page.get("items")
    if items is None:
        return []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise KubeError(f"the Kubernetes API listed {what} that are not objects")
    return items


def _session() -> requests.Session:
    session = requests.Session()
    # No proxies, netrc or REQUESTS_CA_BUNDLE from the environment: they would override the configured trust.
    session.trust_env = False
    session.headers["User-Agent"] = f"gcf-scheduler-extender/{__version__}"
    # Room for the parallel pod lists plus a background node list; no retries: a retry would break the time budget.
    pooled = requests.adapters.HTTPAdapter(pool_maxsize=_MAX_PARALLEL_LISTS + 2, max_retries=0)
    session.mount("https://", pooled)
    session.mount("http://", pooled)
    return session


_LIVE: weakref.WeakSet[KubeClient] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_LIVE):
        client._reconnect()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _status_error(response: requests.Response, content: bytes) -> KubeError:
    """A ``Status`` answer (``code``, ``reason``, ``message``) as one line, with a hint where the fix is ours."""
    code = response.status_code
    try:
        status = orjson.loads(content)
    except orjson.JSONDecodeError:
        status = None
    fields = [status.get(key) for key in ("message", "reason")] if isinstance(status, dict) else []
    # Text only: a message of another JSON type would reach the pod's events as a Python repr.
    message = next((field for field in fields if isinstance(field, str) and field), None)
    if message is None:
        message = content.decode(errors="replace").strip()[:200] if status is None else ""
    reason = response.reason or ""
    message = bounded(message, _MESSAGE_CHARS)
    return KubeError(f"the Kubernetes API answered {code} {reason}: {message}{_HINTS.get(code, '')}".rstrip(": "), code)


def _ca_bundle(config: KubeConfig) -> str | bool:
    """What requests verifies the server with: a file, so that exactly this CA is trusted, not it plus the system's."""
    if config.ca_file is not None:
        return str(config.ca_file)
    if config.ca_pem is None:
        return True
    handle, path = tempfile.mkstemp(prefix="kubernetes-ca-", suffix=".pem")
    with os.fdopen(handle, "wb") as file:
        file.write(config.ca_pem)
    atexit.register(os.unlink, path)
    return path
