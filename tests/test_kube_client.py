"""The Kubernetes API client against a real HTTPS server: configuration, TLS trust, tokens, errors, time limits."""

from __future__ import annotations

import base64
import time

import msgspec
import orjson
import pytest

from extender.framework.types import Pod
from extender.kube import client_from_settings
from extender.kube.client import PAGE_SIZE, KubeClient
from extender.kube.config import KubeConfig
from extender.kube.errors import KubeError
from extender.kube.lists import decode_node_page
from extender.settings import Settings
from testkit import hostile_answers
from testkit.certs import CertificateAuthority
from testkit.fake_apiserver import TOKEN, node, pod
from testkit.ports import free_port


def client(apiserver, **overrides: str) -> KubeClient:
    env = apiserver.environment() | overrides
    made = client_from_settings(Settings.from_environment({name: value for name, value in env.items() if value}))
    assert made is not None
    return made


# --- configuration ------------------------------------------------------------------------------


def test_no_url_means_no_client():
    assert client_from_settings(Settings.from_environment({})) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUBERNETES_TOKEN": "t"}, "KUBERNETES_TOKEN set without KUBERNETES_API_URL"),
        ({"KUBERNETES_API_URL": "ftp://api"}, "must be an https:// URL"),
        ({"KUBERNETES_API_URL": "http://10.0.0.1"}, "must use https"),
        ({"KUBERNETES_API_URL": "https://api?x=1"}, "must not have a query"),
        ({"KUBERNETES_API_URL": "https://admin:hunter2@api"}, "must not carry a user or password"),
        ({"KUBERNETES_API_URL": "https://admin@api"}, "must not carry a user or password"),
        ({"KUBERNETES_API_URL": "https://api", "KUBERNETES_TOKEN": "t", "KUBERNETES_TOKEN_FILE": "/f"}, "not both"),
        (
            {"KUBERNETES_API_URL": "https://api", "KUBERNETES_TOKEN_FILE": "/nonexistent/token"},
            "KUBERNETES_TOKEN_FILE: cannot read",
        ),
        ({"KUBERNETES_API_URL": "https://api", "KUBERNETES_CA_DATA": "not base64!"}, "must be PEM or base64 of PEM"),
        (
            {"KUBERNETES_API_URL": "https://api", "KUBERNETES_CA_DATA": base64.b64encode(b"hello").decode()},
            "holds no PEM certificate",
        ),
        ({"KUBERNETES_API_URL": "https://api", "EXTENDER_HTTP_TIMEOUT": "soon"}, "EXTENDER_HTTP_TIMEOUT"),
    ],
)
def test_bad_settings_are_named_at_start_up(env, message):
    with pytest.raises(ValueError, match=message) as raised:
        client_from_settings(Settings.from_environment(env))
    assert "hunter2" not in str(raised.value)


def test_the_configuration_shows_no_token_or_ca_bundle():
    config = KubeConfig.from_environment({"KUBERNETES_API_URL": "https://api", "KUBERNETES_TOKEN": "hunter2"})
    assert config is not None and config.token == "hunter2"
    assert "hunter2" not in repr(config) and "hunter2" not in f"{config}" and "https://api" in repr(config)


def test_ca_as_pem_or_base64_and_http_only_to_loopback(test_ca):
    pem = test_ca.cert_pem.decode()
    as_pem = KubeConfig.from_environment({"KUBERNETES_API_URL": "https://api/", "KUBERNETES_CA_DATA": pem})
    as_base64 = KubeConfig.from_environment(
        {"KUBERNETES_API_URL": "https://api", "KUBERNETES_CA_DATA": base64.b64encode(pem.encode()).decode()}
    )
    assert as_pem is not None and as_base64 is not None
    assert as_pem.ca_pem.strip() == as_base64.ca_pem.strip() == test_ca.cert_pem.strip()
    assert as_pem.url == "https://api"
    assert KubeConfig.from_environment({"KUBERNETES_API_URL": "http://127.0.0.1:8001"}) is not None  # kubectl proxy


def test_calls_get_half_the_schedulers_http_timeout(apiserver):
    assert client(apiserver).timeout == 2.5
    assert client(apiserver, EXTENDER_HTTP_TIMEOUT="2s").timeout == 1.0


# --- calls -------------------------------------------------------------------------------------


def test_lists_node_metadata_in_pages(apiserver):
    apiserver.set_nodes([node(f"node-{index}", {"index": str(index)}) for index in range(2 * PAGE_SIZE + 3)])
    listed = client(apiserver).list_nodes()
    assert listed == [(f"node-{index}", {"index": str(index)}) for index in range(2 * PAGE_SIZE + 3)]
    pages = [request for request in apiserver.requests if request.path == "/api/v1/nodes"]
    assert len(pages) == 3
    assert [page.query.get("limit") for page in pages] == [[str(PAGE_SIZE)]] * 3
    assert "continue" not in pages[0].query and "continue" in pages[1].query
    assert "as=PartialObjectMetadataList" in pages[0].headers["accept"]
    assert pages[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_full_node_lists_read_the_same(apiserver):
    apiserver.metadata_lists = False
    apiserver.set_nodes([node("node-a", {"zone": "a"})])
    assert client(apiserver).list_nodes() == [("node-a", {"zone": "a"})]


def test_pods_on_nodes_uses_a_field_selector(apiserver):
    apiserver.set_pods([pod("web-1", "u1", "node-a"), pod("web-2", "u2", "node-b"), pod("web-3", "u3", "node-a")])
    found = client(apiserver).pods_on_nodes({"node-a": {"u1", "u3", "u2"}, "node-c": {"u1"}})
    assert list(found["node-a"]) == ["u1", "u3"]
    assert found["node-a"]["u3"] == Pod("u3", "web-3", "default", {}, {}, 0)
    assert found["node-c"] == {}
    selectors = sorted(
        request.query["fieldSelector"][0] for request in apiserver.requests if request.path == "/api/v1/pods"
    )
    assert selectors == ["spec.nodeName=node-a", "spec.nodeName=node-c"]


def test_token_file_is_reread_so_rotation_needs_no_restart(apiserver, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("old-token\n")
    kube = client(apiserver, KUBERNETES_TOKEN="", KUBERNETES_TOKEN_FILE=str(token_file))
    with pytest.raises(KubeError) as refused:
        kube.list_nodes()
    assert refused.value.code == 401
    token_file.write_text(f"{TOKEN}\n")
    assert kube.list_nodes() == []


def test_node_list_pages_keep_names_labels_and_the_continue_token():
    nodes = [
        {"metadata": {"name": f"n{i}", "labels": {"zone": "a"}, "managedFields": [{"fieldsV1": {}}]}, "status": {}}
        for i in range(3)
    ]
    page = {"kind": "NodeList", "metadata": {"continue": "token"}, "items": nodes}
    assert decode_node_page(orjson.dumps(page), 10) == ([(f"n{i}", {"zone": "a"}) for i in range(3)], "token")
    assert decode_node_page(b'{"items": [{"metadata": {"name": "n", "labels": null}}]}', 1) == ([("n", {})], None)


@pytest.mark.parametrize(
    "page",
    [b"[]", b'{"items": {}}', b'{"items": [{"metadata": "x"}]}', b'{"items": ["\xff"]}', b'{"items": [{}]}',
     b'{"items": [{"metadata": {"name": 5}}]}', b'{"items": [{"metadata": {"name": ""}}]}',
     b'{"items": [{"metadata": {"name": "n", "labels": ["zone"]}}]}',
     b'{"items": [{"metadata": {"name": "n", "labels": {"zone": 1}}}]}',
     b'{"metadata": {"continue": 7}, "items": []}', b'{"items": [{"metadata": {"name": "n"}}'],
)  # fmt: skip
def test_node_list_pages_of_another_shape_are_an_error_naming_where(page):
    with pytest.raises(msgspec.DecodeError):
        decode_node_page(page, 10)


# --- errors ------------------------------------------------------------------------------------


def test_401_names_the_token_settings(apiserver):
    with pytest.raises(KubeError) as error:
        client(apiserver, KUBERNETES_TOKEN="wrong").list_nodes()
    assert error.value.code == 401
    assert (
        error.value.message
        == "the Kubernetes API answered 401 Unauthorized: Unauthorized (check KUBERNETES_TOKEN / KUBERNETES_TOKEN_FILE)"
    )


def test_403_carries_the_api_message_and_points_at_the_rbac(apiserver):
    apiserver.forbidden.add(("list", "nodes"))
    with pytest.raises(KubeError) as error:
        client(apiserver).list_nodes()
    assert error.value.code == 403
    assert 'cannot list resource "nodes" in API group "" at the cluster scope' in error.value.message
    assert "deploy/kubernetes/extender-rbac.yaml" in error.value.message


def test_a_server_certificate_from_another_ca_is_refused(apiserver):
    other = CertificateAuthority("not the cluster CA")
    with pytest.raises(KubeError) as error:
        client(apiserver, KUBERNETES_CA_DATA=base64.b64encode(other.cert_pem).decode()).list_nodes()
    assert error.value.code == 0
    assert "CERTIFICATE_VERIFY_FAILED" in error.value.message
    assert apiserver.requests == []  # the token never left


def test_system_roots_do_not_trust_a_private_cluster_ca(apiserver):
    with pytest.raises(KubeError, match="CERTIFICATE_VERIFY_FAILED"):
        client(apiserver, KUBERNETES_CA_DATA="").list_nodes()


def test_unreachable_api_is_code_0():
    kube = client_from_settings(
        Settings.from_environment({"KUBERNETES_API_URL": f"https://127.0.0.1:{free_port()}", "KUBERNETES_TOKEN": "t"})
    )
    assert kube is not None
    with pytest.raises(KubeError) as error:
        kube.list_nodes()
    assert error.value.code == 0
    assert "cannot reach the Kubernetes API" in error.value.message and "refused" in error.value.message


def test_a_slow_api_costs_at_most_the_timeout(apiserver):
    apiserver.delay = 3.0
    kube = client(apiserver, EXTENDER_HTTP_TIMEOUT="600ms")
    started = time.monotonic()
    with pytest.raises(KubeError, match=r"did not answer GET /api/v1/nodes within 0.3 s"):
        kube.list_nodes()
    assert time.monotonic() - started < 1.5


def test_parallel_pod_lists_share_one_budget(apiserver):
    apiserver.delay = 3.0
    kube = client(apiserver)
    started = time.monotonic()
    found = kube.pods_on_nodes({f"node-{index}": {"u"} for index in range(20)}, seconds=0.4)
    assert time.monotonic() - started < 1.5
    assert all(isinstance(result, KubeError) for result in found.values())


# --- a hostile API server: the client trusts it with the cluster, not with this process -----------------


def test_a_dripping_answer_costs_at_most_the_call_time_not_a_timeout_per_read(apiserver):
    apiserver.set_pods([pod("p", "u-p", "node-a")])
    apiserver.drip = 0.05  # a byte every 50 ms: never a read timeout, hundreds of seconds in all
    kube = client(apiserver, EXTENDER_HTTP_TIMEOUT="1s")
    started = time.monotonic()
    with pytest.raises(KubeError, match=r"did not answer GET /api/v1/pods within 0.5 s"):
        kube.pods_on_node("node-a", {"u-p"})
    assert time.monotonic() - started < 1.2


def test_a_dripping_bind_answer_fails_in_time(apiserver):
    apiserver.set_pods([pod("p", "u-p", "")])
    apiserver.drip = 0.05
    kube = client(apiserver, EXTENDER_HTTP_TIMEOUT="1s")
    started = time.monotonic()
    with pytest.raises(KubeError, match="did not answer POST"):
        kube.bind("default", "p", "u-p", "node-a")
    assert time.monotonic() - started < 1.2


def test_an_answer_over_the_size_cap_is_not_read(apiserver):
    apiserver.padding = 3_000_000
    kube = client(apiserver)
    kube.max_answer_bytes = 1_000_000
    with pytest.raises(KubeError, match="answered GET /api/v1/nodes with more than 1000000 bytes"):
        kube.list_nodes()


def test_a_continue_token_that_repeats_ends_the_list(apiserver):
    apiserver.set_nodes([node("node-a")])
    apiserver.repeat_continue = True
    with pytest.raises(KubeError, match="repeated a continue token"):
        client(apiserver).list_nodes()
    assert apiserver.count("GET", "/api/v1/nodes") == 2


def test_pages_are_capped(apiserver, monkeypatch):
    import extender.kube.client as module

    monkeypatch.setattr(module, "MAX_PAGES", 3)
    apiserver.set_nodes([node(f"node-{index}") for index in range(PAGE_SIZE * 4)])
    with pytest.raises(KubeError, match="more than 3 pages"):
        client(apiserver).list_nodes()


@pytest.mark.parametrize("items", [[1, "x", None], "not a list", {"a": 1}, [[]]])
def test_pod_list_items_that_are_not_objects_are_named(apiserver, items):
    apiserver.pod_items = items
    unreadable = r"listed pods on node node-a in a form this extender cannot read: (items\[0\]: )?Expected"
    with pytest.raises(KubeError, match=unreadable):
        client(apiserver).pods_on_node("node-a", {"u-p"})


@pytest.mark.parametrize("message", [["a", "list"], {"an": "object"}, 7, None])
def test_a_status_message_that_is_not_text_is_never_shown_as_a_python_repr(apiserver, message, monkeypatch):
    from testkit import fake_apiserver

    apiserver.set_pods([pod("p", "u-p", "")])

    def shaped(code, reason, _message):
        return {"kind": "Status", "code": code, "reason": reason, "message": message}

    monkeypatch.setattr(fake_apiserver, "status", shaped)
    with pytest.raises(KubeError) as raised:
        client(apiserver).bind("default", "missing", "u-x", "node-a")
    assert raised.value.message == "the Kubernetes API answered 404 Not Found: NotFound"


@pytest.mark.parametrize(
    "shape", ["drip status line", "drip headers", "drip 100 continue", "drip chunks", "stall before head"]
)
@pytest.mark.parametrize("resource", ["nodes", "pods", "binding"])
def test_a_head_or_answer_that_drips_costs_at_most_the_call_time_in_all(apiserver, shape, resource):
    apiserver.set_pods([pod("p", "u-p", "")])
    apiserver.hostile = {resource: shape}
    kube = client(apiserver, EXTENDER_HTTP_TIMEOUT="800ms")
    calls = {
        "nodes": kube.list_nodes,
        "pods": lambda: kube.pods_on_node("node-a", {"u-p"}),
        "binding": lambda: kube.bind("default", "p", "u-p", "node-a"),
    }
    started = time.monotonic()
    with pytest.raises(KubeError, match=r"did not answer (GET|POST) /api/v1/\S+ within 0.4 s"):
        calls[resource]()
    assert time.monotonic() - started < 1.0


def test_a_tls_handshake_held_by_the_server_ends_at_the_deadline(apiserver):
    apiserver.stall_handshake = True
    started = time.monotonic()
    with pytest.raises(KubeError, match=r"did not answer GET /api/v1/nodes within 0\.4 s"):
        client(apiserver, EXTENDER_HTTP_TIMEOUT="800ms").list_nodes()
    assert time.monotonic() - started < 1.0


def test_a_node_list_has_one_deadline_for_all_its_pages(apiserver):
    apiserver.hostile = {"nodes": "endless empty pages"}
    apiserver.delay = 0.05  # each page in good time
    kube = client(apiserver)
    started = time.monotonic()
    with pytest.raises(KubeError, match="did not answer GET /api/v1/nodes within"):
        kube.list_nodes(total=0.5)
    assert time.monotonic() - started < 1.0 and apiserver.count("GET", "/api/v1/nodes") > 2


@pytest.mark.parametrize("shape", ["token echoed in a Status", "token echoed as text"])
def test_a_server_that_echoes_the_bearer_token_never_has_it_quoted(apiserver, shape):
    apiserver.hostile = {"nodes": shape}
    with pytest.raises(KubeError) as raised:
        client(apiserver).list_nodes()
    message = raised.value.message
    assert raised.value.code in (401, 403) and "<redacted>" in message
    for form in (TOKEN, base64.b64encode(TOKEN.encode()).decode()):
        assert not any(form[at : at + 16] in message for at in range(len(form) - 15)), message


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        ("HTML", "listed nodes as Content-Type 'text/html', not application/json"),
        ("no Content-Type", "listed nodes as Content-Type 'none'"),
        ("redirect", "307 Temporary Redirect (redirects are not followed: set KUBERNETES_API_URL to the API server"),
        ("103 as the answer", "answered 103 Early Hints"),
        ("invalid JSON", "listed nodes in a form this extender cannot read"),
        ("gzip unasked", "listed nodes in a form this extender cannot read"),
        ("truncated body", "broken HTTP answer: the answer ended"),
        ("not HTTP", "broken HTTP answer: the answer does not start with an HTTP status line"),
        ("31 MiB list", "with more than 16777216 bytes (the cap of one answer; 3"),
        ("31 MiB list, chunked", "with more than 16777216 bytes (the cap of one answer): not read"),
        ("15 MiB of tiny items", "listed more than 65536 nodes: the kubernetes node source serves clusters up to"),
        ("15 MiB of labels", "cannot read: the labels of node hostile-node-0 take more than 262144 bytes"),
    ],
)
def test_what_is_not_a_readable_node_list_is_an_error_naming_it(apiserver, shape, problem):
    hostile_answers.prepare()  # the large bodies, built before any answer is timed
    apiserver.hostile = {"nodes": shape}
    with pytest.raises(KubeError) as raised:
        client(apiserver).list_nodes()
    assert problem in raised.value.message and "\n" not in raised.value.message


def test_the_pods_of_one_request_read_a_bounded_number_of_bytes_in_all(apiserver, monkeypatch):
    import extender.kube.client as module

    hostile_answers.prepare()
    apiserver.hostile = {"pods": "15 MiB list"}
    monkeypatch.setattr(module, "MAX_REQUEST_BYTES", 40 * 1024 * 1024)
    found = client(apiserver, EXTENDER_HTTP_TIMEOUT="20s").pods_on_nodes({f"node-{index}": {"u"} for index in range(4)})
    failed = [result for result in found.values() if isinstance(result, KubeError)]
    in_all = "more than 41943040 bytes in all (the pod lists of one request)"
    assert len(failed) == 2 and all(in_all in failure.message for failure in failed)


def test_more_pods_on_a_node_than_read_is_an_error(apiserver, monkeypatch):
    import extender.kube.client as module

    monkeypatch.setattr(module, "MAX_PODS_PER_NODE", 2)
    apiserver.set_pods([pod(f"p{index}", f"u{index}", "node-a") for index in range(3)])
    with pytest.raises(KubeError, match="listed 3 pods on node node-a, more than the 2 read"):
        client(apiserver).pods_on_node("node-a", {"u0"})


def test_only_the_victims_are_decoded_the_other_pods_may_hold_anything_else(apiserver):
    apiserver.pod_items = [
        {"metadata": {"uid": "u-victim", "name": "v", "namespace": "ns", "labels": {"app": "db"}},
         "spec": {"priority": 7}},
        {"metadata": {"uid": "u-other", "labels": {"broken": 1}, "annotations": ["x"]}, "spec": {"priority": "high"}},
    ]
    victim = Pod("u-victim", "v", "ns", {"app": "db"}, {}, 7)
    assert client(apiserver).pods_on_node("node-a", {"u-victim"}) == {"u-victim": victim}


def test_bind_takes_any_2xx_as_done_whatever_its_body(apiserver):
    apiserver.set_pods([pod("p", "u-p", "")])
    apiserver.hostile = {"binding": "HTML"}
    client(apiserver).bind("default", "p", "u-p", "node-a")
