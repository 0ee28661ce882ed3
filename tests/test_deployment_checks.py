"""Deployments whose parts each pass their own checks but do not work together are refused by the first check that
can see them (check-policy, check-scheduler-config, start-up), with a message that names the fix.

One test per combination; the Terraform plan's share is in tests/terraform/.
"""

from __future__ import annotations

import pytest

from extender.__main__ import main
from tests.test_check_scheduler_config import HEADER, RUN_APP, TOKEN, write

BATCH_POLICY = """
nodeCacheCapable: true
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}]}
- name: batch
  plugins:
    filter: {enabled: [{name: NodeNameFilter}]}
"""


def run(capsys, command, *argv):
    code = main([command, *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def scheduler_config(tmp_path, extender, header=HEADER, top=""):
    return write(tmp_path, "scheduler.yaml", header + top + "extenders:\n- " + "\n  ".join(extender) + "\n")


def test_a_mistyped_profile_in_url_prefix_is_refused_naming_the_profiles_there_are(capsys, tmp_path):
    policy = write(tmp_path, "policy.yaml", BATCH_POLICY)
    config = scheduler_config(
        tmp_path, [f"urlPrefix: {RUN_APP}/{TOKEN}/bacth", "filterVerb: filter", "nodeCacheCapable: true"]
    )
    code, out, err = run(capsys, "check-scheduler-config", config, "--policy", policy)
    assert (code, out) == (1, "")
    # The policy has a default profile, and the function still answers every call of this urlPrefix with an error.
    assert err[1:] == [
        (
            "  extenders[0].urlPrefix: stricter than kube-scheduler: every call would fail: unknown profile "
            "'bacth': this "
            "policy serves batch, default"
        )
    ]
    assert not any(TOKEN in line for line in err)

    config.write_text(config.read_text().replace("/bacth", "/batch"))
    code, out, err = run(capsys, "check-scheduler-config", config, "--policy", policy)
    assert (code, err) == (0, [])
    assert out.splitlines()[1] == (
        "  extenders[0]: filter; node names; httpTimeout 5s (default); profile batch (past the caller token)"
    )


def test_a_key_set_twice_or_an_unknown_top_level_field_is_refused_as_kube_scheduler_refuses_it(capsys, tmp_path):
    config = scheduler_config(
        tmp_path,
        [
            f"urlPrefix: {RUN_APP}",
            "filterVerb: filter",
            "prioritizeVerb: prioritize",
            "weight: 0",
            "weight: 5",
            "nodeCacheCapable: true",
        ],
        top="percentageOfNodeToScore: 100\n",
    )
    code, out, err = run(capsys, "check-scheduler-config", config)
    assert (code, out) == (1, "")
    assert err[1:] == [
        '  strict decoding error: yaml: unmarshal errors: line 9: key "weight" already set in map',
        '  strict decoding error: unknown field "percentageOfNodeToScore"',
    ]
    fixed = (
        config.read_text().replace("  weight: 0\n", "").replace("percentageOfNodeToScore", "percentageOfNodesToScore")
    )
    config.write_text(fixed)
    code, out, err = run(capsys, "check-scheduler-config", config)
    assert (code, err) == (0, [])
    assert out == (
        f"{config}: ok for kube-scheduler 1.35\n"
        "  extenders[0]: filter, prioritize (weight 5); node names; httpTimeout 5s (default)\n"
    )


def test_v1beta3_is_accepted_for_a_v1_28_scheduler_and_refused_from_v1_29_on(capsys, tmp_path):
    config = scheduler_config(
        tmp_path,
        [f"urlPrefix: {RUN_APP}", "filterVerb: filter", "nodeCacheCapable: true"],
        header="apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
    )
    code, out, err = run(capsys, "check-scheduler-config", config, "--kubernetes-version", "1.28")
    assert (code, err) == (0, [])
    assert out.splitlines() == [
        f"{config}: ok for kube-scheduler 1.28",
        "  extenders[0]: filter; node names; httpTimeout 5s (default)",
        (
            "  note: kubescheduler.config.k8s.io/v1beta3 is deprecated, and kube-scheduler 1.29 and later refuse "
            "it: use "
            "kubescheduler.config.k8s.io/v1"
        ),
    ]
    for version in ("1.29", "1.35"):
        code, out, err = run(capsys, "check-scheduler-config", config, "--kubernetes-version", version)
        assert (code, out) == (1, "")
        assert err[1:] == [
            (
                '  no kind "KubeSchedulerConfiguration" is registered for version '
                f'"kubescheduler.config.k8s.io/v1beta3": kube-scheduler {version} reads a '
                "KubeSchedulerConfiguration of "
                "kubescheduler.config.k8s.io/v1 (v1beta3 was removed in 1.29)"
            )
        ]


@pytest.mark.parametrize("version", ["1.33", "1.35"])
def test_full_node_filters_on_kube_scheduler_1_33_and_later_are_refused_naming_the_regression_and_the_fix(
    capsys, tmp_path, version
):
    config = scheduler_config(tmp_path, [f"urlPrefix: {RUN_APP}", "filterVerb: filter", "nodeCacheCapable: false"])
    code, out, err = run(capsys, "check-scheduler-config", config, "--kubernetes-version", version)
    assert (code, out) == (1, "")
    [problem] = err[1:]
    assert problem.startswith(
        f"  extenders[0].nodeCacheCapable: stricter than kube-scheduler: kube-scheduler {version} scores every node "
        "this extender's filter returns as idle (kubernetes/kubernetes#141781, since 1.33)"
    )
    assert "Set nodeCacheCapable: true" in problem and problem.endswith(
        "or accept it with --allow-blind-resource-scoring"
    )

    assert run(capsys, "check-scheduler-config", config, "--kubernetes-version", "1.32")[0] == 0
    code, out, err = run(
        capsys, "check-scheduler-config", config, "--kubernetes-version", version, "--allow-blind-resource-scoring"
    )
    assert (code, err) == (0, [])
    assert out.splitlines()[-1] == (
        f"  note: extenders[0]: kube-scheduler {version} scores every node this extender's filter returns as idle "
        "(kubernetes/kubernetes#141781, since 1.33), allowed"
    )
    config.write_text(config.read_text().replace("nodeCacheCapable: false", "nodeCacheCapable: true"))
    assert run(capsys, "check-scheduler-config", config, "--kubernetes-version", version)[0] == 0


ENTRY_POINT_REFUSED = (
    "  profiles[0].name: 'extender' is the function's entry point (FUNCTION_TARGET wherever it is deployed), which may "
    "prefix its URLs: choose another name"
)


def test_a_profile_named_extender_is_refused_whatever_the_environment(capsys, tmp_path, monkeypatch, client_factory):
    for name in ("K_SERVICE", "FUNCTION_NAME", "FUNCTION_TARGET"):
        monkeypatch.delenv(name, raising=False)
    policy = write(tmp_path, "policy.yaml", "profiles: [{name: extender}, {name: default}]\n")
    code, out, err = run(capsys, "check-policy", policy)
    assert (code, out) == (1, "")
    assert err == [f"invalid policy {policy}:", ENTRY_POINT_REFUSED]
    with pytest.raises(SystemExit) as stopped:
        client_factory(policy)
    assert ENTRY_POINT_REFUSED.strip() in str(stopped.value)


def test_a_profile_named_like_the_deployed_function_is_refused_given_its_name(capsys, tmp_path, monkeypatch):
    for name in ("K_SERVICE", "FUNCTION_NAME", "FUNCTION_TARGET"):
        monkeypatch.delenv(name, raising=False)
    policy = write(tmp_path, "policy.yaml", "profiles: [{name: default}, {name: scheduler-extender}]\n")
    assert run(capsys, "check-policy", policy)[0] == 0
    code, out, err = run(capsys, "check-policy", policy, "--function-name", "scheduler-extender")
    assert (code, out) == (1, "")
    assert err[1:] == [
        (
            "  profiles[1].name: 'scheduler-extender' is the function's own name, which may prefix its URLs: choose "
            "another name"
        )
    ]


UNKNOWN_PLUGIN = """
nodeCacheCapable: false
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodePressure}, {name: NodeNameFiltre}]}
  pluginConfig:
  - {name: NodePressure, args: {maxLoad: 0.8}}
  - {name: NodeNameFiltre, args: {deny: [node-c]}}
"""


def test_an_unknown_plugin_with_a_plugin_config_entry_is_reported_as_unknown(capsys, tmp_path, client_factory):
    policy = write(tmp_path, "policy.yaml", UNKNOWN_PLUGIN)
    code, out, err = run(capsys, "check-policy", policy)
    assert (code, out) == (1, "")
    # (A plugin of a newer version of the function, or of a pluginModules module the policy forgot, looks the same.)
    # Each once, where the profile first names it, with the nearest known name when one is close.
    assert [line.split(" (known plugins: ")[0] for line in err[1:]] == [
        "  profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodePressure'",
        "  profiles[0].plugins.filter.enabled[1].name: unknown plugin 'NodeNameFiltre': did you mean NodeNameFilter?",
    ]
    assert all("NodeNameFilter" in line.split(" (known plugins: ")[1].rstrip(")").split(", ") for line in err[1:])
    with pytest.raises(SystemExit) as stopped:
        client_factory(policy)
    assert "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodePressure'" in str(stopped.value)
    assert "Traceback" not in str(stopped.value) and "AssertionError" not in str(stopped.value)


def test_field_and_cross_field_problems_of_one_entry_are_reported_together(capsys, tmp_path):
    policy = write(
        tmp_path,
        "policy.yaml",
        """
        nodeCacheCapable: false
        profiles:
        - name: default
          plugins:
            filter: {enabled: [{name: NodeLabelPolicy}, {name: NodeNameFilter}]}
          pluginConfig:
          - name: NodeLabelPolicy
            args:
              rules:
              - name: pool
                nodeSelector: {matchExpressions: [{key: "pool name", operator: Exist}]}
          - name: NodeNameFilter
            args:
              maintenance:
              - name: weekend
                nodes: ["node-*"]
                windows: [{days: [Funday], from: "01:00", to: "05:00", timeZone: Mars/Olympus}]
        """,
    )
    code, out, err = run(capsys, "check-policy", policy)
    assert (code, out) == (1, "")
    expression = "  profiles[0].pluginConfig[0].args.rules[0].nodeSelector.matchExpressions[0]"
    window = "  profiles[0].pluginConfig[1].args.maintenance[0].windows[0]"
    assert err[1:] == [
        (
            f"{expression}.key: 'pool name' is not a valid key: the name must be 1-63 letters, digits, '-', '_' or "
            "'.', "
            "starting and ending with a letter or digit, optionally after a DNS subdomain prefix and '/'"
        ),
        f"{expression}.operator: unknown operator 'Exist': use one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
        f"{window}.timeZone: unknown time zone 'Mars/Olympus': use an IANA name such as Europe/Berlin or UTC",
        f"{window}.days[0]: unknown day 'Funday': use Mon, Tue, Wed, Thu, Fri, Sat, Sun",
    ]
