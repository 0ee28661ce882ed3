"""A small Kubernetes API client for the three calls the extender makes: list nodes, list a node's pods, bind.

The API server is trusted with the cluster, not with this process. Every
call has one deadline for the whole exchange (connect, TLS handshake, head
and body: ``extender.outbound``), so an answer that drips ends there and
frees its thread; a bounded answer size; and, for lists, bounded items and
pages. The pod lists of one request share a byte budget too. Lists are
decoded into what the plugins read only (``lists``), with their types and
sizes checked, so an answer costs a small multiple of its size in memory at
most, whatever its shape. Every failure is a KubeError whose message can go into a
pod's events as it is: the API server's own Status message (never the bearer
token, even if the server echoes it), with a hint where the fix is on this
side (401, 403, a redirect), and for a cap, the cap.
"""

from __future__ import annotations

import os
import ssl
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sized
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import msgspec
import orjson

from extender import __version__, outbound
from extender.errors import ConfigError, bounded, redacted
from extender.framework.types import Pod
from extender.kube.config import KubeConfig
from extender.kube.demand import Resources
from extender.kube.errors import KubeError
from extender.kube.lists import (
    BoundPod,
    NodeFacts,
    TooLong,
    decode_allocatable_page,
    decode_bound_pod_page,
    decode_node_page,
    decode_pods,
)
from extender.kube.variables import CA_DATA_ENV, CA_FILE_ENV, TOKEN_ENV, TOKEN_FILE_ENV
from extender.wire.limits import MAX_NODES

# Metadata-only lists (names and labels): a GKE node's metadata is about a third of its ~18 kB (status.images).
# A server that cannot answer in this form falls back to the plain list, which decodes the same way.
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
_JSON = "application/json"
# The field selector of pods bound to a node.
BOUND = "spec.nodeName!="
# kubectl's page size: bounded answers even for 5000-node clusters.
PAGE_SIZE = 500
# Whole Node objects (status.images, managedFields) run to tens of kB each: pages of them stay a few MB.
FULL_NODES_PAGE_SIZE = 100
# Preemption may offer dozens of candidate nodes; their pods are listed in parallel, this many at a time.
MAX_PARALLEL_LISTS = 8
# Largest answer read from one call: a page of 500 nodes' metadata is ~3 MB, of 100 full nodes a few MB, one node's
# pods (110 at most by default, 256 on GKE) a few MB.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# Bytes the pod lists of one request may read in all: dozens of candidates of a hundred pods each.
MAX_REQUEST_BYTES = 32 * 1024 * 1024
# Pages of one list: 65,536 nodes (past GKE's largest cluster) in pages of PAGE_SIZE, twice over (smaller pages: as
# many more).
MAX_PAGES = 2 * 65_536 // PAGE_SIZE
# Nodes one list may hold: as many as one request may name.
MAX_LISTED_NODES = MAX_NODES
# Pods listed on one node: kubelet runs at most 110 by default, 256 on GKE.
MAX_PODS_PER_NODE = 5000

# Longest API message quoted: it goes into a pod's events.
_MESSAGE_CHARS = 1000
_HINTS = {
    401: f" (check {TOKEN_ENV} / {TOKEN_FILE_ENV})",
    403: " (grant the extender the RBAC in deploy/kubernetes/extender-rbac.yaml)",
}
_TOO_LARGE_HINT = " (a page of 500 nodes, or one node's pods, is a few MB: is KUBERNETES_API_URL the API server?)"
_REDIRECT_HINT = " (redirects are not followed: set KUBERNETES_API_URL to the API server itself)"

Decoded = TypeVar("Decoded")
# A page of a node list as a decoder reads it: its nodes, however they are kept.
Page = TypeVar("Page", bound=Sized)


class KubeClient:
    """Thread-safe: one endpoint (and its kept connections) serves the request threads and the node refresh."""

    def __init__(self, config: KubeConfig, timeout: float, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.config = config
        # Default deadline of each whole call: calls made while the scheduler waits must fit its budget.
        self.timeout = timeout
        self.max_answer_bytes = max_answer_bytes
        headers = {"User-Agent": f"gcf-scheduler-extender/{__version__}"}
        # Room for the parallel pod lists plus a background node list.
        self._endpoint = outbound.Endpoint(config.url, _tls_context(config), headers, idle=MAX_PARALLEL_LISTS + 2)
        _LIVE.add(self)

    def list_nodes(self, total: float | None = None) -> list[NodeFacts]:
        """Every node's name and labels, in pages of PAGE_SIZE; each page's call within the client's timeout, the
        whole list within ``total`` seconds (one call's timeout when None)."""
        beyond = "the kubernetes node source serves clusters up to that size (beyond, use the names or static source)"
        pages = self._node_pages(decode_node_page, _METADATA_LIST, PAGE_SIZE, total, beyond)
        return [node for page in pages for node in page]

    def node_allocatable(self, total: float | None = None) -> dict[str, Resources]:
        """Every node's allocatable CPU and memory (as a Resources' requests), from full node objects; paged and
        bounded in time as ``list_nodes``."""
        found: dict[str, Resources] = {}
        beyond = "NodeLoad reads the allocatable of clusters up to that size"
        for page in self._node_pages(decode_allocatable_page, _JSON, FULL_NODES_PAGE_SIZE, total, beyond):
            found.update(page)
        return found

    def _node_pages(
        self,
        decode: Callable[[bytes, int], tuple[Page, str | None]],
        accept: str,
        page_size: int,
        total: float | None,
        beyond: str,
    ) -> Iterator[Page]:
        """The node list's pages as ``decode`` reads them, ``page_size`` nodes each, at most MAX_LISTED_NODES in all;
        each page's call within the client's timeout, the whole list within ``total`` seconds."""
        until = time.monotonic() + (self.timeout if total is None else total)
        params: dict[str, Any] = {"limit": page_size}
        seen: set[str] = set()
        listed = 0
        max_pages = MAX_PAGES * PAGE_SIZE // page_size
        for _ in range(max_pages):
            page_until = min(until, time.monotonic() + self.timeout)
            answer = self._call("GET", "/api/v1/nodes", params, accept=accept, until=page_until)
            try:
                page, token = self._decoded(decode, answer, "nodes", MAX_LISTED_NODES - listed)
            except TooLong:
                raise KubeError(f"the Kubernetes API listed more than {MAX_LISTED_NODES} nodes: {beyond}") from None
            listed += len(page)
            yield page
            if not token:
                return
            if token in seen:
                raise KubeError("the Kubernetes API repeated a continue token while listing nodes: the list never ends")
            seen.add(token)
            params = {"limit": page_size, "continue": token}
        raise KubeError(f"the Kubernetes API listed nodes in more than {max_pages} pages of {page_size}: stopped there")

    def bound_pods_page(self, token: str | None, until: float) -> tuple[list[BoundPod], str, str | None]:
        """One page of the pods bound to nodes (``fieldSelector=spec.nodeName!=``), the list's resourceVersion and
        the next page's continue token (None on the last), answered by ``until``."""
        params: dict[str, Any] = {"fieldSelector": BOUND, "limit": PAGE_SIZE}
        if token:
            params["continue"] = token
        answer = self._call("GET", "/api/v1/pods", params, until=until)
        try:
            return self._decoded(decode_bound_pod_page, answer, "bound pods", PAGE_SIZE)
        except TooLong as exc:
            raise KubeError(f"the Kubernetes API listed {exc.count} pods in a page of {PAGE_SIZE}") from None

    def watch_bound_pods(self, resource_version: str, until: float, seconds: int) -> outbound.Stream:
        """The watch of the pods bound to nodes from ``resource_version``, with bookmarks, which the API server ends
        after ``seconds``: its head read by ``until``, its events for the caller to read as they come."""
        params = {
            "watch": "1",
            "fieldSelector": BOUND,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
        }
        token = self.config.bearer_token()
        headers = {"Accept": _JSON}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        call = "GET /api/v1/pods?watch=1"
        try:
            stream = self._endpoint.open_stream(f"/api/v1/pods?{urlencode(params)}", until=until, headers=headers)
        except outbound.TimedOut:
            raise KubeError(f"the Kubernetes API did not answer {call} in time") from None
        except outbound.Unreachable as exc:
            raise KubeError(redacted(f"cannot reach the Kubernetes API at {self.config.url}: {exc}", token)) from None
        except outbound.CallFailed as exc:
            broken = f"the Kubernetes API answered {call} with a broken HTTP answer: {exc}"
            raise KubeError(redacted(broken, token)) from None
        if not 200 <= stream.status < 300:
            try:
                body = stream.read_rest(until, 64 * 1024)
            except outbound.TooLarge:
                body = b""
            stream.close()
            raise _status_error(outbound.Answer(stream.status, stream.reason, stream.headers, bytearray(body)), token)
        if stream.media_type != _JSON:
            stream.close()
            shown = bounded(stream.media_type or "none", 100)
            raise KubeError(f"the Kubernetes API answered {call} as Content-Type {shown!r}, not {_JSON}")
        return stream

    def pods_on_node(
        self, node: str, uids: Collection[str], until: float | None = None, budget: outbound.ByteBudget | None = None
    ) -> dict[str, Pod]:
        """The pods among ``uids`` that are on ``node``, by UID, answered by ``until`` (monotonic; one call's timeout
        from now when None). The other pods on the node are counted, never decoded."""
        until = time.monotonic() + self.timeout if until is None else until
        params = {"fieldSelector": f"spec.nodeName={node}"}
        answer = self._call("GET", "/api/v1/pods", params, until=until, budget=budget)
        try:
            return self._decoded(decode_pods, answer, f"pods on node {node}", uids, MAX_PODS_PER_NODE)
        except TooLong as exc:
            raise KubeError(
                f"the Kubernetes API listed {exc.count} pods on node {node}, more than the {MAX_PODS_PER_NODE} read"
            ) from None

    def pods_on_nodes(
        self, uids: Mapping[str, Collection[str]], seconds: float | None = None
    ) -> dict[str, dict[str, Pod] | KubeError]:
        """For each node, the pods among its ``uids`` that are on it: listed in parallel, all within ``seconds`` (the
        client's timeout when None), and MAX_REQUEST_BYTES read in all; a node not listed in time gets a KubeError.

        Every call ends at the shared deadline (its socket is shut down then), so the threads listing are free by
        then, answered or not.
        """
        seconds = self.timeout if seconds is None else seconds
        if not uids:
            return {}
        until = time.monotonic() + seconds
        budget = outbound.ByteBudget(MAX_REQUEST_BYTES, "the pod lists of one request")
        pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_LISTS, len(uids)), thread_name_prefix="kube-pods")
        futures = {node: pool.submit(self.pods_on_node, node, wanted, until, budget) for node, wanted in uids.items()}
        done, _ = wait(futures.values(), timeout=max(0.0, until - time.monotonic()))
        pool.shutdown(wait=False, cancel_futures=True)
        found: dict[str, dict[str, Pod] | KubeError] = {}
        for node, future in futures.items():
            failure = (
                future.exception()
                if future in done
                else KubeError(f"listing the pods on node {node} took longer than {seconds:.3g} s")
            )
            if isinstance(failure, KubeError):
                found[node] = failure
            else:
                found[node] = future.result()  # raises what is not a KubeError: a bug must not pass for "unavailable"
        return found

    def bind(self, namespace: str, name: str, uid: str, node: str, timeout: float | None = None) -> None:
        """Create the pod's Binding, as kube-scheduler's DefaultBinder does; the UID guards against a recreated pod.

        Any 2xx is the API server's word that the Binding exists: its body is read (within the caps) but not used.
        """
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/binding"
        until = time.monotonic() + (self.timeout if timeout is None else timeout)
        self._call("POST", path, body=orjson.dumps(binding), until=until)

    def _call(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        until: float,
        body: bytes | None = None,
        accept: str = _JSON,
        budget: outbound.ByteBudget | None = None,
    ) -> outbound.Answer:
        """The answer of a 2xx status; every other outcome a KubeError."""
        token = self.config.bearer_token()
        headers = {"Accept": accept}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            headers["Content-Type"] = _JSON
        target = f"{path}?{urlencode(params)}" if params else path
        seconds = until - time.monotonic()
        call = f"{method} {path}"
        try:
            answer = self._endpoint.call(
                method, target, until=until, max_bytes=self.max_answer_bytes, headers=headers, body=body, budget=budget
            )
        except outbound.TimedOut:
            raise KubeError(f"the Kubernetes API did not answer {call} within {seconds:.3g} s") from None
        except outbound.Unreachable as exc:
            raise KubeError(redacted(f"cannot reach the Kubernetes API at {self.config.url}: {exc}", token)) from None
        except outbound.TooLarge as exc:
            hint = "" if exc.shared else _TOO_LARGE_HINT
            raise KubeError(f"the Kubernetes API answered {call} with {exc}: not read{hint}", exc.status) from None
        except outbound.BrokenAnswer as exc:
            raise KubeError(
                redacted(f"the Kubernetes API answered {call} with a broken HTTP answer: {exc}", token)
            ) from None
        if not 200 <= answer.status < 300:
            raise _status_error(answer, token)
        return answer

    def _decoded(self, decode: Callable[..., Decoded], answer: outbound.Answer, what: str, *args: Any) -> Decoded:
        """A list answer decoded: JSON by its Content-Type, and in the shape a Kubernetes list of ``what`` has."""
        if answer.media_type != _JSON:
            shown = bounded(answer.media_type or "none", 100)
            raise self._error(f"the Kubernetes API listed {what} as Content-Type {shown!r}, not {_JSON}", answer.status)
        try:
            return decode(answer.body, *args)
        except msgspec.DecodeError as exc:
            problem = bounded(str(exc), _MESSAGE_CHARS)
            raise self._error(
                f"the Kubernetes API listed {what} in a form this extender cannot read: {problem}", answer.status
            ) from None

    def _error(self, message: str, code: int) -> KubeError:
        """A failure that quotes the API's answer: without the bearer token, should the server have echoed it."""
        return KubeError(redacted(message, self.config.bearer_token()), code)


def _status_error(answer: outbound.Answer, token: str | None) -> KubeError:
    """A ``Status`` answer (``code``, ``reason``, ``message``) as one line, with a hint where the fix is ours."""
    code = answer.status
    try:
        status = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        status = None
    fields = [status.get(key) for key in ("message", "reason")] if isinstance(status, dict) else []
    # Text only: a message of another JSON type would reach the pod's events as a Python repr.
    message = next((field for field in fields if isinstance(field, str) and field), None)
    if message is None:
        message = answer.body[:200].decode(errors="replace").strip() if status is None else ""
    hint = _REDIRECT_HINT if 300 <= code < 400 else _HINTS.get(code, "")
    line = f"the Kubernetes API answered {code} {answer.reason}: {bounded(message, _MESSAGE_CHARS)}"
    return KubeError(redacted(line.rstrip(": "), token) + hint, code)


def _tls_context(config: KubeConfig) -> ssl.SSLContext | None:
    """Trust exactly the configured CA (not it plus the system's); the system roots when none is configured."""
    if not config.url.startswith("https://"):
        return None
    try:
        if config.ca_file is not None:
            return ssl.create_default_context(cafile=str(config.ca_file))
        if config.ca_pem is not None:
            return ssl.create_default_context(cadata=config.ca_pem.decode("ascii", errors="replace"))
    except ssl.SSLError as exc:
        variable = CA_FILE_ENV if config.ca_file is not None else CA_DATA_ENV
        raise ConfigError(f"{variable}: the CA bundle cannot be loaded: {exc.reason or exc}") from None
    return ssl.create_default_context()


_LIVE: weakref.WeakSet[KubeClient] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_LIVE):
        client._endpoint.forget_connections()


os.register_at_fork(after_in_child=_after_fork_in_child)
