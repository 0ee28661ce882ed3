"""The project's own rules, beyond what kube-scheduler checks: files it starts with but whose extender cannot work
are refused (each line says ``stricter than kube-scheduler: <why>``), files whose extender works less well than it
could are warned about. docs/policy.md lists each rule with its reason.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from extender.cli.scheduler_config.findings import Finding, note, stricter, under, warning
from extender.cli.scheduler_config.versions import Version, shown

# From this minor on, nodeCacheCapable: false blinds the scheduler's resource scoring (a side effect of #130537).
BLIND_SCORING_SINCE: Version = (1, 33)
BLIND_SCORING_ISSUE = "kubernetes/kubernetes#141781"
VERBS = ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb")
# Each stricter rule by the words its line carries (docs/policy.md quotes them; a test holds the two together).
STRICTER_RULES = {
    "no-extenders": "no extenders configured",
    "url-scheme": "must be an http:// or https:// URL",
    "url-query": "must not have a query string or fragment",
    "https-without-ca": "enableHTTPS without tlsConfig.caData or caFile turns certificate verification off",
    "timeout": "an httpTimeout must be above zero",
    "blind-scoring": "scores every node this extender's filter returns as idle",
}


def check(
    config: dict[str, Any],
    written: set[str],
    broken: list[str],
    version: Version,
    allow_blind_scoring: bool,
    blind_also_in_policy: bool = False,
) -> list[Finding]:
    """The stricter rules and warnings for a defaulted configuration; ``written``: the paths the file sets,
    ``broken``: those that did not decode (an extender with one is left to its decoding error)."""
    extenders = config["extenders"]
    if not extenders:
        return [
            stricter("extenders", f"{STRICTER_RULES['no-extenders']}: kube-scheduler would never call the function")
        ]
    findings = []
    if config["clientConnection"]["kubeconfig"]:
        findings.append(
            note(
                "clientConnection.kubeconfig",
                "read on the scheduler's host as it starts, which exits if it cannot read it",
            )
        )
    for index, extender in enumerate(extenders):
        path = f"extenders[{index}]"

        def intact(*names: str, path: str = path) -> bool:
            """Whether these fields of the extender decoded: a rule reading one that did not is left out."""
            return not any(under(where, [f"{path}.{name}" for name in names]) for where in broken)

        if not intact(*VERBS):
            continue
        if not any(extender[verb] for verb in VERBS):
            findings.append(
                warning(
                    path,
                    "no verb is set (filterVerb, prioritizeVerb, preemptVerb, bindVerb): "
                    "kube-scheduler never calls this extender",
                )
            )
            continue
        if intact("urlPrefix"):
            findings += _url(path, extender["urlPrefix"])
        if intact("urlPrefix", "enableHTTPS", "tlsConfig"):
            findings += _tls(path, extender)
        if f"{path}.httpTimeout" in written and intact("httpTimeout") and extender["httpTimeout"] <= 0:
            findings.append(
                stricter(
                    f"{path}.httpTimeout",
                    f"{STRICTER_RULES['timeout']}: kube-scheduler turns 0 into "
                    "5s, and a negative timeout waits for the extender forever",
                )
            )
        if intact("filterVerb", "nodeCacheCapable") and blind_resource_scoring(version, extender):
            if allow_blind_scoring:
                findings.append(note(path, f"{blind_scoring_note(version)}, allowed"))
            else:
                findings.append(
                    stricter(f"{path}.nodeCacheCapable", blind_scoring_problem(version, blind_also_in_policy))
                )
    return findings


def _url(path: str, url: str) -> list[Finding]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [
            stricter(
                f"{path}.urlPrefix",
                f"{STRICTER_RULES['url-scheme']}: kube-scheduler starts with it, but every call fails",
            )
        ]
    if "?" in url or "#" in url:
        return [
            stricter(
                f"{path}.urlPrefix",
                f'{STRICTER_RULES["url-query"]}: kube-scheduler appends "/<verb>" '
                "verbatim, so every call misses the verb",
            )
        ]
    return []


def _tls(path: str, extender: dict[str, Any]) -> list[Finding]:
    tls = extender["tlsConfig"] or {}
    findings = []
    verified = bool(tls.get("caData") or tls.get("caFile")) or bool(tls.get("insecure"))
    if extender["enableHTTPS"] and not verified and urlsplit(extender["urlPrefix"]).scheme == "https":
        findings.append(
            stricter(
                f"{path}.enableHTTPS",
                f"{STRICTER_RULES['https-without-ca']}: give a CA, drop "
                "enableHTTPS to verify an https:// urlPrefix against the system roots, or set "
                "tlsConfig.insecure: true",
            )
        )
    if urlsplit(extender["urlPrefix"]).scheme == "http" and (extender["enableHTTPS"] or any(tls.values())):
        findings.append(
            warning(
                f"{path}.urlPrefix", "an http:// URL is called in plain HTTP: enableHTTPS and tlsConfig are not used"
            )
        )
    has_cert, has_key = bool(tls.get("certData") or tls.get("certFile")), bool(tls.get("keyData") or tls.get("keyFile"))
    if has_cert != has_key:
        missing = "keyData/keyFile" if has_cert else "certData/certFile"
        findings.append(
            warning(
                f"{path}.tlsConfig",
                f"a client certificate needs its certificate and its key: {missing} "
                "is missing, and kube-scheduler sends no client certificate",
            )
        )
    for data, file in (("caData", "caFile"), ("certData", "certFile"), ("keyData", "keyFile")):
        if tls.get(data) and tls.get(file):
            findings.append(
                warning(
                    f"{path}.tlsConfig.{file}",
                    f"both {data} and {file} are set: kube-scheduler uses {data} and never reads {file}",
                )
            )
    return findings


def blind_resource_scoring(version: Version, extender: dict[str, Any]) -> bool:
    """Whether kube-scheduler ``version`` scores the nodes this extender's filter returns as idle: it wraps each node
    of a full-node answer in a new, empty NodeInfo, so NodeResourcesFit and NodeResourcesBalancedAllocation see no
    pod on it."""
    return (
        version >= BLIND_SCORING_SINCE
        and bool(extender.get("filterVerb"))
        and extender.get("nodeCacheCapable") is not True
    )


def blind_scoring_note(version: Version) -> str:
    return (
        f"kube-scheduler {shown(version)} {STRICTER_RULES['blind-scoring']} "
        f"({BLIND_SCORING_ISSUE}, since {shown(BLIND_SCORING_SINCE)})"
    )


def blind_scoring_problem(version: Version, also_in_policy: bool = False) -> str:
    also = " here and in the policy" if also_in_policy else ""
    return (
        f"{blind_scoring_note(version)}: NodeResourcesFit and NodeResourcesBalancedAllocation see no pod on them, so a "
        f"busy node wins as often as an idle one. Set nodeCacheCapable: true{also} (the scheduler then keeps its own "
        "node data and sends node names; the policy's label plugins need a nodeSource, see docs/policy.md), or "
        "accept it with --allow-blind-resource-scoring"
    )
