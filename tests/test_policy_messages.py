"""A policy's problems say how to fix them, the same way for every field: what YAML read where a value has the wrong
type and how to write it, the known name nearest an unknown one, and each problem once."""

from __future__ import annotations

import json

import pytest

from extender.policy.loader import PolicyError, parse_policy

RULE = "profiles[0].pluginConfig[0].args.rules[0]"


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, "policy.yaml")
    return raised.value.problems


def label_rule(selector: str, pods: str = "{}") -> str:
    return f"""
nodeCacheCapable: false
profiles:
- name: default
  plugins: {{filter: {{enabled: [{{name: NodeLabelPolicy}}]}}}}
  pluginConfig:
  - name: NodeLabelPolicy
    args:
      rules:
      - name: r
        pods: {pods}
        nodeSelector: {selector}
"""


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("true", "a boolean; quote it: 'true'"),
        ("yes", "a boolean; quote it: 'yes'"),  # YAML 1.1
        ("1.5", "a number; quote it: '1.5'"),
        ("22:00", "the number 1320; quote it: '22:00'"),  # YAML 1.1's base 60
        ("2026-03-01", "a date; quote it: '2026-03-01'"),
    ],
)
def test_a_scalar_yaml_read_as_another_type_says_so_and_how_to_quote_it(value, read):
    assert problems(label_rule(f"{{matchLabels: {{cloud.google.com/gke-spot: {value}}}}}")) == [
        f"{RULE}.nodeSelector.matchLabels.cloud.google.com/gke-spot: Not a valid string. YAML read {read}"
    ]


def test_a_quoted_number_says_to_drop_the_quotes_and_a_boolean_for_a_number_says_what_yaml_read():
    policy = 'profiles: [{name: default, plugins: {score: {enabled: [{name: NodeNameFilter, weight: "5"}]}}}]'
    assert "weight: Not a valid integer. YAML read a string; write it without quotes: 5" in problems(policy)[0]
    policy = "profiles: [{name: default, plugins: {score: {enabled: [{name: NodeNameFilter, weight: yes}]}}}]"
    assert "weight: Not a valid integer. YAML read a boolean (yes)" in problems(policy)[0]


def test_a_quoted_value_that_is_meant_as_a_string_gets_no_hint():
    [problem] = problems(label_rule("{matchExpressions: [{key: a, operator: Exist}]}"))
    assert problem.endswith("operator: unknown operator 'Exist': use one of In, NotIn, Exists, DoesNotExist, Gt, Lt")


def test_json_is_yaml_too():
    document = json.loads(json.dumps({"nodeCacheCapable": False, "profiles": [{"name": "default"}]}))
    document["profiles"][0]["name"] = True
    expected = "profiles[0].name: Not a valid string. YAML read a boolean; quote it: 'true'"
    assert problems(json.dumps(document)) == [expected]


def test_a_maintenance_time_yaml_read_as_a_number():
    policy = """
profiles:
- name: default
  plugins: {filter: {enabled: [{name: NodeNameFilter}]}}
  pluginConfig:
  - name: NodeNameFilter
    args: {maintenance: [{name: m, nodes: ["*"], windows: [{from: 22:00, to: "04:00"}]}]}
"""
    window = "profiles[0].pluginConfig[0].args.maintenance[0].windows[0]"
    hint = "YAML read the number 1320; quote it: '22:00'"
    assert problems(policy) == [f'{window}.from: Not a valid string: a time of day is a quoted "HH:MM". {hint}']


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        (label_rule("{}", pods="{namespace: [ml]}"), f"{RULE}.pods.namespace: Unknown field. Did you mean namespaces?"),
        (
            "nodeCacheCapabel: true\nprofiles: [{name: default}]",
            "nodeCacheCapabel: Unknown field. Did you mean nodeCacheCapable?",
        ),
        (
            "nodeSource: {name: {cluster: prod}}\nprofiles: [{name: default}]",
            "nodeSource.name: Unknown field. Did you mean names?",
        ),
        (
            "nodeSource: {kubernetes: {maxwait: 1s}}\nprofiles: [{name: default}]",
            "nodeSource.kubernetes.maxwait: Unknown field. Did you mean maxWait?",
        ),
        ("profiles: [{name: default, plugin: {}}]", "profiles[0].plugin: Unknown field. Did you mean plugins?"),
        (
            "profiles: [{name: default, zzz: {}}]",
            "profiles[0].zzz: Unknown field. Known fields: name, plugins, pluginConfig",
        ),
    ],
)
def test_an_unknown_field_names_the_nearest_known_one_once(policy, problem):
    assert problems(policy) == [problem]


def test_an_unknown_plugin_is_reported_once_with_the_nearest_known_one():
    policy = """
profiles:
- name: default
  plugins:
    filter: {enabled: [{name: NodeLabelPolcy}]}
    preempt: {enabled: [{name: NodeLabelPolcy}]}
  pluginConfig:
  - name: NodeLabelPolcy
    args: {rules: []}
  - name: SpotOnly
    args: {}
"""
    assert [problem.split(" (known plugins: ")[0] for problem in problems(policy)] == [
        "profiles[0].plugins.filter.enabled[0].name: unknown plugin 'NodeLabelPolcy': did you mean NodeLabelPolicy?",
        "profiles[0].pluginConfig[1].name: unknown plugin 'SpotOnly'",
    ]


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        # YAML 1.1 reads 1:00 as 60 (base 60): one message gives the form that loads, not "quote it" then "HH:MM".
        (
            "1:00",
            (
                "Not a valid string: a time of day is a quoted \"HH:MM\". YAML read the number 60 (1:00 in base 60); "
                "write '01:00'"
            ),
        ),
        ('"1:00"', "'1:00' is not a time of day \"HH:MM\" (00:00..23:59, or 24:00 as an end): write '01:00'"),
        ("9:30", "YAML read the number 570 (9:30 in base 60); write '09:30'"),
    ],
)
def test_a_maintenance_time_with_one_digit_of_hours_says_the_form_that_loads_in_one_round(written, problem):
    policy = f"""
profiles:
- name: default
  plugins: {{filter: {{enabled: [{{name: NodeNameFilter}}]}}}}
  pluginConfig:
  - name: NodeNameFilter
    args: {{maintenance: [{{name: m, nodes: ["*"], windows: [{{from: {written}, to: "04:00"}}]}}]}}
"""
    [found] = problems(policy)
    assert found.startswith("profiles[0].pluginConfig[0].args.maintenance[0].windows[0].from: ")
    assert found.endswith(problem)
    fixed = policy.replace(f"from: {written}", f"from: {found.rsplit(' ', 1)[1]}")
    assert parse_policy(fixed, "policy.yaml").profiles  # the message's fix loads


def test_a_window_start_yaml_read_as_a_date_says_the_timestamp_to_write():
    policy = """
profiles:
- name: default
  plugins: {filter: {enabled: [{name: NodeNameFilter}]}}
  pluginConfig:
  - name: NodeNameFilter
    args: {maintenance: [{name: m, nodes: ["*"], windows: [{start: 2026-03-01, end: "2026-03-02T00:00:00Z"}]}]}
"""
    assert problems(policy) == [
        (
            "profiles[0].pluginConfig[0].args.maintenance[0].windows[0].start: 2026-03-01 is a date, not an instant: "
            "write a timestamp such as 2026-03-01T00:00:00Z"
        )
    ]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ('{deny: "*-canary-*"}', 'deny: Not a valid list. Write it as a list: ["*-canary-*"]'),
        (
            '{maintenance: [{name: m, nodes: ["*"], windows: [{days: Tue, from: "01:00", to: "03:00"}]}]}',
            "maintenance[0].windows[0].days: Not a valid list. Write it as a list: [Tue]",
        ),
        ('{deny: {a: 1}}', "deny: Not a valid list."),  # not one value: nothing to repeat
    ],
)
def test_one_value_where_a_list_is_wanted_says_the_list_to_write(args, problem):
    policy = f"""
profiles:
- name: default
  plugins: {{filter: {{enabled: [{{name: NodeNameFilter}}]}}}}
  pluginConfig:
  - name: NodeNameFilter
    args: {args}
"""
    assert problems(policy) == [f"profiles[0].pluginConfig[0].args.{problem}"]
