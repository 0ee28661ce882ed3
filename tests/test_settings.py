"""One settings object reads the environment, once per instance: every variable, its checks, and no other reader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from extender.errors import ConfigError
from extender.settings import ALLOCATOR_ENVIRONMENT, DEFAULT_BUDGET_BYTES, DEFAULT_MAX_BODY_BYTES, Settings
from tests.conftest import ROOT

EVERY_VARIABLE = {
    "EXTENDER_POLICY": "/etc/extender/policy.yaml",
    "EXTENDER_CALLER_TOKEN": " current-T0ken-0123456789\n",
    "EXTENDER_CALLER_TOKEN_PREVIOUS": "previous-T0ken-0123456789",
    "EXTENDER_HTTP_TIMEOUT": "1m30s",
    "EXTENDER_MAX_BODY_BYTES": "1048576",
    "EXTENDER_MAX_BODY_BYTES_IN_FLIGHT": "4194304",
    "EXTENDER_NODE_SOURCE_MAX_AGE": "90s",
    "EXTENDER_RESULT_CACHE": "off",
    "EXTENDER_DECODER": "full",
    "EXTENDER_PROCESS_TUNING": "off",
    "EXTENDER_MEMORY_IDLE": "2m",
    "KUBERNETES_API_URL": "https://10.0.0.1",
    "KUBERNETES_TOKEN_FILE": "/var/run/token",
    "KUBERNETES_CA_DATA": "",
    "K_SERVICE": "my-extender",
    "K_REVISION": "my-extender-00001-abc",
    "FUNCTION_TARGET": "extender",
    "GOOGLE_CLOUD_PROJECT": "my-project",
    "PYTHONMALLOC": "malloc",
    "GLIBC_TUNABLES": "glibc.malloc.check=0:glibc.malloc.tcache_count=1",
    "HOME": "/root",
}


def test_an_empty_environment_gives_the_documented_defaults():
    settings = Settings.from_environment({})
    assert settings == Settings()
    assert (settings.policy_path, settings.caller_token, settings.http_timeout) == (None, None, 5.0)
    assert settings.max_body_bytes == DEFAULT_MAX_BODY_BYTES == 32 * 1024 * 1024
    assert settings.max_body_bytes_in_flight == DEFAULT_BUDGET_BYTES == 96 * 1024 * 1024
    assert (settings.node_source_max_age, settings.result_cache, settings.full_decoder) == (300.0, True, False)
    assert (settings.process_tuning, settings.memory_idle) == (True, 30.0)
    assert (settings.kubernetes, settings.function_names, settings.on_google_cloud) == ({}, frozenset(), False)


def test_every_variable_is_read():
    assert Settings.from_environment(EVERY_VARIABLE) == Settings(
        policy_path="/etc/extender/policy.yaml",
        caller_token="current-T0ken-0123456789",
        previous_caller_token="previous-T0ken-0123456789",
        http_timeout=90.0,
        max_body_bytes=1048576,
        max_body_bytes_in_flight=4194304,
        node_source_max_age=90.0,
        result_cache=False,
        full_decoder=True,
        process_tuning=False,
        memory_idle=120.0,
        kubernetes={"KUBERNETES_API_URL": "https://10.0.0.1", "KUBERNETES_TOKEN_FILE": "/var/run/token"},
        function_names=frozenset({"my-extender", "extender"}),
        on_google_cloud=True,
        project="my-project",
        allocator_as_deployed=True,
    )


def test_a_function_name_alone_is_not_google_cloud():
    assert not Settings.from_environment({"K_SERVICE": "my-extender"}).on_google_cloud


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("EXTENDER_MAX_BODY_BYTES", "0", "EXTENDER_MAX_BODY_BYTES must be a positive integer, got '0'"),
        ("EXTENDER_MAX_BODY_BYTES_IN_FLIGHT", "96MiB", "EXTENDER_MAX_BODY_BYTES_IN_FLIGHT must be a positive integer"),
        ("EXTENDER_HTTP_TIMEOUT", "5", 'EXTENDER_HTTP_TIMEOUT: time: invalid duration "5" (e.g. 5s)'),
        ("EXTENDER_HTTP_TIMEOUT", "-1s", "EXTENDER_HTTP_TIMEOUT must be positive, got '-1s'"),
        ("EXTENDER_NODE_SOURCE_MAX_AGE", "five minutes", "EXTENDER_NODE_SOURCE_MAX_AGE: time: invalid duration"),
        ("EXTENDER_MEMORY_IDLE", "0s", "EXTENDER_MEMORY_IDLE must be positive, got '0s'"),
        ("EXTENDER_RESULT_CACHE", "no", "EXTENDER_RESULT_CACHE must be on or off, got 'no'"),
    ],
)
def test_a_wrong_value_is_named(variable, value, message):
    with pytest.raises(ConfigError) as raised:
        Settings.from_environment({variable: value})
    assert str(raised.value).startswith(message)


def test_the_repr_shows_no_secret():
    shown = repr(Settings.from_environment(EVERY_VARIABLE | {"KUBERNETES_TOKEN": "kube-s3cret"}))
    assert "T0ken" not in shown and "kube-s3cret" not in shown
    assert "caller_token='<set>'" in shown and "'KUBERNETES_TOKEN'" in shown


def test_an_instance_keeps_the_settings_it_started_with(client_factory, monkeypatch):
    """A request never reads the environment: changing a variable after start-up changes nothing."""
    client = client_factory(EXTENDER_MAX_BODY_BYTES="64")
    monkeypatch.setenv("EXTENDER_MAX_BODY_BYTES", "1048576")
    body = b'{"Pod":{"metadata":{"name":"p"}},"NodeNames":["node-a","node-b","node-c","node-d"]}'
    response = client.post("/filter", data=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "EXTENDER_MAX_BODY_BYTES" in response.get_json()["Error"]


_READERS = {"environ", "environb", "getenv", "getenvb"}


def _reads_the_environment(tree: ast.AST) -> list[int]:
    """Lines that touch ``os.environ`` or ``os.getenv`` (or import them from os)."""
    lines = []
    for node in ast.walk(tree):
        by_attribute = (
            isinstance(node, ast.Attribute)
            and node.attr in _READERS
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        )
        by_import = isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & _READERS
        if by_attribute or by_import:
            lines.append(node.lineno)
    return lines


def test_nothing_else_in_the_package_reads_the_environment():
    package = ROOT / "extender"
    readers = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(package.rglob("*.py"))
        if path != package / "settings.py" and (lines := _reads_the_environment(ast.parse(Path(path).read_text())))
    }
    assert readers == {}
    assert _reads_the_environment(ast.parse((package / "settings.py").read_text()))  # the check sees a reader


def test_the_allocator_is_as_deployed_only_with_every_variable_set_so():
    assert not Settings.from_environment({"PYTHONMALLOC": "malloc"}).allocator_as_deployed
    assert not Settings.from_environment({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=1"}).allocator_as_deployed
    assert Settings.from_environment(dict(ALLOCATOR_ENVIRONMENT)).allocator_as_deployed
