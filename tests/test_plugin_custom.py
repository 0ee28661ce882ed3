"""Custom plugins: modules listed in ``pluginModules`` register plugins before the profiles are validated."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

import extender.plugins  # noqa: F401  (the built-in plugins are registered before any test snapshots the registry)
from extender.framework import registry
from extender.framework.types import Facts
from extender.policy.loader import PolicyError, parse_policy
from tests.policy_doc import code_blocks


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A directory on the import path for plugin modules; their modules and registrations are undone afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_PLUGINS", dict(registry._PLUGINS))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name == "tests.custom_plugins" or str(getattr(sys.modules[name], "__file__", "")).startswith(str(tmp_path)):
            del sys.modules[name]


def write_module(directory, name, source):
    (directory / f"{name}.py").write_text(textwrap.dedent(source))


def test_the_readme_lucky_number_sample_works_through_the_function(plugin_dir, client_factory):
    (module,) = code_blocks("python", "Writing your own plugin")
    policy = next(block for block in code_blocks("yaml", "Writing your own plugin") if "pluginModules" in block)
    assert module.startswith("# lucky.py\n") and "pluginModules: [lucky]" in policy
    (plugin_dir / "lucky.py").write_text(module)
    (plugin_dir / "policy.yaml").write_text(policy)
    client = client_factory(plugin_dir / "policy.yaml")
    body = {
        "Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}},
        "Nodes": None,
        "NodeNames": ["node-1", "node-3", "node-13", "node-7"],
    }
    answer = client.post("/prioritize", data=json.dumps(body), content_type="application/json").get_json()
    assert answer == [
        {"Host": "node-1", "Score": 0},
        {"Host": "node-3", "Score": 10},
        {"Host": "node-13", "Score": 10},
        {"Host": "node-7", "Score": 0},
    ]


def test_plugin_modules_load_before_profiles_wherever_the_key_is(plugin_dir):
    # pluginModules written after profiles still registers the plugin before the profiles are checked.
    policy = parse_policy(
        """
        profiles:
        - name: default
          plugins: {filter: {enabled: [{name: LicenseSlots}]}}
          pluginConfig: [{name: LicenseSlots, args: {full: [node-b]}}]
        pluginModules: [tests.custom_plugins]
        """.replace("\n        ", "\n"),
        "test.yaml",
    )
    assert [plugin.name for plugin in policy.profiles["default"].filters] == ["LicenseSlots"]


def test_custom_args_are_validated_with_field_paths(plugin_dir):
    with pytest.raises(PolicyError) as caught:
        parse_policy(
            "pluginModules: [tests.custom_plugins]\n"
            "profiles: [{name: a, plugins: {filter: {enabled: [{name: LicenseSlots}]}}, "
            "pluginConfig: [{name: LicenseSlots, args: {full: node-b}}]}]",
            "test.yaml",
        )
    assert caught.value.problems == [
        "profiles[0].pluginConfig[0].args.full: Not a valid list. Write it as a list: [node-b]"
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "raise RuntimeError('no licence server configured')\n",
            "cannot import '{module}': RuntimeError: no licence server configured",
        ),
        ("def broken(:\n", "cannot import '{module}': SyntaxError: "),
        (
            """
            from extender.framework.plugin import FilterPlugin
            from extender.framework.registry import register

            @register
            class Impostor(FilterPlugin):
                name = "NodeNameFilter"
            """,
            ("cannot import '{module}': ValueError: a plugin named 'NodeNameFilter' is already registered "
             "(extender.plugins.nodenamefilter)"),
        ),
    ],
    ids=["raises", "syntax-error", "name-clash"],
)
def test_a_module_that_fails_to_import_is_a_policy_problem(plugin_dir, source, expected):
    module = f"acme_plugins_{abs(hash(source))}"
    write_module(plugin_dir, module, source)
    with pytest.raises(PolicyError) as caught:
        parse_policy(f"pluginModules: [{module}]\nprofiles: [{{name: default}}]", "test.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("pluginModules[0]: " + expected.format(module=module)), problem


def test_custom_plugins_that_read_labels_fall_under_the_node_facts_rule(plugin_dir):
    write_module(
        plugin_dir,
        "acme_zones",
        """
        from extender.framework import status
        from extender.framework.plugin import FilterPlugin
        from extender.framework.registry import register
        from extender.framework.types import Facts

        @register
        class ZoneA(FilterPlugin):
            name = "ZoneA"
            facts = Facts.LABELS

            def filter(self, pod, node):
                ok = node.labels.get("topology.kubernetes.io/zone") == "a"
                return status.SUCCESS if ok else status.unresolvable("ZoneA: not in zone a")
        """,
    )
    text = "pluginModules: [acme_zones]\nprofiles: [{name: default, plugins: {filter: {enabled: [{name: ZoneA}]}}}]"
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "test.yaml")
    assert caught.value.problems[0].startswith(
        "profiles[0].plugins.filter.enabled[0].name: plugin ZoneA reads node labels"
    )
    assert parse_policy("nodeCacheCapable: false\n" + text, "test.yaml").profiles["default"].facts is Facts.LABELS


def test_unknown_plugin_messages_list_the_registered_custom_plugins(plugin_dir):
    with pytest.raises(PolicyError) as caught:
        parse_policy(
            "pluginModules: [tests.custom_plugins]\n"
            "profiles: [{name: a, plugins: {filter: {enabled: [{name: LicenceSlots}]}}}]",
            "t",
        )
    (problem,) = caught.value.problems
    assert problem.startswith(
        "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'LicenceSlots': did you mean LicenseSlots? (known "
        "plugins: "
    )
    assert "LicenseSlots" in problem and "NodeLabelPolicy" in problem
