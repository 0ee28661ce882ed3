"""A small Kubernetes API server for tests: exactly the endpoints the extender calls, over real TLS.

It answers the way kube-apiserver does: list objects with ``metadata.resourceVersion``
and ``items`` (paged with ``limit``/``continue``; node lists in the metadata-only
``PartialObjectMetadataList`` form when asked), ``Status`` objects with ``code``,
``reason`` and ``message`` for errors, bearer-token authentication (401) and
per-resource authorization (403). Knobs make it slow (``delay``), hang (``hang``:
requests read, never answered), refuse (``forbidden``), fail bound-pod lists
(``fail_pod_lists``: the next ones answer 500) or fall back to full lists (``metadata_lists = False``), and
hostile: an answer dripped byte by byte (``drip``), padded to any size
(``padding``), node lists whose ``continue`` token never changes
(``repeat_continue``), pod lists whose items are any JSON (``pod_items``),
and every answer for a resource in one of ``testkit.hostile_answers.SHAPES``
(``hostile``), TLS handshakes held (``stall_handshake``).

    GET  /api/v1/nodes                                   list nodes
    GET  /api/v1/pods?fieldSelector=spec.nodeName=NODE   list one node's pods
    GET  /api/v1/pods?fieldSelector=spec.nodeName!=      list every bound pod (paged with limit/continue)
    GET  /api/v1/pods?watch=1&resourceVersion=RV&...     watch bound pods from RV: chunked JSON events, bookmarks,
                                                         an ERROR event with a 410 Status for a compacted RV
    POST /api/v1/namespaces/NS/pods/NAME/binding         bind a pod (201, 404, 409)

Every change of a pod (``add_pod``, ``set_pods``, ``delete_pod``, a binding) gets the next resourceVersion and an
event in the log watches replay; ``compact()`` forgets the log up to now, as etcd's compaction does (a watch or a
list continued from before answers 410 Gone). A binding sets ``spec.nodeName`` and the ``PodScheduled`` condition with
its ``lastTransitionTime``, as the API server's binding subresource does. Knobs for watches: ``watch_silent`` (watches
are answered but never sent an event: a stalled stream), ``bookmark_every`` (seconds between bookmarks; 0: none),
``end_watches()`` (every watch asked for by now ends, one still held by ``delay`` or ``hang`` included).
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from testkit import hostile_answers
from testkit.certs import CertificateAuthority

TOKEN = "extender-test-token"
USER = "system:serviceaccount:scheduler-extender:gcf-scheduler-extender"
_BINDING_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
_METADATA_ACCEPT = "as=PartialObjectMetadataList"


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class FakeApiServer:
    def __init__(self, context: ssl.SSLContext | None, token: str | None = TOKEN, ca_pem: bytes = b"") -> None:
        self.token = token
        # The CA that issued the server certificate: what the extender must be told to trust.
        self.ca_pem = ca_pem
        self.nodes: list[dict[str, Any]] = []
        self.pods: list[dict[str, Any]] = []
        # Seconds to wait before every answer: a slow or overloaded API server.
        self.delay = 0.0
        # (verb, resource) pairs answered 403, e.g. ("list", "nodes"), ("create", "pods/binding").
        self.forbidden: set[tuple[str, str]] = set()
        # False: answer node lists in full even when the metadata-only form is asked for (as a proxy might).
        self.metadata_lists = True
        # Seconds between the bytes of every answer's body: an answer that drips in.
        self.drip = 0.0
        # Bytes of padding added to every answer: an answer of any size.
        self.padding = 0
        # True: every node list page carries the same continue token, so the list never ends.
        self.repeat_continue = False
        # Not None: the items of every pod list, whatever their shape.
        self.pod_items: Any = None
        # Resource ("nodes", "pods", "binding") -> the shape every answer for it takes (testkit.hostile_answers).
        self.hostile: dict[str, str] = {}
        # True: new TLS connections wait before their handshake, until the client gives up.
        self.stall_handshake = False
        # True: every request is read and then never answered while it stays True (a hung API server, a stuck proxy).
        self.hang = False
        # Pod lists (of bound pods) still to fail with a 500: a relist that fails.
        self.fail_pod_lists = 0
        # Watches: answered but silent (a stalled stream), and seconds between bookmarks (0: none).
        self.watch_silent = False
        self.bookmark_every = 0.0
        self.requests: list[Recorded] = []
        self.resource_version = 1000
        # Pod events, (resourceVersion, type, pod), oldest first; compacted up to ``compacted``.
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted = 0
        self._changed = threading.Condition(threading.Lock())
        self._watch_epoch = 0
        self._lock = self._changed  # one lock for the objects and the event log
        self._stopped = threading.Event()
        self._connections: set[Any] = set()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        if context is not None:
            self._httpd.socket = context.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self.scheme = "https" if context is not None else "http"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fake-apiserver", daemon=True
        )

    @classmethod
    @contextmanager
    def serving(cls, ca: CertificateAuthority, directory: Path, token: str | None = TOKEN) -> Iterator[FakeApiServer]:
        """An HTTPS server with a certificate for 127.0.0.1 and localhost issued by ``ca``."""
        server = cls(ca.server_context(ca.issue_server("localhost", "127.0.0.1"), directory), token, ca.cert_pem)
        server.start()
        try:
            yield server
        finally:
            server.stop()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    def environment(self) -> dict[str, str]:
        """The extender's environment for talking to this server (CA as base64 PEM, like kubeconfig's data)."""
        env = {"KUBERNETES_API_URL": self.url}
        if self.token:
            env["KUBERNETES_TOKEN"] = self.token
        if self.ca_pem:
            env["KUBERNETES_CA_DATA"] = base64.b64encode(self.ca_pem).decode()
        return env

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop answering: the port refuses connections afterwards, like an unreachable API server."""
        self._stopped.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:  # kept-alive connections too: their next request must fail, not be answered
            for connection in self._connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def set_nodes(self, nodes: list[dict[str, Any]]) -> None:
        with self._lock:
            self.nodes = copy.deepcopy(nodes)
            self.resource_version += 1

    def add_node(self, node: dict[str, Any]) -> None:
        with self._lock:
            self.nodes.append(copy.deepcopy(node))
            self.resource_version += 1

    def add_pod(self, pod: dict[str, Any]) -> None:
        with self._lock:
            added = copy.deepcopy(pod)
            self.pods.append(added)
            self._event("ADDED", added)

    def set_pods(self, pods: list[dict[str, Any]]) -> None:
        with self._lock:
            before = {item["metadata"]["uid"]: item for item in self.pods}
            self.pods = copy.deepcopy(pods)
            after = {item["metadata"]["uid"] for item in self.pods}
            for uid, gone in before.items():
                if uid not in after:
                    self._event("DELETED", gone)
            for item in self.pods:
                self._event("MODIFIED" if item["metadata"]["uid"] in before else "ADDED", item)
            if not self.pods and not before:
                self.resource_version += 1

    def delete_pod(self, uid: str) -> None:
        with self._lock:
            gone = [item for item in self.pods if item["metadata"]["uid"] == uid]
            self.pods = [item for item in self.pods if item["metadata"]["uid"] != uid]
            for item in gone:
                self._event("DELETED", item)

    def update_pod(self, uid: str, change: Any) -> None:
        """``change(pod)`` changes the pod in place (a status update, say): a MODIFIED event."""
        with self._lock:
            for item in self.pods:
                if item["metadata"]["uid"] == uid:
                    change(item)
                    self._event("MODIFIED", item)

    def bind(self, namespace: str, name: str, node_name: str, at: float | None = None) -> None:
        """Bind a pod as the binding subresource does (another scheduler's binding, say)."""
        self._bind(namespace, name, {"kind": "Binding", "target": {"name": node_name}}, at)

    def compact(self) -> None:
        """Forget the event log up to now: watches and list continuations from before answer 410 Gone."""
        with self._lock:
            self.compacted = self.resource_version
            self.events = []

    def end_watches(self) -> None:
        with self._lock:
            self._watch_epoch += 1
            self._changed.notify_all()

    def _event(self, kind: str, pod: dict[str, Any]) -> None:
        """Under the lock: the next resourceVersion, stamped on the pod, and its event for watches."""
        self.resource_version += 1
        pod.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        self.events.append((self.resource_version, kind, copy.deepcopy(pod)))
        self._changed.notify_all()

    def count(self, method: str, path: str) -> int:
        return sum(1 for request in self.requests if request.method == method and request.path == path)

    # --- request handling (runs on the server's threads) ---------------------------------------

    def answer(self, method: str, target: str, headers: dict[str, str], raw_body: bytes) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        epoch = self._watch_epoch  # a watch asked for before ``end_watches`` ends, however long it then waits
        body = json.loads(raw_body) if raw_body else None
        self.requests.append(Recorded(method, parts.path, query, headers, body))
        if self.delay:
            self._stopped.wait(self.delay)
        while self.hang and not self._stopped.wait(0.02):
            pass
        try:
            self._authenticate(headers)
            if method == "GET" and parts.path == "/api/v1/nodes":
                self._authorize("list", "nodes", "at the cluster scope")
                return 200, self._list_nodes(query, headers.get("accept", ""))
            if method == "GET" and parts.path == "/api/v1/pods":
                if query.get("watch", [""])[0] in ("1", "true"):
                    self._authorize("watch", "pods", "at the cluster scope")
                    return 200, {"watch": epoch}
                self._authorize("list", "pods", "at the cluster scope")
                if self.fail_pod_lists and query.get("fieldSelector", [""])[0] == "spec.nodeName!=":
                    self.fail_pod_lists -= 1
                    raise ApiError(500, "InternalError", "etcdserver: request timed out")
                return 200, self._list_pods(query)
            binding = _BINDING_PATH.match(parts.path)
            if method == "POST" and binding:
                namespace, name = binding.groups()
                self._authorize("create", "pods/binding", f'in the namespace "{namespace}"', f'pods "{name}"')
                return 201, self._bind(namespace, name, body)
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        except ApiError as exc:
            return exc.code, status(exc.code, exc.reason, exc.message)

    def _authenticate(self, headers: dict[str, str]) -> None:
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _authorize(self, verb: str, resource: str, scope: str, subject: str | None = None) -> None:
        if (verb, resource) in self.forbidden:
            who = subject or resource
            raise ApiError(
                403,
                "Forbidden",
                f'{who} is forbidden: User "{USER}" cannot {verb} resource "{resource}" in API group "" {scope}',
            )

    def _list_nodes(self, query: dict[str, list[str]], accept: str) -> dict[str, Any]:
        with self._lock:
            nodes, version = list(self.nodes), str(self.resource_version)
        limit = int(query.get("limit", ["0"])[0]) or len(nodes) or 1
        start = int(base64.b64decode(query["continue"][0])) if "continue" in query else 0
        page = nodes[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": version}
        if self.repeat_continue:
            metadata["continue"] = base64.b64encode(b"0").decode()  # the first page, again and again
        elif start + limit < len(nodes):
            metadata["continue"] = base64.b64encode(str(start + limit).encode()).decode()
            metadata["remainingItemCount"] = len(nodes) - start - limit
        if self.metadata_lists and _METADATA_ACCEPT in accept:
            items = [
                {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": node["metadata"]}
                for node in page
            ]
            return {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
                "items": items,
            }
        return {"kind": "NodeList", "apiVersion": "v1", "metadata": metadata, "items": page}

    def _list_pods(self, query: dict[str, list[str]]) -> dict[str, Any]:
        selector = query.get("fieldSelector", [""])[0]
        if selector == "spec.nodeName!=":
            return self._list_bound_pods(query)
        field, _, node = selector.partition("=")
        if field != "spec.nodeName" or not node:
            raise ApiError(400, "BadRequest", f'field label not supported: "{field}"')
        with self._lock:
            pods = [pod for pod in self.pods if pod.get("spec", {}).get("nodeName") == node.lstrip("=")]
            version = str(self.resource_version)
        items = pods if self.pod_items is None else self.pod_items
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": version}, "items": items}

    def _list_bound_pods(self, query: dict[str, list[str]]) -> dict[str, Any]:
        """Every pod with a node, paged; a continuation serves the first page's resourceVersion (410 once compacted)."""
        limit = int(query.get("limit", ["0"])[0] or 0)
        with self._lock:
            if "continue" in query:
                start_text, _, version_text = base64.b64decode(query["continue"][0]).decode().partition("/")
                start, version = int(start_text), int(version_text)
                if version < self.compacted:
                    too_old = "The provided continue parameter is too old to display a consistent list result."
                    raise ApiError(410, "Expired", too_old)
            else:
                start, version = 0, self.resource_version
            pods = [pod for pod in self.pods if (pod.get("spec") or {}).get("nodeName")]
            # Served at the list's resourceVersion: a pod changed since is shown as it is (the fake keeps no history).
            page = [copy.deepcopy(pod) for pod in (pods[start : start + limit] if limit else pods[start:])]
        metadata: dict[str, Any] = {"resourceVersion": str(version)}
        if limit and start + limit < len(pods):
            metadata["continue"] = base64.b64encode(f"{start + limit}/{version}".encode()).decode()
            metadata["remainingItemCount"] = len(pods) - start - limit
        items = page if self.pod_items is None else self.pod_items
        return {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}

    def watch_events(self, query: dict[str, list[str]], send: Any, epoch: int) -> None:
        """Stream pod events after ``resourceVersion`` to ``send(event)`` until the watch's timeout, ``end_watches``
        since the watch was asked for (``epoch``) or the server stops; bound pods only (``spec.nodeName!=``): a pod
        entering the selector is ADDED."""
        timeout = float(query.get("timeoutSeconds", ["60"])[0])
        bookmarks = query.get("allowWatchBookmarks", [""])[0] == "true"
        until = time.monotonic() + timeout
        with self._lock:
            since = int(query.get("resourceVersion", ["0"])[0] or 0)
            if since < self.compacted:
                message = f"too old resource version: {since} ({self.compacted})"
                send({"type": "ERROR", "object": status(410, "Expired", message)})
                return
        sent_bookmark = time.monotonic()
        while not self._stopped.is_set() and time.monotonic() < until:
            with self._lock:
                if self._watch_epoch != epoch:
                    return
                fresh = [event for event in self.events if event[0] > since]
                if not fresh:
                    self._changed.wait(0.05)
                    fresh = [event for event in self.events if event[0] > since]
                latest = self.resource_version
            if self.watch_silent:
                continue
            for version, kind, item in fresh:
                since = version
                if not (item.get("spec") or {}).get("nodeName"):
                    continue
                shown = "ADDED" if kind == "MODIFIED" and not _was_bound(self.events, item, version) else kind
                send({"type": shown, "object": item})
            if bookmarks and self.bookmark_every and time.monotonic() - sent_bookmark >= self.bookmark_every:
                since = max(since, latest)
                marker = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(since)}}
                send({"type": "BOOKMARK", "object": marker})
                sent_bookmark = time.monotonic()

    def _bind(self, namespace: str, name: str, body: Any, at: float | None = None) -> dict[str, Any]:
        if not isinstance(body, dict) or body.get("kind") != "Binding" or not (body.get("target") or {}).get("name"):
            raise ApiError(400, "BadRequest", "Binding is invalid: target.name: Required value")
        with self._lock:
            named = (p for p in self.pods if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace)
            pod = next(named, None)
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            uid = (body.get("metadata") or {}).get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                raise ApiError(
                    409, "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": Precondition failed: '
                    f"UID in precondition: {uid}, UID in object meta: {pod['metadata']['uid']}",
                )
            assigned = pod.get("spec", {}).get("nodeName")
            if assigned:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned to node '
                    f'"{assigned}"',
                )
            pod.setdefault("spec", {})["nodeName"] = body["target"]["name"]
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if at is None else at))
            status_ = pod.setdefault("status", {})
            conditions = [c for c in status_.get("conditions") or [] if c.get("type") != "PodScheduled"]
            scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp}
            status_["conditions"] = [*conditions, scheduled]
            self._event("MODIFIED", pod)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``metav1.Status`` failure, as the API server encodes it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def node(name: str, labels: dict[str, str] | None = None, cpu: str = "4", memory: str = "16Gi") -> dict[str, Any]:
    """A Node as the API server lists it (no kind/apiVersion inside a typed list)."""
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": dict(labels or {})},
        "spec": {"providerID": f"gce://project/zone/{name}"},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    uid: str,
    node_name: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    priority: int = 0,
    cpu: str | None = None,
    memory: str | None = None,
    bound_at: float | None = None,
    owner_kind: str | None = None,
) -> dict[str, Any]:
    """A pod as the API server lists it; with ``cpu``/``memory`` a Guaranteed container (requests = limits), and on a
    node a ``PodScheduled`` condition at ``bound_at`` (now when None)."""
    resources = {key: value for key, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.9"}
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"}
    metadata["labels"] = dict(labels or {})
    metadata["creationTimestamp"] = _stamp(bound_at)
    if owner_kind:
        owner = {"apiVersion": "apps/v1", "kind": owner_kind, "name": f"{name}-owner", "uid": f"owner-{uid}"}
        metadata["ownerReferences"] = [{**owner, "controller": True}]
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if node_name:
        status["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _stamp(bound_at)}]
    spec: dict[str, Any] = {"nodeName": node_name, "priority": priority, "containers": [container]}
    return {"metadata": metadata, "spec": spec, "status": status}


def _stamp(at: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if at is None else at))


def _was_bound(events: list[tuple[int, str, dict[str, Any]]], pod: dict[str, Any], version: int) -> bool:
    """Whether the pod had a node in its event before ``version``: a watch of bound pods saw it already."""
    uid = pod["metadata"]["uid"]
    for earlier, _, item in reversed(events):
        if earlier < version and item["metadata"]["uid"] == uid:
            return bool((item.get("spec") or {}).get("nodeName"))
    return False


def _handler_for(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the API server does: the client's pool is exercised
        # Each write sent at once, as Go's servers send them (TCP_NODELAY): else a body written after its headers
        # waits for the client's delayed ACK, 40 ms a page or watch event where the API server takes none.
        disable_nagle_algorithm = True

        def handle(self) -> None:
            # The handshake runs here, on the connection's thread, so a client that fails it blocks nobody.
            if isinstance(self.request, ssl.SSLSocket):
                if server.stall_handshake:
                    hostile_answers.Answering(self, server._stopped, 0.0, None, "").stall()
                    return
                try:
                    self.request.do_handshake()
                except (ssl.SSLError, OSError):
                    return
            with server._lock:
                server._connections.add(self.request)
            try:
                super().handle()
            except OSError:
                pass  # the client hung up mid-answer: what the tests of the client's size and time caps make it do
            finally:
                with server._lock:
                    server._connections.discard(self.request)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {key.lower(): value for key, value in self.headers.items()}
            code, body = server.answer(self.command, self.path, headers, raw)
            if code == 200 and "watch" in body:
                self._watch(body["watch"])
                return
            shape = server.hostile.get(_resource(self.path))
            if shape is not None:
                payload = json.dumps(body).encode()
                pace = server.drip or 0.05
                resource = _resource(self.path)
                hostile_answers.answer(self, shape, code, payload, server._stopped, pace, server.token, resource)
                return
            if server.padding:
                body = {**body, "padding": "x" * server.padding}
            payload = json.dumps(body).encode()
            self.send_response(code, HTTPStatus(code).phrase)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if not server.drip:
                self.wfile.write(payload)
                return
            for at in range(len(payload)):
                if server._stopped.wait(server.drip):
                    return
                try:
                    self.wfile.write(payload[at : at + 1])
                    self.wfile.flush()
                except OSError:  # the client gave up on the answer
                    self.close_connection = True
                    return

        def _watch(self, epoch: int) -> None:
            """A watch's answer: chunked, one JSON event per line, as the API server streams them."""
            self.send_response(200, "OK")
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.close_connection = True

            def send(event: dict[str, Any]) -> None:
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()

            try:
                server.watch_events(parse_qs(urlsplit(self.path).query), send, epoch)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass  # the client went away

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _resource(target: str) -> str:
    path = urlsplit(target).path
    if path == "/api/v1/nodes":
        return "nodes"
    if path == "/api/v1/pods":
        return "pods"
    return "binding" if _BINDING_PATH.match(path) else ""


def wait_for(condition: Any, timeout: float = 5.0) -> bool:
    """Poll ``condition()`` until true or ``timeout``: for effects of background threads."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())
