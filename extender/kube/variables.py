"""The environment variables that configure the Kubernetes API client (read by ``Settings``, checked by
``KubeConfig``)."""

from __future__ import annotations

API_URL_ENV = "KUBERNETES_API_URL"
TOKEN_ENV = "KUBERNETES_TOKEN"
TOKEN_FILE_ENV = "KUBERNETES_TOKEN_FILE"
CA_DATA_ENV = "KUBERNETES_CA_DATA"
CA_FILE_ENV = "KUBERNETES_CA_FILE"
# How to authenticate to and trust the API server: meaningless without its URL.
CREDENTIAL_ENVS = (TOKEN_ENV, TOKEN_FILE_ENV, CA_DATA_ENV, CA_FILE_ENV)
