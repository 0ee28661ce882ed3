"""An extender's TLS material as kube-scheduler loads it when it builds the extender (makeTransport, then
client-go's TLSConfigFor): a file that passes every other check and carries a CA missing a line, or a client
certificate and a key that are not a pair, still stops kube-scheduler: ``couldn't build extenders: ...``.

Certificates and keys are parsed with ``cryptography``, imported only here and only when there is material to
parse (the function's cold start never pays for it). Files (``caFile``, ``certFile``, ``keyFile``) live on the
scheduler's host: they are read there, not here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from extender.cli.scheduler_config import gopem


class TLSFindings(NamedTuple):
    errors: list[tuple[str, str]]  # (field path, kube-scheduler's words), each stops it
    notes: list[tuple[str, str]]  # (field path, what could not be checked here)


def check(path: str, tls: dict[str, Any] | None, enable_https: bool) -> TLSFindings:
    """What kube-scheduler's transport set-up refuses in one extender's ``tlsConfig`` (``path`` names it)."""
    if tls is None:
        return TLSFindings([], [])
    errors: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    has_ca = bool(tls["caData"] or tls["caFile"])
    has_cert_auth = bool(tls["certData"] or tls["certFile"]) and bool(tls["keyData"] or tls["keyFile"])
    insecure = tls["insecure"] or (enable_https and not has_ca)
    if not (has_ca or has_cert_auth or insecure or tls["serverName"]):
        return TLSFindings([], [])  # client-go builds no TLS configuration at all
    if has_ca and tls["insecure"]:
        message = "specifying a root certificates file with the insecure flag is not allowed"
        return TLSFindings([(f"{path}.insecure", message)], [])
    for name in ("caFile", "certFile", "keyFile"):
        data = name.replace("File", "Data")
        if tls[name] and not tls[data] and (name == "caFile" or has_cert_auth):
            notes.append(
                (f"{path}.{name}", "read on the scheduler's host as it starts, which exits if it cannot read it")
            )
    try:
        if tls["caData"]:
            problem = _root_pool_error(tls["caData"])
            if problem:
                errors.append((f"{path}.caData", f"unable to load root certificates: {problem}"))
        if has_cert_auth and tls["certData"] and tls["keyData"]:
            problem = _key_pair_error(tls["certData"], tls["keyData"])
            if problem:
                errors.append((f"{path}.keyData", problem))
    except ImportError:
        notes.append((path, "certificates and keys not checked: the cryptography package is not installed"))
    return TLSFindings(errors, notes)


def _root_pool_error(ca_data: bytes) -> str | None:
    """x509.CertPool.AppendCertsFromPEM, and client-go's account of why it found nothing (createErrorParsingCAData)."""
    found = [block for block in gopem.blocks(ca_data) if block.type == "CERTIFICATE" and not block.headers]
    if any(_parse_certificate(block.bytes) is None for block in found):
        return None  # at least one certificate parses: the pool is not empty
    rest = ca_data
    while rest:
        block, rest = gopem.decode(rest)
        if block is None:
            return "unable to parse bytes as PEM block"
        if block.type != "CERTIFICATE" or block.headers:
            continue
        problem = _parse_certificate(block.bytes)
        if problem is not None:
            return f"failed to parse certificate: {problem}"
    return "no valid certificate authority data seen"


def _parse_certificate(der: bytes) -> str | None:
    """None when x509.ParseCertificate would accept ``der``, else its error (Go's words for a malformed one)."""
    from cryptography import x509

    try:
        certificate = x509.load_der_x509_certificate(der)
        certificate.extensions  # noqa: B018 - parsed lazily: Go parses them with the certificate
    except ValueError:
        return "x509: malformed certificate"
    return None


def _key_pair_error(cert_data: bytes, key_data: bytes) -> str | None:
    """tls.X509KeyPair's error for a client certificate and key given as data, or None when they are a pair."""
    certificates: list[gopem.Block] = []
    skipped: list[gopem.Block] = []
    for block in gopem.blocks(cert_data):
        (certificates if block.type == "CERTIFICATE" else skipped).append(block)
    if not certificates:
        if not skipped:
            return "tls: failed to find any PEM data in certificate input"
        if len(skipped) == 1 and skipped[0].type.endswith("PRIVATE KEY"):
            return (
                "tls: failed to find certificate PEM data in certificate input, but did find a private key; PEM "
                "inputs may have been switched"
            )
        types = " ".join(block.type for block in skipped)
        return (
            'tls: failed to find "CERTIFICATE" PEM block in certificate input after skipping PEM blocks of the '
            f"following types: [{types}]"
        )
    key_block, skipped_types = None, []
    for block in gopem.blocks(key_data):
        if block.type == "PRIVATE KEY" or block.type.endswith(" PRIVATE KEY"):
            key_block = block
            break
        skipped_types.append(block.type)
    if key_block is None:
        if not skipped_types:
            return "tls: failed to find any PEM data in key input"
        if skipped_types == ["CERTIFICATE"]:
            return "tls: found a certificate rather than a key in the PEM for the private key"
        return (
            'tls: failed to find PEM block with type ending in "PRIVATE KEY" in key input after skipping PEM blocks '
            f"of the following types: [{' '.join(skipped_types)}]"
        )
    problem = _parse_certificate(certificates[0].bytes)
    if problem is not None:
        return problem
    return _pair_mismatch(certificates[0].bytes, key_block.bytes)


def _pair_mismatch(cert_der: bytes, key_der: bytes) -> str | None:
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    try:
        key = serialization.load_der_private_key(key_der, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return "tls: failed to parse private key"
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)):
        return "tls: found unknown private key type in PKCS#8 wrapping"
    try:
        public = x509.load_der_x509_certificate(cert_der).public_key()
    except (ValueError, UnsupportedAlgorithm):
        return "tls: unknown public key algorithm"
    pairs = (
        (rsa.RSAPublicKey, rsa.RSAPrivateKey),
        (ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey),
        (ed25519.Ed25519PublicKey, ed25519.Ed25519PrivateKey),
    )
    for public_type, private_type in pairs:
        if isinstance(public, public_type):
            if not isinstance(key, private_type):
                return "tls: private key type does not match public key type"
            raw = serialization.PublicFormat.SubjectPublicKeyInfo
            same = public.public_bytes(serialization.Encoding.DER, raw) == key.public_key().public_bytes(
                serialization.Encoding.DER, raw
            )
            return None if same else "tls: private key does not match public key"
    return "tls: unknown public key algorithm"
