"""The bound pods' map by node (extender/kube/sharded_map.py): every map published equals a plain dict changed the
same way at that moment, and still does after the changes that follow (a published map is never changed)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from extender.kube.sharded_map import SHARDS, ShardedIndex

KEYS = st.text(min_size=1, max_size=8)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), KEYS, st.integers()),
        st.tuples(st.just("pop"), KEYS, st.none()),
        st.tuples(st.just("publish"), st.none(), st.none()),
    ),
    max_size=300,
)


@given(STEPS)
def test_each_published_map_equals_a_dict_changed_alike_then_and_after(steps):
    index: ShardedIndex[int] = ShardedIndex()
    model: dict[str, int] = {}
    published = [(index.publish(), {})]
    for step, key, value in steps:
        if step == "set":
            index.set(key, value)
            model[key] = value
        elif step == "pop":
            index.pop(key)
            model.pop(key, None)
        else:
            published.append((index.publish(), dict(model)))
        assert index.get(key or "", -1) == model.get(key or "", -1)
    published.append((index.publish(), dict(model)))
    for mapping, then in published:
        assert mapping == then and dict(mapping) == then and len(mapping) == len(then) and bool(mapping) == bool(then)
        assert all(mapping[key] == then[key] and mapping.get(key) == then[key] and key in mapping for key in then)
        assert mapping.get("absent key", -1) == -1 and "absent key" not in mapping and 7 not in mapping


def test_a_map_shares_the_shards_no_key_of_which_changed():
    index: ShardedIndex[int] = ShardedIndex()
    for number in range(20 * SHARDS):
        index.set(f"node-{number}", number)
    before = index.publish()
    index.set("node-3", -3)
    after = index.publish()
    kept = [new is old for new, old in zip(after._shards, before._shards, strict=True)]
    assert kept.count(False) == 1 and after["node-3"] == -3 and before["node-3"] == 3
    assert index.publish() is not after and index.publish()._shards is after._shards  # nothing changed since
