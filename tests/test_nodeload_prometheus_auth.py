"""NodeLoad's Prometheus auth against a real Prometheus (tests/prometheus.py) behind a proxy that demands each kind:
a bearer token (from a file, rotated, or from a PROMETHEUS_* variable), basic auth, a client certificate over TLS
with a private CA (certificates from ``cryptography``, testkit.certs) and a tenant header (testkit.auth_proxy).

A refused credential is a WARNING and a reason naming the auth kind, where its secret comes from and the HTTP status;
no secret is in any log record, reason or exception text (tests/token_leaks.py looks for every form of it). What
the policy names is checked at load (one credential, files named never written in), and the files by
``check-policy --env`` and start-up, which never print what they hold.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from marshmallow import ValidationError

from extender.__main__ import main
from extender.framework.args import loading_for
from extender.framework.profile import Profile
from extender.plugins import NodeLoad
from extender.settings import Settings
from testkit.auth_proxy import AuthProxy
from testkit.certs import CertificateAuthority
from tests.plugin_helpers import node, pod
from tests.prometheus import METRIC, refreshes_landed, write_nodeload_policy
from tests.token_leaks import RecordKeeper, leaks

TOKEN = "glc_eyJvIjoiMTIzNDU2Iiwibi-stand-in-token-0123456789"
ROTATED = "glc_rotated-stand-in-token-abcdefghijklmnopqrstuv"
PASSWORD = "correct-horse-battery-staple-42"
OVER = "NodeLoad rule 'cpu': load above 0.9"


@pytest.fixture
def loaded(prometheus, exporter) -> None:
    exporter.set({"a": 0.2, "b": 0.95})
    prometheus.wait_until(METRIC, lambda values: values == {"a": 0.2, "b": 0.95})


@pytest.fixture
def records() -> Iterator[RecordKeeper]:
    """Every record any logger writes during the test."""
    keeper = RecordKeeper()
    root = logging.getLogger()
    root.addHandler(keeper)
    previous = root.level
    root.setLevel(logging.DEBUG)
    yield keeper
    root.removeHandler(keeper)
    root.setLevel(previous)


def served(prometheus_args: dict[str, Any], clock: list[float], settings: Settings | None = None) -> Profile:
    args = {
        "prometheus": prometheus_args,
        "metrics": [{"name": "cpu", "query": METRIC, "nodeLabel": "node", "resource": "none"}],
        "filter": [{"metric": "cpu", "above": 0.9}],
    }
    with loading_for(settings or Settings()):
        plugin = NodeLoad(NodeLoad.args_schema().load(args), clock=lambda: clock[0])
    return Profile("default", filters=[plugin])


def judged(profile: Profile) -> tuple[list[str], dict[str, str], str]:
    """The feasible nodes, the rejected ones' reasons, and the error's reason (nodes without facts), if any."""
    result = profile.filter(pod(), [node("a"), node("b")])
    rejected = {name: status.reason for name, status in result.rejected.items()}
    return result.feasible, rejected, result.error.reason if result.error is not None else ""


def refreshed(profile: Profile, clock: list[float]) -> None:
    """Past refreshInterval, with the refresh it makes due landed: a request starts it on a thread of its own (and
    judges on the answers at hand)."""
    clock[0] += 31
    judged(profile)
    refreshes_landed()


def assert_secret_free(records: RecordKeeper, *texts: str, secrets: tuple[str, ...] = (TOKEN, ROTATED, PASSWORD)):
    for text in [*records.texts, *texts]:
        assert not leaks(text, secrets), text


def nodeload_warnings(records: RecordKeeper) -> list[str]:
    return [text for text in records.texts if text.startswith("NodeLoad: metric cpu:")]


def test_a_bearer_token_file_is_sent_and_read_again_when_prometheus_refuses_it(
    prometheus, loaded, tmp_path, records
):
    proxy = AuthProxy(prometheus.url, bearer=TOKEN)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")  # as Secret Manager values often end
    clock = [time.time()]
    profile = served({"url": proxy.url, "tokenFile": str(token_file)}, clock)
    try:
        assert judged(profile) == (["a"], {"b": OVER}, "")
        assert proxy.seen[-1]["headers"]["Authorization"] == f"Bearer {TOKEN}"
        # Rotated: the proxy takes the new token only; the file is rewritten (a new Secret Manager version).
        proxy.bearer = ROTATED
        token_file.write_text(ROTATED)
        refreshed(profile, clock)
        # The old token is refused: the last answer serves meanwhile.
        assert judged(profile) == (["a"], {"b": OVER}, "")
        [warning] = nodeload_warnings(records)
        assert "answered 401 Unauthorized: unauthorized: missing or wrong bearer token" in warning
        assert f"the bearer token (prometheus.tokenFile {token_file}) was refused" in warning
        refreshed(profile, clock)
        assert judged(profile) == (["a"], {"b": OVER}, "")  # read again after the refusal
        assert proxy.seen[-1]["headers"]["Authorization"] == f"Bearer {ROTATED}"
    finally:
        proxy.close()
    assert_secret_free(records)


def test_a_bearer_token_from_a_prometheus_variable(prometheus, loaded, records):
    proxy = AuthProxy(prometheus.url, bearer=TOKEN)
    settings = Settings.from_environment({"PROMETHEUS_TOKEN": TOKEN + "\n"})
    try:
        profile = served({"url": proxy.url, "auth": "bearer", "tokenEnv": "PROMETHEUS_TOKEN"}, [time.time()], settings)
        assert judged(profile) == (["a"], {"b": OVER}, "")
    finally:
        proxy.close()
    assert "PROMETHEUS_TOKEN" in repr(settings) and TOKEN not in repr(settings)
    assert_secret_free(records)


def test_basic_auth_and_a_wrong_password_names_the_user_and_the_status_never_the_password(
    prometheus, loaded, tmp_path, records
):
    proxy = AuthProxy(prometheus.url, basic=("scheduler", PASSWORD), echo=True)
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD)
    wrong_file = tmp_path / "wrong"
    wrong_file.write_text("not-" + PASSWORD)
    try:
        good = served({"url": proxy.url, "username": "scheduler", "passwordFile": str(password_file)}, [time.time()])
        assert judged(good) == (["a"], {"b": OVER}, "")
        wrong = served({"url": proxy.url, "username": "scheduler", "passwordFile": str(wrong_file)}, [time.time()])
        feasible, _, error = judged(wrong)
    finally:
        proxy.close()
    assert feasible == []
    assert "answered 401 Unauthorized: unauthorized: missing or wrong basic credentials" in error
    assert f"basic auth as 'scheduler' (prometheus.passwordFile {wrong_file}) was refused" in error
    # The proxy echoed the request's headers into its refusal: the encoded credentials are not passed on.
    assert_secret_free(records, error, secrets=(PASSWORD, "not-" + PASSWORD))


def test_a_client_certificate_and_a_private_ca_over_tls(prometheus, loaded, tmp_path, records):
    ca = CertificateAuthority("private Prometheus CA")  # trusted by nothing else: only tls.caFile makes it work
    context = ca.server_context(ca.issue_server("127.0.0.1"), tmp_path)
    context.verify_mode = __import__("ssl").CERT_OPTIONAL  # asked, and refused with a 403 when missing
    context.load_verify_locations(cadata=ca.cert_pem.decode())
    proxy = AuthProxy(prometheus.url, context=context, client_cert=True, bearer=TOKEN)
    cert_file, key_file = ca.issue_client("nodeload").write(tmp_path, "client")
    ca_file = ca.write(tmp_path, "private-ca")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    tls = {"caFile": str(ca_file), "certFile": str(cert_file), "keyFile": str(key_file)}
    try:
        with_cert = served({"url": proxy.url, "tokenFile": str(token_file), "tls": tls}, [time.time()])
        assert judged(with_cert) == (["a"], {"b": OVER}, "")
        assert proxy.seen[-1]["client_cert"]
        without = served({"url": proxy.url, "tokenFile": str(token_file), "tls": {"caFile": str(ca_file)}}, [0.0])
        _, _, refused = judged(without)
        untrusted = served({"url": proxy.url, "tokenFile": str(token_file)}, [0.0])
        _, _, unverified = judged(untrusted)
    finally:
        proxy.close()
    assert "answered 403 Forbidden: unauthorized: no client certificate was presented" in refused
    assert "CERTIFICATE_VERIFY_FAILED" in unverified  # without caFile the private CA is not trusted
    assert_secret_free(records, refused, unverified)


def test_a_tenant_header_is_sent_with_every_query(prometheus, loaded, records):
    proxy = AuthProxy(prometheus.url, tenant="team-a")
    try:
        tenant = served({"url": proxy.url, "headers": {"X-Scope-OrgID": "team-a"}}, [time.time()])
        assert judged(tenant) == (["a"], {"b": OVER}, "")
        _, _, error = judged(served({"url": proxy.url}, [time.time()]))
    finally:
        proxy.close()
    assert "answered 401 Unauthorized: unauthorized: no org id (no credentials were sent: prometheus.auth is none)" in (
        error
    )


def test_a_missing_token_file_says_so_and_the_next_refresh_reads_it(prometheus, loaded, tmp_path, records):
    proxy = AuthProxy(prometheus.url, bearer=TOKEN)
    token_file = tmp_path / "token"
    clock = [time.time()]
    profile = served({"url": proxy.url, "tokenFile": str(token_file)}, clock)
    try:
        _, _, error = judged(profile)
        assert f"prometheus.tokenFile {token_file} does not exist" in error
        assert proxy.seen == []  # nothing sent without the token
        token_file.write_text(TOKEN)
        refreshed(profile, clock)  # a file that could not be read is read again with the next query
        assert judged(profile) == (["a"], {"b": OVER}, "")
    finally:
        proxy.close()
    [warning] = nodeload_warnings(records)
    assert f"prometheus.tokenFile {token_file} does not exist (no answer: its nodes have no facts)" in warning


@pytest.mark.parametrize(
    ("prometheus_args", "expected"),
    [
        (
            {"tokenFile": "/s/t", "username": "u", "passwordFile": "/s/p"},
            "args.prometheus.auth: a bearer token (tokenFile or tokenEnv) and basic auth",
        ),
        ({"tokenFile": "/s/t", "tokenEnv": "PROMETHEUS_T"}, "args.prometheus.tokenEnv: tokenFile and tokenEnv both"),
        ({"auth": "bearer"}, "args.prometheus.tokenFile: auth bearer needs tokenFile"),
        ({"auth": "basic", "username": "u"}, "args.prometheus.passwordFile: basic auth needs passwordFile"),
        ({"passwordFile": "/s/p"}, "args.prometheus.username: basic auth needs a username"),
        ({"auth": "none", "tokenFile": "/s/t"}, "args.prometheus.auth: auth none sends no credentials: tokenFile"),
        ({"tokenEnv": "GRAFANA_TOKEN"}, "args.prometheus.tokenEnv: must be a variable named PROMETHEUS_..."),
        ({"username": "a:b", "passwordEnv": "PROMETHEUS_P"}, "args.prometheus.username: must not be empty nor hold"),
        ({"tls": {"certFile": "/s/c"}}, "args.prometheus.tls.keyFile: certFile needs keyFile"),
        ({"headers": {"Authorization": "Bearer x"}}, "args.prometheus.headers: Authorization is set by NodeLoad"),
        ({"headers": {"X-Scope-OrgID": "a\nb"}}, "args.prometheus.headers: X-Scope-OrgID's value must be one line"),
        ({"password": "hunter2"}, "args.prometheus.password: Unknown field."),
        (
            {"url": "http://prometheus.example.internal:9090", "tokenFile": "/s/t"},
            "args.prometheus.url: must use https: the bearer token would cross the network in clear text",
        ),
        (
            {"url": "http://127.0.0.1:9090", "tls": {"caFile": "/s/ca"}},
            "args.prometheus.url: must be an https:// URL: tls (caFile, certFile, keyFile) applies to https only",
        ),
    ],
)
def test_what_the_policy_names_is_checked_at_load(prometheus_args, expected):
    args = {
        "prometheus": {"url": "https://prometheus.example.internal", **prometheus_args},
        "metrics": [{"name": "cpu", "query": METRIC, "nodeLabel": "node"}],
    }
    with pytest.raises(ValidationError) as raised:
        NodeLoad.args_schema().load(args)
    def lines(messages: Any, path: str) -> Iterator[str]:
        if isinstance(messages, dict):
            for key, inner in messages.items():
                yield from lines(inner, f"{path}.{key}")
        else:
            for message in messages:
                yield f"{path}: {message}"

    found = list(lines(raised.value.messages, "args"))
    assert any(line.startswith(expected) for line in found), found


def policy_file(directory: Path, prometheus_args: dict[str, Any]) -> Path:
    args = {
        "prometheus": {"url": "https://prometheus.example.internal", **prometheus_args},
        "metrics": [{"name": "cpu", "query": METRIC, "nodeLabel": "node"}],
        "filter": [{"metric": "cpu", "above": 0.9}],
    }
    return write_nodeload_policy(directory, args)


def test_check_policy_lists_the_secrets_and_env_checks_them_without_printing_them(
    capsys, tmp_path, monkeypatch, test_ca
):
    token_file = tmp_path / "token"
    cert_file, key_file = test_ca.issue_client("nodeload").write(tmp_path, "client")
    _, other_key = test_ca.issue_client("other").write(tmp_path, "other")
    path = policy_file(
        tmp_path,
        {
            "tokenFile": str(token_file),
            "tls": {"certFile": str(cert_file), "keyFile": str(other_key)},
            "headers": {"X-Scope-OrgID": "team-a"},
        },
    )
    monkeypatch.delenv("PROMETHEUS_TOKEN", raising=False)
    code = main(["check-policy", str(path)])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert f"  needs file {token_file}: NodeLoad's Prometheus bearer token (prometheus.tokenFile)" in out
    assert f"  needs file {other_key}: NodeLoad's Prometheus client certificate's key (prometheus.tls.keyFile)" in out
    code = main(["check-policy", str(path), "--env"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == [
        f"{path}: the policy needs files this environment cannot use:",
        f"  file {token_file}: NodeLoad's Prometheus bearer token (prometheus.tokenFile): does not exist",
        (
            f"  file {cert_file}: NodeLoad's Prometheus client certificate (prometheus.tls.certFile): "
            f"prometheus.tls.certFile {cert_file} and keyFile {other_key} cannot be loaded together "
            "(a PEM certificate chain and its unencrypted private key): KEY_VALUES_MISMATCH"
        ),
    ]
    token_file.write_text(TOKEN)
    tls = {"certFile": str(cert_file), "keyFile": str(key_file)}
    path = policy_file(tmp_path, {"tokenFile": str(token_file), "tls": tls})
    assert main(["check-policy", str(path), "--env"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and TOKEN not in out
    key_text = key_file.read_text()
    assert not any(line in out + err for line in key_text.splitlines()[1:-1])


def test_check_policy_env_and_start_up_name_an_unset_variable_and_an_empty_file(capsys, tmp_path, monkeypatch):
    empty = tmp_path / "password"
    empty.write_text("\n")
    path = policy_file(tmp_path, {"username": "u", "passwordFile": str(empty)})
    assert main(["check-policy", str(path), "--env"]) == 2
    _, err = capsys.readouterr()
    assert f"  file {empty}: NodeLoad's Prometheus basic auth password (prometheus.passwordFile): is empty" in err
    path = policy_file(tmp_path, {"tokenEnv": "PROMETHEUS_TOKEN"})
    monkeypatch.delenv("PROMETHEUS_TOKEN", raising=False)
    assert main(["check-policy", str(path), "--env"]) == 2
    _, err = capsys.readouterr()
    assert err.splitlines() == [
        f"{path}: the policy needs variables the environment does not set:",
        "  PROMETHEUS_TOKEN: NodeLoad's Prometheus bearer token (prometheus.tokenEnv)",
    ]
    monkeypatch.setenv("PROMETHEUS_TOKEN", TOKEN)
    assert main(["check-policy", str(path), "--env"]) == 0
    out, err = capsys.readouterr()
    assert TOKEN not in out + err
    from extender.http.handler import Extender

    monkeypatch.delenv("PROMETHEUS_TOKEN")
    with pytest.raises(ValueError, match="PROMETHEUS_TOKEN: NodeLoad's Prometheus bearer token"):
        Extender.from_environment(str(path), Settings.from_environment({"EXTENDER_PROCESS_TUNING": "off"}))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_named_with_why(capsys, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0)
    path = policy_file(tmp_path, {"tokenFile": str(token_file)})
    assert main(["check-policy", str(path), "--env"]) == 2
    _, err = capsys.readouterr()
    assert "prometheus.tokenFile): cannot be read: Permission denied" in err


def test_a_directory_is_no_secret_file(capsys, tmp_path):
    path = policy_file(tmp_path, {"tokenFile": str(tmp_path)})
    assert main(["check-policy", str(path), "--env"]) == 2
    _, err = capsys.readouterr()
    assert f"  file {tmp_path}: NodeLoad's Prometheus bearer token (prometheus.tokenFile): is a directory" in err


def test_served_and_explained_a_refused_token_is_named_never_shown(
    prometheus, loaded, tmp_path, client_factory, records
):
    """Through the function's HTTP handling (the filter answer, the decision entry) and ``explain`` (its table, its
    JSON, its stderr): the refusal's status and the auth kind, never the token."""
    import json
    import subprocess

    from tests.conftest import ROOT
    from tests.test_nodeload_prometheus import POD, explain_command, filtered

    proxy = AuthProxy(prometheus.url, bearer=TOKEN, echo=True)
    token_file = tmp_path / "token"
    token_file.write_text(ROTATED)  # not the one the proxy takes
    policy = policy_file(tmp_path, {"url": proxy.url, "tokenFile": str(token_file)})
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(json.dumps(POD))
    try:
        verdict = filtered(client_factory(policy), ["a", "b"])
        command = explain_command(pod_file, policy, "a,b")
        shown = [
            subprocess.run([*command, *extra], cwd=ROOT, capture_output=True, text=True, check=False)
            for extra in ([], ["--json"])
        ]
        token_file.write_text(TOKEN)
        right = subprocess.run([*command, "--json"], cwd=ROOT, capture_output=True, text=True, check=False)
    finally:
        proxy.close()
    refused = (
        "answered 401 Unauthorized: unauthorized: missing or wrong bearer token "
        f"(the bearer token (prometheus.tokenFile {token_file}) was refused)"
    )
    assert refused in verdict["error"]
    decision = [text for text in records.texts if "extender decision" in text]
    assert decision and any(refused in text for text in decision)
    for run in shown:
        assert refused in run.stdout + run.stderr, run.stdout + run.stderr
    assert right.returncode == 0, right.stderr
    rows = {row["name"]: row for row in json.loads(right.stdout)["nodes"]}
    assert rows["b"]["reason"] == OVER and rows["a"]["answer"] == "kept"
    assert_secret_free(records, verdict["error"], *(run.stdout + run.stderr for run in [*shown, right]))


def test_a_rotated_client_certificate_is_read_again_and_makes_a_new_tls_context(prometheus, loaded, tmp_path):
    import ssl

    ca = CertificateAuthority("private Prometheus CA")
    context = ca.server_context(ca.issue_server("127.0.0.1"), tmp_path)
    context.verify_mode = ssl.CERT_OPTIONAL  # a certificate it cannot verify fails the handshake
    context.load_verify_locations(cadata=ca.cert_pem.decode())
    proxy = AuthProxy(prometheus.url, context=context, client_cert=True)
    ca_file = ca.write(tmp_path, "private-ca")
    cert_file, key_file = CertificateAuthority("some other CA").issue_client("nodeload").write(tmp_path, "client")
    tls = {"caFile": str(ca_file), "certFile": str(cert_file), "keyFile": str(key_file)}
    clock = [time.time()]
    profile = served({"url": proxy.url, "tls": tls}, clock)
    try:
        _, _, error = judged(profile)
        # Refused in the handshake (TLS 1.2) or right after it (TLS 1.3: an alert, or the connection's end where the
        # answer should be): either way the certificate is named.
        assert f"{proxy.url} " in error and f"client certificate prometheus.tls.certFile {cert_file}" in error
        ca.issue_client("nodeload").write(tmp_path, "client")  # the new version of both secrets
        refreshed(profile, clock)
        assert judged(profile) == (["a"], {"b": OVER}, "")
        assert proxy.seen[-1]["client_cert"]
    finally:
        proxy.close()


def test_a_ca_bundle_that_is_not_pem_is_named_by_check_policy_env(capsys, tmp_path):
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text("not a certificate\n")
    path = policy_file(tmp_path, {"tls": {"caFile": str(ca_file)}})
    assert main(["check-policy", str(path), "--env"]) == 2
    _, err = capsys.readouterr()
    assert (
        f"  file {ca_file}: NodeLoad's Prometheus CA bundle (prometheus.tls.caFile): prometheus.tls.caFile {ca_file} "
        "cannot be loaded as PEM CA certificates:"
    ) in err


def test_check_policy_probe_asks_with_the_policy_s_credentials(prometheus, loaded, tmp_path, capsys, monkeypatch):
    """--probe goes where and as the function would: the token the policy names is sent, a refused one is named by
    its kind and the status, and neither output holds it."""
    proxy = AuthProxy(prometheus.url, bearer=TOKEN, tenant="team-a")
    monkeypatch.setenv("PROMETHEUS_TOKEN", ROTATED)  # not the one the proxy takes
    nodes = tmp_path / "nodes.json"
    nodes.write_text('{"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}')
    headers = {"X-Scope-OrgID": "team-a"}
    try:
        path = policy_file(tmp_path, {"url": proxy.url, "tokenEnv": "PROMETHEUS_TOKEN", "headers": headers})
        refused = main(["check-policy", str(path), "--probe", "--nodes", str(nodes)])
        refused_out, refused_err = capsys.readouterr()
        monkeypatch.setenv("PROMETHEUS_TOKEN", TOKEN)
        answered = main(["check-policy", str(path), "--probe", "--nodes", str(nodes)])
        answered_out, answered_err = capsys.readouterr()
    finally:
        proxy.close()
    assert refused == 1, refused_out + refused_err
    assert (
        "no answer: " + f"{proxy.url} answered 401 Unauthorized: unauthorized: missing or wrong bearer token "
        "(the bearer token (prometheus.tokenEnv PROMETHEUS_TOKEN) was refused)"
    ) in refused_out
    assert answered == 0, answered_out + answered_err
    assert "2 of 2 nodes matched on label node" in answered_out
    for text in (refused_out, refused_err, answered_out, answered_err):
        assert not leaks(text, (TOKEN, ROTATED)), text
