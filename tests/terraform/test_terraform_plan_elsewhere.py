"""terraform/README.md's "CI pipelines": `terraform plan -out` in one checkout, `terraform apply` of that saved plan in
another checkout at another path, after the first is gone. Run for real on what needs no downloaded provider (the
pre-flight and modules/scheduler-config); the root module and the examples, which need the google provider, are
checked statically for what would tie a plan to the machine that made it."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import zipfile
from pathlib import Path

from tests.terraform.support import REPO, ROOT_MODULE, checkout, load_hcl, load_module, named, tf
from tests.terraform.test_terraform_preflight import readme_example

STAND_IN_TOKEN = "PreflightStandInForTheCallerTokenTerraformMakes00"
CI_SECTION = "\n## CI pipelines: plan on one machine, apply on another\n"


def plan_here_apply_there(
    terraform: str, env: dict[str, str], tmp_path: Path, module: str, *plan_args: str, prepare: object = None
) -> tuple[Path, str]:
    """Plans ``module`` (a directory under the checkout) in checkout ``plan``, deletes it, applies the saved plan in
    a fresh checkout ``apply``: (the apply checkout's module directory, apply's output)."""
    planned = checkout(tmp_path / "plan")
    if callable(prepare):
        prepare(planned)
    tf(terraform, env, planned / module, "init", "-input=false")
    plan_file = tmp_path / "tfplan"
    tf(terraform, env, planned / module, "plan", "-input=false", f"-out={plan_file}", *plan_args)
    shutil.rmtree(planned)
    applying = checkout(tmp_path / "apply")
    if callable(prepare):
        prepare(applying)
    tf(terraform, env, applying / module, "init", "-input=false")
    assert not (applying / module / ".terraform.lock.hcl").exists(), "no provider, so nothing to lock"
    applied = tf(terraform, env, applying / module, "apply", "-input=false", str(plan_file), check=False)
    return applying / module, applied


def write_readme_example(root: Path) -> None:
    tfvars, policy = readme_example()
    assert 'policy_file        = "../my-policy.yaml"' in tfvars, "the README's tfvars name the policy relatively"
    (root / "terraform" / "terraform.tfvars").write_text(tfvars)
    (root / "my-policy.yaml").write_text(policy)


def test_a_saved_pre_flight_plan_applies_in_another_checkout(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path
) -> None:
    module, applied = plan_here_apply_there(
        terraform, terraform_env, tmp_path, "terraform/preflight", "-var-file=../terraform.tfvars",
        prepare=write_readme_example,
    )
    assert "Apply complete!" in applied, applied
    rendered = tf(terraform, terraform_env, module, "output", "-raw", "kube_scheduler_configuration")
    assert f"https://scheduler-extender-preflight.a.run.app/{STAND_IN_TOKEN}" in rendered


def test_an_absolute_policy_file_ties_the_plan_to_its_machine(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path
) -> None:
    """Why the README asks for a relative policy_file: the apply reads the file again, at the path the plan saved."""
    absolute = f"-var=policy_file={tmp_path / 'plan' / 'my-policy.yaml'}"
    _, applied = plan_here_apply_there(
        terraform, terraform_env, tmp_path, "terraform/preflight", "-var-file=../terraform.tfvars", absolute,
        prepare=write_readme_example,
    )
    assert "Apply complete!" not in applied
    assert "policy_file" in applied and "cannot be read" in " ".join(re.sub(r"[│╷╵]", " ", applied).split())


def test_a_saved_plan_with_public_invocation_holds_the_caller_token(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path
) -> None:
    """What the README's "the saved plan is a secret" is about: the token is in the plan file in clear."""
    root = checkout(tmp_path / "plan")
    write_readme_example(root)
    module = root / "terraform" / "preflight"
    tf(terraform, terraform_env, module, "init", "-input=false")
    tf(terraform, terraform_env, module, "plan", "-input=false", "-out=tfplan", "-var-file=../terraform.tfvars")
    with zipfile.ZipFile(module / "tfplan") as plan:
        assert any(STAND_IN_TOKEN.encode() in plan.read(name) for name in plan.namelist())


def test_a_saved_scheduler_config_plan_applies_in_another_checkout(
    terraform: str, terraform_env: dict[str, str], tmp_path: Path
) -> None:
    def caller(root: Path) -> None:
        config = {
            "module": {
                "scheduler_config": {
                    "source": "./terraform/modules/scheduler-config",
                    "url": "https://scheduler-extender-x7k2p9q4ra-uc.a.run.app",
                    "kubernetes_version": "1.33.5-gke.1200",
                    "scheduler_image_repository": "us-central1-docker.pkg.dev/acme/registry-k8s-io/kube-scheduler",
                }
            },
            "output": {"manifests": {"value": "${module.scheduler_config.kubernetes_manifests}", "sensitive": True}},
        }
        (root / "main.tf.json").write_text(json.dumps(config))

    module, applied = plan_here_apply_there(terraform, terraform_env, tmp_path, ".", prepare=caller)
    assert "Apply complete!" in applied, applied
    manifests = tf(terraform, terraform_env, module, "output", "-raw", "manifests")
    assert '"image": "us-central1-docker.pkg.dev/acme/registry-k8s-io/kube-scheduler:v1.33.5"' in manifests


# --- Static: the modules that need the google provider -------------------------------------------------------------


def test_the_lock_file_is_not_ignored() -> None:
    """A lock file committed once is what makes the plan and apply jobs resolve the same providers."""
    patterns = [
        line.strip() for line in (REPO / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in ("terraform/.terraform.lock.hcl", "terraform/examples/gke-private/.terraform.lock.hcl"):
        ignored = [p for p in patterns if any(fnmatch.fnmatch(part, p.strip("/")) for part in path.split("/"))]
        assert not ignored, f"{path} is ignored by {ignored}"


def test_no_module_reads_a_path_only_the_planning_machine_has() -> None:
    """abspath() and path.cwd put the planning runner's directory into the plan; the policy file is read through
    local.policy_path (relative to policy_directory) everywhere, never straight from the variable."""
    for path in ROOT_MODULE.rglob("*.tf"):
        text = path.read_text()
        assert not re.search(r"\babspath\(|\bpath\.cwd\b", text), path
        assert not re.search(r"\bfile(sha256)?\(var\.policy_file\)", text), path
    main = (ROOT_MODULE / "main.tf").read_text()
    assert re.search(r"filesha256\(local\.policy_path\)", main) and "[local.policy_path]" in main


def test_the_examples_name_their_policy_relatively() -> None:
    for example in sorted((ROOT_MODULE / "examples").iterdir()):
        if not example.is_dir():
            continue
        module = named(load_module(example)["module"])["extender"]
        policy = module.get("policy_file")
        # Either a file of the example's own, or the caller's path passed through: the root module reads a relative
        # policy_file against path.root, the example's directory, wherever the checkout lies.
        if policy is not None and policy != "${var.policy_file}":
            assert "${path.module}/" in policy and not policy.startswith("/"), (example.name, policy)


def test_the_backend_example_keeps_state_in_gcs() -> None:
    [terraform_block] = load_hcl(ROOT_MODULE / "examples" / "backend.tf.example")["terraform"]
    [backend] = terraform_block["backend"]
    assert set(backend) == {"gcs"}
    assert {"bucket", "prefix"} <= set(backend["gcs"])


def test_the_ci_section_says_what_a_pipeline_needs() -> None:
    section = (ROOT_MODULE / "README.md").read_text().split(CI_SECTION, 1)[1].split("\n## ", 1)[0]
    for needed in (
        ".terraform.lock.hcl",
        "terraform providers lock",
        "examples/backend.tf.example",
        "-backend-config",
        "policy_file",
        "secret",
        "CMEK",
    ):
        assert needed in section, needed
