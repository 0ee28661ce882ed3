"""python -m extender check-scheduler-config: kube-scheduler's rules for extenders[], in its words, and the policy
cross-checks, on real files."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap

import pytest

from extender.__main__ import main
from testkit.certs import CertificateAuthority
from tests.conftest import ROOT
from tests.recordings import scenarios

RECORDED = [recording.config_path for recording in scenarios()]
HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
URL = "https://scheduler-extender-x7k2p9q4ra-uc.a.run.app/q8ZrT2vLw5NcY7bK1mXf4HsJ9dGp3aEu"


def run(capsys, *argv):
    code = main(["check-scheduler-config", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("path", RECORDED, ids=[f"{path.parent.parent.name}/{path.parent.name}" for path in RECORDED])
def test_configurations_a_real_kube_scheduler_started_with_pass(capsys, path):
    code, out, err = run(capsys, path)
    assert (code, err) == (0, [])
    assert out.startswith(f"{path}: ok\n  extenders[0]: filter, prioritize (weight ")


def test_every_problem_is_reported_in_kube_schedulers_words(capsys, tmp_path):
    config = write(
        tmp_path,
        "scheduler.yaml",
        HEADER
        + f"""
        extenders:
        - urlPrefix: {URL}
          prioritizeVerb: prioritize
          weight: 0
          bindVerb: bind
          nodeCacheCapabel: true
          httpTimeout: 5
          managedResources: [{{name: gpu}}, {{name: example.com/gpu}}]
          tlsConfig: {{caData: "-----BEGIN CERTIFICATE-----"}}
        - urlPrefix: ftp://extender.example.com
          bindVerb: bind
          managedResources: [{{name: example.com/gpu}}]
        """.replace("\n        ", "\n"),
    )
    code, out, err = run(capsys, config)
    assert (code, out) == (1, "")
    assert err[0] == f"invalid scheduler configuration {config}:"
    assert sorted(err[1:]) == sorted(
        [
            '  strict decoding error: unknown field "extenders[0].nodeCacheCapabel"',
            "  extenders[0].httpTimeout: json: cannot unmarshal number into Go struct field Extender.extenders.httpTimeout "
            "of type string",
            "  extenders[0].tlsConfig.caData: illegal base64 data at input byte 0: the *Data fields hold base64 of the "
            "PEM file, e.g. base64 -w0 ca.pem",
            "  extenders[0].managedResources[0].name: Invalid value: \"gpu\": is an invalid extended resource name",
            "  extenders[1].urlPrefix: must be an http:// or https:// URL: kube-scheduler accepts it, but every call fails",
            "  extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
            '  extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind',
            "  extenders[1].managedResources[0].name: Invalid value: \"example.com/gpu\": duplicate extender managed "
            "resource name",
        ]
    )
    assert all(URL.rsplit("/", 1)[1] not in line for line in err), "the caller token never appears"


POLICY = """
nodeCacheCapable: false
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
  pluginConfig:
  - {name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {matchLabels: {cloud.google.com/gke-nodepool: a}}}]}}
- name: batch
"""


def test_with_the_policy_the_two_files_must_agree(capsys, tmp_path):
    policy = write(tmp_path, "policy.yaml", POLICY)
    ca = base64.b64encode(CertificateAuthority("check CA").cert_pem).decode()
    good = write(
        tmp_path,
        "good.yaml",
        HEADER + f"extenders:\n- {{urlPrefix: '{URL}/batch', filterVerb: filter, enableHTTPS: true, tlsConfig: {{caData: {ca}}}}}\n",
    )
    code, out, err = run(capsys, good, "--policy", policy)
    assert (code, err) == (0, [])
    assert out == f"{good}: ok with policy {policy}\n  extenders[0]: filter; full nodes; httpTimeout 5s (default)\n"

    no_default = write(tmp_path, "p2.yaml", POLICY.replace("name: default", "name: tenants"))
    bad = write(
        tmp_path,
        "bad.yaml",
        HEADER
        + f"""extenders:
- urlPrefix: {URL}/batc
  filterVerb: filtr
  preemptVerb: preempt
  nodeCacheCapable: true
  enableHTTPS: true
- urlPrefix: {URL}?profile=batch
  preemptVerb: preempt
""",
    )
    code, out, err = run(capsys, bad, "--policy", no_default)
    assert (code, out) == (1, "")
    assert err[1:] == [
        "  extenders[0].enableHTTPS: enableHTTPS without tlsConfig.caData or caFile turns certificate verification off: "
        "give a CA, drop enableHTTPS to verify an https:// urlPrefix against the system roots, or set "
        "tlsConfig.insecure: true",
        '  extenders[1].urlPrefix: must not have a query string or fragment: the scheduler appends "/<verb>" verbatim',
        '  extenders[0].filterVerb: Invalid value: "filtr": the function answers only \'filter\' here',
        "  extenders[0].urlPrefix: selects no profile of the policy: its last path segment is not one of batch, "
        "tenants, and the policy has no default profile",
        "  extenders[0].nodeCacheCapable: Invalid value: true: the scheduler sends node names only, but the policy "
        "declares nodeCacheCapable: false; set both alike",
        "  extenders[1].urlPrefix: selects no profile of the policy: its last path segment is not one of batch, "
        "tenants, and the policy has no default profile",
        "  extenders[1].preemptVerb: preempt requests carry no Node objects and the policy has no nodeSource, so "
        "filters reading labels (tenants/NodeLabelPolicy) cannot run there: configure a nodeSource, or set "
        "preemptTrustsSchedulerFilter: true in the policy (see docs/policy.md)",
    ]
    trusting = write(tmp_path, "p3.yaml", "preemptTrustsSchedulerFilter: true\n" + POLICY)
    preempting = write(tmp_path, "s3.yaml", HEADER + f"extenders:\n- {{urlPrefix: '{URL}', preemptVerb: preempt}}\n")
    assert run(capsys, preempting, "--policy", trusting)[0] == 0
    assert run(capsys, preempting, "--policy", policy)[0] == 1


def test_an_invalid_policy_is_reported_as_check_policy_does(capsys, tmp_path):
    policy = write(tmp_path, "policy.yaml", "profiles: [{name: filter}]")
    code, _, err = run(capsys, RECORDED[0], "--policy", policy)
    assert code == 1
    assert err == [
        f"invalid policy {policy}:",
        "  profiles[0].name: 'filter' is a verb of the extender's URLs (filter, prioritize, preempt, bind, healthz): "
        "choose another name",
    ]


def test_as_a_real_command_exit_codes_and_streams(tmp_path):
    def cli(*args):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "extender", "check-scheduler-config", *map(str, args)]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)

    ok = cli(RECORDED[0])
    assert (ok.returncode, ok.stderr) == (0, "")
    missing = cli(tmp_path / "missing.yaml")
    assert missing.returncode == 1 and "cannot read the file" in missing.stderr
    no_extenders = write(tmp_path, "none.yaml", HEADER + "profiles: [{schedulerName: second}]\n")
    empty = cli(no_extenders)
    assert empty.returncode == 1
    assert "extenders: no extenders configured: kube-scheduler would never call the function" in empty.stderr
    usage = cli()
    assert usage.returncode == 2 and "usage:" in usage.stderr
