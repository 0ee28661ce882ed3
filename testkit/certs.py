"""Real X.509 certificates for tests, generated with ``cryptography`` at test time (never committed).

A CertificateAuthority issues server certificates (with DNS and IP subject
alternative names) and client certificates (for mutual TLS); any of them can
be made expired or not yet valid. Keys are ECDSA P-256: fast to generate.

    ca = CertificateAuthority()
    server = ca.issue_server("localhost", "127.0.0.1")
    client = ca.issue_client("kube-scheduler", organization="system:kube-scheduler")
    cert_file, key_file = server.write(tmp_path, "server")
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, as PEM."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """``<name>.crt`` and ``<name>.key`` in ``directory``: the paths TLS libraries want."""
        cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
        cert_file.write_bytes(self.cert_pem)
        key_file.write_bytes(self.key_pem)
        key_file.chmod(0o600)
        return cert_file, key_file


class CertificateAuthority:
    def __init__(self, common_name: str = "extender test CA") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _now()
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 30 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, directory: Path, name: str = "ca") -> Path:
        path = directory / f"{name}.crt"
        path.write_bytes(self.cert_pem)
        return path

    def issue_server(
        self, *hosts: str, valid_from: datetime.timedelta = -_DAY, valid_for: datetime.timedelta = 30 * _DAY
    ) -> Issued:
        """A TLS server certificate for ``hosts`` (DNS names or IP addresses, as SANs); default localhost."""
        hosts = hosts or ("localhost", "127.0.0.1")
        return self.issue(
            hosts[0], sans=hosts, usage=ExtendedKeyUsageOID.SERVER_AUTH, valid_from=valid_from, valid_for=valid_for
        )

    def issue_client(
        self, common_name: str, organization: str | None = None, valid_from: datetime.timedelta = -_DAY,
        valid_for: datetime.timedelta = 30 * _DAY,
    ) -> Issued:
        """A TLS client certificate; Kubernetes reads CN as the user and O as the group."""
        return self.issue(
            common_name,
            organization=organization,
            usage=ExtendedKeyUsageOID.CLIENT_AUTH,
            valid_from=valid_from,
            valid_for=valid_for,
        )

    def issue(
        self,
        common_name: str,
        *,
        sans: tuple[str, ...] = (),
        organization: str | None = None,
        usage: x509.ObjectIdentifier = ExtendedKeyUsageOID.SERVER_AUTH,
        valid_from: datetime.timedelta = -_DAY,
        valid_for: datetime.timedelta = 30 * _DAY,
    ) -> Issued:
        """A leaf certificate valid from ``now + valid_from`` for ``valid_for`` (negative offsets are in the past)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        start = _now() + valid_from
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + valid_for)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if sans:
            names = x509.SubjectAlternativeName([_general_name(host) for host in sans])
            builder = builder.add_extension(names, critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return Issued(
            cert_pem=cert.public_bytes(serialization.Encoding.PEM),
            key_pem=key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )

    def server_context(self, issued: Issued, directory: Path, require_client_cert: bool = False) -> ssl.SSLContext:
        """A server-side SSLContext presenting ``issued``; with ``require_client_cert``, mTLS against this CA."""
        cert_file, key_file = issued.write(directory, f"server-{id(issued):x}")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cadata=self.cert_pem.decode())
        return context


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
