"""The root module's Google resources, read with python-hcl2 (the google provider cannot be installed here).

The provider schema test checks argument names against the provider; these tests check what the design needs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from extender.decision_log import EVENT, decision_fields
from extender.policy.loader import load_policy
from extender.routing import CALLER_TOKEN_ENV, Route
from extender.verbs import Answer
from tests.terraform.support import REPO, ROOT_MODULE, SCHEDULER_CONFIG, load_module, named, resources, run_terraform

ROOT = load_module(ROOT_MODULE)
SUBMODULE = load_module(SCHEDULER_CONFIG)
RESOURCES = resources(ROOT)
LOCALS = {name: value for block in ROOT["locals"] for name, value in block.items()}
VARIABLES = named(ROOT["variable"])
OUTPUTS = named(ROOT["output"])
MODULE_CALL = named(ROOT["module"])["scheduler_config"]
EXAMPLES = sorted(path for path in (ROOT_MODULE / "examples").iterdir() if path.is_dir())


def _raw(value: str) -> str:
    """The HCL expression of an attribute: "${var.x}" -> "var.x"."""
    return value[2:-1] if value.startswith("${") and value.endswith("}") else value


def _expression(value: str) -> str:
    """The expression without whitespace, which python-hcl2 re-spaces freely; compare it with ``_code(...)``."""
    return _code(_raw(value))


def _code(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _block(body: dict[str, Any], name: str) -> dict[str, Any]:
    [block] = body[name]
    return block


FUNCTION = RESOURCES[("google_cloudfunctions2_function", "extender")]
SERVICE_CONFIG = _block(FUNCTION, "service_config")


def test_function_runs_the_extender_entry_point_on_python() -> None:
    build = _block(FUNCTION, "build_config")
    assert build["entry_point"] == "extender"
    assert _expression(build["runtime"]) == _code("var.runtime")
    assert re.fullmatch(r"python3\d+", VARIABLES["runtime"]["default"])
    storage = _block(_block(build, "source"), "storage_source")
    assert _expression(storage["object"]) == _code("google_storage_bucket_object.source.name")


def test_one_warm_instance_by_default() -> None:
    assert _expression(SERVICE_CONFIG["min_instance_count"]) == _code("var.min_instance_count")
    assert VARIABLES["min_instance_count"]["default"] == 1


def test_threads_match_request_concurrency() -> None:
    assert _expression(SERVICE_CONFIG["max_instance_request_concurrency"]) == _code("var.concurrency")
    assert _code("THREADS = tostring(var.concurrency)") in _expression(LOCALS["environment_variables"])


def test_function_timeout_follows_the_schedulers_http_timeout() -> None:
    assert _expression(SERVICE_CONFIG["timeout_seconds"]) == _code("local.http_timeout_seconds")
    assert _expression(LOCALS["http_timeout_seconds"]) == _code("ceil(module.scheduler_config.http_timeout_ms / 1000)")
    assert _code("EXTENDER_HTTP_TIMEOUT = var.http_timeout") in _expression(LOCALS["environment_variables"])
    assert _expression(MODULE_CALL["http_timeout"]) == _code("var.http_timeout")


@pytest.mark.parametrize(
    "setting",
    [
        'EXTENDER_POLICY = var.policy_file == null ? null : "policy.yaml"',
        "KUBERNETES_API_URL = var.kubernetes_api_url",
        "KUBERNETES_CA_DATA = var.kubernetes_ca_data",
        "GOOGLE_CLOUD_PROJECT = var.project_id",
    ],
)
def test_environment_variables(setting: str) -> None:
    assert _code(setting) in _expression(LOCALS["environment_variables"])
    assert _expression(SERVICE_CONFIG["environment_variables"]) == _code("local.environment_variables")


def test_secrets_reach_the_function_as_secret_environment_variables() -> None:
    [dynamic] = SERVICE_CONFIG["dynamic"]
    secret_env = dynamic["secret_environment_variables"]
    assert _expression(secret_env["for_each"]) == _code("local.secret_environment_variables")
    secrets = _expression(LOCALS["secret_environment_variables"])
    assert _code(f"{CALLER_TOKEN_ENV} = local.caller_token_enabled ?") in secrets
    assert _code("version = one(google_secret_manager_secret_version.caller_token[*].version)") in secrets
    assert _code('KUBERNETES_TOKEN = var.kubernetes_token_secret == null ? null : { secret = var.kubernetes_token_secret, version = "latest" }') in secrets
    assert "TOKEN" not in _expression(LOCALS["environment_variables"]), "tokens must never be plain environment variables"


def test_function_account_reads_only_its_secrets() -> None:
    for name in ("caller_token", "kubernetes_token"):
        binding = RESOURCES[("google_secret_manager_secret_iam_member", name)]
        assert binding["role"] == "roles/secretmanager.secretAccessor"
        assert _expression(binding["member"]) == _code("google_service_account.function.member")
    assert not [key for key in RESOURCES if key[0] in ("google_project_iam_member", "google_project_iam_binding")]
    assert _expression(SERVICE_CONFIG["service_account_email"]) == _code("google_service_account.function.email")


def test_public_invocation_is_run_invoker_for_all_users_on_the_cloud_run_service() -> None:
    binding = RESOURCES[("google_cloud_run_service_iam_member", "public_invoker")]
    assert (binding["role"], binding["member"]) == ("roles/run.invoker", "allUsers")
    assert _expression(binding["service"]) == _code("google_cloudfunctions2_function.extender.name")
    assert _expression(binding["count"]) == _code('var.invocation == "public" ? 1 : 0')
    # 2nd gen functions reject allUsers on the function-level IAM resources.
    assert not [key for key in RESOURCES if key[0].startswith("google_cloudfunctions2_function_iam")]


def test_iam_only_invocation_grants_the_proxy_account_and_its_workload_identity() -> None:
    invoker = RESOURCES[("google_cloud_run_service_iam_member", "proxy_invoker")]
    assert invoker["role"] == "roles/run.invoker"
    assert _expression(invoker["member"]) == _code("google_service_account.scheduler_proxy[0].member")
    workload_identity = RESOURCES[("google_service_account_iam_member", "scheduler_proxy_workload_identity")]
    assert workload_identity["role"] == "roles/iam.workloadIdentityUser"
    assert _expression(workload_identity["member"]) == _code("serviceAccount:${local.cluster_project_id}.svc.id.goog[${var.scheduler_namespace}/${var.scheduler_name}]")
    proxy = _expression(MODULE_CALL["identity_proxy"])
    assert proxy.startswith(_code('var.invocation == "iam" ? { image = var.proxy_image, port = 8001,'))
    assert VARIABLES["proxy_image"]["validation"], "proxy_image must be required for IAM-only invocation"


def test_caller_token_is_generated_stored_and_passed_on() -> None:
    password = RESOURCES[("random_password", "caller_token")]
    assert password["special"] is False and password["length"] >= 32
    version = RESOURCES[("google_secret_manager_secret_version", "caller_token")]
    assert _expression(version["secret_data"]) == _code("local.caller_token")
    assert _expression(MODULE_CALL["caller_token"]) == _code("local.caller_token")
    assert VARIABLES["caller_token"]["sensitive"] is True
    assert _expression(LOCALS["caller_token_enabled"]) == _code('coalesce(var.caller_token_enabled, var.invocation == "public" || nonsensitive(var.caller_token != null))')


def test_invocation_is_an_explicit_choice() -> None:
    invocation = VARIABLES["invocation"]
    assert "default" not in invocation
    assert "public" in invocation["description"] and "iam" in invocation["description"]


def test_scheduler_config_gets_the_cloud_run_url() -> None:
    assert _expression(MODULE_CALL["url"]) == _code("google_cloudfunctions2_function.extender.service_config[0].uri")
    assert MODULE_CALL["source"] == "./modules/scheduler-config"


def test_every_submodule_variable_is_set_with_the_same_defaults() -> None:
    """Pass-through variables keep the submodule's type and default, so the README's defaults hold for both."""
    sub_variables = named(SUBMODULE["variable"])
    assert set(sub_variables) == set(MODULE_CALL) - {"source"}
    for sub_name, value in MODULE_CALL.items():
        match = re.fullmatch(r"var\.(\w+)", _expression(value))
        if sub_name == "source" or match is None:
            continue
        root_variable, sub_variable = VARIABLES[match.group(1)], sub_variables[sub_name]
        assert root_variable.get("type") == sub_variable.get("type"), sub_name
        assert root_variable.get("default") == sub_variable.get("default"), sub_name
        assert root_variable.get("sensitive", False) == sub_variable.get("sensitive", False), sub_name


def test_outputs_are_wired_to_the_submodule_and_token_outputs_are_sensitive() -> None:
    sub_outputs = named(SUBMODULE["output"])
    wired = {name for name, body in OUTPUTS.items() if _expression(body["value"]) == f"module.scheduler_config.{name}"}
    assert {"url_prefix", "extenders_yaml", "kube_scheduler_configuration", "kubernetes_manifests", "scheduler_name", "tls_verification"} <= wired
    for name in wired:
        assert OUTPUTS[name].get("sensitive", False) == sub_outputs[name].get("sensitive", False), name
    assert all(OUTPUTS[name]["sensitive"] for name in ("url_prefix", "extenders_yaml", "kube_scheduler_configuration", "kubernetes_manifests"))
    assert _expression(OUTPUTS["function_uri"]["value"]) == _code("google_cloudfunctions2_function.extender.service_config[0].uri")


def test_source_archive_holds_the_function_and_the_policy(terraform: str, terraform_env: dict[str, str], tmp_path: Path) -> None:
    """Evaluates the module's own file selection with terraform, against this repository."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "main.tf").write_text(
        f'locals {{\n  source_dir = "{REPO}"\n  source_files = {_raw(LOCALS["source_files"])}\n}}\n'
        'output "files" {\n  value = local.source_files\n}\n'
    )
    env = {**terraform_env, "TF_DATA_DIR": str(tmp_path / ".terraform")}
    run_terraform(terraform, "apply", "-auto-approve", "-input=false", cwd=probe, env=env)
    files = json.loads(run_terraform(terraform, "output", "-json", "files", cwd=probe, env=env).stdout)
    assert {"main.py", "requirements.txt", "extender/__init__.py", "extender/policy/default.yaml"} <= set(files)
    assert all(file == "main.py" or file == "requirements.txt" or file.startswith("extender/") for file in files)
    assert not [file for file in files if "__pycache__" in file or file.endswith(".pyc") or "/tests/" in file]
    archive = resources(ROOT, "data")[("archive_file", "source")]
    dynamic_sources = [block["source"] for block in archive["dynamic"]]
    assert [_expression(source["for_each"]) for source in dynamic_sources] == [
        _code("local.source_files"), _code("var.policy_file == null ? [] : [var.policy_file]")
    ]
    assert _block(dynamic_sources[1], "content")["filename"] == "policy.yaml"


def test_log_based_metrics_read_the_decision_log_entry() -> None:
    filter_ = _expression(LOCALS["decision_log_filter"])
    assert _code(f'jsonPayload.event=\\"{EVENT}\\"') in filter_
    assert _code('resource.type=\\"cloud_run_revision\\"') in filter_
    assert _code('resource.labels.service_name=\\"${var.name}\\"') in filter_
    errors = RESOURCES[("google_logging_metric", "errors")]
    assert errors["filter"] == "${local.decision_log_filter} AND jsonPayload.error:*"
    latency = RESOURCES[("google_logging_metric", "latency")]
    assert latency["value_extractor"] == "EXTRACT(jsonPayload.durationMs)"
    assert _block(latency, "metric_descriptor")["value_type"] == "DISTRIBUTION"
    # The fields the filters and extractors read are those the function logs.
    fields = decision_fields(Route("filter", "default"), Answer(body=None, error="plugin failed"), 0.012, 5.0, method="POST", path="/filter")
    assert {"event", "verb", "profile", "status", "durationMs", "budgetMs", "error"} <= set(fields)
    assert isinstance(fields["durationMs"], float)
    assert "error" not in decision_fields(Route("filter", "default"), Answer(body=None), 0.012, 5.0, method="POST", path="/filter")


def test_alert_policy_watches_latency_against_the_timeout_and_errors() -> None:
    policy = RESOURCES[("google_monitoring_alert_policy", "extender")]
    latency, errors = (condition["condition_threshold"][0] for condition in policy["conditions"])
    assert "google_logging_metric.latency[0].name" in latency["filter"]
    assert _expression(latency["threshold_value"]) == _code("local.latency_threshold_ms")
    assert _expression(LOCALS["latency_threshold_ms"]) == _code("module.scheduler_config.http_timeout_ms * var.alert_latency_ratio")
    assert _block(latency, "aggregations")["per_series_aligner"] == "ALIGN_PERCENTILE_99"
    assert "google_logging_metric.errors[0].name" in errors["filter"]
    assert (errors["comparison"], errors["threshold_value"]) == ("COMPARISON_GT", 0)
    assert _expression(policy["notification_channels"]) == _code("var.notification_channels")


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_examples_call_the_module_with_its_variables(example: Path) -> None:
    call = named(load_module(example)["module"])["extender"]
    assert call["source"] == "../.."
    required = {name for name, body in VARIABLES.items() if "default" not in body}
    assert required <= set(call), f"missing required inputs: {required - set(call)}"
    assert set(call) - {"source"} <= set(VARIABLES), f"unknown inputs: {set(call) - {'source'} - set(VARIABLES)}"


def test_example_policy_is_valid() -> None:
    load_policy(ROOT_MODULE / "examples" / "gke-public" / "policy.yaml")
