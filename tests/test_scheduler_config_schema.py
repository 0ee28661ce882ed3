"""extender.cli.scheduler_config_schema: kube-scheduler's rules for ``extenders[]``, and the silent misconfigurations."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml
from marshmallow import ValidationError

from extender.cli.scheduler_config_schema import (
    ExtenderSchema,
    ExtendersSchema,
    extended_resource_name_errors,
)
from extender.duration import parse_go_duration
from extender.wire.errors import flatten_errors
from testkit.certs import CertificateAuthority
from tests.recordings import scenarios

URL = "https://scheduler-extender-x7k2p9q4ra-uc.a.run.app/q8ZrT2vLw5NcY7bK1mXf4HsJ9dGp3aEu"
CA = CertificateAuthority("schema test CA")
CLIENT = CA.issue_client("kube-scheduler")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def problems(document: dict[str, Any]) -> list[str]:
    try:
        ExtendersSchema().load(document)
    except ValidationError as exc:
        return flatten_errors(exc.messages)
    return []


def one(**fields: Any) -> list[str]:
    return problems({"extenders": [{"urlPrefix": URL, **fields}]})


@pytest.mark.parametrize("recording", scenarios(), ids=lambda recording: recording.id)
def test_configurations_kube_scheduler_accepted_load_and_round_trip(recording: Any) -> None:
    """Every configuration a real kube-scheduler started with (the recordings of each version) is valid, and dumps
    back unchanged."""
    extenders = {"extenders": yaml.safe_load(recording.config_path.read_text())["extenders"]}
    schema = ExtendersSchema()
    assert schema.dump(schema.load(extenders)) == extenders


def test_complete_entry_round_trips() -> None:
    entry = {
        "urlPrefix": URL, "filterVerb": "filter", "prioritizeVerb": "prioritize", "preemptVerb": "preempt", "bindVerb": "bind",
        "weight": 5, "enableHTTPS": True, "httpTimeout": "1m30.5s", "nodeCacheCapable": True, "ignorable": False,
        "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
        "tlsConfig": {"serverName": "extender.example.com", "caData": _b64(CA.cert_pem), "certData": _b64(CLIENT.cert_pem),
                      "keyData": _b64(CLIENT.key_pem)},
    }
    assert ExtenderSchema().dump(ExtenderSchema().load(entry)) == entry


def test_null_reads_as_missing() -> None:
    assert one(filterVerb=None, tlsConfig=None, managedResources=None, weight=None) == []


# --- kube-scheduler's start-up validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [0, -2])
def test_weight_must_be_positive_with_prioritize(weight: int) -> None:
    assert one(prioritizeVerb="prioritize", weight=weight) == [
        f"extenders[0].weight: Invalid value: {weight}: must have a positive weight applied to it"
    ]


def test_weight_is_free_without_prioritize() -> None:
    assert one(filterVerb="filter", weight=0) == []


def test_only_one_extender_binds() -> None:
    assert problems({"extenders": [{"urlPrefix": URL, "bindVerb": "bind"}, {"urlPrefix": "http://127.0.0.1:8888", "bindVerb": "bind"}]}) == [
        'extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind'
    ]


@pytest.mark.parametrize(
    "name",
    ["gpu", "kubernetes.io/gpu", "nvidia.kubernetes.io/gpu", "requests.example.com/gpu", "Example.com/gpu", "example.com/", "a/b/c",
     "example.com/" + "g" * 64, "example.com/-gpu"],
)
def test_managed_resource_names_need_a_domain_and_no_kubernetes_io(name: str) -> None:
    assert extended_resource_name_errors(name)
    [message] = one(managedResources=[{"name": name}])[:1]
    assert message.startswith(f"extenders[0].managedResources[0].name: Invalid value: {json.dumps(name)}: ")


@pytest.mark.parametrize("name", ["example.com/gpu", "nvidia.com/gpu", "acme.io/licence.seat", "a.b/C_d-1"])
def test_valid_managed_resource_names(name: str) -> None:
    assert extended_resource_name_errors(name) == []


def test_managed_resource_names_are_unique_across_extenders() -> None:
    document = {"extenders": [
        {"urlPrefix": URL, "managedResources": [{"name": "example.com/gpu"}]},
        {"urlPrefix": "http://127.0.0.1:8888", "managedResources": [{"name": "example.com/tpu"}, {"name": "example.com/gpu"}]},
    ]}
    assert problems(document) == [
        'extenders[1].managedResources[1].name: Invalid value: "example.com/gpu": duplicate extender managed resource name'
    ]
    assert one(managedResources=[{"name": "example.com/gpu"}, {"name": "example.com/gpu"}]) == [
        'extenders[0].managedResources[1].name: Invalid value: "example.com/gpu": duplicate extender managed resource name'
    ]


def test_unknown_fields_stop_the_scheduler() -> None:
    assert one(nodeCacheCapabel=True) == ["extenders[0].nodeCacheCapabel: Unknown field."]
    assert one(tlsConfig={"caDat": _b64(CA.cert_pem)}) == ["extenders[0].tlsConfig.caDat: Unknown field."]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"httpTimeout": 5}, "extenders[0].httpTimeout: json: cannot unmarshal number into Go struct field Extender.extenders.httpTimeout of type string"),
        ({"httpTimeout": "5"}, 'extenders[0].httpTimeout: time: invalid duration "5" (e.g. "5s", "1500ms", "1m30s")'),
        ({"httpTimeout": "5sec"}, 'extenders[0].httpTimeout: time: invalid duration "5sec" (e.g. "5s", "1500ms", "1m30s")'),
        ({"weight": 1.5}, "extenders[0].weight: json: cannot unmarshal number 1.5 into Go struct field Extender.extenders.weight of type int64"),
        ({"weight": True}, "extenders[0].weight: json: cannot unmarshal bool into Go struct field Extender.extenders.weight of type int64"),
        ({"weight": "1"}, "extenders[0].weight: json: cannot unmarshal string into Go struct field Extender.extenders.weight of type int64"),
        ({"ignorable": "true"}, "extenders[0].ignorable: json: cannot unmarshal string into Go struct field Extender.extenders.ignorable of type bool"),
        ({"nodeCacheCapable": 1}, "extenders[0].nodeCacheCapable: json: cannot unmarshal number into Go struct field Extender.extenders.nodeCacheCapable of type bool"),
        ({"filterVerb": 1}, "extenders[0].filterVerb: json: cannot unmarshal number into Go struct field Extender.extenders.filterVerb of type string"),
        ({"tlsConfig": {"insecure": "yes"}}, "extenders[0].tlsConfig.insecure: json: cannot unmarshal string into Go struct field ExtenderTLSConfig.extenders.tlsConfig.insecure of type bool"),
        ({"managedResources": [{"name": 1}]}, "extenders[0].managedResources[0].name: json: cannot unmarshal number into Go struct field ExtenderManagedResource.extenders.managedResources.name of type string"),
    ],
)
def test_types_are_go_types(fields: dict[str, Any], expected: str) -> None:
    assert one(**fields) == [expected]


def test_integral_float_weight_is_an_integer() -> None:
    """YAML configurations pass through JSON, where 2.0 and 2 are the same number."""
    assert ExtenderSchema().load({"urlPrefix": URL, "prioritizeVerb": "prioritize", "weight": 2.0})["weight"] == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5.0), ("1500ms", 1.5), ("1m30.5s", 90.5), (".5s", 0.5), ("1h", 3600.0), ("2us", 2e-6), ("0", 0.0), ("-1.5s", -1.5), ("+3s", 3.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "s", "5 s", "1d", "--5s", "5s5", ""])
def test_invalid_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


@pytest.mark.parametrize("timeout", ["0s", "0", "-5s"])
def test_timeout_must_be_positive(timeout: str) -> None:
    assert one(httpTimeout=timeout) == [
        "extenders[0].httpTimeout: must be positive: kube-scheduler turns 0 into 5s and a negative timeout disables it"
    ]


# --- TLS: *Data fields and verification --------------------------------------------------------------------------------


def test_data_fields_are_base64_of_pem() -> None:
    assert one(tlsConfig={"caData": CA.cert_pem.decode()}) == [
        "extenders[0].tlsConfig.caData: illegal base64 data at input byte 0: the *Data fields hold base64 of the PEM file, e.g. base64 -w0 ca.pem"
    ]
    assert one(tlsConfig={"caData": _b64(b"not a certificate")}) == [
        "extenders[0].tlsConfig.caData: unable to parse bytes as PEM block: expected base64 of a PEM certificate"
    ]
    assert one(tlsConfig={"certData": _b64(CLIENT.key_pem), "keyData": _b64(CLIENT.key_pem)}) == [
        "extenders[0].tlsConfig.certData: unable to parse bytes as PEM block: expected base64 of a PEM certificate"
    ]
    assert one(tlsConfig={"certData": _b64(CLIENT.cert_pem), "keyData": _b64(CLIENT.cert_pem)}) == [
        "extenders[0].tlsConfig.keyData: unable to parse bytes as PEM block: expected base64 of a PEM private key"
    ]


@pytest.mark.parametrize(("data", "offset"), [("-----BEGIN", 0), ("QUJD RA==", 4), ("QUJDRA", 4), ("QUJ", 0), ("QU\nJD!", 5)])
def test_bad_base64_names_the_byte_like_go(data: str, offset: int) -> None:
    (line,) = one(tlsConfig={"caData": data})
    assert line.startswith(f"extenders[0].tlsConfig.caData: illegal base64 data at input byte {offset}: ")


def test_data_fields_may_be_wrapped_like_base64_tools_wrap() -> None:
    wrapped = base64.encodebytes(CA.cert_pem).decode()
    assert "\n" in wrapped.strip()
    assert one(tlsConfig={"caData": wrapped}, enableHTTPS=True) == []


def test_enable_https_without_ca_is_rejected_unless_insecure_is_explicit() -> None:
    [message] = one(enableHTTPS=True)
    assert message.startswith("extenders[0].enableHTTPS: enableHTTPS without tlsConfig.caData or caFile turns certificate verification off")
    assert one(enableHTTPS=True, tlsConfig={"serverName": "extender.example.com"})
    assert one(enableHTTPS=True, tlsConfig={"insecure": True}) == []
    assert one(enableHTTPS=True, tlsConfig={"caData": _b64(CA.cert_pem)}) == []
    assert one(enableHTTPS=True, tlsConfig={"caFile": "/etc/kubernetes/pki/extender-ca.pem"}) == []
    # An https URL without enableHTTPS is verified against the system roots.
    assert one(enableHTTPS=False) == []


def test_insecure_with_a_ca_is_refused() -> None:
    assert one(tlsConfig={"insecure": True, "caData": _b64(CA.cert_pem)}) == [
        "extenders[0].tlsConfig.insecure: specifying a root certificates file with the insecure flag is not allowed"
    ]


def test_client_certificate_needs_its_key() -> None:
    [message] = one(tlsConfig={"certData": _b64(CLIENT.cert_pem)})
    assert message.startswith("extenders[0].tlsConfig: a client certificate needs both certificate and key: keyData/keyFile is missing")
    assert one(tlsConfig={"certFile": "/etc/ssl/client.pem", "keyFile": "/etc/ssl/client.key"}) == []


def test_data_and_file_of_one_item_are_ambiguous() -> None:
    assert one(tlsConfig={"caData": _b64(CA.cert_pem), "caFile": "/etc/ssl/ca.pem"}) == [
        "extenders[0].tlsConfig.caFile: set caData or caFile, not both: caData silently wins"
    ]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://extender.example.com/x?token=abc", 'must not have a query string or fragment: the scheduler appends "/<verb>" verbatim'),
        ("https://extender.example.com/#x", 'must not have a query string or fragment: the scheduler appends "/<verb>" verbatim'),
        ("extender.example.com", "must be an http:// or https:// URL: kube-scheduler accepts it, but every call fails"),
        ("ftp://extender.example.com", "must be an http:// or https:// URL: kube-scheduler accepts it, but every call fails"),
    ],
)
def test_url_prefix(url: str, message: str) -> None:
    assert problems({"extenders": [{"urlPrefix": url}]}) == [f"extenders[0].urlPrefix: {message}"]


def test_url_prefix_is_required() -> None:
    assert problems({"extenders": [{"filterVerb": "filter"}]}) == ["extenders[0].urlPrefix: Missing data for required field."]
