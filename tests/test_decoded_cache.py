"""The decoded values a saver's blob cache keeps (``codec.copies``): every read gets its own
copy, so user code mutating what ``get_tuple`` returned never changes what a later read,
another caller, or the stored rows give back."""

from __future__ import annotations

import copy

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadline import codec
from threadline.codec import copies
from tests.backends import Backend

SERDE = JsonPlusSerializer()


def _messages(start: int, n: int) -> list:
    out: list = []
    for i in range(start, start + n):
        call = {"name": "search", "args": {"query": f"q{i}", "opts": [1, {"deep": True}]}, "id": f"c{i}", "type": "tool_call"}
        out.append(AIMessage(content=f"answer {i} " * 20, id=f"ai{i}", tool_calls=[call], additional_kwargs={"k": [i]}))
        out.append(ToolMessage(content=f"result {i} " * 20, tool_call_id=f"c{i}", id=f"t{i}"))
    return out


def _put(saver, config: dict, messages: list, versions: dict, step: int) -> dict:
    ck = empty_checkpoint()
    ck["id"] = str(uuid6(clock_seq=step))
    versions["messages"] = saver.get_next_version(versions.get("messages"), None)
    ck["channel_values"] = {"messages": messages, "other": {"n": step}}
    versions["other"] = saver.get_next_version(versions.get("other"), None)
    ck["channel_versions"] = dict(versions)
    return saver.put(config, ck, {"source": "loop", "step": step}, {"messages": versions["messages"], "other": versions["other"]})


def _mutate(messages: list) -> None:
    messages[0].content = "changed"
    messages[0].tool_calls[0]["args"]["opts"][1]["deep"] = False
    messages[0].additional_kwargs["k"].append("x")
    messages[1].__pydantic_fields_set__.add("name")
    messages[1].response_metadata["added"] = True  # an empty dict in the kept value: a new one in each copy
    messages[1].__pydantic_extra__["added"] = True
    messages.append(HumanMessage(content="appended by user code"))


def test_fresh_copies_share_only_immutable_scalars() -> None:
    value = {"m": _messages(0, 2), "t": (1, [2]), "s": {1, "a"}, "f": 1.5}
    got = copies.fresh(value)
    assert got == value and SERDE.dumps_typed(got) == SERDE.dumps_typed(value)
    assert got["m"][0] is not value["m"][0] and got["m"][0].tool_calls is not value["m"][0].tool_calls
    assert got["m"][0].content is value["m"][0].content  # a str: shared, it cannot change
    _mutate(got["m"])
    got["t"][1].append(3)
    assert value == {"m": _messages(0, 2), "t": (1, [2]), "s": {1, "a"}, "f": 1.5}

    class Tagged(str):
        pass

    for odd in ([object()], {"k": Tagged("x")}, {(1, 2): 1}):
        assert copies.private(odd) is None  # not copied exactly: such values are deserialized every time


@pytest.mark.parametrize("warm_puts", [0, 3])
def test_mutating_what_get_tuple_returned_changes_no_later_read(sync_backend: Backend, warm_puts: int) -> None:
    """A list this saver put keeps what its first read decodes, a value read from the database
    what its second read does; later reads are copies of it (warm cache); ``warm_puts`` puts
    then extend the kept list with the new items' decoded bytes."""
    with sync_backend.open() as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        live, versions = _messages(0, 20), {}
        config = _put(saver, config, live, versions, 1)
        key = ("t", "", "messages", versions["messages"])
        first = saver.get_tuple(config)  # the first read of a list this saver put keeps what it decodes
        assert type(saver.blob_codec.cache.get(key).value.decoded) is list
        second = saver.get_tuple(config)  # a copy
        for step in range(warm_puts):
            live = live + _messages(100 + 10 * step, 2)
            config = _put(saver, config, live, versions, 2 + step)
        expected = copy.deepcopy(live)
        reads = [saver.get_tuple(config).checkpoint["channel_values"]["messages"] for _ in range(3)]
        for got in reads:
            assert got == expected and SERDE.dumps_typed(got) == SERDE.dumps_typed(expected)
        _mutate(reads[0])
        _mutate(first.checkpoint["channel_values"]["messages"])
        _mutate(second.checkpoint["channel_values"]["messages"])
        assert reads[1] == expected and reads[1][0] is not reads[2][0]
        after = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
        assert after == expected and SERDE.dumps_typed(after) == SERDE.dumps_typed(expected)
        saver.blob_codec.cache.clear()  # what the rows hold is what was put
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == expected
        latest = ("t", "", "messages", versions["messages"])
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == expected
        assert saver.blob_codec.cache.get(latest).value.decoded is codec.SEEN  # read from the rows, then a cache hit: not kept
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == expected
        assert type(saver.blob_codec.cache.get(latest).value.decoded) is list  # its second cache hit keeps it


def test_a_list_extended_by_what_copies_cannot_copy_is_decoded_at_every_read(sync_backend: Backend) -> None:
    """A list extended by an item holding what ``copies`` cannot copy (a deque) is decoded by every
    read, each its own: nothing of it is kept."""
    from collections import deque

    with sync_backend.open() as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        live, versions = _messages(0, 4), {}
        config = _put(saver, config, live, versions, 1)
        saver.get_tuple(config)  # keeps the list
        live = [*live, deque([1, 2])]
        config = _put(saver, config, live, versions, 2)  # extends the kept list by the new item's bytes
        reads = [saver.get_tuple(config).checkpoint["channel_values"]["messages"] for _ in range(3)]
        assert all(got == live for got in reads) and reads[0][-1] is not reads[1][-1]
        reads[0][-1].append(3)
        _mutate(reads[1])
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == live


def test_new_items_kept_as_decoded_fall_back_to_a_decode_when_they_cannot_be_copied() -> None:
    """The new items of an extended list are kept as their first read decodes them (nothing else
    holds them); if the kept list cannot be copied, that read and every later one decode the value."""
    from threadline.codec.containers import LIST, Container, Extended
    from threadline.codec.deltas import load

    tag, data = SERDE.dumps_typed([1, 2])
    value = Container(LIST, 2, data, 1)
    value.decoded = Extended([1], (SERDE.dumps_typed([2])[1],))
    assert load(SERDE, ("msgpack", None, value), "row") == [1, 2] and value.decoded == [1, 2]  # kept
    value.decoded = Extended([object()], (SERDE.dumps_typed([2])[1],))  # a kept item copies cannot copy
    assert load(SERDE, ("msgpack", None, value), "row") == [1, 2]  # decoded from the row's bytes
    assert value.decoded is None


def test_a_kept_value_is_counted_in_the_cache_bytes(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        config = _put(saver, {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, _messages(0, 20), {}, 1)
        cache = saver.blob_codec.cache
        before = cache.nbytes
        saver.get_tuple(config)
        entries = [e for e, _ in cache._blobs.values()]
        assert cache.nbytes > before + 3 * sum(e.value.body_len for e in entries)
        assert all(e.value.kept for e in entries if e.value.kind == codec.LIST)
