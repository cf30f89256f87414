"""Delta encoding and compression, the codec alone (no database).

msgpack item boundaries, list and dict deltas and their reconstruction checks, tampered
delta rows, compression tags, the value cache's bound, item fingerprints and the
new-items-only list encoding with its self-check. Storage rules, the round-trip property
and lifecycle safety on real databases are in ``test_delta.py``.
"""

from __future__ import annotations

import random
import struct
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from threadline import codec
from threadline.codec import BlobCodec
from threadline.codec.cache import THREAD_OVERHEAD, entry_bytes
from threadline.codec.serde import default_serde
from threadline.errors import CorruptRowError

SERDE = default_serde()


def dumps(value: Any) -> bytes:
    return SERDE.dumps_typed(value)[1]


def cont(value: Any) -> codec.Container:
    c = codec.container(dumps(value))
    assert c is not None
    return c


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(st.lists(JSONISH, max_size=40))
@settings(max_examples=200, deadline=None)
def test_skip_finds_the_item_boundaries_the_serializer_writes(items: list) -> None:
    data = dumps(items)
    kind, count, hl = codec.split(data)
    assert (kind, count) == (codec.LIST, len(items))
    pos = hl
    for item in SERDE.loads_typed(("msgpack", data)):
        end = codec.skip(data, pos)
        assert SERDE.loads_typed(("msgpack", data[pos:end])) == item
        pos = end
    assert pos == len(data)


def test_list_delta_reproduces_the_snapshot_bytes() -> None:
    base = [{"i": i, "text": "x" * 40} for i in range(20)]
    new = base + [{"i": 99, "text": "appended"}, "and a string"]
    found = codec.make_delta(cont(base), cont(new), max_depth=8)
    assert found is not None
    prefix, payload, value = found
    assert prefix == codec.DELTA_LIST and value.depth == 1
    rows = {"1": ("msgpack", dumps(base), None), "2": (prefix + "msgpack", payload, "1")}
    tag, raw, got = codec.resolve(rows, "2", "test")
    assert tag == "msgpack" and raw is None
    assert got.serialized() == dumps(new)
    assert codec.load(SERDE, (tag, raw, got), "test") == new
    # the delta alone is a valid msgpack array of the appended items
    assert SERDE.loads_typed(("msgpack", payload[23:])) == new[20:]


def test_dict_delta_adds_and_changes_keys_in_place() -> None:
    base = {f"k{i}": "v" * 30 for i in range(12)}
    new = dict(base)
    new["k3"] = {"changed": True}
    new["zz"] = [1, 2, 3]
    found = codec.make_delta(cont(base), cont(new), max_depth=8)
    assert found is not None and found[0] == codec.DELTA_DICT
    assert SERDE.loads_typed(("msgpack", found[1][23:])) == {"k3": {"changed": True}, "zz": [1, 2, 3]}
    rows = {"1": ("msgpack", dumps(base), None), "2": ("delta-dict:msgpack", found[1], "1")}
    resolved = codec.resolve(rows, "2", "test")
    got = codec.load(SERDE, resolved, "test")
    assert got == new and list(got) == list(new)  # same keys, same order
    assert resolved[2].serialized() == dumps(new)


@pytest.mark.parametrize(
    "base, new",
    [
        ([f"item {i}" * 5 for i in range(20)], [f"item {i}" * 5 for i in range(19)]),  # shrunk
        ([f"item {i}" * 5 for i in range(20)], ["changed"] + [f"item {i}" * 5 for i in range(1, 21)]),  # replaced item
        ({f"k{i}": "v" * 20 for i in range(20)}, {f"k{i}": "v" * 20 for i in range(1, 21)}),  # key removed
        ({f"k{i}": "v" * 20 for i in range(20)}, {f"k{i}": "v" * 20 for i in reversed(range(20))}),  # reordered
        ([f"item {i}" * 5 for i in range(20)], {f"item {i}": 1 for i in range(30)}),  # list → dict
        ([f"item {i}" * 5 for i in range(4)], [f"item {i}" * 5 for i in range(40)]),  # delta larger than half the value
    ],
)
def test_no_delta_when_the_value_does_not_extend_its_base(base: Any, new: Any) -> None:
    assert codec.make_delta(cont(base), cont(new), max_depth=8) is None


def test_no_delta_past_max_depth() -> None:
    base = [f"item {i}" * 5 for i in range(20)]
    c = cont(base)
    deep = c.with_chain(3, 0)
    new = cont(base + ["more"])
    assert codec.make_delta(deep, new, max_depth=3) is None
    assert codec.make_delta(deep, new, max_depth=4)[2].depth == 4


def test_delta_on_a_different_base_fails_loudly() -> None:
    base = ["a" * 50] * 10
    other = ["b" * 50] * 10  # same length, same count: only the CRC tells them apart
    new = base + ["c" * 50]
    _, payload, _ = codec.make_delta(cont(base), cont(new), max_depth=4)
    rows = {"1": ("msgpack", dumps(other), None), "2": ("delta-list:msgpack", payload, "1")}
    with pytest.raises(CorruptRowError, match="does not reproduce"):
        codec.resolve(rows, "2", "blob ('t', '', 'messages')")


@pytest.mark.parametrize(
    "rows, match",
    [
        ({"2": ("delta-list:msgpack", b"\x01", "1")}, "not stored"),
        ({"1": ("msgpack", dumps(["x"] * 10), None), "2": ("delta-list:msgpack", b"\x01\x00", "1")}, "truncated"),
        ({"1": ("msgpack", dumps(["x"] * 10), None), "2": ("delta-list:msgpack+zstd", b"not zstd", "1")}, "zstd"),
        ({"1": ("delta-list:msgpack", b"", "2"), "2": ("delta-list:msgpack", b"", "1")}, "cycle"),
        ({"1": ("msgpack", dumps(5), None), "2": ("delta-list:msgpack", struct.pack("<BHIQII", 1, 1, 1, 1, 0, 1) + b"\x91\x01", "1")}, "not a list or dict"),
        ({"2": ("delta-list:msgpack", b"", None)}, "no base_version"),
    ],
)
def test_tampered_delta_rows_raise_corrupt_row_error(rows: dict, match: str) -> None:
    with pytest.raises(CorruptRowError, match=match):
        codec.resolve(rows, "2", "blob ('t', '', 'c')")


def test_decode_refuses_delta_rows_and_pickle() -> None:
    with pytest.raises(CorruptRowError, match="delta"):
        codec.decode(SERDE, "delta-list:msgpack", b"", "row")
    with pytest.raises(CorruptRowError, match="pickle"):
        codec.decode(SERDE, "pickle+zstd", codec.compress("pickle", b"x" * 2000, min_bytes=0)[1], "row")


def test_compression_tags_and_threshold() -> None:
    big = ["the same words again and again"] * 100
    tag, data = codec.compress(*SERDE.dumps_typed(big), min_bytes=512)
    assert tag == "msgpack+zstd" and len(data) < len(dumps(big)) / 5
    assert codec.decode(SERDE, tag, data, "row") == big
    small = ["short"]
    assert codec.compress(*SERDE.dumps_typed(small), min_bytes=512) == SERDE.dumps_typed(small)
    noise = random.Random(1).randbytes(4096)
    assert codec.compress("bytes", noise, min_bytes=0) == ("bytes", noise)  # does not shrink: kept plain
    assert codec.compress("msgpack", dumps(big), min_bytes=-1)[0] == "msgpack"  # disabled


def test_cache_is_bounded_and_keyed_by_version() -> None:
    entry = codec.Entry(cont(["x" * 300]), "msgpack", 305)
    size = entry_bytes(("t", "", "c", "0"), entry)
    assert size > 305  # the value, its key and the per-entry overhead
    cache = codec.BlobCache(max_bytes=3 * size + THREAD_OVERHEAD + 10)
    for i in range(5):
        cache.put(("t", "", "c", str(i)), entry)
    assert len(cache) == 3 and cache.nbytes == 3 * size + THREAD_OVERHEAD <= cache.max_bytes
    assert cache.get(("t", "", "c", "0")) is None and cache.get(("t", "", "c", "4")) is entry
    cache = codec.BlobCache(max_bytes=1 << 20, max_checkpoints=2)
    cache.put(("t", "", "c", "4"), entry)
    for i in range(3):
        cache.put_versions(("t", "", f"ck{i}"), codec.Versions({"c": str(i)}))
    assert cache.versions(("t", "", "ck0")) is None and cache.versions(("t", "", "ck2")).of == {"c": "2"}
    cache.forget_threads(["t"])
    assert len(cache) == 0 and cache.versions(("t", "", "ck2")) is None and cache.nbytes == 0


def test_fingerprints_are_exact_about_content_and_type() -> None:
    fp = codec.fingerprints
    assert fp([1]) != fp([True]) != fp([1.0])
    assert fp([{"a": 1, "b": 2}]) != fp([{"b": 2, "a": 1}])  # key order is kept
    assert fp([0.0]) != fp([-0.0])

    class Tag(str):
        pass

    assert fp([Tag("x")]) is None  # subclasses are refused: no fingerprint, whole serialization
    assert fp([object()]) is None
    # anything but the exact core types, on which LangGraph's serializer writes what the fingerprint does
    for odd in (datetime.now(timezone.utc), uuid.uuid4(), {1: "non-str key"}, "\ud800", 1 << 70, {"a": [Tag("x")]}):
        assert fp([odd]) is None, odd
    # a tuple is an array to LangGraph's serializer as to the fingerprint: the same bytes either way
    assert fp([{"a": (1, 2)}]) == fp([{"a": [1, 2]}]) and SERDE.dumps_typed({"a": (1, 2)}) == SERDE.dumps_typed({"a": [1, 2]})
    assert fp(["x" * 20] * 70_000).extends(fp(["x" * 20] * 10))  # array 32 and fixarray headers
    msg = AIMessage(content="hello", id="m1", additional_kwargs={"k": [1]})
    before = fp([msg])
    msg.additional_kwargs["k"].append(2)  # mutated in place, two levels down
    assert fp([msg]) != before  # content, not identity: the same object now fingerprints differently
    assert fp([dict(msg.__dict__)]) != fp([msg])  # a dict with a model's state is not the model
    human = HumanMessage(content="hello", id="m1")
    grown = fp([human, msg, {"k": 1}])
    assert grown.extends(fp([human, msg])) and not grown.extends(fp([msg, human]))
    object.__setattr__(human, "__class__", AIMessage)  # another class, the same state
    assert not fp([human, msg, {"k": 1}]).extends(fp([HumanMessage(content="hello", id="m1"), msg]))
    # content only: not who else holds an item's parts (a chat model's copy of the messages does for a while)
    items = [AIMessage(content=f"answer {i} " * 20, id=f"a{i}", tool_calls=[{"name": "t", "args": {}, "id": f"c{i}"}]) for i in range(3)]
    alone = fp(items)
    held = [(m.content, m.tool_calls[0]["id"]) for m in items]
    assert fp(items) == alone and held


def _entry_for(bc: BlobCodec, value: list) -> codec.Entry:
    tag, data = SERDE.dumps_typed(value)
    c = bc.candidate(tag, data, value)
    assert c is not None and c.fps is not None
    return codec.Entry(c, tag, len(data))


def test_encode_list_serializes_only_new_items_and_only_when_the_rest_is_unchanged() -> None:
    bc = BlobCodec(delta_min_bytes=0, _checks_left=0)
    value = [AIMessage(content=f"message {i} " * 10, id=f"m{i}") for i in range(20)]
    base = _entry_for(bc, value)
    grown = value + [HumanMessage(content="new", id="h")]
    data, c = bc.encode_list(SERDE, grown, base)
    assert data == SERDE.dumps_typed(grown)[1] and c.count == 21  # byte for byte the whole serialization
    value[3].content = "changed in place"  # the same object, new content
    assert bc.encode_list(SERDE, value + [HumanMessage(content="new", id="h")], base) is None
    assert bc.encode_list(SERDE, value[:10], base) is None  # shrunk


def test_encode_list_self_check_turns_the_fast_path_off_when_bytes_differ() -> None:
    class Odd:
        """A serializer whose list bytes are not its items' back to back."""

        def dumps_typed(self, obj):
            tag, data = SERDE.dumps_typed(obj)
            if isinstance(obj, list) and len(obj) > 3:
                return tag, SERDE.dumps_typed(list(reversed(obj)))[1]
            return tag, data

    bc = BlobCodec(delta_min_bytes=0)
    value = [f"item {i} " * 8 for i in range(6)]
    base = _entry_for(bc, value)
    with pytest.warns(RuntimeWarning, match="whole"):
        assert bc.encode_list(Odd(), value + ["more", "and more"], base) is None
    assert bc.fast_lists is False
