"""``python -m extender check-policy``: the start-up validation for CI pipelines, with exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from extender.__main__ import main
from tests.conftest import ROOT
from tests.policy_doc import code_blocks, shown_runs

DEFAULT = ROOT / "extender" / "policy" / "default.yaml"
BROKEN = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeNameFilter}]}
- name: default
"""
LABELS_NO_SOURCE = (
    "profiles: [{name: default, plugins: {score: {enabled: [{name: InstanceCost, weight: 1}]}},"
    " pluginConfig: [{name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}]}]"
)


def run(capsys, *argv):
    code = main(["check-policy", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_valid_policy_exits_0_and_lists_its_profiles(capsys, tmp_path):
    complete = next(
        block for block in code_blocks("yaml") if block.startswith("apiVersion:") and "name: batch" in block
    )
    (tmp_path / "policy.yaml").write_text(complete)
    code, out, err = run(capsys, tmp_path / "policy.yaml")
    assert code == 0 and err == ""
    assert out.splitlines() == [
        f"{tmp_path / 'policy.yaml'}: ok",
        "  profile batch: score InstanceCost (weight 1)",
        (
            "  profile default: filter NodeNameFilter, NodeLabelPolicy; "
            "score InstanceCost (weight 3, failurePolicy Ignore), TopologyPreference (weight 1); "
            "preempt ProtectedVictims"
        ),
    ]


def test_an_invalid_policy_exits_1_with_one_field_path_line_per_problem_on_stderr(capsys, tmp_path):
    (tmp_path / "broken.yaml").write_text(BROKEN)
    code, out, err = run(capsys, tmp_path / "broken.yaml")
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"invalid policy {tmp_path / 'broken.yaml'}:",
        "  profiles[1].name: duplicate profile name 'default'",
    ]


def test_the_node_facts_rule_is_checked_too(capsys, tmp_path):
    (tmp_path / "labels.yaml").write_text(LABELS_NO_SOURCE)
    code, _, err = run(capsys, tmp_path / "labels.yaml")
    assert code == 1
    assert "  profiles[0].plugins.score.enabled[0].name: plugin InstanceCost reads node labels" in err
    (tmp_path / "labels.yaml").write_text("nodeCacheCapable: false\n" + LABELS_NO_SOURCE)
    assert run(capsys, tmp_path / "labels.yaml")[0] == 0


def test_several_files_are_all_checked_and_any_problem_fails(capsys, tmp_path):
    (tmp_path / "broken.yaml").write_text(BROKEN)
    code, out, err = run(capsys, DEFAULT, tmp_path / "missing.yaml", tmp_path / "broken.yaml")
    assert code == 1
    assert out.splitlines() == [f"{DEFAULT}: ok", "  profile default: filter NodeNameFilter"]
    assert f"invalid policy {tmp_path / 'missing.yaml'}:\n  cannot read the file: " in err
    assert f"invalid policy {tmp_path / 'broken.yaml'}:\n  profiles[1].name: duplicate profile name 'default'" in err


def test_no_file_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["check-policy"])
    assert exited.value.code == 2
    assert "the following arguments are required: FILE" in capsys.readouterr().err


def cli(*args, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "extender", "check-policy", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_as_a_real_command_exit_codes_and_streams(tmp_path):
    ok = cli(DEFAULT)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.startswith(f"{DEFAULT}: ok\n")
    (tmp_path / "broken.yaml").write_text(BROKEN)
    bad = cli(tmp_path / "broken.yaml")
    assert (bad.returncode, bad.stdout) == (1, "")
    assert "profiles[1].name: duplicate profile name 'default'" in bad.stderr and "Traceback" not in bad.stderr


def test_custom_plugin_modules_import_from_the_working_directory(tmp_path):
    # As in a repository with lucky.py next to main.py, checked from its root.
    (module,) = code_blocks("python", "Writing your own plugin")
    policy = next(block for block in code_blocks("yaml", "Writing your own plugin") if "pluginModules" in block)
    (tmp_path / "lucky.py").write_text(module)
    (tmp_path / "policy.yaml").write_text(policy)
    result = cli("policy.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "policy.yaml: ok\n  profile default: score LuckyNumber (weight 1)\n"


@pytest.mark.parametrize("command", ["check-policy", "check-scheduler-config"])
def test_the_docs_show_what_the_checks_print(command, tmp_path):
    """Each shown run, on the files the documentation shows before it (its ``# NAME`` YAML blocks)."""
    runs = shown_runs(command)
    assert len(runs) >= 2
    for line, expected, files in runs:
        for name, text in files.items():
            (tmp_path / name).write_text(text)
        result = subprocess.run(
            [sys.executable, *line.split()[2:]],
            cwd=tmp_path,
            # No Kubernetes API setting: a shown --env run names them all.
            env={**{k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (result.stdout + result.stderr).splitlines() == expected, line
        unset = any(line.endswith(": the policy needs variables the environment does not set:") for line in expected)
        assert result.returncode == (1 if expected[0].startswith("invalid ") else 2 if unset else 0)


def test_a_wrong_setting_in_the_environment_is_named_not_a_traceback(capsys, monkeypatch):
    # The policy is loaded with the settings the function would start with (EXTENDER_RESULT_CACHE and the function's
    # names change what is checked), so a setting the function could not start with stops the check too.
    monkeypatch.setenv("EXTENDER_HTTP_TIMEOUT", "5")
    code, out, err = run(capsys, DEFAULT)
    assert code == 2 and out == ""
    assert err == 'python -m extender check-policy: EXTENDER_HTTP_TIMEOUT: time: invalid duration "5" (e.g. 5s)\n'


KUBERNETES_SOURCE = "nodeSource: {kubernetes: {}}\nprofiles: [{name: default}]\n"
API_URL_NEED = "KUBERNETES_API_URL: the policy's kubernetes nodeSource lists the nodes from the API server"
TOKEN_NEED = (
    "KUBERNETES_TOKEN or KUBERNETES_TOKEN_FILE: the API server refuses to list nodes for an anonymous caller (only an "
    "http:// KUBERNETES_API_URL, kubectl proxy on the loopback, needs none)"
)


def test_the_variables_the_policy_needs_at_start_up_are_listed_one_a_line(capsys, tmp_path, monkeypatch):
    for name in ("KUBERNETES_API_URL", "KUBERNETES_TOKEN", "KUBERNETES_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "policy.yaml").write_text(KUBERNETES_SOURCE)
    code, out, err = run(capsys, tmp_path / "policy.yaml")
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == [f"  needs {API_URL_NEED}", f"  needs {TOKEN_NEED}"]


@pytest.mark.parametrize(
    ("environment", "unmet"),
    [
        ({}, [API_URL_NEED, TOKEN_NEED]),
        ({"KUBERNETES_API_URL": "https://203.0.113.10"}, [TOKEN_NEED]),
        ({"KUBERNETES_API_URL": "https://203.0.113.10", "KUBERNETES_TOKEN": "t"}, []),
        ({"KUBERNETES_API_URL": "http://127.0.0.1:8001"}, []),  # kubectl proxy adds its own credentials
    ],
)
def test_env_checks_them_as_start_up_does(capsys, tmp_path, monkeypatch, environment, unmet):
    for name in ("KUBERNETES_API_URL", "KUBERNETES_TOKEN", "KUBERNETES_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "policy.yaml"
    path.write_text(KUBERNETES_SOURCE)
    code, out, err = run(capsys, path, "--env")
    assert out.startswith(f"{path}: ok\n")
    if unmet:
        assert code == 2
        assert err.splitlines() == [f"{path}: the policy needs variables the environment does not set:"] + [
            f"  {line}" for line in unmet
        ]
    else:
        assert (code, err) == (0, "")
    from extender.startup import start

    monkeypatch.setenv("EXTENDER_POLICY", str(path))
    monkeypatch.setenv("EXTENDER_PROCESS_TUNING", "off")
    if unmet:  # start-up decides with the same code
        with pytest.raises(SystemExit) as stopped:
            start()
        assert str(stopped.value).splitlines()[1:] == [f"  {line}" for line in unmet]


ANONYMOUS_API = (
    "KUBERNETES_API_URL is set without KUBERNETES_TOKEN or KUBERNETES_TOKEN_FILE: the function would call the API "
    "server anonymously, which refuses to list nodes and pods and to bind. Set the token of the service account "
    "deploy/kubernetes/extender-rbac.yaml makes (Terraform: kubernetes_token_secret), or unset KUBERNETES_API_URL"
)


@pytest.mark.parametrize(
    ("environment", "refused"),
    [
        ({"KUBERNETES_API_URL": "https://203.0.113.10"}, True),
        ({"KUBERNETES_API_URL": "https://203.0.113.10", "KUBERNETES_TOKEN": "t"}, False),
        ({"KUBERNETES_API_URL": "https://203.0.113.10", "KUBERNETES_TOKEN_FILE": "{token_file}"}, False),
        ({"KUBERNETES_API_URL": "http://127.0.0.1:8001"}, False),  # kubectl proxy adds its own credentials
        ({}, False),
    ],
)
def test_env_refuses_an_api_server_the_function_would_call_anonymously(
    capsys, tmp_path, monkeypatch, environment, refused
):
    # Whatever the policy needs: NodeLoad's in-flight pods, preemption and bind use the API whenever it is set.
    for name in ("KUBERNETES_API_URL", "KUBERNETES_TOKEN", "KUBERNETES_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "token").write_text("t\n")
    for name, value in environment.items():
        monkeypatch.setenv(name, value.format(token_file=tmp_path / "token"))
    path = tmp_path / "policy.yaml"
    path.write_text("profiles: [{name: default}]\n")
    code, out, err = run(capsys, path, "--env")
    assert out.startswith(f"{path}: ok\n")
    assert (code, err) == ((2, f"{path}: {ANONYMOUS_API}\n") if refused else (0, ""))
    code, _, err = run(capsys, path)  # without --env the environment is not judged
    assert (code, err) == (0, "")


def test_env_checks_the_kubernetes_variables_values_too(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBERNETES_API_URL", "http://203.0.113.10")
    (tmp_path / "policy.yaml").write_text(KUBERNETES_SOURCE)
    code, _, err = run(capsys, tmp_path / "policy.yaml", "--env")
    assert code == 2
    assert "KUBERNETES_API_URL must use https: the bearer token would cross the network in clear text" in err
