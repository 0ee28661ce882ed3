"""The Kubernetes API client against a real HTTPS server: configuration, TLS trust, tokens, errors, time limits."""

from __future__ import annotations

import base64
import time

import pytest

from extender.kube import client_from_settings
from extender.kube.client import PAGE_SIZE, KubeClient
from extender.kube.config import KubeConfig
from extender.kube.errors import KubeError
from extender.settings import Settings
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
        ({"KUBERNETES_API_URL": "https://api", "KUBERNETES_TOKEN_FILE": "/nonexistent/token"}, "KUBERNETES_TOKEN_FILE: cannot read"),
        ({"KUBERNETES_API_URL": "https://api", "KUBERNETES_CA_DATA": "not base64!"}, "must be PEM or base64 of PEM"),
        ({"KUBERNETES_API_URL": "https://api", "KUBERNETES_CA_DATA": base64.b64encode(b"hello").decode()}, "holds no PEM certificate"),
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
    as_base64 = KubeConfig.from_environment({"KUBERNETES_API_URL": "https://api", "KUBERNETES_CA_DATA": base64.b64encode(pem.encode()).decode()})
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
    items = client(apiserver).list_nodes()
    assert [item["metadata"]["labels"]["index"] for item in items] == [str(index) for index in range(2 * PAGE_SIZE + 3)]
    assert all(item["kind"] == "PartialObjectMetadata" for item in items)
    pages = [request for request in apiserver.requests if request.path == "/api/v1/nodes"]
    assert len(pages) == 3
    assert [page.query.get("limit") for page in pages] == [[str(PAGE_SIZE)]] * 3
    assert "continue" not in pages[0].query and "continue" in pages[1].query
    assert "as=PartialObjectMetadataList" in pages[0].headers["accept"]
    assert pages[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_full_node_lists_read_the_same(apiserver):
    apiserver.metadata_lists = False
    apiserver.set_nodes([node("node-a", {"zone": "a"})])
    [item] = client(apiserver).list_nodes()
    assert item["metadata"]["labels"] == {"zone": "a"} and "status" in item


def test_pods_on_nodes_uses_a_field_selector(apiserver):
    apiserver.set_pods([pod("web-1", "u1", "node-a"), pod("web-2", "u2", "node-b"), pod("web-3", "u3", "node-a")])
    found = client(apiserver).pods_on_nodes(["node-a", "node-c"])
    assert [item["metadata"]["uid"] for item in found["node-a"]] == ["u1", "u3"]
    assert found["node-c"] == []
    selectors = sorted(request.query["fieldSelector"][0] for request in apiserver.requests if request.path == "/api/v1/pods")
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


# --- errors ------------------------------------------------------------------------------------


def test_401_names_the_token_settings(apiserver):
    with pytest.raises(KubeError) as error:
        client(apiserver, KUBERNETES_TOKEN="wrong").list_nodes()
    assert error.value.code == 401
    assert error.value.message == "the Kubernetes API answered 401 Unauthorized: Unauthorized (check KUBERNETES_TOKEN / KUBERNETES_TOKEN_FILE)"


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
    kube = client_from_settings(Settings.from_environment({"KUBERNETES_API_URL": f"https://127.0.0.1:{free_port()}", "KUBERNETES_TOKEN": "t"}))
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
    found = kube.pods_on_nodes([f"node-{index}" for index in range(20)], budget=0.4)
    assert time.monotonic() - started < 1.5
    assert all(isinstance(result, KubeError) for result in found.values())


# --- a hostile API server: the client trusts it with the cluster, not with this process -----------------


def test_a_dripping_answer_costs_at_most_the_call_time_not_a_timeout_per_read(apiserver):
    apiserver.set_pods([pod("p", "u-p", "node-a")])
    apiserver.drip = 0.05  # a byte every 50 ms: never a read timeout, hundreds of seconds in all
    kube = client(apiserver, EXTENDER_HTTP_TIMEOUT="1s")
    started = time.monotonic()
    with pytest.raises(KubeError, match=r"did not answer GET /api/v1/pods within 0.5 s"):
        kube.pods_on_node("node-a")
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
    with pytest.raises(KubeError, match="listed pods on node node-a that are not objects"):
        client(apiserver).pods_on_node("node-a")


@pytest.mark.parametrize("message", [["a", "list"], {"an": "object"}, 7, None])
def test_a_status_message_that_is_not_text_is_never_shown_as_a_python_repr(apiserver, message, monkeypatch):
    from testkit import fake_apiserver

    apiserver.set_pods([pod("p", "u-p", "")])
    shaped = lambda code, reason, _message: {"kind": "Status", "code": code, "reason": reason, "message": message}
    monkeypatch.setattr(fake_apiserver, "status", shaped)
    with pytest.raises(KubeError) as raised:
        client(apiserver).bind("default", "missing", "u-x", "node-a")
    assert raised.value.message == "the Kubernetes API answered 404 Not Found: NotFound"
