"""check-scheduler-config's rules beyond the recorded verdicts: kube-scheduler's defaulting, validation, plugin args,
profile building and extender building (TLS material from real certificates), each version's own, and the project's
stricter rules and warnings."""

from __future__ import annotations

import base64
import datetime
import sys

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from extender.cli.scheduler_config.check import Verdict, check
from extender.cli.scheduler_config.findings import Severity
from extender.cli.scheduler_config.versions import parse_kubernetes_version
from testkit.certs import CertificateAuthority

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
EXTENDER = (
    "extenders:\n- urlPrefix: https://extender.example.com/default\n  filterVerb: filter\n  nodeCacheCapable: true\n"
)
CA = CertificateAuthority("rules test CA")
CLIENT = CA.issue_client("kube-scheduler")
OTHER = CA.issue_client("someone else")


def judged(body: str, version: str = "1.35", extender: str = EXTENDER) -> Verdict:
    return check(HEADER + body + extender, parse_kubernetes_version(version))


def refusals(verdict: Verdict) -> list[str]:
    return [finding.line for finding in verdict.findings if finding.severity is Severity.REFUSED]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- Defaults apply before validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "leaderElection: {leaderElect: true, leaseDuration: 0s, renewDeadline: 0s, retryPeriod: 0s}\n",
        "leaderElection: {leaderElect: true, resourceLock: '', resourceName: '', resourceNamespace: ''}\n",
        "profiles: [{schedulerName: null}]\n",
        "profiles: []\nparallelism: null\nclientConnection: {qps: 0, burst: 0}\n",
        "podInitialBackoffSeconds: 10\n",
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: {type: MostAllocated, "
            "resources: [{name: cpu, weight: 0}]}}}]}]\n"
        ),
        "profiles: [{pluginConfig: [{name: NodeResourcesBalancedAllocation, args: {resources: [{name: cpu}]}}]}]\n",
        "leaderElection: {leaderElect: false, leaseDuration: 1s, renewDeadline: 5s, resourceLock: endpoints}\n",
    ],
)
def test_what_the_defaults_complete_is_valid(body: str) -> None:
    assert judged(body).findings == []


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            "podInitialBackoffSeconds: 20\n",
            "podMaxBackoffSeconds: Invalid value: 10: must be greater than or equal to PodInitialBackoffSeconds",
        ),
        ("profiles: [{schedulerName: a}, {}]\n", "profiles[1].schedulerName: Required value"),
        ("parallelism: 0\n", "parallelism: Invalid value: 0: should be an integer value greater than zero"),
        ("percentageOfNodesToScore: 101\n", "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"),
        (
            "profiles: [{percentageOfNodesToScore: -1}]\n",
            "profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
        ),
        ("profiles: [{schedulerName: a}, {schedulerName: a}]\n", 'profiles[1].schedulerName: Duplicate value: "a"'),
        (
            "leaderElection: {leaseDuration: -1s, renewDeadline: -2s}\n",
            'leaderElection.leaseDuration: Invalid value: "-1s": must be greater than zero',
        ),
        (
            "leaderElection: {renewDeadline: 2s, retryPeriod: 2s}\n",
            (
                "leaderElection.renewDeadline: couldn't create leader elector: renewDeadline must be greater than "
                "retryPeriod*JitterFactor (JitterFactor is 1.2)"
            ),
        ),
        ("clientConnection: {burst: -5}\n", "clientConnection.burst: Invalid value: -5: must be non-negative"),
    ],
)
def test_the_configuration_s_own_rules(body: str, problem: str) -> None:
    assert refusals(judged(body))[:1] == [problem]


def test_field_values_print_as_each_version_prints_them() -> None:
    body = "leaderElection: {leaseDuration: 10s, renewDeadline: 15s}\n"
    assert refusals(judged(body, "1.31")) == [
        (
            "leaderElection.leaseDuration: Invalid value: v1.Duration{Duration:15000000000}: LeaseDuration must be "
            "greater "
            "than RenewDeadline"
        )
    ]
    assert refusals(judged(body, "1.35")) == [
        'leaderElection.leaseDuration: Invalid value: "15s": must be greater than `RenewDeadline`'
    ]


# --- Plugin args ------------------------------------------------------------------------------------------------------


def _config(name: str, args: str, plugins: str = "") -> str:
    return f"profiles:\n- {plugins}pluginConfig:\n  - name: {name}\n    args: {args}\n"


@pytest.mark.parametrize(
    ("name", "args", "problem"),
    [
        (
            "DefaultPreemption",
            "{minCandidateNodesAbsolute: -1}",
            ".args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
        ),
        (
            "InterPodAffinity",
            "{hardPodAffinityWeight: -1}",
            ".args.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]",
        ),
        (
            "NodeResourcesBalancedAllocation",
            "{resources: [{name: cpu}, {name: cpu}]}",
            '.args.resources[1].name: Duplicate value: "cpu"',
        ),
        (
            "PodTopologySpread",
            "{defaultingType: Custom}",
            '.args.defaultingType: Unsupported value: "Custom": supported values: "System", "List"',
        ),
        (
            "PodTopologySpread",
            (
                "{defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: "
                "DoNotSchedule}]}"
            ),
            ".args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
        ),
        (
            "PodTopologySpread",
            (
                "{defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "
                "Sometimes}]}"
            ),
            (
                '.args.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: '
                '"DoNotSchedule", "ScheduleAnyway"'
            ),
        ),
        (
            "PodTopologySpread",
            (
                "{defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: "
                "DoNotSchedule, labelSelector: {}}]}"
            ),
            (
                ".args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they "
                "deduced for each pod"
            ),
        ),
        (
            "VolumeBinding",
            "{shape: [{utilization: 0, score: 0}]}",
            (
                '.args.shape: Invalid value: [{"utilization":0,"score":0}]: unexpected field `shape`, remove it or '
                "turn on the feature gate StorageCapacityScoring"
            ),
        ),
        (
            "NodeAffinity",
            (
                "{addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
                "[{matchExpressions: [{key: a, operator: In}]}]}}}"
            ),
            (
                ".args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
                ".matchExpressions[0].values: Invalid value: null: for 'in', 'notin' operators, values set can't be "
                "empty"
            ),
        ),
        (
            "NodeAffinity",
            (
                "{addedAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: "
                "{matchExpressions: [{key: a, operator: Gt, values: [x]}]}}]}}"
            ),
            (
                ".args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
                ".matchExpressions[0].values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be "
                "an integer"
            ),
        ),
    ],
)
def test_each_plugin_s_args_are_validated_with_the_file_enabled_or_not(name: str, args: str, problem: str) -> None:
    assert refusals(judged(_config(name, args))) == [f"profiles[0].pluginConfig[0]{problem}"]
    disabled = f"plugins: {{multiPoint: {{disabled: [{{name: {name}}}]}}}}\n  "
    assert refusals(judged(_config(name, args, disabled))) == [f"profiles[0].pluginConfig[0]{problem}"]


def test_node_resources_fit_args_are_validated_only_when_the_plugin_is_built() -> None:
    where = "profiles[0]: initializing profiles: creating profile for scheduler name default-scheduler"
    assert refusals(judged(_config("NodeResourcesFit", "{scoringStrategy: {type: RequestedToCapacityRatio}}"))) == [
        (
            f'{where}: initializing plugin "NodeResourcesFit": scoringStrategy.requestedToCapacityRatio: Required '
            "value: "
            "must be specified when type is RequestedToCapacityRatio"
        )
    ]
    disabled = "plugins: {multiPoint: {disabled: [{name: NodeResourcesFit}]}}\n  "
    assert judged(_config("NodeResourcesFit", "{scoringStrategy: {type: Bogus}}", disabled)).findings == []


def test_args_decode_strictly_as_their_kind() -> None:
    where = "decoding .profiles[0].pluginConfig[0]: decoding args for plugin InterPodAffinity"
    assert refusals(judged(_config("InterPodAffinity", "{hardPodAffinityWieght: 5}"))) == [
        f'strict decoding error: {where}: strict decoding error: unknown field "hardPodAffinityWieght"'
    ]
    assert refusals(judged(_config("InterPodAffinity", "{kind: DefaultPreemptionArgs}"))) == [
        (
            "decoding .profiles[0].pluginConfig[0]: args for plugin InterPodAffinity were not of type "
            "InterPodAffinityArgs.kubescheduler.config.k8s.io, got DefaultPreemptionArgs.kubescheduler.config.k8s.io"
        )
    ]
    assert refusals(judged(_config("InterPodAffinity", "[1]"))) == [
        (
            f"{where}: couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type "
            'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
        )
    ]
    # Out-of-tree plugins' args are theirs to read: kube-scheduler keeps them as written.
    assert judged(_config("NodeLabelPolicy", "{rules: [{anything: goes}]}")).findings == []


def test_dynamic_resources_args_exist_from_1_34() -> None:
    args = _config("DynamicResources", "{filterTimeout: 10s}")
    assert judged(args, "1.35").findings == []
    # Before, kube-scheduler has no args kind for the plugin and leaves its args alone.
    assert judged(args, "1.31").findings == []
    assert refusals(judged(_config("DynamicResources", "{filterTimeout: -1s}"), "1.35")) == [
        'profiles[0].pluginConfig[0].args.filterTimeout: Invalid value: "-1s": must be zero or positive'
    ]


# --- Building each profile's plugins ----------------------------------------------------------------------------------

WHERE = "profiles[0]: initializing profiles: creating profile for scheduler name default-scheduler: "


@pytest.mark.parametrize(
    ("plugins", "problem"),
    [
        ("filter: {enabled: [{name: ImageLocality}]}", 'plugin "ImageLocality" does not extend FilterPlugin plugin'),
        ("bind: {enabled: [{name: NodeResourcesFit}]}", 'plugin "NodeResourcesFit" does not extend BindPlugin plugin'),
        ("filter: {enabled: [{weight: 1}]}", 'FilterPlugin "" does not exist'),
        (
            "multiPoint: {enabled: [{name: NodePorts}, {name: NodePorts}]}",
            'plugin "NodePorts" already registered as "PreFilterPlugin"',
        ),
        ("multiPoint: {enabled: [{name: Coscheduling}]}", 'PreFilterPlugin "Coscheduling" does not exist'),
        (
            "queueSort: {disabled: [{name: '*'}]}",
            'only one queue sort plugin required for profile with scheduler name "default-scheduler", but got 0',
        ),
        (
            "bind: {disabled: [{name: '*'}]}",
            'at least one bind plugin is needed for profile with scheduler name "default-scheduler"',
        ),
        ("score: {enabled: [{name: NodeAffinity, weight: -5}]}", "total score of Score plugins could overflow"),
    ],
)
def test_profile_plugins_are_built_as_the_framework_builds_them(plugins: str, problem: str) -> None:
    assert refusals(judged(f"profiles:\n- plugins: {{{plugins}}}\n")) == [WHERE + problem]


def test_one_queue_sort_plugin_may_be_enabled() -> None:
    twice = "profiles:\n- plugins: {queueSort: {enabled: [{name: PrioritySort}, {name: PrioritySort}]}}\n"
    assert refusals(judged(twice)) == [
        "profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled",
        WHERE + 'plugin "PrioritySort" already registered as "QueueSortPlugin"',
    ]


def test_score_weights_add_up_in_go_s_wrapping_arithmetic() -> None:
    # The last score plugin may take a negative weight: only a plugin after it sees the sum wrap.
    last = "profiles:\n- plugins: {multiPoint: {enabled: [{name: ImageLocality, weight: -3}]}}\n"
    assert judged(last).findings == []
    assert (
        judged("profiles:\n- plugins: {score: {enabled: [{name: ImageLocality, weight: 2147483647}]}}\n").findings == []
    )


def test_a_plugin_set_at_its_point_replaces_its_multi_point_default() -> None:
    assert (
        judged(
            "profiles:\n- plugins: {bind: {enabled: [{name: DefaultBinder}]}, queueSort: {enabled: [{name: "
            "PrioritySort}]}}\n"
        ).findings
        == []
    )


@pytest.mark.parametrize(
    ("plugins", "accepted"),
    [
        ("score: {enabled: [{name: SelectorSpread}]}", {"1.28": False, "1.31": False, "1.35": False}),
        ("filter: {enabled: [{name: EBSLimits}]}", {"1.28": True, "1.31": True, "1.35": False}),
        ("preEnqueue: {enabled: [{name: DefaultPreemption}]}", {"1.28": False, "1.31": False, "1.35": True}),
        ("permit: {enabled: [{name: GangScheduling}]}", {"1.28": False, "1.31": False, "1.35": True}),
    ],
)
def test_each_version_has_its_own_plugins(plugins: str, accepted: dict[str, bool]) -> None:
    body = f"profiles:\n- plugins: {{{plugins}}}\n"
    assert {version: judged(body, version).accepted for version in accepted} == accepted


def test_v1beta3_on_1_28_has_its_own_fields_and_may_still_name_selector_spread() -> None:
    v1beta3 = HEADER.replace("/v1\n", "/v1beta3\n")
    spread = "profiles:\n- plugins: {score: {enabled: [{name: SelectorSpread}]}}\n"
    assert check(v1beta3 + spread + EXTENDER, (1, 28)).accepted
    assert refusals(check(v1beta3 + "delayCacheUntilActive: true\n" + EXTENDER, (1, 28))) == [
        'strict decoding error: unknown field "delayCacheUntilActive"'
    ]
    assert refusals(check(v1beta3 + "profiles: [{percentageOfNodesToScore: 50}]\n" + EXTENDER, (1, 28))) == [
        'strict decoding error: unknown field "profiles[0].percentageOfNodesToScore"'
    ]


# --- Building the extenders -------------------------------------------------------------------------------------------


def tls_extender(**tls: str) -> str:
    fields = ", ".join(f"{key}: {value}" for key, value in tls.items())
    return EXTENDER + f"  enableHTTPS: true\n  tlsConfig: {{{fields}}}\n"


def _truncated(pem: bytes) -> bytes:
    """A certificate with a line of its body missing: still PEM, no longer DER."""
    lines = pem.splitlines(keepends=True)
    return b"".join(lines[:3] + lines[4:])


@pytest.mark.parametrize(
    ("tls", "problem"),
    [
        (
            {"caData": _b64(b"plain text")},
            "caData: couldn't build extenders: unable to load root certificates: unable to parse bytes as PEM block",
        ),
        (
            {"caData": _b64(_truncated(CA.cert_pem))},
            (
                "caData: couldn't build extenders: unable to load root certificates: failed to parse certificate: "
                "x509: malformed certificate"
            ),
        ),
        (
            {"caData": _b64(CLIENT.key_pem)},
            (
                "caData: couldn't build extenders: unable to load root certificates: no valid certificate authority "
                "data seen"
            ),
        ),
        (
            {"caData": _b64(CA.cert_pem), "certData": _b64(CLIENT.cert_pem), "keyData": _b64(OTHER.key_pem)},
            "keyData: couldn't build extenders: tls: private key does not match public key",
        ),
        (
            {"caData": _b64(CA.cert_pem), "certData": _b64(CLIENT.key_pem), "keyData": _b64(CLIENT.key_pem)},
            (
                "keyData: couldn't build extenders: tls: failed to find certificate PEM data in certificate input, but "
                "did find a private key; PEM inputs may have been switched"
            ),
        ),
        (
            {
                "caData": _b64(CA.cert_pem),
                "certData": _b64(CLIENT.cert_pem),
                "keyData": _b64(b"-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n"),
            },
            "keyData: couldn't build extenders: tls: failed to parse private key",
        ),
        (
            {"insecure": "true", "caFile": "/etc/ca.pem"},
            (
                "insecure: couldn't build extenders: specifying a root certificates file with the insecure flag is not "
                "allowed"
            ),
        ),
    ],
)
def test_tls_material_must_load_as_client_go_loads_it(tls: dict[str, str], problem: str) -> None:
    assert refusals(judged("", extender=tls_extender(**tls))) == [f"extenders[0].tlsConfig.{problem}"]


def test_a_bundle_loads_when_one_of_its_certificates_parses() -> None:
    bundle = _truncated(CA.cert_pem) + CA.cert_pem
    pair = {"certData": _b64(CLIENT.cert_pem), "keyData": _b64(CLIENT.key_pem)}
    assert judged("", extender=tls_extender(caData=_b64(bundle), **pair)).findings == []


def test_rsa_keys_in_pkcs1_pair_with_their_certificate() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    tls = {"caData": _b64(CA.cert_pem), "certData": _b64(cert_pem), "keyData": _b64(key_pem)}
    assert judged("", extender=tls_extender(**tls)).findings == []
    tls["keyData"] = _b64(CLIENT.key_pem)
    assert refusals(judged("", extender=tls_extender(**tls))) == [
        "extenders[0].tlsConfig.keyData: couldn't build extenders: tls: private key type does not match public key type"
    ]


def test_files_are_read_on_the_scheduler_s_host_and_said_so() -> None:
    verdict = judged("", extender=tls_extender(caFile="/etc/kubernetes/pki/extender-ca.pem"))
    assert [(finding.severity, finding.line) for finding in verdict.findings] == [
        (
            Severity.NOTE,
            (
                "extenders[0].tlsConfig.caFile: read on the scheduler's host as it starts, which exits if it cannot "
                "read it"
            ),
        )
    ]


def test_without_cryptography_the_material_is_not_checked_and_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)
    verdict = judged("", extender=tls_extender(caData=_b64(_truncated(CA.cert_pem))))
    assert verdict.accepted
    assert [finding.line for finding in verdict.findings] == [
        "extenders[0].tlsConfig: certificates and keys not checked: the cryptography package is not installed"
    ]


def test_ignored_resources_need_node_resources_fit_in_every_profile() -> None:
    managed = EXTENDER + "  managedResources: [{name: example.com/gpu, ignoredByScheduler: true}]\n"
    disabled = (
        "profiles:\n- schedulerName: a\n- schedulerName: b\n"
        "  plugins: {multiPoint: {disabled: [{name: NodeResourcesFit}]}}\n"
    )
    assert refusals(judged(disabled, extender=managed)) == [
        (
            "profiles[1]: couldn't build extenders: can't find NodeResourcesFitArgs in plugin config: managedResources "
            "ignoredByScheduler (example.com/gpu) need NodeResourcesFit, which profile 'b' disables"
        )
    ]
    # With args of its own, the profile has the plugin's config, enabled or not.
    configured = disabled + "  pluginConfig: [{name: NodeResourcesFit}]\n"
    assert judged(configured, extender=managed).accepted
    assert judged(disabled, extender=EXTENDER + "  managedResources: [{name: example.com/gpu}]\n").accepted


# --- The project's stricter rules and warnings ------------------------------------------------------------------------


def findings_of(extender: str, version: str = "1.35") -> list[tuple[Severity, str]]:
    return [(finding.severity, finding.line) for finding in judged("", version, extender).findings]


def test_what_the_extender_cannot_work_with_is_refused_saying_so() -> None:
    stricter = "stricter than kube-scheduler: "
    assert findings_of("extenders:\n- {filterVerb: filter, nodeCacheCapable: true}\n") == [
        (
            Severity.STRICTER,
            (
                f"extenders[0].urlPrefix: {stricter}must be an http:// or https:// URL: kube-scheduler "
                "starts with it, but every call fails"
            ),
        ),
    ]
    assert findings_of(EXTENDER + "  httpTimeout: -1s\n") == [
        (
            Severity.STRICTER,
            (
                f"extenders[0].httpTimeout: {stricter}an httpTimeout must be above zero: kube-scheduler "
                "turns 0 into 5s, and a negative timeout waits for the extender forever"
            ),
        ),
    ]
    assert findings_of("extenders: []\n") == [
        (
            Severity.STRICTER,
            f"extenders: {stricter}no extenders configured: kube-scheduler would never call the function",
        )
    ]


def test_what_works_less_well_than_it_could_is_a_warning() -> None:
    plain = "extenders:\n- urlPrefix: http://127.0.0.1:8001\n  filterVerb: filter\n  nodeCacheCapable: true\n"
    certificate_only = (
        EXTENDER + f"  tlsConfig: {{certData: {_b64(CLIENT.cert_pem)}, caData: {_b64(CA.cert_pem)}, caFile: /x}}\n"
    )
    assert findings_of(plain + f"  tlsConfig: {{caData: {_b64(CA.cert_pem)}}}\n") == [
        (
            Severity.WARNING,
            "extenders[0].urlPrefix: an http:// URL is called in plain HTTP: enableHTTPS and tlsConfig are not used",
        )
    ]
    assert findings_of(certificate_only) == [
        (
            Severity.WARNING,
            (
                "extenders[0].tlsConfig: a client certificate needs its certificate and its key: "
                "keyData/keyFile is missing, and kube-scheduler sends no client certificate"
            ),
        ),
        (
            Severity.WARNING,
            (
                "extenders[0].tlsConfig.caFile: both caData and caFile are set: kube-scheduler uses caData "
                "and never reads caFile"
            ),
        ),
    ]
    assert findings_of("extenders:\n- {urlPrefix: https://x.example.com}\n") == [
        (
            Severity.WARNING,
            (
                "extenders[0]: no verb is set (filterVerb, prioritizeVerb, preemptVerb, bindVerb): "
                "kube-scheduler never calls this extender"
            ),
        ),
    ]


def test_an_extender_that_did_not_decode_is_left_to_its_decoding_error() -> None:
    assert [
        line for _, line in findings_of(EXTENDER + "  enableHTTPS: true\n  tlsConfig: {caData: not-base64!}\n")
    ] == [
        (
            "extenders[0].tlsConfig.caData: illegal base64 data at input byte 3: a *Data field holds base64 of the "
            "PEM file, "
            "such as base64 -w0 ca.pem writes"
        )
    ]


# --- --kubernetes-version ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("1.31", (1, 31)),
        ("v1.31", (1, 31)),
        ("1.31.4", (1, 31)),
        ("v1.31.4", (1, 31)),
        ("1.31.4-gke.100", (1, 31)),
        (" 1.28.0 ", (1, 28)),
    ],
)
def test_versions_are_written_x_y_x_y_z_or_v_x_y_z(text: str, version: tuple[int, int]) -> None:
    assert parse_kubernetes_version(text) == version


@pytest.mark.parametrize("text", ["1", "1.31-gke.1", "1.31.", "1.31.4-", "latest", "1.27", "1.36.0", "2.0"])
def test_other_versions_are_refused_with_the_forms_and_the_range(text: str) -> None:
    with pytest.raises(ValueError, match=f"^{text!r}") as refused:
        parse_kubernetes_version(text)
    assert "X.Y, X.Y.Z, vX.Y.Z or X.Y.Z-gke.N" in str(refused.value) or "only 1.28 to 1.35" in str(refused.value)
