"""The policy file: format, validation with field-path messages, the node-facts rule, and the embedded default."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
import yaml

from extender import plugins
from extender import policy as policy_package
from extender.framework.profile import EntryPolicy
from extender.framework.types import Facts, VictimFacts
from extender.policy.loader import EMBEDDED, PolicyError, load_policy, parse_policy
from testkit.scheduler_checks import check_answer
from tests.policy_doc import PLUGIN_DOCS, code_blocks, policy_section
from tests.policy_doc import plugin_snippets as documented_plugin_snippets
from tests.recordings import exchanges

DEFAULT_YAML = Path(policy_package.__file__).with_name("default.yaml")


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(textwrap.dedent(text), "test.yaml")
    return caught.value.problems


LABELS_FIX = "configure a nodeSource, or set nodeCacheCapable: false if the scheduler sends full nodes"

INVALID = {
    "not yaml": ("profiles: [", ["not valid YAML or JSON: "]),
    "not a mapping": ("- name: default", ["the policy must be a mapping with a 'profiles' list"]),
    "no profiles": ("failurePolicy: Fail", ["profiles: Missing data for required field."]),
    "empty profiles": ("profiles: []", ["profiles: Shorter than minimum length 1."]),
    "wrong apiVersion": (
        "apiVersion: v1\nprofiles: [{name: default}]",
        ["apiVersion: Must be equal to extender.scheduling.gcf/v1alpha1."],
    ),
    "wrong kind": ("kind: Policy\nprofiles: [{name: default}]", ["kind: Must be equal to ExtenderPolicy."]),
    "unknown top-level field": (
        "profile: []\nprofiles: [{name: default}]",
        ["profile: Unknown field. Did you mean profiles?"],
    ),
    "bad failurePolicy": (
        "failurePolicy: Open\nprofiles: [{name: default}]",
        ["failurePolicy: Must be one of: Fail, Ignore."],
    ),
    "nodeCacheCapable not a boolean": (
        'nodeCacheCapable: "false"\nprofiles: [{name: default}]',
        ["nodeCacheCapable: Not a valid boolean."],
    ),
    "pluginModules not a list": (
        "pluginModules: acme\nprofiles: [{name: default}]",
        ["pluginModules: Not a valid list."],
    ),
    "pluginModules not importable": (
        "pluginModules: [acme_missing_plugins]\nprofiles: [{name: default}]",
        [
            ("pluginModules[0]: cannot import 'acme_missing_plugins': ModuleNotFoundError: No module named "
             "'acme_missing_plugins'")
        ],
    ),
    "pluginModules a path": (
        "pluginModules: [plugins/lucky.py]\nprofiles: [{name: default}]",
        ["pluginModules[0]: 'plugins/lucky.py' is not a Python module name such as acme_plugins or acme.scheduling"],
    ),
    "profile name not a DNS label": (
        "profiles: [{name: Default}]",
        ["profiles[0].name: must be a DNS label (lowercase letters, digits, '-')"],
    ),
    "duplicate profile": ("profiles: [{name: a}, {name: a}]", ["profiles[1].name: duplicate profile name 'a'"]),
    "unknown extension point": (
        "profiles: [{name: a, plugins: {bind: {enabled: [{name: NodeNameFilter}]}}}]",
        ["profiles[0].plugins.bind: Unknown field. Known fields: filter, score, preempt"],
    ),
    "unknown plugin": (
        "profiles: [{name: a, plugins: {filter: {enabled: [{name: NodeNameFiltr}]}}}]",
        ["profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeNameFiltr': did you mean NodeNameFilter?"],
    ),
    "plugin at the wrong extension point": (
        "profiles: [{name: a, plugins: {score: {enabled: [{name: NodeNameFilter, weight: 1}]}}}]",
        [
            ("profiles[0].plugins.score.enabled[0].name: plugin NodeNameFilter does not implement the score extension "
             "point")
        ],
    ),
    "enabled twice": (
        "profiles: [{name: a, plugins: {filter: {enabled: [{name: NodeNameFilter}, {name: NodeNameFilter}]}}}]",
        ["profiles[0].plugins.filter.enabled[1].name: plugin NodeNameFilter is enabled twice"],
    ),
    "score without weight": (
        ("nodeCacheCapable: false\nprofiles: [{name: a, plugins: {score: {enabled: [{name: InstanceCost}]}}, "
         "pluginConfig: [{name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}]}]"),
        ["profiles[0].plugins.score.enabled[0].weight: score plugins need a weight (1..100)"],
    ),
    "weight out of range": (
        ("nodeCacheCapable: false\nprofiles: [{name: a, plugins: {score: {enabled: [{name: InstanceCost, weight: "
         "0}]}}, pluginConfig: [{name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}]}]"),
        [
            ("profiles[0].plugins.score.enabled[0].weight: Must be greater than or equal to 1 and less than or equal "
             "to 100.")
        ],
    ),
    "weight on a filter": (
        "profiles: [{name: a, plugins: {filter: {enabled: [{name: NodeNameFilter, weight: 2}]}}}]",
        ["profiles[0].plugins.filter.enabled[0].weight: only score plugins take a weight"],
    ),
    "config for a plugin not enabled": (
        "profiles: [{name: a, pluginConfig: [{name: NodeNameFilter, args: {}}]}]",
        ["profiles[0].pluginConfig[0].name: plugin NodeNameFilter is not enabled in this profile"],
    ),
    "configured twice": (
        """
        profiles:
        - name: a
          plugins: {filter: {enabled: [{name: NodeNameFilter}]}}
          pluginConfig: [{name: NodeNameFilter, args: {}}, {name: NodeNameFilter, args: {}}]
        """,
        ["profiles[0].pluginConfig[1].name: plugin NodeNameFilter is configured twice"],
    ),
    "required args missing": (
        "nodeCacheCapable: false\nprofiles: [{name: a, plugins: {filter: {enabled: [{name: NodeLabelPolicy}]}}}]",
        [
            (
                "profiles[0].plugins.filter.enabled[0].name: plugin NodeLabelPolicy needs a pluginConfig entry in this "
                "profile (args.rules: Missing data for required field.)"
            )
        ],
    ),
    "args of a plugin, deep": (
        """
        nodeCacheCapable: false
        profiles:
        - name: default
        - name: tenancy
          plugins: {filter: {enabled: [{name: NodeLabelPolicy}]}}
          pluginConfig:
          - name: NodeLabelPolicy
            args:
              rules:
              - {name: a, nodeSelector: {}}
              - {name: b, nodeSelector: {}}
              - name: c
                nodeSelector: {matchExpressions: [{key: zone, operator: In}]}
                pods: {priority: {min: 10, max: 1}}
        """,
        [
            "profiles[1].pluginConfig[0].args.rules[2].pods.priority: min (10) is above max (1)",
            ("profiles[1].pluginConfig[0].args.rules[2].nodeSelector.matchExpressions[0].values: In needs at least one "
             "value"),
        ],
    ),
    "labels without a node source": (
        """
        profiles:
        - name: default
          plugins:
            filter: {enabled: [{name: NodeNameFilter}, {name: NodeLabelPolicy}]}
            score: {enabled: [{name: InstanceCost, weight: 1}]}
          pluginConfig:
          - {name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {}}]}}
          - {name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}
        """,
        [
            (
                "profiles[0].plugins.filter.enabled[1].name: plugin NodeLabelPolicy reads node labels, which "
                f"node-name requests (nodeCacheCapable: true) do not carry: {LABELS_FIX}"
            ),
            (
                f"profiles[0].plugins.score.enabled[0].name: plugin InstanceCost reads node labels, which node-name "
                f"requests (nodeCacheCapable: true) do not carry: {LABELS_FIX}"
            ),
        ],
    ),
    "labels with nodeCacheCapable true": (
        ("nodeCacheCapable: true\nprofiles: [{name: a, plugins: {score: {enabled: [{name: InstanceCost, weight: 1}]}}, "
         "pluginConfig: [{name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}]}]"),
        [
            (
                f"profiles[0].plugins.score.enabled[0].name: plugin InstanceCost reads node labels, which node-name "
                f"requests (nodeCacheCapable: true) do not carry: {LABELS_FIX}"
            )
        ],
    ),
    "victim pods without the kubernetes node source": (
        """
        nodeSource: {names: {cluster: prod}}
        profiles:
        - name: a
          plugins: {preempt: {enabled: [{name: ProtectedVictims}]}}
          pluginConfig: [{name: ProtectedVictims, args: {protect: [{name: system, pods: {namespaces: [kube-system]}}]}}]
        """,
        [
            (
                "profiles[0].plugins.preempt.enabled[0].name: plugin ProtectedVictims reads victim pods, which "
                "node-name preempt requests (nodeCacheCapable: true) name by UID only: configure the kubernetes "
                "nodeSource to look them up, or set nodeCacheCapable: false if the scheduler sends full nodes"
            )
        ],
    ),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_invalid_policies_get_one_field_path_message_per_problem(case):
    text, expected = INVALID[case]
    got = problems(text)
    assert len(got) == len(expected), got
    for line, prefix in zip(got, expected, strict=True):
        assert line.startswith(prefix), (line, prefix)


def test_an_unreadable_file_is_a_policy_problem(tmp_path):
    with pytest.raises(PolicyError) as caught:
        load_policy(tmp_path / "missing.yaml")
    assert caught.value.problems[0].startswith("cannot read the file: ")
    assert str(caught.value).startswith(f"invalid policy {tmp_path / 'missing.yaml'}:\n  cannot read the file")


NODE_LABEL_PLUGINS = """
profiles:
- name: a
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
    score: {enabled: [{name: InstanceCost, weight: 1}, {name: TopologyPreference, weight: 1}]}
  pluginConfig:
  - {name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {}}]}}
  - {name: TopologyPreference, args: {preferences: [{label: zone, weights: {a: 1}}]}}
  - {name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}
"""
VICTIM_PLUGIN = """
- name: b
  plugins: {preempt: {enabled: [{name: ProtectedVictims}]}}
  pluginConfig: [{name: ProtectedVictims, args: {protect: [{name: p}]}}]
"""


@pytest.mark.parametrize(
    "header",
    [
        "nodeCacheCapable: false",
        # The kubernetes node source serves node labels, and its API client victim pods.
        "nodeSource: {kubernetes: {}}",
        "nodeCacheCapable: true\nnodeSource: {kubernetes: {cacheTTL: 30s}}",
    ],
)
def test_plugins_that_read_more_than_names_load_when_the_facts_can_come(header):
    policy = parse_policy(header + NODE_LABEL_PLUGINS + VICTIM_PLUGIN, "test.yaml")
    assert policy.profiles["a"].facts is Facts.LABELS
    assert policy.profiles["b"].victim_facts is VictimFacts.POD


STATIC_ZONES_AND_TYPES = "static: {nodes: [{names: ['*'], labels: {zone: a, node.kubernetes.io/instance-type: e2}}]}"
POOL_RULE = """
profiles:
- name: a
  plugins: {filter: {enabled: [{name: NodeLabelPolicy}]}}
  pluginConfig:
  - name: NodeLabelPolicy
    args: {rules: [{name: r, nodeSelector: {matchLabels: {cloud.google.com/gke-nodepool: gpu}}}]}
"""


@pytest.mark.parametrize(
    ("source", "plugins"), [(STATIC_ZONES_AND_TYPES, NODE_LABEL_PLUGINS), ("names: {cluster: prod}", POOL_RULE)]
)
def test_every_node_source_serves_node_labels(source, plugins):
    policy = parse_policy(f"nodeSource: {{{source}}}" + plugins, "test.yaml")
    assert policy.profiles["a"].facts is Facts.LABELS


def test_profiles_are_built_in_policy_order_with_their_weights_and_one_instance_per_plugin():
    policy = parse_policy(
        """
        nodeCacheCapable: false
        profiles:
        - name: default
          plugins:
            filter: {enabled: [{name: NodeLabelPolicy}, {name: NodeNameFilter}]}
            score: {enabled: [{name: TopologyPreference, weight: 5}, {name: InstanceCost, weight: 2}]}
          pluginConfig:
          - {name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {}}]}}
          - {name: TopologyPreference, args: {preferences: [{label: zone, weights: {a: 1}}]}}
          - {name: InstanceCost, args: {prices: {e2-standard-4: 0.134}}}
        - name: names-only
          plugins:
            filter: {enabled: [{name: NodeNameFilter}]}
        """.replace("\n        ", "\n"),
        "test.yaml",
    )
    default, names_only = policy.profiles["default"], policy.profiles["names-only"]
    assert [plugin.name for plugin in default.filters] == ["NodeLabelPolicy", "NodeNameFilter"]
    assert [(entry.plugin.name, entry.weight) for entry in default.scores] == [
        ("TopologyPreference", 5),
        ("InstanceCost", 2),
    ]
    assert default.facts is Facts.LABELS and names_only.facts is Facts.NAME
    assert default.fail_open is False


def test_failure_policy_ignore_makes_profiles_fail_open():
    policy = parse_policy("failurePolicy: Ignore\nprofiles: [{name: default}]", "test.yaml")
    assert policy.profiles["default"].fail_open is True


def test_json_policies_load_too():
    policy = parse_policy(
        '{"profiles": [{"name": "default", "plugins": {"filter": {"enabled": [{"name": "NodeNameFilter"}]}}}]}',
        "p.json",
    )
    assert list(policy.profiles) == ["default"]


# --- The embedded default ------------------------------------------------------------------------


def test_the_embedded_default_loads_under_the_node_facts_rule_for_both_modes():
    policy = load_policy()
    assert policy.source == EMBEDDED
    assert list(policy.profiles) == ["default"]
    # It reads node names only: no node source is needed, whatever the scheduler's nodeCacheCapable.
    assert policy.profiles["default"].facts is Facts.NAME
    assert "nodeCacheCapable" not in yaml.safe_load(DEFAULT_YAML.read_text())


def test_the_embedded_default_is_loaded_from_a_json_form_holding_the_yaml_document():
    # After editing default.yaml: python -c "import json, yaml; print(json.dumps(yaml.safe_load(open(
    # 'extender/policy/default.yaml')), indent=2))" > extender/policy/default.json
    assert orjson.loads(DEFAULT_YAML.with_name("default.json").read_bytes()) == yaml.safe_load(DEFAULT_YAML.read_text())
    loaded, parsed = load_policy(), parse_policy(DEFAULT_YAML.read_text(), EMBEDDED)
    assert (loaded.source, loaded.sha256, loaded.node_source, loaded.node_cache_capable) == (
        parsed.source,
        parsed.sha256,
        parsed.node_source,
        parsed.node_cache_capable,
    )
    assert [plugin.name for plugin in loaded.profiles["default"].filters] == ["NodeNameFilter"]


def test_the_readme_shows_the_embedded_default_verbatim():
    assert DEFAULT_YAML.read_text().rstrip("\n") + "\n" in code_blocks("yaml")


@pytest.mark.parametrize("exchange", exchanges(), ids=lambda e: e.id)
def test_the_embedded_default_never_rejects_without_a_rule(client, exchange):
    answer = client.post(f"/{exchange.verb}", data=exchange.body, content_type="application/json").get_json()
    check_answer(exchange.verb, exchange.request, answer)
    request = exchange.request
    if exchange.verb == "filter":
        sent = request["NodeNames"] or [node["metadata"]["name"] for node in request["Nodes"]["items"]]
        kept = answer.get("NodeNames") or [node["metadata"]["name"] for node in answer["Nodes"]["items"]]
        assert (
            kept == sent
            and not answer["FailedNodes"]
            and not answer["FailedAndUnresolvableNodes"]
            and not answer["Error"]
        )
    elif exchange.verb == "prioritize":
        assert len({entry["Score"] for entry in answer}) == 1, "all nodes alike"
    elif exchange.verb == "preempt":
        offered = request["NodeNameToVictims"] or request["NodeNameToMetaVictims"]
        assert set(answer["NodeNameToMetaVictims"]) == set(offered), "no preemption vetoed"


# --- The README's policy documentation -----------------------------------------------------------


def test_the_readme_complete_example_loads():
    complete = next(
        block
        for block in code_blocks("yaml")
        if block.startswith("apiVersion:") and "profiles:" in block and "InstanceCost" in block
    )
    policy = parse_policy(complete, "README.md")
    assert sorted(policy.profiles) == ["batch", "default"]
    names = {plugin.name for profile in policy.profiles.values() for plugin in [*profile.filters, *profile.preempts]}
    names |= {entry.plugin.name for profile in policy.profiles.values() for entry in profile.scores}
    assert names == {"NodeLabelPolicy", "NodeNameFilter", "InstanceCost", "TopologyPreference", "ProtectedVictims"}


POINT = {
    "NodeLabelPolicy": "filter",
    "NodeLoad": "filter",  # and score
    "NodeNameFilter": "filter",
    "InstanceCost": "score",
    "TopologyPreference": "score",
    "ProtectedVictims": "preempt",
}


def snippet_policy(snippet: str) -> str:
    """A policy enabling the plugin that a ``- name: X`` pluginConfig snippet configures."""
    name = yaml.safe_load(snippet)[0]["name"]
    weight = ", weight: 1" if POINT[name] == "score" else ""
    config = textwrap.indent(textwrap.dedent(snippet), "  ")
    plugins = f"{{{POINT[name]}: {{enabled: [{{name: {name}{weight}}}]}}}}"
    return f"nodeCacheCapable: false\nprofiles:\n- name: default\n  plugins: {plugins}\n  pluginConfig:\n{config}"


def plugin_snippets() -> list[str]:
    """Every plugin's example: on its page in docs/plugins/ and in its module docstring."""
    readme = documented_plugin_snippets()
    docstrings = []
    for name in POINT:
        doc = inspect.getmodule(getattr(plugins, name)).__doc__
        docstrings.append(textwrap.dedent(doc[doc.index("    - name:") :]))
    return readme + docstrings


@pytest.mark.parametrize("snippet", plugin_snippets())
def test_every_documented_plugin_snippet_loads(snippet):
    (config,) = yaml.safe_load(snippet)
    profile = parse_policy(snippet_policy(snippet), "snippet").profiles["default"]
    (plugin,) = [*profile.filters, *(entry.plugin for entry in profile.scores), *profile.preempts]
    assert plugin.name == config["name"]


def test_every_built_in_plugin_is_documented_in_the_readme():
    """Each on its own page, docs/plugins/<plugin>.md, linked from the table of docs/policy.md's Built-in plugins."""
    built_in = policy_section().split("\n## Built-in plugins\n", 1)[1].split("\n## ", 1)[0]
    for name in POINT:
        page = PLUGIN_DOCS / f"{name.lower()}.md"
        assert page.read_text().startswith(f"# {name} ("), page
        assert f"| [{name}](plugins/{page.name}) |" in built_in
    assert {yaml.safe_load(block)[0]["name"] for block in documented_plugin_snippets()} == set(POINT)


# --- Every problem at once -------------------------------------------------------------------------


def test_field_and_cross_field_problems_are_reported_in_one_run():
    """A field error (a bad profile name) used to hide the duplicate profiles, the unknown plugin, the missing node
    source, and every duplicate after the first."""
    got = problems(
        """
        failurePolicy: Sometimes
        profiles:
        - name: Default
          plugins: {filter: {enabled: [{name: NoSuchPlugin}, {name: NodeLabelPolicy}]}}
          pluginConfig: [{name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {}}]}}]
        - {name: b}
        - {name: b}
        - {name: c}
        - {name: c}
        """
    )
    assert sorted(got) == sorted(
        [
            "failurePolicy: Must be one of: Fail, Ignore.",
            "profiles[0].name: must be a DNS label (lowercase letters, digits, '-')",
            (
                "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NoSuchPlugin' (known plugins: "
                "InstanceCost, NodeLabelPolicy, NodeLoad, NodeNameFilter, ProtectedVictims, TopologyPreference)"
            ),
            (
                "profiles[0].plugins.filter.enabled[1].name: plugin NodeLabelPolicy reads node labels, which node-name "
                f"requests (nodeCacheCapable: true) do not carry: {LABELS_FIX}"
            ),
            "profiles[2].name: duplicate profile name 'b'",
            "profiles[4].name: duplicate profile name 'c'",
        ]
    )


def test_plugin_config_problems_show_beside_a_broken_plugins_list():
    got = problems(
        """
        profiles:
        - name: a
          plugins: {filter: {enabled: [{name: NodeNameFilter, typo: 1}]}}
          pluginConfig: [{name: NodeNameFilter, args: {deny: ["Canary-*"]}}]
        """
    )
    assert got == [
        (
            "profiles[0].plugins.filter.enabled[0].typo: Unknown field. Known fields: name, weight, failurePolicy, "
            "enforcement"
        ),
        (
            "profiles[0].pluginConfig[0].args.deny[0]: glob 'Canary-*' can never match a node name: 'C' cannot appear "
            "in one (node names hold lowercase letters, digits, '-' and '.'; globs add *, ? and [...])"
        ),
    ]


def test_cross_field_checks_run_beside_the_field_errors_of_the_same_entry():
    """marshmallow skips a schema's cross-field checks once one of its fields has an error; the policy's run anyway,
    leaving out only what depends on the broken field (no "missing" from for a from that is there but wrong)."""
    got = problems(
        """
        nodeSource: {kubernetes: {maxWait: soon}, static: {nodes: [{names: ["*"], labels: {a: b}}]}}
        profiles:
        - name: default
          plugins:
            filter: {enabled: [{name: NodeLabelPolicy}, {name: NodeNameFilter}]}
            score: {enabled: [{name: InstanceCost, weight: 1}]}
          pluginConfig:
          - name: NodeLabelPolicy
            args:
              rules:
              - name: r
                pods: {priority: {min: 10, max: 5, mid: 7}}
                nodeSelector: {matchExpressions: [{key: "bad key!", operator: In, values: []}, {key: a, operator: 5}]}
          - name: NodeNameFilter
            args:
              maintenance:
              - name: m
                nodes: [a]
                windows:
                - {from: 2200, to: "22:00", days: [Funday]}
                - {start: "2026-01-01T00:00:00Z", end: nope, from: "01:00"}
          - {name: InstanceCost, args: {prices: {e2: "0.1"}, scale: absolute}}
        """
    )
    rule = "profiles[0].pluginConfig[0].args.rules[0]"
    windows = "profiles[0].pluginConfig[1].args.maintenance[0].windows"
    assert got == [
        "nodeSource.kubernetes.maxWait: Not a duration: write it like 500ms, 5s or 1m30s.",
        "nodeSource: set exactly one of kubernetes, static, names (got kubernetes, static)",
        f"{rule}.pods.priority: min (10) is above max (5)",
        f"{rule}.pods.priority.mid: Unknown field. Did you mean min?",
        (
            f"{rule}.nodeSelector.matchExpressions[0].key: 'bad key!' is not a valid key: the name must be 1-63 "
            "letters, digits, '-', '_' or '.', starting and ending with a letter or digit, optionally after a DNS "
            "subdomain prefix and '/'"
        ),
        f"{rule}.nodeSelector.matchExpressions[0].values: In needs at least one value",
        f"{rule}.nodeSelector.matchExpressions[1].operator: Not a valid string. YAML read a number; quote it: '5'",
        (
            f'{windows}[0].from: Not a valid string: a time of day is a quoted "HH:MM". '
            "YAML read a number; quote it: '2200'"
        ),
        f"{windows}[0].days[0]: unknown day 'Funday': use Mon, Tue, Wed, Thu, Fri, Sat, Sun",
        f"{windows}[1].end: 'nope' is not an RFC 3339 timestamp such as 2026-03-01T22:00:00Z",
        f"{windows}[1]: a window is either one-off (start, end) or weekly (days, from, to, timeZone), not both",
        ("profiles[0].pluginConfig[2].args.prices.e2: must be a number (a price such as 0.134), not a string or a "
         "boolean"),
        "profiles[0].pluginConfig[2].args.ceiling: scale: absolute needs a ceiling, the price that scores 0",
    ]


def _policy_schemas() -> dict[type, object]:
    """Every schema of this package a policy is loaded with: the policy's own, the node sources', every built-in
    plugin's args, and the schemas nested in them."""
    from marshmallow import fields

    from extender.framework import registry
    from extender.policy.schema import PolicySchema

    def nested(field):
        if isinstance(field, fields.Nested):
            return [field.schema]
        if isinstance(field, fields.List):
            return nested(field.inner)
        if isinstance(field, fields.Dict) and field.value_field is not None:
            return nested(field.value_field)
        return []

    args = [registry.lookup(name).args_schema for name in registry.names()]
    stack = [PolicySchema(), *(schema() for schema in args if schema is not None)]
    found: dict[type, object] = {}
    while stack:
        schema = stack.pop()
        if type(schema) not in found and type(schema).__module__.startswith("extender."):
            found[type(schema)] = schema
            stack.extend(child for field in schema.load_fields.values() for child in nested(field))
    return found


def test_every_cross_field_check_of_a_policy_runs_beside_field_errors():
    """So that check-policy and start-up report every problem of a file in one run, whatever plugin it names."""
    schemas = _policy_schemas()
    assert {"PolicySchema", "WindowSchema", "RequirementSchema", "NodeSourceSchema", "InstanceCostArgs"} <= {
        schema.__name__ for schema in schemas
    }
    skipping = [
        f"{schema.__module__}.{schema.__name__}.{name}"
        for schema in schemas
        for name, _, options in schema._hooks["validates_schema"]
        if options["skip_on_field_errors"]
    ]
    assert skipping == [], "use validates_schema(skip_on_field_errors=False), see extender.framework.args.failed_fields"


@pytest.mark.parametrize("name", ["filter", "prioritize", "preempt", "bind", "healthz"])
def test_a_profile_named_like_a_verb_is_rejected(name):
    assert problems(f"profiles: [{{name: {name}}}]") == [
        (f"profiles[0].name: {name!r} is a verb of the extender's URLs (filter, prioritize, preempt, bind, healthz): "
         "choose another name")
    ]


def test_a_profile_named_like_the_function_is_rejected(monkeypatch):
    monkeypatch.setenv("K_SERVICE", "scheduler-extender")
    assert problems("profiles: [{name: scheduler-extender}, {name: default}]") == [
        ("profiles[0].name: 'scheduler-extender' is the function's own name, which may prefix its URLs: choose "
         "another name")
    ]


def test_static_inventory_globs_are_checked():
    assert problems(
        "nodeSource: {static: {nodes: [{names: ['gke_pool_*'], labels: {a: b}}]}}\nprofiles: [{name: a}]"
    ) == [
        (
            "nodeSource.static.nodes[0].names[0]: glob 'gke_pool_*' can never match a node name: '_' cannot appear in "
            "one (node names hold lowercase letters, digits, '-' and '.'; globs add *, ? and [...])"
        )
    ]


# --- Label keys the node source supplies -----------------------------------------------------------


def _rules(*selectors: str) -> str:
    rules = ", ".join(f"{{name: r{index}, nodeSelector: {selector}}}" for index, selector in enumerate(selectors))
    return f"""
profiles:
- name: default
  plugins: {{filter: {{enabled: [{{name: NodeLabelPolicy}}]}}}}
  pluginConfig: [{{name: NodeLabelPolicy, args: {{rules: [{rules}]}}}}]
"""


SPOT_ABSENT = "{matchExpressions: [{key: cloud.google.com/gke-spot, operator: DoesNotExist}]}"
POOL_IS_GPU = "{matchLabels: {cloud.google.com/gke-nodepool: gpu}}"
REGION = "{matchLabels: {topology.kubernetes.io/region: europe-west1}}"


def test_a_rule_on_a_label_the_names_source_cannot_supply_is_rejected_with_its_field_path():
    """The names source knows the node pool only: a DoesNotExist rule on the spot label passed every spot node, and
    a rule on the region rejected every node."""
    got = problems("nodeSource: {names: {cluster: prod}}" + _rules(POOL_IS_GPU, SPOT_ABSENT, REGION))
    supplies = "(it supplies: cloud.google.com/gke-nodepool), so the rule would judge every node as lacking it"
    assert got == [
        (
            "profiles[0].pluginConfig[0].args.rules[1].nodeSelector.matchExpressions[0].key: plugin NodeLabelPolicy "
            f"reads node label cloud.google.com/gke-spot: the names nodeSource does not supply it {supplies}"
        ),
        (
            "profiles[0].pluginConfig[0].args.rules[2].nodeSelector.matchLabels.topology.kubernetes.io/region: plugin "
            "NodeLabelPolicy reads node label topology.kubernetes.io/region: the names nodeSource does not supply it "
            f"{supplies}"
        ),
    ]
    parse_policy("nodeSource: {names: {cluster: prod}}" + _rules(POOL_IS_GPU), "test.yaml")


def test_the_static_source_supplies_the_keys_of_its_entries():
    static = "nodeSource: {static: {nodes: [{names: ['*'], labels: {cloud.google.com/gke-nodepool: gpu}}]}}"
    (line,) = problems(static + _rules(POOL_IS_GPU, SPOT_ABSENT))
    assert line.startswith("profiles[0].pluginConfig[0].args.rules[1].nodeSelector.matchExpressions[0].key: ")
    assert "the static nodeSource does not supply it (it supplies: cloud.google.com/gke-nodepool)" in line
    spot = (
        "nodeSource: {static: {nodes: [{names: ['*'], labels: {cloud.google.com/gke-nodepool: a}}, "
        "{names: ['*-spot-*'], labels: {cloud.google.com/gke-spot: 'true'}}]}}"
    )
    parse_policy(spot + _rules(POOL_IS_GPU, SPOT_ABSENT), "test.yaml")


def test_kubernetes_source_and_full_nodes_supply_every_key():
    parse_policy("nodeSource: {kubernetes: {}}" + _rules(SPOT_ABSENT, REGION), "test.yaml")
    parse_policy("nodeCacheCapable: false" + _rules(SPOT_ABSENT, REGION), "test.yaml")
    # With full nodes and a node source, filter reads every label, but preempt the source's: only trusting the
    # scheduler's filter there takes the keys the source lacks (tests/test_preempt_filters.py).
    trusting = "nodeCacheCapable: false\npreemptTrustsSchedulerFilter: true\nnodeSource: {names: {cluster: p}}"
    parse_policy(trusting + _rules(SPOT_ABSENT, REGION), "test.yaml")


def test_score_plugins_declare_their_keys_too():
    got = problems(
        """
        nodeSource: {names: {cluster: prod}}
        profiles:
        - name: default
          plugins: {score: {enabled: [{name: InstanceCost, weight: 1}, {name: TopologyPreference, weight: 1}]}}
          pluginConfig:
          - {name: InstanceCost, args: {prices: {e2-standard-4: 0.134}, spotDiscount: 0.7}}
          - name: TopologyPreference
            args:
              preferences:
              - {label: cloud.google.com/gke-nodepool, weights: {a: 1}}
              - {label: topology.kubernetes.io/zone, weights: {b: 1}}
        """
    )
    assert [line.split(": plugin")[0] for line in got] == [
        "profiles[0].plugins.score.enabled[0].name",
        "profiles[0].pluginConfig[0].args.spotDiscount",
        "profiles[0].pluginConfig[1].args.preferences[1].label",
    ]
    assert "reads node label node.kubernetes.io/instance-type or beta.kubernetes.io/instance-type" in got[0]
    assert "reads node label cloud.google.com/gke-spot or cloud.google.com/gke-preemptible" in got[1]


PREEMPTING = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolicy}]}
    preempt: {enabled: [{name: ProtectedVictims}]}
  pluginConfig:
  - name: NodeLabelPolicy
    args: {rules: [{name: r, nodeSelector: {matchLabels: {cloud.google.com/gke-nodepool: gpu}}}]}
  - {name: ProtectedVictims, args: {protect: [{name: system, pods: {namespaces: [kube-system]}}]}}
"""


def test_a_label_filter_in_a_preempting_full_node_profile_needs_a_node_source_or_the_opt_in():
    """Preempt requests never carry Node objects: in full-node mode without a node source the label filter used to be
    skipped silently during preempt."""
    assert problems("nodeCacheCapable: false" + PREEMPTING) == [
        ("profiles[0].plugins.filter.enabled[0].name: plugin NodeLabelPolicy reads node labels, which preempt requests "
         "never carry (they hold victims, not Node objects), so preempt could not evaluate it: configure a nodeSource, "
         "or set preemptTrustsSchedulerFilter: true to rely on the scheduler having excluded the nodes this filter "
         "rejected (see docs/policy.md)")
    ]
    parse_policy("nodeCacheCapable: false\npreemptTrustsSchedulerFilter: true" + PREEMPTING, "test.yaml")
    parse_policy("nodeCacheCapable: false\nnodeSource: {names: {cluster: prod}}" + PREEMPTING, "test.yaml")
    # With full nodes, filters see every label, but preempt only what the node source supplies.
    spot_rule = PREEMPTING.replace("{matchLabels: {cloud.google.com/gke-nodepool: gpu}}", SPOT_ABSENT)
    (line,) = problems("nodeCacheCapable: false\nnodeSource: {names: {cluster: prod}}" + spot_rule)
    assert "preempt requests (which carry no Node objects) take labels from the nodeSource" in line


def test_preempt_evaluates_the_label_filters_of_the_documented_example(client_factory, tmp_path):
    """The complete example used to rely on full nodes alone: preempt, which gets no Node objects, skipped
    NodeLabelPolicy and accepted a shop pod's victim on a gpu-pool node that filter rejects. Without a node source
    it is now rejected; with the names source it declares, preempt judges the node pool."""
    from tests.test_decision_log import FULL_PREEMPT

    complete = next(
        block
        for block in code_blocks("yaml")
        if block.startswith("apiVersion:") and "profiles:" in block and "InstanceCost" in block
    )
    without_source = complete.replace("nodeSource:\n  names: {cluster: prod}\n", "")
    assert without_source != complete
    assert any("preemptTrustsSchedulerFilter" in line for line in problems(without_source))

    policy = tmp_path / "policy.yaml"
    policy.write_text(complete)
    request = FULL_PREEMPT.request
    victims = next(iter(request["NodeNameToVictims"].values()))
    gpu, general = "gke-prod-gpu-1a2b3c4d-x1y2", "gke-prod-general-1a2b3c4d-x1y2"
    payload = {
        "Pod": {**request["Pod"], "metadata": {**request["Pod"]["metadata"], "namespace": "shop"}},
        "NodeNameToVictims": {gpu: victims, general: victims},
        "NodeNameToMetaVictims": None,
    }
    answer = client_factory(policy).post("/preempt", json=payload).get_json()
    assert list(answer["NodeNameToMetaVictims"]) == [general]


def test_plugin_entries_take_a_failure_policy_and_an_enforcement_checked_at_their_field_paths():
    entries = """
    failurePolicy: Fail
    nodeCacheCapable: false
    profiles:
    - name: default
      plugins:
        filter: {enabled: [{name: NodeLabelPolicy, failurePolicy: Ignore, enforcement: Audit}]}
        score: {enabled: [{name: TopologyPreference, weight: 1, failurePolicy: {policy}, enforcement: {enforcement}}]}
      pluginConfig:
      - {name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {matchLabels: {pool: gpu}}}]}}
      - {name: TopologyPreference, args: {preferences: [{label: zone, weights: {a: 100}}]}}
    """
    valid = parse_policy(textwrap.dedent(entries.replace("{policy}", "Fail").replace("{enforcement}", "Enforce")), "t")
    profile = valid.profiles["default"]
    label_policy, = profile.filters
    assert profile.entry("filter", label_policy) == EntryPolicy(fail_open=True, audit=True)
    assert profile.entry("score", profile.scores[0].plugin) == EntryPolicy(fail_open=False, audit=False)
    assert sorted(problems(entries.replace("{policy}", "Maybe").replace("{enforcement}", "audit"))) == [
        "profiles[0].plugins.score.enabled[0].enforcement: Must be one of: Enforce, Audit.",
        "profiles[0].plugins.score.enabled[0].failurePolicy: Must be one of: Fail, Ignore.",
    ]


def test_check_policy_lists_what_an_entry_sets_apart(tmp_path, capsys):
    from extender.__main__ import main

    path = tmp_path / "policy.yaml"
    path.write_text(
        "nodeCacheCapable: false\nprofiles:\n- name: default\n  plugins:\n"
        "    filter: {enabled: [{name: NodeNameFilter}, {name: NodeLabelPolicy, failurePolicy: Ignore, enforcement: "
        "Audit}]}\n"
        "  pluginConfig:\n  - {name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {matchLabels: {pool: "
        "gpu}}}]}}\n"
    )
    assert main(["check-policy", str(path)]) == 0
    assert "filter NodeNameFilter, NodeLabelPolicy (failurePolicy Ignore, enforcement Audit)" in capsys.readouterr().out


def test_an_entry_without_a_failure_policy_takes_the_policy_level_one():
    text = """
    failurePolicy: Ignore
    nodeCacheCapable: false
    profiles:
    - name: default
      plugins:
        filter: {enabled: [{name: NodeLabelPolicy}]}
      pluginConfig:
      - {name: NodeLabelPolicy, args: {rules: [{name: r, nodeSelector: {matchLabels: {pool: gpu}}}]}}
    """
    profile = parse_policy(textwrap.dedent(text), "t").profiles["default"]
    assert profile.entry("filter", profile.filters[0]) == EntryPolicy(fail_open=True, audit=False)


def test_unknown_keys_are_reported_in_the_same_order_whatever_the_hash_seed(tmp_path: Path) -> None:
    """marshmallow finds unknown keys by set difference; the lines must not follow the interpreter's hash seed."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "profiles:\n- name: default\n  zeta: 1\n  alpha: 2\n  mid: 3\n  plugins: {filter: {enabled: [{name: "
        "NodeNameFilter}]}}\n"
    )
    outputs = set()
    for seed in ("1", "2", "3", "4", "5"):
        done = subprocess.run(
            [sys.executable, "-m", "extender", "check-policy", str(policy)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=Path(__file__).resolve().parent.parent,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        outputs.add(done.stdout + done.stderr)
    assert len(outputs) == 1, outputs
    (output,) = outputs
    lines = [line.strip() for line in output.splitlines() if "Unknown field" in line]
    known = "Unknown field. Known fields: name, plugins, pluginConfig"
    assert lines == [f"profiles[0].{key}: {known}" for key in ("alpha", "mid", "zeta")]
