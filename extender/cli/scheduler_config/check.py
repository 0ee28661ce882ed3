"""A KubeSchedulerConfiguration judged as kube-scheduler of one version judges it, stage by stage as it starts:
decoding (``loading``), defaulting, validation (with each plugin's args), building the extenders, building each
profile's framework; then the project's stricter rules. Every stage runs, so every problem is reported at once;
what a later stage says about a field that did not decode is left out (it would only repeat the decoding error).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from extender.cli.scheduler_config import extra_rules
from extender.cli.scheduler_config.defaults import defaulted
from extender.cli.scheduler_config.extenders import build_extenders
from extender.cli.scheduler_config.findings import Finding, note, under
from extender.cli.scheduler_config.framework import build_profiles
from extender.cli.scheduler_config.loading import load
from extender.cli.scheduler_config.validation import validate
from extender.cli.scheduler_config.versions import V1, V1BETA3, Version


class Verdict(NamedTuple):
    findings: list[Finding]
    extenders: list[dict[str, Any]] | None  # as decoded (Go's zero values for fields not written); None: no file

    @property
    def refused(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.refuses]

    @property
    def accepted(self) -> bool:
        return not self.refused


def check(
    text: str, version: Version, *, allow_blind_scoring: bool = False, blind_also_in_policy: bool = False
) -> Verdict:
    loaded = load(text, version)
    if loaded.config is None:
        return Verdict(loaded.findings, None)
    config = defaulted(loaded, version)
    later = validate(config, loaded.api_version, version)
    later += build_extenders(config)
    later += build_profiles(config, version)
    later += extra_rules.check(
        config, loaded.written, loaded.broken, version, allow_blind_scoring, blind_also_in_policy
    )
    if loaded.api_version == V1BETA3:
        later.append(note("", f"{V1BETA3} is deprecated, and kube-scheduler 1.29 and later refuse it: use {V1}"))
    findings = loaded.findings + [finding for finding in later if not under(finding.path, loaded.broken)]
    return Verdict(list(dict.fromkeys(findings)), config["extenders"])
