"""A get on Redis in one round trip (issue 43: "its cold read one round trip").

``get_tuple`` is one script (``scripts.GET``): the checkpoint, its pending writes and, for the
root namespace's latest checkpoint, its blobs with their delta chains and the writes their
references name, found through the blob fields the put that wrote it listed (``wix`` field
``latest_blobs``). Those fields are a hint, never the record: whatever the hint says, the read
returns what a read without it returns, at worst one round trip later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

import threadline.storage.redis.runner as runner
from redis_support import RedisTarget
from test_redis_saver import chat, url_of
from threadline import aopen_saver, open_saver
from threadline.codec import BlobCodec, Keyring

K1 = bytes(range(32)).hex()
TEXT = "a reply long enough to be stored once, as the pending write it came in " * 4  # a reference: 128 bytes and more


def cfg(thread_id: str, **more: str) -> dict:
    return {"configurable": {"thread_id": thread_id, **more}}


@contextmanager
def round_trips() -> Iterator[list[list[str]]]:
    """Each batch of commands the Redis runner sends (one round trip each), by name."""
    seen: list[list[str]] = []
    sync, async_ = runner._sync_batch, runner._async_batch

    def name(c: object) -> str:
        return getattr(c, "script", None) or c[0]  # type: ignore[index]

    def counted(client: object, batch: list) -> list:
        seen.append([name(c) for c in batch])
        return sync(client, batch)

    async def acounted(client: object, batch: list) -> list:
        seen.append([name(c) for c in batch])
        return await async_(client, batch)

    runner._sync_batch, runner._async_batch = counted, acounted
    try:
        yield seen
    finally:
        runner._sync_batch, runner._async_batch = sync, async_


def comparable(t: object) -> tuple:
    return (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)  # type: ignore[attr-defined]


def written(target: RedisTarget, thread_id: str, turns: int = 3) -> tuple:
    """A thread of ``turns`` turns of a real graph, written by one saver; (its latest tuple as that
    saver reads it, every checkpoint's tuple)."""
    with open_saver(url_of(target)) as saver:
        g = chat().compile(checkpointer=saver)
        for i in range(turns):
            g.invoke({"messages": [("user", f"question {i}")]}, cfg(thread_id))
        return saver.get_tuple(cfg(thread_id)), list(saver.list(cfg(thread_id)))


def referencing(target: RedisTarget, thread_id: str, keys: Keyring | None = None) -> tuple:
    """A thread whose messages are stored as references to the pending writes that appended them,
    written call by call as LangGraph's loop calls the saver (in a graph, whether a write is stored
    before the next put, and so referenced, depends on its threads' timing); as ``written``. Most
    values after the first are references (deltas not limited by the value's size)."""
    with open_saver(url_of(target), codec=BlobCodec(keys=keys, delta_piece_bytes=0)) as saver:
        checkpoint, messages = empty_checkpoint(), []
        config = saver.put(cfg(thread_id), {**checkpoint, "channel_values": {"messages": []}, "channel_versions": {"messages": "1"}},
                           {"source": "input", "step": -1}, {"messages": "1"})
        for step in range(4):
            reply = [AIMessage(content=f"{TEXT} {step}", id=f"reply-{step}")]
            saver.put_writes(config, [("messages", reply)], f"task-{step}", "")
            messages = messages + reply
            version = str(step + 2)
            checkpoint = {**checkpoint, "id": str(uuid6(clock_seq=step)), "channel_values": {"messages": messages},
                          "channel_versions": {"messages": version}}
            config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"messages": version})
        return saver.get_tuple(cfg(thread_id)), list(saver.list(cfg(thread_id)))


def blob_types(target: RedisTarget, thread_id: str, version: str | None = None) -> list[bytes]:
    """The stored types of the thread's blobs (of its messages' ``version`` only, when given)."""
    stored = target.client().hgetall(next(k for k in target.keys() if k.endswith(b"{" + thread_id.encode() + b"}:bl")))
    return [v.split(b"\x00", 1)[0] for f, v in stored.items() if version is None or f == f"\x00messages\x00{version}".encode()]


def test_a_get_is_one_round_trip_cold_and_warm_and_reads_what_was_written(any_redis_target: RedisTarget) -> None:
    for thread_id, write in (("graph", written), ("refs", referencing)):
        latest, history = write(any_redis_target, thread_id)
        with open_saver(url_of(any_redis_target)) as saver:  # a new process: nothing cached
            with round_trips() as seen:
                cold = saver.get_tuple(cfg(thread_id))
            assert seen == [["get"]], thread_id
            assert comparable(cold) == comparable(latest)
            with round_trips() as seen:
                warm = saver.get_tuple(cfg(thread_id))
            assert seen == [["get"]] and comparable(warm) == comparable(latest)
            # an older checkpoint: its blobs in a second round trip, with the writes they reference
            older = history[2].config
            with round_trips() as seen:
                found = saver.get_tuple(older)
            assert seen == [["get"], ["blobs"]] and comparable(found) == comparable(history[2])
        for t in history:  # every checkpoint, cold, as the saver that wrote them listed it
            with open_saver(url_of(any_redis_target)) as fresh:
                assert comparable(fresh.get_tuple(t.config)) == comparable(t)
    # the cold reads above followed references in the script: the latest value is one, on others
    assert blob_types(any_redis_target, "refs", "5")[0] == b"delta-ref:msgpack+sum"
    assert blob_types(any_redis_target, "refs").count(b"delta-ref:msgpack+sum") >= 2
    assert len(latest.checkpoint["channel_values"]["messages"]) == 4


def test_the_listed_blobs_are_a_hint_never_the_record(redis_target: RedisTarget) -> None:
    """Damaged, stale, partial or missing, the list costs at most a round trip, never a wrong value."""
    latest, _ = referencing(redis_target, "hint")
    client = redis_target.client()
    wix = next(k for k in redis_target.keys() if k.endswith(b"{hint}:wix"))
    listed = client.hget(wix, "latest_blobs")
    field, blobs = listed.split(b"\x02")
    assert field == b"\x00" + latest.config["configurable"]["checkpoint_id"].encode()
    cases = {
        "partial": field + b"\x02" + blobs.split(b"\x01")[0],  # one blob listed: the others read after
        "garbage": field + b"\x02\x00\x00\x01no-separator\x01\x00messages\x00\x00",
        "another checkpoint": b"\x00" + b"0" * 36 + b"\x02" + blobs,
        "not a list": b"\xff\x00\x02\x02\x01",
    }
    for name, value in cases.items():
        client.hset(wix, "latest_blobs", value)
        with open_saver(url_of(redis_target)) as saver:
            with round_trips() as seen:
                found = saver.get_tuple(cfg("hint"))
            assert comparable(found) == comparable(latest), name
            assert len(seen) <= 2, name
    client.hdel(wix, "latest_blobs")
    with open_saver(url_of(redis_target)) as saver:
        assert comparable(saver.get_tuple(cfg("hint"))) == comparable(latest)
        # the next put lists its blobs again, and the get after it is one round trip
        g = chat().compile(checkpointer=saver)
        g.invoke({"messages": [("user", "again")]}, cfg("hint"))
        newest = saver.get_tuple(cfg("hint"))
    with open_saver(url_of(redis_target)) as saver:
        with round_trips() as seen:
            assert comparable(saver.get_tuple(cfg("hint"))) == comparable(newest)
        assert seen == [["get"]]


def test_a_put_that_is_not_the_latest_keeps_the_list_of_the_latest(redis_target: RedisTarget) -> None:
    """A fork of an older checkpoint is the namespace's latest (uuid6 ids grow with time); a put of
    a subgraph namespace lists nothing, and a read of it is as before."""
    latest, history = written(redis_target, "fork")
    with open_saver(url_of(redis_target)) as saver:
        g = chat().compile(checkpointer=saver)
        forked = g.update_state(history[3].config, {"messages": [("user", "a fork")]})
        with round_trips() as seen:
            found = saver.get_tuple(cfg("fork"))
        assert seen == [["get"]]
        assert found.config["configurable"]["checkpoint_id"] == forked["configurable"]["checkpoint_id"]
        sub = saver.put(cfg("fork", checkpoint_ns="child:1"), {**latest.checkpoint, "id": "1f0c0000-0000-6000-8000-000000000001"},
                        {"source": "loop", "step": 1}, latest.checkpoint["channel_versions"])
        with open_saver(url_of(redis_target)) as fresh:
            assert fresh.get_tuple(sub).checkpoint["channel_values"] == latest.checkpoint["channel_values"]
            with round_trips() as seen:
                assert fresh.get_tuple(cfg("fork")).config["configurable"]["checkpoint_id"] == forked["configurable"]["checkpoint_id"]
            assert seen == [["get"]]


def test_encrypted_references_are_read_in_a_second_round_trip(redis_target: RedisTarget) -> None:
    """Under a keyring the script cannot read a reference: the reader fetches its writes after."""
    latest, _ = referencing(redis_target, "enc", Keyring([K1]))
    assert b"delta-ref:msgpack+gcm" in blob_types(redis_target, "enc")
    with open_saver(url_of(redis_target), codec=BlobCodec(keys=Keyring([K1]))) as saver:
        with round_trips() as seen:
            assert comparable(saver.get_tuple(cfg("enc"))) == comparable(latest)
        assert seen[0] == ["get"] and len(seen) == 2


def test_async_get_is_one_round_trip(redis_target: RedisTarget) -> None:
    latest, _ = written(redis_target, "async")

    async def read() -> tuple:
        async with aopen_saver(url_of(redis_target)) as saver:
            with round_trips() as seen:
                found = await saver.aget_tuple(cfg("async"))
            with round_trips() as none:
                assert await saver.aget_tuple(cfg("nobody")) is None
            return found, seen, none

    found, seen, none = asyncio.run(read())
    assert seen == [["get"]] and none == [["get"]] and comparable(found) == comparable(latest)
