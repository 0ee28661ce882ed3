"""Terraform provider schemas, read from the jsii assemblies that the cdktn-provider-* packages on PyPI carry.

The providers themselves cannot be downloaded here, but each cdktn-provider-<name> wheel holds, as jsii type
information, every resource and data source of one provider version: its configuration struct (arguments and
nested blocks, required or optional, each documented with its Terraform name) and its class (every attribute that
can be referenced, computed ones included). Only the wheel is downloaded and read; nothing is installed or run.
"""

from __future__ import annotations

import json
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.terraform.support import BLOCK_MARKER

META_ARGUMENTS = {"count", "for_each", "depends_on", "lifecycle", "provider", "provisioner", "connection"}
_DOC_LINK = re.compile(r"docs/(resources|data-sources)/\S+ (\w+)\}")
_ARGUMENT_LINK = re.compile(r"#(\w+) ")
_REFERENCE = re.compile(
    r"\b(data\.)?((?:google|random|archive|time)_[a-z0-9_]+)\.([a-z0-9_]+)((?:\[[^\]]*\]|\.[a-z_][a-z0-9_]*)*)"
)


@dataclass(frozen=True)
class Argument:
    required: bool
    # The struct of a nested block; None for an attribute.
    block: str | None


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class ProviderSchema:
    def __init__(self, assemblies: list[dict[str, Any]]) -> None:
        self.types: dict[str, Any] = {fqn: spec for assembly in assemblies for fqn, spec in assembly["types"].items()}
        self.classes: dict[tuple[str, str], str] = {}
        for fqn, spec in self.types.items():
            match = _DOC_LINK.search(spec.get("docs", {}).get("summary", "")) if spec.get("kind") == "class" else None
            if match:
                kind = "resource" if match.group(1) == "resources" else "data"
                self.classes[(kind, match.group(2).removeprefix("data_") if kind == "data" else match.group(2))] = fqn

    @classmethod
    def from_wheels(cls, wheels: list[Path]) -> ProviderSchema:
        assemblies = []
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                [name] = [name for name in archive.namelist() if name.endswith(".jsii.tgz")]
                with archive.open(name) as packed, tarfile.open(fileobj=packed) as tar:
                    member = tar.extractfile("package/.jsii")
                    assert member is not None
                    assemblies.append(json.load(member))
        return cls(assemblies)

    def arguments(self, struct: str) -> dict[str, Argument]:
        """{terraform name: Argument} of a configuration struct (a resource's config or a nested block)."""
        found: dict[str, Argument] = {}
        for prop in self.types[struct].get("properties", []):
            link = _ARGUMENT_LINK.search(prop["docs"].get("remarks", ""))
            name = link.group(1) if link else _snake(prop["name"])
            found[name] = Argument(required=not prop.get("optional", False), block=self._block_struct(prop["type"]))
        return found

    def config(self, kind: str, name: str) -> str:
        initializer = self.types[self.classes[(kind, name)]]["initializer"]
        [config] = [parameter for parameter in initializer["parameters"] if parameter["name"] == "config"]
        return config["type"]["fqn"]

    def _block_struct(self, spec: dict[str, Any]) -> str | None:
        candidates = spec["union"]["types"] if "union" in spec else [spec]
        for candidate in candidates:
            if "collection" in candidate and candidate["collection"]["kind"] == "array":
                candidate = candidate["collection"]["elementtype"]
            fqn = candidate.get("fqn")
            if fqn in self.types and self.types[fqn].get("datatype"):
                return fqn
        return None

    def check_block(self, struct: str, body: dict[str, Any], path: str) -> list[str]:
        """Problems of one resource or nested block body (python-hcl2 with block markers) against its struct."""
        problems: list[str] = []
        arguments = self.arguments(struct)
        present: set[str] = set()
        for key, value in body.items():
            if key == BLOCK_MARKER or key in META_ARGUMENTS:
                continue
            blocks = (
                [(name, dynamic["content"]) for entry in value for name, dynamic in entry.items()]
                if key == "dynamic"
                else [(key, value)]
            )
            for name, content in blocks:
                present.add(name)
                argument = arguments.get(name)
                if argument is None:
                    problems.append(f"{path}.{name}: no such argument or block")
                elif argument.block is None and _is_block(content):
                    problems.append(f"{path}.{name}: is an attribute, written as a block")
                elif argument.block is not None:
                    if not _is_block(content):
                        problems.append(f"{path}.{name}: is a block, assigned as an attribute")
                        continue
                    for index, nested in enumerate(content):
                        problems.extend(self.check_block(argument.block, nested, f"{path}.{name}[{index}]"))
        problems.extend(
            f"{path}.{name}: required, missing"
            for name, argument in arguments.items()
            if argument.required and name not in present
        )
        return problems

    def check_reference(self, reference: str) -> str | None:
        """None when ``[data.]type.name.attr...`` names attributes the resource has, else the problem."""
        match = _REFERENCE.fullmatch(reference)
        assert match is not None, reference
        kind = "data" if match.group(1) else "resource"
        key = (kind, match.group(2))
        if key not in self.classes:
            return f"{reference}: no {kind} {match.group(2)}"
        current = self.classes[key]
        steps = re.findall(r"\[[^\]]*\]|\.[a-z_][a-z0-9_]*", match.group(4))
        # An index right after the name is count/for_each's, not the schema's.
        if steps and steps[0].startswith("["):
            steps = steps[1:]
        for step in steps:
            if step.startswith("["):
                methods = {method["name"]: method for method in self.types[current].get("methods", [])}
                if "get" in methods:
                    current = methods["get"]["returns"]["type"]["fqn"]
                continue
            getters = {
                _snake(prop["name"]).removesuffix("_attribute"): prop["type"]
                for prop in self.types[current].get("properties", [])
                if not prop["name"].endswith("Input")
            }
            attribute = step[1:]
            if attribute not in getters:
                return f"{reference}: {current.rsplit('.', 1)[-1]} has no attribute {attribute}"
            current = getters[attribute].get("fqn", "")
            if current not in self.types:
                return None
        return None


def _is_block(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, dict) and item.get(BLOCK_MARKER) for item in value)
    )


def references(value: Any) -> set[str]:
    """Every ``[data.]provider_type.name.attr...`` reference inside a parsed HCL value."""
    if isinstance(value, dict):
        return {found for item in value.values() for found in references(item)}
    if isinstance(value, list):
        return {found for item in value for found in references(item)}
    if isinstance(value, str):
        return {match.group(0) for match in _REFERENCE.finditer(value)}
    return set()
