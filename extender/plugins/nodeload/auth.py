"""NodeLoad's credentials for a Prometheus a team runs: a bearer token, basic auth, a client certificate (mutual TLS),
a CA bundle for a private certificate, and extra headers (a tenant's ``X-Scope-OrgID`` for Mimir, Cortex, Thanos).

The policy names where each secret is, never the secret itself: a file (a Secret Manager secret that Cloud Functions
mounts, or any file the process can read) or a ``PROMETHEUS_*`` variable (a secret environment variable, which
Cloud Functions resolves when the instance starts). A file is read with the first query, on a thread of its own that
the query waits for only within its deadline (a mounted secret's every read is a Secret Manager lookup), and read
again at most every ``REREAD_SECONDS``, at once after Prometheus refuses the credential (401, 403), and with every
query while it cannot be read (a missing file is read again once it is there): a secret
mounted at its ``latest`` version is rotated without a new revision. The client certificate, its key and the CA
bundle are read the same way, and a change makes a new TLS context.

No message holds a secret: errors name the field and the file or variable, never what it holds (a token with a
line break is refused without quoting it, as ``http.client`` would), and ``Credential.secrets`` lists what the
transport redacts from whatever a server answers.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from base64 import b64encode
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema
from marshmallow.validate import Length, OneOf, Regexp

from extender.background import started
from extender.framework.args import failed_fields

if TYPE_CHECKING:
    import ssl

GOOGLE, BEARER, BASIC, NONE = "google", "bearer", "basic", "none"
KINDS = (GOOGLE, BEARER, BASIC, NONE)
# The variables a policy may name for a secret: the settings read them (``Settings.prometheus``), nothing else.
SECRET_ENV_PREFIX = "PROMETHEUS_"
# A file's secret is read again after this long (a mounted secret at ``latest``: its current version).
REREAD_SECONDS = 60.0
# Largest secret file read: a token, a password, a certificate chain, a CA bundle.
MAX_SECRET_BYTES = 1024 * 1024
# What an HTTP header value may carry (RFC 9110 field-vchar and spaces between): a token with a line break would
# split the request, and http.client's own error quotes the value.
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Headers the transport or the auth fields set: a header of the policy's own would clash with them, or (Authorization,
# Cookie) write a secret into the policy.
_RESERVED_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "host", "content-length", "transfer-encoding", "connection"}
)
_ENV_NAME = Regexp(
    rf"^{SECRET_ENV_PREFIX}[A-Z0-9_]+$",
    error=f"must be a variable named {SECRET_ENV_PREFIX}..., such as {SECRET_ENV_PREFIX}TOKEN "
    "(Terraform's prometheus_secret_environment_variables sets them from Secret Manager)",
)


class QueryError(Exception):
    """The query got no usable answer; the message says why, for the refresh's WARNING (never a secret)."""


class Credential(NamedTuple):
    """The ``Authorization`` header's value, and the secrets no message may hold (the token, the password, the
    encoded credentials)."""

    header: str
    secrets: tuple[str, ...]


class PrometheusAuth:
    """Where the credentials of ``prometheus`` are (the loaded args): files and variables, never their values."""

    __slots__ = (
        "ca_file",
        "cert_file",
        "headers",
        "key_file",
        "kind",
        "password_env",
        "password_file",
        "token_env",
        "token_file",
        "username",
    )

    def __init__(
        self,
        kind: str = NONE,
        *,
        token_file: str | None = None,
        token_env: str | None = None,
        username: str | None = None,
        password_file: str | None = None,
        password_env: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.token_file = token_file
        self.token_env = token_env
        self.username = username
        self.password_file = password_file
        self.password_env = password_env
        self.ca_file = ca_file
        self.cert_file = cert_file
        self.key_file = key_file
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return f"PrometheusAuth({self.kind!r}, {self.described})"

    @property
    def described(self) -> str:
        """What the credential is and where it comes from, for messages: ``bearer token (prometheus.tokenFile
        /etc/secrets/prometheus/token)``."""
        if self.kind == BEARER:
            where = f"tokenFile {self.token_file}" if self.token_file else f"tokenEnv {self.token_env}"
            return f"the bearer token (prometheus.{where})"
        if self.kind == BASIC:
            where = f"passwordFile {self.password_file}" if self.password_file else f"passwordEnv {self.password_env}"
            return f"basic auth as {self.username!r} (prometheus.{where})"
        if self.kind == GOOGLE:
            return "the function's Google access token (prometheus.auth: google)"
        return "no credentials (prometheus.auth: none)"

    def files(self) -> list[tuple[str, str]]:
        """Each file named, with its field: ``(prometheus.tokenFile, /etc/secrets/...)``."""
        named = [
            ("prometheus.tokenFile", self.token_file),
            ("prometheus.passwordFile", self.password_file),
            ("prometheus.tls.caFile", self.ca_file),
            ("prometheus.tls.certFile", self.cert_file),
            ("prometheus.tls.keyFile", self.key_file),
        ]
        return [(field, path) for field, path in named if path]

    def variables(self) -> list[tuple[str, str]]:
        named = [("prometheus.tokenEnv", self.token_env), ("prometheus.passwordEnv", self.password_env)]
        return [(field, name) for field, name in named if name]

    def problem(self, path: str) -> str:
        """What stops this process using the file at ``path`` as the policy says ("" when nothing): missing,
        unreadable, empty, or (the CA bundle, the client certificate and its key) not loadable. Never its content."""
        found = file_problem(path)
        if found or path not in (self.ca_file, self.cert_file, self.key_file):
            return found
        if any(file_problem(other) for other in (self.ca_file, self.cert_file, self.key_file) if other):
            return ""  # the other TLS file's own problem says it
        try:
            tls_context(self)
        except QueryError as exc:
            # Said once, on the file the error names first.
            return str(exc) if str(exc).split(" ", 2)[1] == path else ""
        return ""


def file_problem(path: str) -> str:
    """What stops this process reading ``path`` as a secret ("" when nothing): never what the file holds."""
    return read_secret(path)[1]


def read_secret(path: str) -> tuple[bytes | None, str]:
    """The content of the file at ``path``, or None and why it cannot serve as a secret (never what it holds)."""
    try:
        with open(path, "rb") as opened:
            data = opened.read(MAX_SECRET_BYTES + 1)
    except FileNotFoundError:
        return None, "does not exist"
    except IsADirectoryError:
        return None, "is a directory, not a file"
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror}"
    if not data.strip():
        return None, "is empty"
    if len(data) > MAX_SECRET_BYTES:
        return None, f"is larger than {MAX_SECRET_BYTES} bytes: not a secret"
    return data, ""


class SecretFile:
    """One file's content, read on a thread of its own as the module says; thread-safe."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what  # the field naming it, for messages
        self._lock = threading.Lock()
        self._value: bytes | None = None
        self._problem = ""
        self._read_at = -math.inf
        self._reading: threading.Thread | None = None

    def value(self, seconds: float) -> bytes:
        """The content, read again first when due (waiting for that within ``seconds`` only when nothing usable is
        known); QueryError when there is none."""
        deadline = time.monotonic() + seconds
        with self._lock:
            due = self._value is None or time.monotonic() - self._read_at >= REREAD_SECONDS
            if self._reading is None and due:
                self._reading = threading.Thread(target=self._read, name="nodeload-secret-file", daemon=True)
                if not started(self._reading):
                    self._reading = None  # read again at the next use
            reading = self._reading if self._value is None else None
        if reading is not None:
            reading.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            if self._value is not None:
                return self._value
            if self._problem:
                raise QueryError(f"{self.what} {self.path} {self._problem}")
            raise QueryError(f"{self.what} {self.path} was not read within {seconds:.1f} s")

    def refused(self) -> None:
        """Prometheus refused what it holds: read it again before the next use (a rotated secret)."""
        with self._lock:
            self._read_at = -math.inf
            self._value = None
            self._problem = ""

    def _read(self) -> None:
        value, problem = read_secret(self.path)
        with self._lock:
            self._value, self._problem = value, problem
            self._read_at = time.monotonic()
            self._reading = None


class Credentials:
    """A NodeLoad instance's credentials for its Prometheus (bearer or basic), from files read as the module says or
    from the variables of the instance's settings."""

    def __init__(self, spec: PrometheusAuth, variables: Mapping[str, str]) -> None:
        self.spec = spec
        self.kind = spec.kind
        self._secret: SecretFile | None
        if spec.kind == BEARER:
            self._secret = SecretFile(spec.token_file, "prometheus.tokenFile") if spec.token_file else None
            self._env = spec.token_env
        else:
            self._secret = SecretFile(spec.password_file, "prometheus.passwordFile") if spec.password_file else None
            self._env = spec.password_env
        self._variables = variables

    @property
    def described(self) -> str:
        return self.spec.described

    def authorization(self, seconds: float) -> Credential:
        secret = self._read(seconds)
        if self.kind == BEARER:
            if not _HEADER_VALUE.fullmatch(secret):
                raise QueryError(
                    f"{self._where()} holds a line break or a character an HTTP header cannot carry: "
                    "a bearer token is one line of visible ASCII characters"
                )
            return Credential(f"Bearer {secret}", (secret,))
        encoded = b64encode(f"{self.spec.username}:{secret}".encode()).decode()
        return Credential(f"Basic {encoded}", (encoded, secret))

    def refused(self) -> None:
        if isinstance(self._secret, SecretFile):
            self._secret.refused()

    def _read(self, seconds: float) -> str:
        if isinstance(self._secret, SecretFile):
            data = self._secret.value(seconds)
            try:
                text = data.decode()
            except UnicodeDecodeError:
                raise QueryError(f"{self._where()} is not UTF-8 text") from None
        else:
            assert self._env is not None  # the args name a file or a variable (``PrometheusArgs``)
            text = self._variables.get(self._env, "")
        # Secret Manager values often end in a newline: surrounding whitespace is never part of the secret.
        text = text.strip()
        if not text:
            raise QueryError(f"{self._where()} is empty" if self._secret else f"{self._env} is not set or empty")
        return text

    def _where(self) -> str:
        if isinstance(self._secret, SecretFile):
            return f"{self._secret.what} {self._secret.path}"
        field = "prometheus.tokenEnv" if self.kind == BEARER else "prometheus.passwordEnv"
        return f"{field} {self._env}"


class TlsFiles:
    """The CA bundle and client certificate files of ``spec``, read as the module says: their content, compared with
    what the current TLS context was made from, says when to make a new one."""

    def __init__(self, spec: PrometheusAuth) -> None:
        self.spec = spec
        self._files = [
            SecretFile(path, field)
            for field, path in spec.files()
            if field in ("prometheus.tls.caFile", "prometheus.tls.certFile", "prometheus.tls.keyFile")
        ]

    def current(self, seconds: float) -> tuple[bytes, ...]:
        deadline = time.monotonic() + seconds
        return tuple(file.value(max(0.0, deadline - time.monotonic())) for file in self._files)

    def refused(self) -> None:
        for file in self._files:
            file.refused()


def tls_context(spec: PrometheusAuth, fallback_bundle: str | None = None) -> ssl.SSLContext:
    """A client context trusting ``spec``'s CA bundle (else ``fallback_bundle``, else the system's) and presenting its
    client certificate; QueryError naming the file that cannot be loaded (never its content)."""
    import ssl

    try:
        if spec.ca_file:
            context = ssl.create_default_context(cafile=spec.ca_file)
        elif fallback_bundle is not None and os.path.isdir(fallback_bundle):
            context = ssl.create_default_context(capath=fallback_bundle)
        else:
            context = ssl.create_default_context(cafile=fallback_bundle)
    except (OSError, ValueError) as exc:  # ssl.SSLError included
        if spec.ca_file:
            raise QueryError(
                f"prometheus.tls.caFile {spec.ca_file} cannot be loaded as PEM CA certificates: {_ssl_reason(exc)}"
            ) from None
        raise QueryError(
            f"the CA bundle {fallback_bundle} (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) cannot be loaded: {exc}"
        ) from None
    if spec.cert_file and spec.key_file:
        try:
            context.load_cert_chain(spec.cert_file, spec.key_file, password=_no_passphrase)
        except (OSError, ValueError) as exc:
            raise QueryError(
                f"prometheus.tls.certFile {spec.cert_file} and keyFile {spec.key_file} cannot be loaded together "
                f"(a PEM certificate chain and its unencrypted private key): {_ssl_reason(exc)}"
            ) from None
    return context


def _no_passphrase() -> bytes:
    # Called only for an encrypted key: never prompt on a terminal, say what to do instead.
    raise ValueError("the key is encrypted: store it unencrypted (in Secret Manager, which encrypts it at rest)")


def _ssl_reason(exc: BaseException) -> str:
    import ssl

    if isinstance(exc, ssl.SSLError):
        return exc.reason or exc.strerror or type(exc).__name__
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return str(exc)


class TlsArgs(Schema):
    caFile = fields.String(validate=Length(min=1))
    certFile = fields.String(validate=Length(min=1))
    keyFile = fields.String(validate=Length(min=1))

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def paired(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        given = data.keys() | failed_fields(self, data, original)
        for named, missing in (("certFile", "keyFile"), ("keyFile", "certFile")):
            if named in given and missing not in given:
                raise ValidationError(
                    f"{named} needs {missing}: a client certificate and its private key go together", missing
                )


class PrometheusArgs(Schema):
    url = fields.String(validate=Length(min=1, error="must not be empty"))
    auth = fields.String(validate=OneOf(KINDS))
    tokenFile = fields.String(validate=Length(min=1))
    tokenEnv = fields.String(validate=_ENV_NAME)
    username = fields.String(
        validate=Regexp(r"^[^:\x00-\x1f\x7f]+$", error="must not be empty nor hold a colon or a control character")
    )
    passwordFile = fields.String(validate=Length(min=1))
    passwordEnv = fields.String(validate=_ENV_NAME)
    tls = fields.Nested(TlsArgs)
    headers = fields.Dict(keys=fields.String(), values=fields.String())

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def one_credential(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        given = data.keys() | (failed_fields(self, data, original) & set(self.fields))
        bearer = given & {"tokenFile", "tokenEnv"}
        basic = given & {"username", "passwordFile", "passwordEnv"}
        kind = data.get("auth") or (BEARER if bearer else BASIC if basic else None)
        problems: dict[str, list[str]] = {}
        if bearer and basic:
            problems["auth"] = [
                ("a bearer token (tokenFile or tokenEnv) and basic auth (username, passwordFile or passwordEnv) "
                "together: Prometheus takes one Authorization header, choose one")
            ]
        elif kind in (GOOGLE, NONE) and (bearer or basic):
            problems["auth"] = [
                (f"auth {kind} sends {_SENDS[kind]}: "
                f"{', '.join(sorted(bearer | basic))} need auth bearer or basic (or leave auth out)")
            ]
        elif kind == BEARER:
            if basic:
                problems["auth"] = [f"auth bearer takes tokenFile or tokenEnv, not {', '.join(sorted(basic))}"]
            elif len(bearer) == 2:
                problems["tokenEnv"] = ["tokenFile and tokenEnv both given: the token comes from one of them"]
            elif not bearer:
                problems["tokenFile"] = [
                    ("auth bearer needs tokenFile (a file, such as a Secret Manager secret mounted into the function) "
                    f"or tokenEnv (a {SECRET_ENV_PREFIX}* variable): the policy never holds the token itself")
                ]
        elif kind == BASIC:
            if "passwordFile" in basic and "passwordEnv" in basic:
                problems["passwordEnv"] = ["passwordFile and passwordEnv both given: the password comes from one"]
            elif not basic & {"passwordFile", "passwordEnv"}:
                problems["passwordFile"] = [
                    ("basic auth needs passwordFile (a file, such as a mounted Secret Manager secret) or passwordEnv "
                    f"(a {SECRET_ENV_PREFIX}* variable): the policy never holds the password itself")
                ]
            if "username" not in given:
                problems["username"] = ["basic auth needs a username"]
        for name, value in data.get("headers", {}).items():
            header_problem = _header_problem(name, value)
            if header_problem:
                problems.setdefault("headers", []).append(header_problem)
        if problems:
            raise ValidationError(problems)

    @post_load
    def make(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The URL and auth kind as given (None: the preset's or none), and where the credentials are."""
        bearer = "tokenFile" in data or "tokenEnv" in data
        basic = "username" in data
        kind = data.get("auth") or (BEARER if bearer else BASIC if basic else None)
        tls = data.get("tls", {})
        loaded = {key: data[key] for key in ("url",) if key in data}
        if kind is not None:
            loaded["auth"] = kind
        loaded["credentials"] = PrometheusAuth(
            kind or NONE,
            token_file=data.get("tokenFile"),
            token_env=data.get("tokenEnv"),
            username=data.get("username"),
            password_file=data.get("passwordFile"),
            password_env=data.get("passwordEnv"),
            ca_file=tls.get("caFile"),
            cert_file=tls.get("certFile"),
            key_file=tls.get("keyFile"),
            headers=data.get("headers"),
        )
        return loaded


_SENDS = {GOOGLE: "the function's Google access token", NONE: "no credentials"}


def _header_problem(name: str, value: str) -> str:
    if not _HEADER_NAME.match(name):
        return f"{name!r} is not an HTTP header name"
    if name.lower() in _RESERVED_HEADERS:
        return (
            f"{name} is set by NodeLoad itself or would write a secret into the policy: use tokenFile, tokenEnv or "
            "basic auth for credentials"
        )
    if not _HEADER_VALUE.fullmatch(value):
        return f"{name}'s value must be one line of visible ASCII characters"
    return ""


def with_kind(spec: PrometheusAuth, kind: str) -> PrometheusAuth:
    """``spec`` with the auth kind a preset implies when the args set none."""
    if spec.kind == kind:
        return spec
    copy = PrometheusAuth(kind)
    for name in PrometheusAuth.__slots__:
        if name != "kind":
            setattr(copy, name, getattr(spec, name))
    return copy
