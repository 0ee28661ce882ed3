"""What kube-scheduler checks when it builds its extenders (pkg/scheduler/scheduler.go buildExtenders, extender.go
NewHTTPExtender): each extender's TLS material loads, and a managed resource ``ignoredByScheduler`` can be handed to
NodeResourcesFit's args in every profile, which a profile that disables the plugin (and so has no args for it)
cannot take: ``couldn't build extenders: can't find NodeResourcesFitArgs in plugin config``.
"""

from __future__ import annotations

from typing import Any

from extender.cli.scheduler_config import tls
from extender.cli.scheduler_config.findings import Finding, note, refused

_PREFIX = "couldn't build extenders: "


def build_extenders(config: dict[str, Any]) -> list[Finding]:
    findings = []
    ignored = []
    for index, extender in enumerate(config["extenders"]):
        path = f"extenders[{index}]"
        checked = tls.check(f"{path}.tlsConfig", extender["tlsConfig"], extender["enableHTTPS"])
        findings += [refused(where, _PREFIX + message) for where, message in checked.errors]
        findings += [note(where, message) for where, message in checked.notes]
        ignored += [resource["name"] for resource in extender["managedResources"] if resource["ignoredByScheduler"]]
    if ignored:
        for index, profile in enumerate(config["profiles"]):
            if not any(entry["name"] == "NodeResourcesFit" for entry in profile["pluginConfig"]):
                findings.append(
                    refused(
                        f"profiles[{index}]",
                        f"{_PREFIX}can't find NodeResourcesFitArgs in plugin config: managedResources "
                        f"ignoredByScheduler ({', '.join(ignored)}) need NodeResourcesFit, which profile "
                        f"{profile['schedulerName']!r} disables",
                    )
                )
    return findings
