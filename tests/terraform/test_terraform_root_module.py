"""The root module's Google resources, read with python-hcl2 (the google provider cannot be installed here).

The provider schema test checks argument names against the provider; these tests check what the design needs.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from extender.decision_log import EVENT, decision_fields
from extender.http.routing import Router
from extender.policy.loader import load_policy
from extender.protocol import Route
from extender.settings import CALLER_TOKEN_ENV, PREVIOUS_CALLER_TOKEN_ENV, Settings
from extender.verbs import Answer
from tests.terraform.support import (
    REPO,
    ROOT_MODULE,
    SCHEDULER_CONFIG,
    load_hcl,
    load_module,
    local_source,
    named,
    resources,
    run_terraform,
)

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
        # Memory comes back after large requests (extender/http/memory.py): served as the README's command serves.
        'PYTHONMALLOC = "malloc"',
        'GLIBC_TUNABLES = "glibc.malloc.tcache_count=1"',
    ],
)
def test_environment_variables(setting: str) -> None:
    assert _code(setting) in _expression(LOCALS["environment_variables"])
    assert _expression(SERVICE_CONFIG["environment_variables"]) == _code("local.environment_variables")


def _dynamic(body: dict[str, Any], name: str) -> dict[str, Any]:
    [block] = [entry[name] for entry in body["dynamic"] if name in entry]
    return block


def test_secrets_reach_the_function_as_secret_environment_variables() -> None:
    secret_env = _dynamic(SERVICE_CONFIG, "secret_environment_variables")
    assert _expression(secret_env["for_each"]) == _code("local.secret_environment_variables")
    secrets = _expression(LOCALS["secret_environment_variables"])
    assert _code(
        "{ for name, slot in local.caller_token_secret_slots : name => { secret = local.caller_token_secret_id,"
        " version = google_secret_manager_secret_version.caller_token[slot].version } }"
    ) in secrets
    assert (
        _code(
            "KUBERNETES_TOKEN = { secret = var.kubernetes_token_secret, version = var.kubernetes_token_secret_version }"
        )
        in secrets
    )
    assert "latest" not in secrets, "a secret at latest leaves warm instances on a rotated-out value"
    assert "TOKEN" not in _expression(LOCALS["environment_variables"]), (
        "tokens must never be plain environment variables"
    )
    # The function's two token variables are the ones the slots fill (variables.tf).
    slots = local_source(ROOT_MODULE / "variables.tf", "caller_token_secret_slots")
    assert f"{CALLER_TOKEN_ENV} " in slots and f"{PREVIOUS_CALLER_TOKEN_ENV} " in slots


def test_node_load_prometheus_credentials_are_secrets_mounted_as_files_or_secret_variables() -> None:
    """Secret Manager secret ids go in, never a secret's value: files mounted one directory each at the path the
    policy names, PROMETHEUS_* variables among the secret environment variables, each secret readable by the
    function's account, and nothing of them in a plain variable or an output."""
    volumes = _dynamic(SERVICE_CONFIG, "secret_volumes")
    assert _expression(volumes["for_each"]) == _code("var.prometheus_secret_files")
    content = _block(volumes, "content")
    assert _expression(content["mount_path"]) == _code("dirname(secret_volumes.key)")
    assert _expression(content["secret"]) == _code("secret_volumes.value.secret")
    assert _expression(content["project_id"]) == _code("var.project_id")
    versions = _block(content, "versions")
    assert _expression(versions["path"]) == _code("basename(secret_volumes.key)")
    assert _expression(versions["version"]) == _code("secret_volumes.value.version")
    assert _code("var.prometheus_secret_environment_variables") in _expression(LOCALS["secret_environment_variables"])
    assert "prometheus" not in _expression(LOCALS["environment_variables"]).lower()
    grant = RESOURCES[("google_secret_manager_secret_iam_member", "prometheus")]
    assert _expression(grant["for_each"]) == _code("local.prometheus_secret_ids")
    assert grant["role"] == "roles/secretmanager.secretAccessor"
    assert _expression(grant["member"]) == _code("local.function_service_account_member")
    grants = RESOURCES[("time_sleep", "secret_access")]["triggers"]["grants"]
    assert "google_secret_manager_secret_iam_member.prometheus" in grants
    for name in ("prometheus_secret_files", "prometheus_secret_environment_variables"):
        fields = VARIABLES[name]["type"]
        assert "secret" in fields and "value" not in fields and "data" not in fields, fields
    assert not any("prometheus" in json.dumps(output) for output in OUTPUTS.values())


def test_secret_names_are_known_at_plan_time() -> None:
    """The function's secret references name the secret by a plan-time string, not by the secret resource (#22497)."""
    assert LOCALS["caller_token_secret_id"] == "${var.function_name}-caller-token"
    assert _expression(RESOURCES[("google_secret_manager_secret", "caller_token")]["secret_id"]) == _code(
        "local.caller_token_secret_id"
    )
    assert "google_secret_manager_secret." not in _expression(LOCALS["secret_environment_variables"])


def test_a_token_lives_exactly_as_long_as_its_slot_is_accepted() -> None:
    """Nothing but a slot's leaving and coming back replaces its token (rotation.tftest.hcl walks the procedure)."""
    password = RESOURCES[("random_password", "caller_token")]
    assert _expression(password["for_each"]) == _code("local.generated_caller_token_slots")
    assert "keepers" not in password, "a token's only generation input is its slot's being accepted"
    assert _block(password, "lifecycle")["ignore_changes"] == ["keepers"], (
        "keepers left in state by earlier versions must not replace a token"
    )
    version = RESOURCES[("google_secret_manager_secret_version", "caller_token")]
    assert _expression(version["for_each"]) == _code("local.caller_token_slots")
    assert _expression(version["secret_data"]) == _code("local.caller_tokens[each.key]")
    assert _block(version, "lifecycle")["create_before_destroy"] is True
    assert _expression(version["secret"]) == _code("google_secret_manager_secret.caller_token[0].id")
    assert _expression(LOCALS["caller_tokens"]) == _code(
        "{ for slot in local.caller_token_slots : slot => try(var.caller_tokens[slot], "
        "random_password.caller_token[slot].result) }"
    )
    assert _expression(LOCALS["caller_token"]) == _code(
        "local.caller_token_enabled ? local.caller_tokens[var.caller_token_active_slot] : null"
    )
    assert VARIABLES["caller_tokens"]["sensitive"] is True


def test_state_of_the_single_token_versions_moves_into_slot_a() -> None:
    """A deployment of the module before the slots keeps its token: no replacement, no outage, on the upgrade."""
    moved = {(block["from"], block["to"]) for entry in ROOT["moved"] for block in [entry]}
    assert {
        ("${random_password.caller_token[0]}", '${random_password.caller_token["a"]}'),
        (
            "${google_secret_manager_secret_version.caller_token[0]}",
            '${google_secret_manager_secret_version.caller_token["a"]}',
        ),
        ("${google_service_account.function}", "${google_service_account.function[0]}"),
    } <= moved
    assert (
        VARIABLES["caller_token_accepted_slots"]["default"] == ["a"]
        and VARIABLES["caller_token_active_slot"]["default"] == "a"
    )


def test_direct_vpc_egress_is_wired_only_when_a_network_is_given() -> None:
    interface = _dynamic(SERVICE_CONFIG, "direct_vpc_network_interface")
    assert _expression(interface["for_each"]) == _code("local.direct_vpc_egress ? [1] : []")
    content = _block(interface, "content")
    assert {key: _expression(value) for key, value in content.items()} == {
        "network": "var.direct_vpc_network",
        "subnetwork": "var.direct_vpc_subnetwork",
        "tags": "var.direct_vpc_network_tags",
    }
    assert _expression(SERVICE_CONFIG["direct_vpc_egress"]) == _code(
        "local.direct_vpc_egress ? var.direct_vpc_egress : null"
    )
    assert _expression(LOCALS["direct_vpc_egress"]) == _code(
        "var.direct_vpc_network != null || var.direct_vpc_subnetwork != null"
    )


def test_first_apply_waits_for_apis_and_secret_access() -> None:
    assert set(FUNCTION["depends_on"]) == {"${time_sleep.apis}", "${time_sleep.secret_access}"}
    apis = RESOURCES[("time_sleep", "apis")]
    assert "google_project_service.apis" in apis["triggers"]["apis"]
    grants = RESOURCES[("time_sleep", "secret_access")]["triggers"]["grants"]
    assert "google_secret_manager_secret_iam_member.caller_token[*].id" in grants
    assert "google_secret_manager_secret_iam_member.kubernetes_token[*].id" in grants
    # Nothing that needs an API goes straight to the enablement: everything waits on the sleep.
    waiting = [key for key, body in RESOURCES.items() if "${google_project_service.apis}" in body.get("depends_on", [])]
    assert waiting == []


def test_function_takes_the_source_generation_from_the_object() -> None:
    """A new zip and a function update in one apply: the generation comes from the object (#19134)."""
    storage = _block(_block(_block(FUNCTION, "build_config"), "source"), "storage_source")
    assert _expression(storage["generation"]) == _code("google_storage_bucket_object.source.generation")


def test_function_account_reads_only_its_secrets_and_node_loads_metrics() -> None:
    for name in ("caller_token", "kubernetes_token"):
        binding = RESOURCES[("google_secret_manager_secret_iam_member", name)]
        assert binding["role"] == "roles/secretmanager.secretAccessor"
        assert _expression(binding["member"]) == _code("local.function_service_account_member")
    project_grants = [key for key in RESOURCES if key[0] in ("google_project_iam_member", "google_project_iam_binding")]
    assert project_grants == [("google_project_iam_member", "function_monitoring_viewer")]
    viewer = RESOURCES[project_grants[0]]
    assert viewer["role"] == "roles/monitoring.viewer"
    assert _expression(viewer["member"]) == _code("local.function_service_account_member")
    # Only for an account the module made, and only the projects NodeLoad reads (node_load_grants.tftest.hcl).
    assert _expression(viewer["for_each"]) == _code(
        "var.function_service_account_email == null ? local.monitoring_viewer_projects : toset([])"
    )
    assert _expression(SERVICE_CONFIG["service_account_email"]) == _code("local.function_service_account_email")


def test_existing_service_accounts_replace_the_created_ones() -> None:
    assert _expression(RESOURCES[("google_service_account", "function")]["count"]) == _code(
        "var.function_service_account_email == null ? 1 : 0"
    )
    assert _expression(RESOURCES[("google_service_account", "scheduler_proxy")]["count"]) == _code(
        'var.invocation == "iam" && var.proxy_service_account_email == null ? 1 : 0'
    )
    assert _expression(LOCALS["function_service_account_email"]) == _code(
        "coalesce(var.function_service_account_email, one(google_service_account.function[*].email))"
    )
    assert _expression(LOCALS["proxy_service_account_email"]) == _code(
        'var.invocation == "iam" ? coalesce(var.proxy_service_account_email, '
        'one(google_service_account.scheduler_proxy[*].email)) : null'
    )
    assert _expression(OUTPUTS["function_service_account"]["value"]) == _code("local.function_service_account_email")
    assert _expression(OUTPUTS["proxy_service_account"]["value"]) == _code("local.proxy_service_account_email")
    # The function's account waits for its grants like its secret access does.
    assert (
        "google_project_iam_member.function_monitoring_viewer"
        in RESOURCES[("time_sleep", "secret_access")]["triggers"]["grants"]
    )


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
    assert _expression(invoker["member"]) == _code("serviceAccount:${local.proxy_service_account_email}")
    workload_identity = RESOURCES[("google_service_account_iam_member", "scheduler_proxy_workload_identity")]
    assert _expression(workload_identity["service_account_id"]) == _code(
        'var.proxy_service_account_email == null ? google_service_account.scheduler_proxy[0].name : '
        '"projects/-/serviceAccounts/${var.proxy_service_account_email}"'
    )
    assert workload_identity["role"] == "roles/iam.workloadIdentityUser"
    assert _expression(workload_identity["member"]) == _code(
        "serviceAccount:${local.cluster_project_id}.svc.id.goog[${var.scheduler_namespace}/${var.scheduler_name}]"
    )
    proxy = _expression(MODULE_CALL["identity_proxy"])
    assert proxy.startswith(_code('var.invocation == "iam" ? { image = var.proxy_image, port = 8001,'))
    assert (
        _code("google_service_account = var.gke_workload_identity ? local.proxy_service_account_email : null") in proxy
    )
    assert VARIABLES["proxy_image"]["validation"], "proxy_image must be required for IAM-only invocation"


def test_caller_token_is_generated_stored_and_passed_on() -> None:
    password = RESOURCES[("random_password", "caller_token")]
    assert password["special"] is False and password["length"] >= 32
    assert _expression(MODULE_CALL["caller_token"]) == _code("local.caller_token")
    caller_token_enabled = local_source(ROOT_MODULE / "variables.tf", "caller_token_enabled")
    assert _code(caller_token_enabled) == _code(
        'coalesce(var.caller_token_enabled, var.invocation == "public" || nonsensitive(length(var.caller_tokens) > 0))'
    )


def test_caller_token_secret_replicates_where_the_organisation_allows() -> None:
    replication = _block(RESOURCES[("google_secret_manager_secret", "caller_token")], "replication")
    [auto] = [entry["auto"] for entry in replication["dynamic"] if "auto" in entry]
    [user_managed] = [entry["user_managed"] for entry in replication["dynamic"] if "user_managed" in entry]
    assert _expression(auto["for_each"]) == _code("length(var.secret_replica_locations) == 0 ? [1] : []")
    assert _expression(user_managed["for_each"]) == _code("length(var.secret_replica_locations) == 0 ? [] : [1]")
    replicas = _dynamic(_block(user_managed, "content"), "replicas")
    assert _expression(replicas["for_each"]) == _code("var.secret_replica_locations")
    assert _expression(_block(replicas, "content")["location"]) == _code("replicas.value")


def test_invocation_is_an_explicit_choice() -> None:
    invocation = VARIABLES["invocation"]
    assert "default" not in invocation
    assert "public" in invocation["description"] and "iam" in invocation["description"]


def test_scheduler_config_gets_the_cloud_run_url() -> None:
    assert _expression(MODULE_CALL["url"]) == _code("local.function_uri")
    uri = "google_cloudfunctions2_function.extender.service_config[0].uri"
    assert _expression(LOCALS["function_uri"]) == _code(uri)
    assert MODULE_CALL["source"] == "./modules/scheduler-config"


def test_the_preflight_renders_with_the_root_module_s_own_files() -> None:
    """terraform/preflight plans the root module's variables and renders its scheduler configuration without a
    provider: the same files (links), with stand-ins for exactly the three locals main.tf takes from resources, and
    its own policy_directory (a relative policy_file names the same file as from the root module's directory)."""
    preflight = ROOT_MODULE / "preflight"
    for name in ("variables.tf", "scheduler_config.tf", "modules"):
        assert (preflight / name).is_symlink() and (preflight / name).resolve() == (ROOT_MODULE / name).resolve(), name
    own = [path.name for path in preflight.glob("*.tf") if not path.is_symlink()]
    assert sorted(own) == ["outputs.tf", "stand_ins.tf", "versions.tf"]
    stand_ins = {name for block in load_hcl(preflight / "stand_ins.tf")["locals"] for name in block}
    assert stand_ins - {"policy_directory"} == {"function_uri", "caller_token", "proxy_service_account_email"}
    assert stand_ins <= set(LOCALS)
    assert "resource" not in load_module(preflight) and "data" not in load_module(preflight)


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
    assert {
        "url_prefix",
        "extenders_yaml",
        "kube_scheduler_configuration",
        "kubernetes_manifests",
        "scheduler_name",
        "tls_verification",
    } <= wired
    for name in wired:
        assert OUTPUTS[name].get("sensitive", False) == sub_outputs[name].get("sensitive", False), name
    assert all(
        OUTPUTS[name]["sensitive"]
        for name in ("url_prefix", "extenders_yaml", "kube_scheduler_configuration", "kubernetes_manifests")
    )
    assert _expression(OUTPUTS["function_uri"]["value"]) == _code(
        "google_cloudfunctions2_function.extender.service_config[0].uri"
    )


def _copy_function_sources(destination: Path) -> None:
    for name in ("main.py", "requirements.txt"):
        shutil.copy(REPO / name, destination / name)
    shutil.copytree(REPO / "extender", destination / "extender", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _source_locals(
    terraform: str, terraform_env: dict[str, str], probe: Path, source_dir: Path, policy_file: Path | None
) -> dict[str, Any]:
    """The module's own source selection and archive key, evaluated by terraform against ``source_dir``."""
    probe.mkdir()
    names = ("source_files", "source_sha256", "source_key")
    policy = "null" if policy_file is None else f'"{policy_file}"'
    (probe / "main.tf").write_text(
        'variable "function_name" {\n  default = "scheduler-extender"\n}\n'
        f'variable "policy_file" {{\n  default = {policy}\n}}\n'
        f'locals {{\n  source_dir = "{source_dir}"\n'
        # policy_file as main.tf reads it: from policy_directory, through variables.tf's policy_path.
        f"  policy_directory = {local_source(ROOT_MODULE / 'main.tf', 'policy_directory')}\n"
        f"  policy_path = {local_source(ROOT_MODULE / 'variables.tf', 'policy_path')}\n"
        + "".join(f"  {name} = {local_source(ROOT_MODULE / 'main.tf', name)}\n" for name in names)
        # What the archive's source blocks do with every selected file: read it as UTF-8 text.
        + '  read = [for file in local.source_files : length(file("${local.source_dir}/${file}"))]\n}\n'
        + "".join(f'output "{name}" {{\n  value = local.{name}\n}}\n' for name in (*names, "read"))
    )
    env = {**terraform_env, "TF_DATA_DIR": str(probe / ".terraform")}
    run_terraform(terraform, "apply", "-auto-approve", "-input=false", cwd=probe, env=env)
    return {
        name: value["value"]
        for name, value in json.loads(run_terraform(terraform, "output", "-json", cwd=probe, env=env).stdout).items()
    }


def test_source_archive_holds_the_function_and_ignores_stray_files(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path
) -> None:
    """Stray binary files (as a developer's checkout or a build leaves them) are never selected, so never read."""
    clean, stray = tmp_path / "clean", tmp_path / "stray"
    for tree in (clean, stray):
        tree.mkdir()
        _copy_function_sources(tree)
    binary = bytes(range(256))
    for name in (
        ".DS_Store",
        "_speedups.cpython-312-x86_64-linux-gnu.so",
        "routing.cpython-312.pyc",
        "policy/.default.yaml.swp",
    ):
        (stray / "extender" / name).write_bytes(binary)
    (stray / "extender" / "__pycache__").mkdir()
    (stray / "extender" / "__pycache__" / "app.cpython-312.pyc").write_bytes(binary)
    (stray / "extender" / "tests").mkdir()
    (stray / "extender" / "tests" / "test_local.py").write_text("def test_x() -> None: ...\n")
    (stray / "notes.txt").write_bytes(binary)

    found = _source_locals(terraform, terraform_env, tmp_path / "probe-stray", stray, None)
    expected = _source_locals(terraform, terraform_env, tmp_path / "probe-clean", clean, None)
    files = found["source_files"]
    assert {"main.py", "requirements.txt", "extender/__init__.py", "extender/policy/default.yaml"} <= set(files)
    assert all(file in ("main.py", "requirements.txt") or file.startswith("extender/") for file in files)
    assert files == expected["source_files"], "stray files must not enter the archive"
    # Same content, same key, wherever the checkout lives: a plan made on one machine names the object the apply
    # uploads.
    assert found["source_sha256"] == expected["source_sha256"]
    assert found["source_key"] == f"default/scheduler-extender/{found['source_sha256']}"
    assert len(found["read"]) == len(files)


def test_source_key_follows_content_and_policy(terraform: str, terraform_env: dict[str, str], tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    _copy_function_sources(tree)
    base = _source_locals(terraform, terraform_env, tmp_path / "base", tree, None)
    with_policy = _source_locals(
        terraform, terraform_env, tmp_path / "policy", tree, ROOT_MODULE / "examples" / "gke-public" / "policy.yaml"
    )
    (tree / "extender" / "http" / "routing.py").write_text(
        (tree / "extender" / "http" / "routing.py").read_text() + "\n"
    )
    edited = _source_locals(terraform, terraform_env, tmp_path / "edited", tree, None)
    assert len({base["source_sha256"], with_policy["source_sha256"], edited["source_sha256"]}) == 3


def test_archive_is_built_where_it_is_uploaded() -> None:
    """The zip is read at apply time whenever the object changes, so a saved plan applies on another machine."""
    archive = resources(ROOT, "data")[("archive_file", "source")]
    assert archive["depends_on"] == ["${terraform_data.source}"]
    trigger = RESOURCES[("terraform_data", "source")]
    assert trigger["input"] == {"key": "${local.source_key}", "bucket": "${google_storage_bucket.source.name}"}
    assert _expression(archive["output_path"]) == _code(
        '${path.root}/.terraform/extender-source/${local.source_key}.zip'
    )
    source_object = RESOURCES[("google_storage_bucket_object", "source")]
    assert source_object["name"] == "${local.source_key}.zip", "the object name must be known at plan time"
    assert _block(source_object, "lifecycle")["create_before_destroy"] is True, (
        "the function must never point at a deleted zip"
    )
    assert "terraform.workspace" in LOCALS["source_key"] and "var.function_name" in LOCALS["source_key"]
    dynamic_sources = [block["source"] for block in archive["dynamic"]]
    assert [_expression(source["for_each"]) for source in dynamic_sources] == [
        _code("local.source_files"), _code("var.policy_file == null ? [] : [local.policy_path]")
    ]
    assert _block(dynamic_sources[1], "content")["filename"] == "policy.yaml"


def test_log_based_metrics_read_the_decision_log_entry() -> None:
    filter_ = _expression(LOCALS["decision_log_filter"])
    assert _code(f'jsonPayload.event=\\"{EVENT}\\"') in filter_
    assert _code('resource.type=\\"cloud_run_revision\\"') in filter_
    assert _code('resource.labels.service_name=\\"${var.function_name}\\"') in filter_
    assert RESOURCES[("google_logging_metric", "errors")]["filter"] == "${local.errors_log_filter}"
    assert RESOURCES[("google_logging_metric", "unauthenticated")]["filter"] == "${local.unauthenticated_log_filter}"
    latency = RESOURCES[("google_logging_metric", "latency")]
    assert latency["value_extractor"] == "EXTRACT(jsonPayload.durationMs)"
    assert _block(latency, "metric_descriptor")["value_type"] == "DISTRIBUTION"
    # The fields the filters and extractors read are those the function logs.
    fields = decision_fields(
        Route("filter", "default"), Answer(body=None, error="plugin failed"), 0.012, 5.0, method="POST", path="/filter"
    )
    assert {"event", "verb", "profile", "status", "durationMs", "budgetMs", "error", "method", "path"} <= set(fields)
    assert isinstance(fields["durationMs"], float) and isinstance(fields["status"], int)
    assert "error" not in decision_fields(
        Route("filter", "default"), Answer(body=None), 0.012, 5.0, method="POST", path="/filter"
    )


def test_per_rule_metrics_count_the_rejection_and_audit_entries_per_plugin_and_rule() -> None:
    """Enforced plugins' rejections and audited ones' held-back verdicts: one entry per plugin and rule, whose fields
    the extractors read; would_reject, once a resource of its own, keeps its state (moved)."""
    from extender.decision_log import (
        AUDIT_EVENT,
        REJECTION_EVENT,
        SKIPPED_EVENT,
        audit_entries,
        rejection_entries,
        skipped_entries,
    )
    from extender.framework import status
    from extender.framework.profile import FilterResult

    metric = RESOURCES[("google_logging_metric", "by_rule")]
    assert _expression(metric["for_each"]) == _code(
        "{for name, metric in local.rule_metrics : name => metric if var.monitoring_enabled}"
    )
    assert metric["name"] == "${var.function_name}/${each.key}"
    filter_ = _expression(metric["filter"])
    assert _code('jsonPayload.event=\\"${each.value.event}\\"') in filter_
    assert _code('resource.labels.service_name=\\"${var.function_name}\\"') in filter_
    assert _block(metric, "metric_descriptor")["value_type"] == "INT64"
    assert _code("each.value.labels") in _expression(metric["label_extractors"])
    rules = LOCALS["rule_metrics"]
    assert {name: (rule["event"], set(rule["labels"])) for name, rule in rules.items()} == {
        "rejections": (REJECTION_EVENT, {"plugin", "rule"}),
        "would_reject": (AUDIT_EVENT, {"plugin", "rule", "verdict"}),
        "skipped": (SKIPPED_EVENT, {"plugin", "rule", "code"}),
    }
    moved = {(_raw(block["from"]), _raw(block["to"])) for block in ROOT["moved"]}
    assert ("google_logging_metric.would_reject[0]", 'google_logging_metric.by_rule["would_reject"]') in moved
    # The fields the extractors read are those the function logs, the rule taken from the plugin's reason.
    reason = "NodeLabelPolicy rule 'others-off-gpu-pool': node does not match x"
    held = status.unresolvable(reason).with_plugin("NodeLabelPolicy")
    audited = FilterResult(feasible=["n-1", "n-2"], would_reject={"n-1": (held,), "n-2": (held,)})
    enforced = FilterResult(feasible=[], rejected={"n-1": held, "n-2": held})
    route = Route("filter", "default")
    for verdict, result in (("wouldReject", audited), (None, enforced)):
        fields = decision_fields(route, Answer(body=None, result=result), 0.01, 5.0, method="POST", path="/filter")
        [entry] = audit_entries(fields, result) if verdict else rejection_entries(fields)
        labels = rules["would_reject" if verdict else "rejections"]["labels"]
        assert {"verb", "profile", *labels} <= set(entry)
        assert (entry["plugin"], entry["rule"], entry.get("verdict"), entry["count"]) == (
            "NodeLabelPolicy", "others-off-gpu-pool", verdict, 2
        )
    # Nodes a plugin did not judge, per plugin, rule and code: the skipped metric's entries.
    unjudged = status.Status(status.Code.SUCCESS, "not evaluated (failurePolicy Ignore): no answer", "NodeLoad")
    skipping = FilterResult(feasible=["n-1", "n-2"], skipped={"n-1": (unjudged,), "n-2": (unjudged,)})
    fields = decision_fields(route, Answer(body=None, result=skipping), 0.01, 5.0, method="POST", path="/filter")
    [entry] = skipped_entries(fields, skipping)
    assert {"verb", "profile", *rules["skipped"]["labels"]} <= set(entry)
    assert (entry["plugin"], entry["rule"], entry["code"], entry["count"]) == ("NodeLoad", "", "Success", 2)


def test_unauthenticated_requests_are_kept_apart_from_errors() -> None:
    """A 404 is what a request without the token gets: internet probes must never count as the scheduler's errors."""
    assert (
        LOCALS["errors_log_filter"]
        == "${local.decision_log_filter} AND jsonPayload.error:* AND jsonPayload.status!=404"
    )
    assert LOCALS["unauthenticated_log_filter"] == "${local.decision_log_filter} AND jsonPayload.status=404"


def test_verb_path_label_reads_the_redacted_path_of_a_wrong_token_call() -> None:
    """The label extractor's regex, applied to what the function logs for a scheduler call with a wrong token."""
    extractor = RESOURCES[("google_logging_metric", "unauthenticated")]["label_extractors"]["verb_path"]
    assert extractor == 'REGEXP_EXTRACT(jsonPayload.path, "${local.verb_path_regex}")'
    router = Router({"default"}, {"scheduler-extender"}, ["r1ght-t0ken-r1ght-t0ken-r1ght-t0ken"])
    regex = LOCALS["verb_path_regex"]
    assert (
        re.search(regex, router.redact("/scheduler-extender/0ld-t0ken-0ld-t0ken-0ld-t0ken/default/filter")).group(1)
        == "filter"
    )
    assert re.search(regex, router.redact("/wp-login.php")) is None


ALERTS = LOCALS["alert_definitions"]
POLICY = RESOURCES[("google_monitoring_alert_policy", "extender")]
THRESHOLD = _dynamic(_block(POLICY, "conditions"), "condition_threshold")
PROMQL = _dynamic(_block(POLICY, "conditions"), "condition_prometheus_query_language")
COUNT_ALERTS = (
    "errors", "rejected_calls", "cloud_run_refused", "cloud_run_failed", "iam_refused", "skipped", "source_failures"
)


def test_every_alert_has_a_runbook_and_its_own_policy() -> None:
    assert set(ALERTS) == {*COUNT_ALERTS, "latency", "cloud_run_latency"}
    assert _expression(POLICY["for_each"]) == _code("var.monitoring_enabled ? local.alerts : {}")
    assert _expression(LOCALS["alerts"]) == _code(
        '{ for name, alert in local.alert_definitions : name => alert '
        'if name != "iam_refused" || var.invocation == "iam" }'
    )
    assert "each.value.runbook" in _block(POLICY, "documentation")["content"]
    assert _expression(POLICY["notification_channels"]) == _code("var.notification_channels")
    for name, alert in ALERTS.items():
        assert len(alert["runbook"].strip().splitlines()) >= 2, name
        assert (alert["threshold"] is None) != (alert["promql"] is None), f"{name}: one condition each"


def test_count_alerts_fire_on_a_rate_over_the_window_never_on_one_event() -> None:
    assert _expression(THRESHOLD["for_each"]) == _code("each.value.threshold == null ? [] : [each.value.threshold]")
    content = _block(THRESHOLD, "content")
    aggregations = _block(content, "aggregations")
    assert _expression(aggregations["alignment_period"]) == _code("local.alert_window")
    assert (aggregations["per_series_aligner"], aggregations["cross_series_reducer"]) == ("ALIGN_SUM", "REDUCE_SUM")
    assert _expression(content["threshold_value"]) == _code("var.alert_error_count - 1")
    assert content["comparison"] == "COMPARISON_GT"
    assert LOCALS["alert_window"] == "${var.alert_window_minutes * 60}s"
    assert VARIABLES["alert_error_count"]["default"] > 1
    for name in COUNT_ALERTS:
        assert ALERTS[name]["promql"] is None and ALERTS[name]["threshold"]["filter"], name


def test_cloud_runs_own_answers_are_watched() -> None:
    """429, 413 and 5xx (timeouts included) never reach the function's log: Cloud Run's request metrics see them."""
    refused = _expression(ALERTS["cloud_run_refused"]["threshold"]["filter"])
    failed = _expression(ALERTS["cloud_run_failed"]["threshold"]["filter"])
    for filter_ in (refused, failed):
        assert _code('metric.type="run.googleapis.com/request_count"') in filter_
        assert filter_.startswith(_code("${local.cloud_run_filter}"))
    assert (
        _code(
            'metric.label.response_code_class="4xx" AND NOT '
            'metric.label.response_code=one_of(${local.cloud_run_refused_codes})'
        )
        in refused
    )
    assert _code('metric.label.response_code_class="5xx"') in failed
    assert "429" in ALERTS["cloud_run_refused"]["runbook"] and "504" in ALERTS["cloud_run_failed"]["runbook"]
    rejected = _expression(ALERTS["rejected_calls"]["threshold"]["filter"])
    assert _code('metric.label.method="POST"') in rejected and "verb_path" in rejected
    assert (
        LOCALS["cloud_run_filter"]
        == 'resource.type="cloud_run_revision" AND resource.labels.service_name="${var.function_name}"'
    )


def test_iam_refusals_of_scheduler_calls_are_an_alert_of_their_own() -> None:
    """With IAM-only invocation 401/403 leave the refused alert (probes get them); the scheduler's go to iam_refused."""
    assert _expression(LOCALS["cloud_run_refused_codes"]) == _code(
        'var.invocation == "iam" ? "\\"401\\", \\"403\\", \\"404\\"" : "\\"404\\""'
    )
    metric = RESOURCES[("google_logging_metric", "iam_refused")]
    assert _expression(metric["count"]) == _code('var.monitoring_enabled && var.invocation == "iam" ? 1 : 0')
    assert metric["filter"] == "${local.iam_refused_log_filter}"
    log_filter = _expression(LOCALS["iam_refused_log_filter"])
    for part in (
        'logName=\\"projects/${var.project_id}/logs/run.googleapis.com%2Frequests\\"',
        "httpRequest.status=(401 OR 403)",
        'httpRequest.requestMethod=\\"POST\\"',
        'httpRequest.requestUrl=~\\"${local.verb_path_regex}\\"',
    ):
        assert _code(part) in log_filter, part
    assert _code("/${var.function_name}/iam_refused") in _expression(ALERTS["iam_refused"]["threshold"]["filter"])
    runbook = ALERTS["iam_refused"]["runbook"]
    for check in ("roles/run.invoker", "iam.gke.io/gcp-service-account", "roles/iam.workloadIdentityUser", "audience"):
        assert check in runbook, check
    # The regex the log filter and the label extractors share matches what the proxy forwards, and not a probe.
    regex = LOCALS["verb_path_regex"]
    assert re.search(regex, "https://scheduler-extender-x7k2p9q4ra-uc.a.run.app/gpu/filter")
    assert not re.search(regex, "https://scheduler-extender-x7k2p9q4ra-uc.a.run.app/wp-login.php")


@pytest.mark.parametrize("name", ["latency", "cloud_run_latency"])
def test_latency_alerts_compare_p99_with_the_timeout_over_enough_calls(name: str) -> None:
    alert = ALERTS[name]
    query = {"latency": LOCALS["latency_query"], "cloud_run_latency": LOCALS["cloud_run_latency_query"]}[name]
    assert _expression(alert["promql"]) == _code(f"local.{name}_query")
    assert _code("histogram_quantile(0.99,") in _code(query)
    assert _code("> ${local.latency_threshold_ms}") in _code(query)
    assert _code(">= ${var.alert_latency_min_requests}") in _code(query)
    assert _expression(PROMQL["for_each"]) == _code("each.value.promql == null ? [] : [each.value.promql]")
    assert _expression(_block(PROMQL, "content")["duration"]) == _code("local.alert_window")
    assert _expression(LOCALS["latency_threshold_ms"]) == _code(
        "module.scheduler_config.http_timeout_ms * var.alert_latency_ratio"
    )
    metric = "run_googleapis_com:request_latencies" if name == "cloud_run_latency" else "${local.promql_latency}"
    assert f"{metric}_bucket" in query and f"{metric}_count" in query
    assert _expression(LOCALS["promql_latency"]) == _code(
        'logging_googleapis_com:user_${replace(var.function_name, "-", "_")}_latency'
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_examples_call_the_module_with_its_variables(example: Path) -> None:
    call = named(load_module(example)["module"])["extender"]
    assert call["source"] == "../.."
    required = {name for name, body in VARIABLES.items() if "default" not in body}
    assert required <= set(call), f"missing required inputs: {required - set(call)}"
    assert set(call) - {"source"} <= set(VARIABLES), f"unknown inputs: {set(call) - {'source'} - set(VARIABLES)}"


EXAMPLE_POLICIES = sorted((ROOT_MODULE / "examples").glob("*/policy*.yaml"))


@pytest.mark.parametrize(
    "policy", EXAMPLE_POLICIES, ids=[f"{path.parent.name}/{path.name}" for path in EXAMPLE_POLICIES]
)
def test_example_policy_is_valid(policy: Path) -> None:
    # As deployed: the module sets GOOGLE_CLOUD_PROJECT, which NodeLoad's gke preset reads.
    load_policy(policy, Settings(project="example-project"))
