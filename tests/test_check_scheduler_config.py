"""python -m extender check-scheduler-config: the file judged as the kube-scheduler of a version decodes and validates
it, in its words, and the policy cross-checks, on real files."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from extender.__main__ import main
from extender.cli.scheduler_config.extra_rules import blind_resource_scoring
from testkit.certs import CertificateAuthority
from tests.conftest import ROOT
from tests.recordings import scenarios

RECORDED = [recording.config_path for recording in scenarios()]
BLIND = (
    "nodeCacheCapable: stricter than kube-scheduler: kube-scheduler {version} scores every node this extender's filter "
    "returns as idle (kubernetes/kubernetes#141781, since 1.33)"
)
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


def scheduler_yaml(tmp_path, body):
    return write(tmp_path, "scheduler.yaml", HEADER + textwrap.dedent(body))


@pytest.mark.parametrize("recording", scenarios(), ids=lambda recording: recording.id)
def test_configurations_a_real_kube_scheduler_started_with_pass_for_its_version(capsys, recording):
    major, minor = recording.kubernetes_version or (1, 35)
    version = f"{major}.{minor}"
    path = recording.config_path
    extender = yaml.safe_load(path.read_text())["extenders"][0]
    code, out, err = run(capsys, path, "--kubernetes-version", version)
    if blind_resource_scoring((major, minor), extender):
        # It started, and scored blind (kubernetes#141781): refused unless accepted explicitly.
        assert (code, out, err[0]) == (1, "", f"invalid scheduler configuration {path}:")
        assert [line.split(" Set nodeCacheCapable: true")[0] for line in err[1:]] == [
            (
                f"  extenders[0].{BLIND.format(version=version)}: NodeResourcesFit and "
                "NodeResourcesBalancedAllocation see "
                "no pod on them, so a busy node wins as often as an idle one."
            )
        ]
        code, out, err = run(capsys, path, "--kubernetes-version", version, "--allow-blind-resource-scoring")
    assert (code, err) == (0, [])
    assert out.startswith(f"{path}: ok for kube-scheduler {version}\n  extenders[0]: filter, prioritize (weight ")


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
            (
                "  extenders[0].httpTimeout: json: cannot unmarshal number into Go struct field "
                "Extender.extenders.httpTimeout "
                "of type string"
            ),
            (
                "  extenders[0].tlsConfig.caData: illegal base64 data at input byte 0: a *Data field holds base64 "
                "of the PEM "
                "file, such as base64 -w0 ca.pem writes"
            ),
            '  extenders[0].managedResources[0].name: Invalid value: "gpu": is an invalid extended resource name',
            (
                "  extenders[1].urlPrefix: stricter than kube-scheduler: must be an http:// or https:// URL: "
                "kube-scheduler "
                "starts with it, but every call fails"
            ),
            "  extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
            '  extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind',
            (
                '  extenders[1].managedResources[0].name: Invalid value: "example.com/gpu": duplicate extender managed '
                "resource name"
            ),
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
        HEADER + f"extenders:\n- {{urlPrefix: '{URL}/batch', filterVerb: filter, enableHTTPS: true, "
        f"tlsConfig: {{caData: {ca}}}}}\n",
    )
    code, out, err = run(capsys, good, "--policy", policy, "--kubernetes-version", "1.32")
    assert (code, err) == (0, [])
    assert out == (
        f"{good}: ok for kube-scheduler 1.32 with policy {policy}\n"
        "  extenders[0]: filter; full nodes; httpTimeout 5s (default); profile batch (past the caller token)\n"
    )

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
    stricter = "stricter than kube-scheduler: "
    assert err[1:] == [
        (
            f"  extenders[0].enableHTTPS: {stricter}enableHTTPS without tlsConfig.caData or caFile turns certificate "
            "verification off: give a CA, drop enableHTTPS to verify an https:// urlPrefix against the system "
            "roots, or "
            "set tlsConfig.insecure: true"
        ),
        (
            f"  extenders[1].urlPrefix: {stricter}must not have a query string or fragment: kube-scheduler appends "
            '"/<verb>" '
            "verbatim, so every call misses the verb"
        ),
        f"  extenders[0].filterVerb: {stricter}Invalid value: \"filtr\": the function answers only 'filter' here",
        # Routed as the function routes it: past the caller token, "batc" names no profile.
        (
            f"  extenders[0].urlPrefix: {stricter}every call would fail: unknown profile 'batc': this policy "
            "serves batch, "
            "tenants"
        ),
        (
            f"  extenders[0].nodeCacheCapable: {stricter}Invalid value: true: the scheduler sends node names only, "
            "but the "
            "policy declares nodeCacheCapable: false; set both alike"
        ),
        (
            f"  extenders[1].preemptVerb: {stricter}preempt requests carry no Node objects and the policy has no "
            "nodeSource, so filters reading labels (tenants/NodeLabelPolicy) cannot run there: configure a "
            "nodeSource, or "
            "set preemptTrustsSchedulerFilter: true in the policy (see docs/policy.md)"
        ),
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
        (
            "  profiles[0].name: 'filter' is a verb of the extender's URLs (filter, prioritize, preempt, bind, "
            "healthz): "
            "choose another name"
        ),
    ]


def test_as_a_real_command_exit_codes_and_streams(tmp_path):
    def cli(*args):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "extender", "check-scheduler-config", *map(str, args)]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)

    ok = cli(RECORDED[0], "--kubernetes-version", "1.28")
    assert (ok.returncode, ok.stderr) == (0, "")
    missing = cli(tmp_path / "missing.yaml")
    assert missing.returncode == 1 and "cannot read the file" in missing.stderr
    no_extenders = write(tmp_path, "none.yaml", HEADER + "profiles: [{schedulerName: second}]\n")
    empty = cli(no_extenders)
    assert empty.returncode == 1
    assert (
        "extenders: stricter than kube-scheduler: no extenders configured: kube-scheduler would never call"
        in empty.stderr
    )
    usage = cli()
    assert usage.returncode == 2 and "usage:" in usage.stderr
    for version in ("1.31", "v1.31", "1.31.4", "v1.31.4", "1.31.4-gke.1200"):
        right = cli(RECORDED[0], "--kubernetes-version", version)
        assert (right.returncode, right.stderr) == (0, "")
        assert right.stdout.startswith(f"{RECORDED[0]}: ok for kube-scheduler 1.31\n")
    for version in ("1.35-gke.1200", "latest", "1.35.4-", "1.35.x"):
        wrong = cli(RECORDED[0], "--kubernetes-version", version)
        assert (wrong.returncode, wrong.stdout) == (2, "")
        assert (
            f"argument --kubernetes-version: {version!r} is not a Kubernetes version: write X.Y, X.Y.Z, vX.Y.Z or "
            "X.Y.Z-gke.N, such as 1.35, 1.35.4 or v1.35.4"
        ) in wrong.stderr
    for version in ("1.27", "1.36.1", "v2.0.0"):
        wrong = cli(RECORDED[0], "--kubernetes-version", version)
        assert (wrong.returncode, wrong.stdout) == (2, "")
        assert f"argument --kubernetes-version: {version!r}: Kubernetes" in wrong.stderr
        assert "is not supported, only 1.28 to 1.35" in wrong.stderr


# --- Strict decoding of the whole file -------------------------------------------------------------------------------


def test_keys_set_twice_anywhere_in_a_yaml_file_are_refused_by_line(capsys, tmp_path):
    config = scheduler_yaml(
        tmp_path,
        f"""\
        profiles:
        - schedulerName: second
          schedulerName: third
          plugins:
            score:
              enabled: [{{name: NodeResourcesFit, weight: 1, weight: 2}}]
          pluginConfig:
          - name: NodeResourcesFit
            args: {{scoringStrategy: {{type: MostAllocated}}, scoringStrategy: {{type: LeastAllocated}}}}
        extenders:
        - urlPrefix: {URL}
          bindVerb: bind
          tlsConfig: {{insecure: true, insecure: false}}
        """,
    )
    code, out, err = run(capsys, config)
    assert (code, out) == (1, "")
    # go-yaml v2 names the line of the second value, and looks into plugin args too.
    assert err[1:] == [
        '  strict decoding error: yaml: unmarshal errors: line 5: key "schedulerName" already set in map',
        '  strict decoding error: yaml: unmarshal errors: line 8: key "weight" already set in map',
        '  strict decoding error: yaml: unmarshal errors: line 11: key "scoringStrategy" already set in map',
        '  strict decoding error: yaml: unmarshal errors: line 15: key "insecure" already set in map',
    ]


def test_keys_set_twice_in_a_json_file_are_refused_by_path_outside_plugin_args(capsys, tmp_path):
    config = tmp_path / "scheduler.json"
    config.write_text(
        '{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",'
        ' "profiles": [{"schedulerName": "a", "pluginConfig": [{"name": "X", "args": {"k": 1, "k": 2}}]}],'
        f' "extenders": [{{"urlPrefix": "{URL}", "bindVerb": "bind", "weight": 1, "weight": 2, "ignorable": true}}],'
        ' "kind": "KubeSchedulerConfiguration"}'
    )
    code, out, err = run(capsys, config)
    assert (code, out) == (1, "")
    assert err[1:] == [
        '  strict decoding error: duplicate field "extenders[0].weight"',
        '  strict decoding error: duplicate field "kind"',
    ]


def test_unknown_fields_and_wrong_types_are_refused_at_every_level(capsys, tmp_path):
    config = scheduler_yaml(
        tmp_path,
        f"""\
        parallelism: "16"
        leaderElection: {{leaderElect: true, leaseDuration: 15, resourceNamespce: kube-system}}
        clientConnection: {{qps: fast, burst: 100}}
        profiles:
        - schedulerName: second
          percentageOfNodesToScore: 100
          plugins:
            filtre: {{enabled: [{{name: NodeAffinity}}]}}
            score: {{enabled: [{{name: NodeResourcesFit, wieght: 2}}], disabled: [{{name: "*"}}]}}
            multiPoint: {{enabled: [{{name: ImageLocality, weight: 1.5}}]}}
          pluginConfig:
          - {{name: NodeResourcesFit, args: {{anything: [goes, here]}}}}
        extenders:
        - {{urlPrefix: {URL}, filterVerb: filter, nodeCacheCapable: true}}
        """,
    )
    code, out, err = run(capsys, config)
    assert (code, out) == (1, "")
    assert sorted(err[1:]) == sorted(
        [
            '  strict decoding error: unknown field "leaderElection.resourceNamespce"',
            '  strict decoding error: unknown field "profiles[0].plugins.filtre"',
            '  strict decoding error: unknown field "profiles[0].plugins.score.enabled[0].wieght"',
            (
                "  strict decoding error: decoding .profiles[0].pluginConfig[0]: decoding args for plugin "
                "NodeResourcesFit: "
                'strict decoding error: unknown field "anything"'
            ),
            (
                "  parallelism: json: cannot unmarshal string into Go struct field "
                "KubeSchedulerConfiguration.parallelism "
                "of type int32"
            ),
            (
                "  leaderElection.leaseDuration: json: cannot unmarshal number into Go struct field "
                "LeaderElectionConfiguration.leaderElection.leaseDuration of type string"
            ),
            (
                "  clientConnection.qps: json: cannot unmarshal string into Go struct field "
                "ClientConnectionConfiguration.clientConnection.qps of type float32"
            ),
            (
                "  profiles[0].plugins.multiPoint.enabled[0].weight: json: cannot unmarshal number 1.5 into Go "
                "struct field "
                "Plugin.profiles.plugins.multiPoint.enabled.weight of type int32"
            ),
        ]
    )


def test_a_complete_configuration_is_valid_and_says_what_is_read_on_the_schedulers_host(capsys, tmp_path):
    config = scheduler_yaml(
        tmp_path,
        f"""\
        parallelism: 16
        leaderElection:
          leaderElect: true
          leaseDuration: 15s
          renewDeadline: 10s
          retryPeriod: 2s
          resourceLock: leases
          resourceName: extender-scheduler
          resourceNamespace: kube-system
        clientConnection:
          {{kubeconfig: /etc/kubernetes/scheduler.conf, qps: 50, burst: 100, contentType: application/json}}
        enableProfiling: false
        enableContentionProfiling: false
        percentageOfNodesToScore: 0
        podInitialBackoffSeconds: 1
        podMaxBackoffSeconds: 10
        delayCacheUntilActive: true
        profiles:
        - schedulerName: extender-scheduler
          percentageOfNodesToScore: 100
          plugins:
            preEnqueue: {{enabled: [{{name: SchedulingGates}}]}}
            score:
              disabled: [{{name: "*"}}]
              enabled: [{{name: NodeResourcesFit, weight: 2}}]
          pluginConfig:
          - name: NodeResourcesFit
            args: {{scoringStrategy: {{type: MostAllocated}}}}
        extenders:
        - urlPrefix: {URL}
          filterVerb: filter
          nodeCacheCapable: true
          ignorable: false
        """,
    )
    code, out, err = run(capsys, config)
    assert (code, err) == (0, [])
    assert out.splitlines() == [
        f"{config}: ok for kube-scheduler 1.35",
        "  extenders[0]: filter; node names; httpTimeout 5s (default)",
        (
            "  note: clientConnection.kubeconfig: read on the scheduler's host as it starts, which exits if it "
            "cannot read "
            "it"
        ),
    ]


@pytest.mark.parametrize(
    ("header", "version", "problem"),
    [
        (
            "kind: KubeSchedulerConfiguration\n",
            "1.35",
            (
                "Object 'apiVersion' is missing in 'kind: "
                "KubeSchedulerConfiguration / extenders: / - {urlPrefix: 'https://schedu...': set apiVersion: "
                "kubescheduler.config.k8s.io/v1"
            ),
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\n",
            "1.35",
            (
                "Object 'Kind' is missing in 'apiVersion: "
                "kubescheduler.config.k8s.io/v1 / extenders: / - {urlPrefix: 'http...': set kind: "
                "KubeSchedulerConfiguration"
            ),
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfig\n",
            "1.35",
            (
                "no kind "
                '"KubeSchedulerConfig" is registered for version "kubescheduler.config.k8s.io/v1": kube-scheduler '
                "1.35 reads a "
                "KubeSchedulerConfiguration of kubescheduler.config.k8s.io/v1"
            ),
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n",
            "1.28",
            (
                "no kind "
                '"KubeSchedulerConfiguration" is registered for version "kubescheduler.config.k8s.io/v1beta2": '
                "kube-scheduler 1.28 reads a KubeSchedulerConfiguration of kubescheduler.config.k8s.io/v1 or "
                "kubescheduler.config.k8s.io/v1beta3"
            ),
        ),
    ],
)
def test_the_api_version_and_kind_must_be_ones_that_version_decodes(capsys, tmp_path, header, version, problem):
    config = write(tmp_path, "scheduler.yaml", header + f"extenders:\n- {{urlPrefix: '{URL}'}}\n")
    code, out, err = run(capsys, config, "--kubernetes-version", version)
    assert (code, out, err[1:]) == (1, "", [f"  {problem}"])


# --- Blind resource scoring (kubernetes#141781) ----------------------------------------------------------------------


def test_blind_scoring_applies_to_filtering_extenders_without_a_node_cache_from_1_33(capsys, tmp_path):
    def refused(version, *fields):
        config = write(
            tmp_path, "scheduler.yaml", HEADER + f"extenders:\n- {{urlPrefix: '{URL}', {', '.join(fields)}}}\n"
        )
        code, _, err = run(capsys, config, "--kubernetes-version", version)
        return code == 1 and any(BLIND.format(version=version) in line for line in err)

    assert refused("1.33", "filterVerb: filter")  # kube-scheduler's default is nodeCacheCapable: false
    assert refused("1.34", "filterVerb: filter", "nodeCacheCapable: false", "prioritizeVerb: prioritize", "weight: 1")
    assert not refused("1.32", "filterVerb: filter")
    assert not refused("1.35", "filterVerb: filter", "nodeCacheCapable: true")
    # Without a filter the scheduler keeps its own NodeInfo for every node.
    assert not refused("1.35", "prioritizeVerb: prioritize", "weight: 1")


def test_with_a_full_node_policy_the_fix_names_both_files(capsys, tmp_path):
    policy = write(tmp_path, "policy.yaml", "nodeCacheCapable: false\nprofiles: [{name: default}]\n")
    config = write(tmp_path, "scheduler.yaml", HEADER + f"extenders:\n- {{urlPrefix: '{URL}', filterVerb: filter}}\n")
    code, _, err = run(capsys, config, "--policy", policy)
    assert code == 1
    [problem] = err[1:]
    assert "Set nodeCacheCapable: true here and in the policy (the scheduler then keeps its own node data" in problem


NODE_LOAD_SCORE = """
nodeCacheCapable: true
profiles:
- name: default
  plugins:
    score: {enabled: [{name: NodeLoad, weight: 1}]}
  pluginConfig:
  - {name: NodeLoad, args: {preset: gke, score: {metric: cpu, strategy: LeastLoaded}}}
- name: batch
"""


@pytest.mark.parametrize(
    ("profile", "weight", "warned"),
    [("", 1, True), ("", 2, True), ("", 3, False), ("", 5, False), ("/batch", 1, False)],
    ids=["weight-1", "weight-2", "weight-3", "weight-5", "profile-without-node-load"],
)
def test_a_node_load_score_behind_a_weight_below_3_is_warned_about(capsys, tmp_path, profile, weight, warned):
    """kube-scheduler's own resource scores outweigh such a score: a burst spreads as without the extender."""
    policy = write(tmp_path, "policy.yaml", NODE_LOAD_SCORE)
    extender = f"urlPrefix: '{URL}{profile}', filterVerb: filter, prioritizeVerb: prioritize, weight: {weight}"
    config = write(tmp_path, "scheduler.yaml", HEADER + f"extenders:\n- {{{extender}, nodeCacheCapable: true}}\n")
    code, out, err = run(capsys, config, "--policy", policy, "--kubernetes-version", "1.33")
    assert (code, err) == (0, [])
    assert (f"  warning: extenders[0].weight: {weight} with a NodeLoad score: each point" in out) == warned, out
    assert ("set 3 or more (5 recommended)" in out) == warned, out


# --- Routing urlPrefix as the function routes it ---------------------------------------------------------------------

PROFILES = "profiles: [{name: default}, {name: batch}]\n"


def routed(capsys, tmp_path, url, *argv, policy=PROFILES):
    """(exit code, the extender's line or the problems) of an extender at ``url`` checked against ``policy``."""
    policy_file = write(tmp_path, "policy.yaml", policy)
    config = write(
        tmp_path,
        "scheduler.yaml",
        HEADER + f"extenders:\n- {{urlPrefix: '{url}', filterVerb: filter, nodeCacheCapable: true}}\n",
    )
    code, out, err = run(capsys, config, "--policy", policy_file, *argv)
    assert all(TOKEN not in line for line in [*out.splitlines(), *err]), "the caller token is never shown"
    return code, out.splitlines()[1:] if code == 0 else err[1:]


TOKEN = URL.rsplit("/", 1)[1]
RUN_APP = URL.rsplit("/", 1)[0]
FUNCTIONS = "https://us-central1-acme.cloudfunctions.net/scheduler-extender"
NODE_NAMES = "  extenders[0]: filter; node names; httpTimeout 5s (default); profile"


@pytest.mark.parametrize(
    ("url", "argv", "profile"),
    [
        (f"{RUN_APP}/{TOKEN}/batch", (), "batch (past the caller token)"),
        (f"{RUN_APP}/{TOKEN}/", (), "default (past the caller token)"),
        (f"{RUN_APP}/batch/", (), "batch"),
        (RUN_APP, (), "default"),
        (f"{FUNCTIONS}/batch", (), "batch"),
        (f"{FUNCTIONS}/{TOKEN}/batch", (), "batch (past the caller token)"),
        (f"{RUN_APP}/scheduler-extender/batch", ("--function-name", "scheduler-extender"), "batch"),
    ],
)
def test_url_prefixes_route_to_the_profile_the_function_serves_them(capsys, tmp_path, url, argv, profile):
    assert routed(capsys, tmp_path, url, *argv) == (0, [f"{NODE_NAMES} {profile}"])


@pytest.mark.parametrize(
    ("url", "policy", "problem"),
    [
        (f"{RUN_APP}/{TOKEN}/bacth", PROFILES, "unknown profile 'bacth': this policy serves batch, default"),
        (f"{RUN_APP}/bacth", PROFILES, "unknown profile 'bacth': this policy serves batch, default"),
        (f"{RUN_APP}/batch/{TOKEN}", PROFILES, "unknown profile '<redacted>': this policy serves batch, default"),
        (f"{RUN_APP}/batch/{TOKEN * 3}", PROFILES, "unknown profile '<redacted>': this policy serves batch, default"),
        (f"{FUNCTIONS}/tenants/batch", PROFILES, "unknown profile 'tenants': this policy serves batch, default"),
        (
            f"{RUN_APP}/{TOKEN}",
            "profiles: [{name: batch}]\n",
            ("the policy has no 'default' profile: name one in the path (/<profile>/filter)"),
        ),
    ],
)
def test_url_prefixes_the_function_would_not_route_are_refused(capsys, tmp_path, url, policy, problem):
    refused = f"  extenders[0].urlPrefix: stricter than kube-scheduler: every call would fail: {problem}"
    assert routed(capsys, tmp_path, url, policy=policy) == (1, [refused])


def test_the_environment_caller_token_is_the_one_the_path_must_carry(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EXTENDER_CALLER_TOKEN", TOKEN)
    assert routed(capsys, tmp_path, f"{RUN_APP}/{TOKEN}/batch") == (0, [f"{NODE_NAMES} batch (past the caller token)"])
    assert routed(capsys, tmp_path, f"{RUN_APP}/{TOKEN[::-1]}/batch") == (
        1,
        [
            (
                "  extenders[0].urlPrefix: stricter than kube-scheduler: every call would fail: its path does not "
                "carry the "
                "caller token the function holds (EXTENDER_CALLER_TOKEN in this environment)"
            )
        ],
    )
