"""Where the Kubernetes API server is and how to trust and authenticate to it, from the environment.

Terraform sets these variables; the token and CA usually come from Secret
Manager, as a value (``KUBERNETES_TOKEN``, ``KUBERNETES_CA_DATA``) or as a
mounted file (``KUBERNETES_TOKEN_FILE``, ``KUBERNETES_CA_FILE``). Every
problem is reported at start-up, never on the first scheduling request.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from extender.errors import ConfigError
from extender.kube.variables import API_URL_ENV, CA_DATA_ENV, CA_FILE_ENV, CREDENTIAL_ENVS, TOKEN_ENV, TOKEN_FILE_ENV
from extender.urls import credential_base_url

_PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"


class KubeConfig(NamedTuple):
    # Scheme, host, port and an optional path prefix, without a trailing "/".
    url: str
    token: str | None = None
    token_file: Path | None = None
    # PEM bundle to verify the API server with; neither means the system roots.
    ca_pem: bytes | None = None
    ca_file: Path | None = None

    def __repr__(self) -> str:
        """Without the token and the CA bundle: a repr can end up in a log line."""
        return f"KubeConfig(url={self.url!r}, token_file={self.token_file!r}, ca_file={self.ca_file!r})"

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> KubeConfig | None:
        """None when ``KUBERNETES_API_URL`` is unset; ConfigError naming the variable for anything wrong."""
        url = environ.get(API_URL_ENV, "").strip()
        if not url:
            stray = [name for name in CREDENTIAL_ENVS if environ.get(name)]
            if stray:
                raise ConfigError(f"{', '.join(stray)} set without {API_URL_ENV}: set the API server URL too")
            return None
        _exclusive(environ, TOKEN_ENV, TOKEN_FILE_ENV, "token")
        _exclusive(environ, CA_DATA_ENV, CA_FILE_ENV, "CA bundle")
        ca_file = _readable(environ, CA_FILE_ENV)
        if ca_file is not None and _PEM_CERTIFICATE not in ca_file.read_bytes():
            raise ConfigError(f"{CA_FILE_ENV}: {ca_file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        config = cls(
            url=_api_url(url),
            # Secret Manager values often end in a newline; whitespace is never part of a token.
            token=environ.get(TOKEN_ENV, "").strip() or None,
            token_file=_readable(environ, TOKEN_FILE_ENV),
            ca_pem=_ca_data(environ.get(CA_DATA_ENV, "")),
            ca_file=ca_file,
        )
        if config.token_file is not None and not config.bearer_token():
            raise ConfigError(f"{TOKEN_FILE_ENV}: {config.token_file} is empty")
        return config

    def bearer_token(self) -> str | None:
        """Read on every call: a mounted secret may be rotated while the instance runs."""
        if self.token_file is not None:
            try:
                return self.token_file.read_text(encoding="utf-8").strip() or None
            except OSError:
                return None
        return self.token


def _api_url(url: str) -> str:
    # http is for a local ``kubectl proxy`` only.
    return credential_base_url(url, what=API_URL_ENV, example="https://203.0.113.10", credential="the bearer token")


def _exclusive(environ: Mapping[str, str], value_env: str, file_env: str, what: str) -> None:
    if environ.get(value_env) and environ.get(file_env):
        raise ConfigError(f"set one of {value_env} and {file_env} for the {what}, not both")


def _readable(environ: Mapping[str, str], name: str) -> Path | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    path = Path(raw)
    try:
        path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read {raw}: {exc.strerror or exc}") from None
    return path


def _ca_data(raw: str) -> bytes | None:
    """PEM, or base64 of PEM as in kubeconfig's certificate-authority-data and the scheduler's caData."""
    raw = raw.strip()
    if not raw:
        return None
    pem = raw.encode()
    if _PEM_CERTIFICATE not in pem:
        try:
            pem = base64.b64decode(pem, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{CA_DATA_ENV} must be PEM or base64 of PEM (e.g. base64 -w0 ca.pem)") from None
    if _PEM_CERTIFICATE not in pem:
        raise ConfigError(f"{CA_DATA_ENV} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    return pem
