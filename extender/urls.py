"""Checks for the URLs we send credentials to (the Kubernetes API, the proxied function)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from extender.errors import ConfigError


def credential_base_url(url: str, *, what: str, example: str, credential: str | None) -> str:
    """``url`` without a trailing slash, for appending paths; plain http only to loopback, where no one can listen.

    ``credential`` says what would cross the network in clear text, for the message; None when nothing secret is
    sent, and plain http may go anywhere. The URL itself is never echoed: a function URL may carry the caller token
    in its path.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"{what} must be an https:// URL such as {example}")
    if parts.query or parts.fragment:
        raise ConfigError(f"{what} must not have a query or fragment: paths are appended to it")
    if parts.username is not None or parts.password is not None:
        # Credentials in a URL end up in error messages, and from there in pod events and logs.
        raise ConfigError(f"{what} must not carry a user or password (user:password@): pass credentials separately")
    if parts.scheme == "http" and credential is not None and not is_loopback(parts.hostname):
        raise ConfigError(f"{what} must use https: {credential} would cross the network in clear text")
    return url.rstrip("/")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def failure_cause(exc: BaseException) -> str:
    """Why a call failed (refused, TLS verification, name resolution), without urllib3's wrappers.

    The wrappers' text names the URL, path included, which may carry a token: the innermost reason does not.
    """
    reason: object = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
    reason = getattr(reason, "reason", None) or reason  # urllib3's MaxRetryError wraps the real one
    while isinstance(reason, Exception) and reason.args and isinstance(reason.args[0], BaseException):
        reason = reason.args[0]
    text = str(reason)
    # NewConnectionError reads "<HTTPSConnection object at 0x..>: Failed to establish a new connection: ...".
    return text.split(">: ", 1)[1] if text.startswith("<") and ">: " in text else text
