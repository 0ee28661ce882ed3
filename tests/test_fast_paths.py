"""One-pass checks for thousands of names, nodes and scores give exactly what the marshmallow fields give."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import Schema, ValidationError, fields

from extender.wire.fields import NameList, non_empty_string
from extender.wire.priorities import HostPrioritySchema
from extender.wire.schemas import ExtenderArgsSchema, ExtenderFilterResultSchema, NodeItems, NodeSchema, _plain_args


class Fast(Schema):
    names = NameList()


class Slow(Schema):
    names = fields.List(non_empty_string())


def outcome(schema: Schema, data: dict) -> object:
    try:
        return schema.load(data)
    except ValidationError as exc:
        return exc.messages


@pytest.mark.parametrize("names", [["a", "b"], [], ["a", ""], ["a", 5, None, ""], "a", {"a": 1}, None, [["a"]]])
def test_name_lists_load_and_fail_like_a_list_of_non_empty_strings(names):
    assert outcome(Fast(), {"names": names}) == outcome(Slow(), {"names": names})


@pytest.mark.parametrize("names", [["a", "b"], [], None])
def test_name_lists_dump_like_a_list_of_strings(names):
    assert Fast().dump({"names": names}) == Slow().dump({"names": names})


@pytest.mark.parametrize(
    "entries",
    [
        [{"Host": "a", "Score": 3}, {"Host": "b", "Score": 10}],
        [{"Host": "a", "Score": 3.0}],
        [{"Host": "a", "Score": True}],
        [{"Host": "a", "Score": 1, "Extra": 2}],
        [],
    ],
)
def test_host_priorities_dump_like_the_marshmallow_fields(entries):
    assert HostPrioritySchema(many=True).dump(entries) == Schema.dump(HostPrioritySchema(many=True), entries)


@pytest.mark.parametrize(
    "answer",
    [
        {"FailedNodes": {"a": "why"}, "FailedAndUnresolvableNodes": {}, "Error": "", "NodeNames": ["b", "c"]},
        {"FailedNodes": {}, "FailedAndUnresolvableNodes": {"a": "why"}, "Error": "", "Nodes": {"items": []}},
        {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": "broken"},
        {"Error": "", "NodeNames": ["a", 1]},
        {"Error": 3, "NodeNames": []},
        {"NodeNames": ["a"]},
    ],
)
def test_filter_answers_dump_like_the_marshmallow_fields(answer):
    schema = ExtenderFilterResultSchema()
    dumped, expected = schema.dump(answer), Schema.dump(schema, answer)
    assert dumped == expected and list(dumped) == list(expected)


class Items(Schema):
    items = NodeItems()


@pytest.mark.parametrize(
    "items",
    [
        [{"metadata": {"name": "a", "labels": {"zone": "x"}}, "status": {}}, {"metadata": {"name": "b"}}],
        [{"metadata": {"name": "a", "labels": None}}],
        [{"metadata": {"name": "a"}}, {"metadata": {"name": ""}}],
        [{"metadata": {"name": "a", "labels": {"zone": 1}}}],
        [{"metadata": None}, "node", {"metadata": {"name": 7}}],
    ],
)
def test_node_items_load_like_node_schema(items):
    try:
        expected = [
            (facts["metadata"]["name"], facts["metadata"]["labels"]) for facts in NodeSchema(many=True).load(items)
        ]
    except ValidationError as exc:
        refused = exc
    else:
        refused = None
    if refused is not None:
        with pytest.raises(ValidationError) as raised:
            Items().load({"items": items})
        assert raised.value.messages == {"items": refused.messages}
    else:
        nodes = Items().load({"items": items})["items"]
        assert [(node.name, node.labels) for node in nodes] == expected
        assert [node.raw for node in nodes] == items


TEXT = st.one_of(st.none(), st.sampled_from(["", "a", "node-1"]), st.integers(-1, 1), st.booleans(), st.just([]))
STRING_MAP = st.one_of(
    st.none(), st.just([]), st.dictionaries(st.sampled_from(["k", "zone"]), st.one_of(st.just("v"), st.none(), TEXT))
)
PODS = st.one_of(
    st.none(),
    st.just("pod"),
    st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.one_of(
                st.none(),
                st.just([]),
                st.fixed_dictionaries(
                    {},
                    optional={
                        "uid": TEXT,
                        "name": TEXT,
                        "namespace": TEXT,
                        "labels": STRING_MAP,
                        "annotations": STRING_MAP,
                        "other": TEXT,
                    },
                ),
            ),
            "spec": st.one_of(
                st.none(),
                st.just("spec"),
                st.fixed_dictionaries(
                    {},
                    optional={
                        "priority": st.one_of(
                            st.none(), st.integers(-(2**70), 2**70), st.booleans(), st.floats(0, 2), TEXT
                        )
                    },
                ),
            ),
        },
    ),
)
NAMES = st.one_of(
    st.none(), st.just("names"), st.lists(st.one_of(st.sampled_from(["a", "b", "c", ""]), TEXT), max_size=4)
)
NODE_ITEMS = st.lists(
    st.one_of(
        st.fixed_dictionaries({"metadata": st.fixed_dictionaries({"name": TEXT}, optional={"labels": STRING_MAP})}),
        st.just("node"),
    ),
    max_size=3,
)
NODES = st.one_of(
    st.none(), st.just([]), st.fixed_dictionaries({}, optional={"items": st.one_of(st.none(), st.just({}), NODE_ITEMS)})
)
ARGS = st.one_of(
    st.just([]),
    st.fixed_dictionaries({}, optional={"Pod": PODS, "Nodes": NODES, "NodeNames": NAMES, "Extra": TEXT}),
)


@st.composite
def nearly_valid_args(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly plainly valid requests of either mode (nulls where the scheduler writes them), some with one field
    made wrong: every branch of the one-pass load is taken."""
    word = st.sampled_from(["a", "b", "node-1", "zone"])
    maps = st.one_of(st.none(), st.dictionaries(word, word, max_size=3))
    metadata = draw(
        st.fixed_dictionaries(
            {"name": word},
            optional={"uid": word, "namespace": st.one_of(st.none(), word), "labels": maps, "annotations": maps},
        )
    )
    pod: dict[str, Any] = {"metadata": metadata}
    if draw(st.booleans()):
        pod["spec"] = draw(st.fixed_dictionaries({}, optional={"priority": st.one_of(st.none(), st.integers())}))
    names = draw(st.lists(word, max_size=4, unique=True))
    if draw(st.booleans()):
        items = [{"metadata": {"name": name, "labels": draw(maps)}} for name in names]
        data: dict[str, Any] = {"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    else:
        data = {"Pod": pod, "Nodes": None, "NodeNames": names}
    if draw(st.booleans()):  # one field made wrong
        target, key = draw(
            st.sampled_from(
                [(data, "Pod"), (data, "NodeNames"), (data, "Nodes"), (pod, "metadata"), (pod, "spec"),
                 (metadata, "name"), (metadata, "uid"), (metadata, "labels"), (metadata, "annotations")]
            )
        )
        target[key] = draw(st.one_of(TEXT, st.just({"k": 1}), st.just(["a", "a"]), st.just(["a", ""]), st.floats(0, 2)))
    return data


def _loaded(load: Any) -> object:
    try:
        args = load()
    except ValidationError as exc:
        return exc.messages
    nodes = None if args.nodes is None else [(node.name, node.labels, node.raw) for node in args.nodes]
    return args.pod, nodes, args.node_names


@settings(max_examples=400, deadline=None)
@given(data=st.one_of(ARGS, nearly_valid_args()))
def test_extender_args_load_in_one_pass_as_the_schema_fields_do(data):
    schema = ExtenderArgsSchema()
    assert _loaded(lambda: schema.load(data)) == _loaded(lambda: Schema.load(schema, data))


def test_plainly_valid_extender_args_take_the_one_pass_load():
    pod = {"metadata": {"name": "p", "uid": "u", "labels": {"app": "a"}}, "spec": {"priority": 7}}
    loaded = _plain_args({"Pod": pod, "Nodes": None, "NodeNames": ["a", "b"]})
    assert loaded is not None and loaded.node_names == ["a", "b"] and loaded.pod.priority == 7
