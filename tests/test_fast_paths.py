"""One-pass checks for thousands of names, nodes and scores give exactly what the marshmallow fields give."""

from __future__ import annotations

import pytest
from marshmallow import Schema, ValidationError, fields

from extender.wire.fields import NameList, non_empty_string
from extender.wire.priorities import HostPrioritySchema
from extender.wire.schemas import NodeItems, NodeSchema


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
        with pytest.raises(ValidationError) as raised:
            Items().load({"items": items})
        assert raised.value.messages == {"items": exc.messages}
    else:
        nodes = Items().load({"items": items})["items"]
        assert [(node.name, node.labels) for node in nodes] == expected
        assert [node.raw for node in nodes] == items
