"""Every cache a saver holds is bounded by bytes, configurable, and the bound holds.

* the value cache (``codec.BlobCache``): ``cache_max_bytes`` on every saver's constructor
  and ``from_conn_string`` (new keyword only: the official signatures still work); after
  writing many threads its counted bytes stay ≤ the bound, and what it counts covers the
  memory it really holds (``tracemalloc``);
* the TTL refresh map of a saver (``sweeping.TOUCHED_MAX_BYTES``);
* the per-class maps of ``codec.fingerprinting`` (``MAX_CLASSES``).
"""

from __future__ import annotations

import inspect
import tracemalloc
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as OfficialAsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as OfficialAsyncSqliteSaver
from pydantic import BaseModel

import threadline
from threadline import codec, sweeping
from threadline.codec import fingerprinting
from threadline.codec.cache import DEFAULT_MAX_BYTES, entry_bytes
from threadline.errors import ConfigError

from backends import Backend

PAIRS = [
    (threadline.SqliteSaver, OfficialSqliteSaver),
    (threadline.AsyncSqliteSaver, OfficialAsyncSqliteSaver),
    (threadline.PostgresSaver, OfficialPostgresSaver),
    (threadline.AsyncPostgresSaver, OfficialAsyncPostgresSaver),
]


@pytest.mark.parametrize(("ours", "official"), PAIRS, ids=lambda c: c.__qualname__)
def test_cache_max_bytes_is_a_new_optional_keyword(ours: type, official: type) -> None:
    for fn in ("__init__", "from_conn_string"):
        mine = inspect.signature(getattr(ours, fn)).parameters
        theirs = inspect.signature(getattr(official, fn)).parameters
        positional = [n for n, p in theirs.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert [n for n in mine if n in positional] == positional  # same positional order
        p = mine["cache_max_bytes"]
        assert p.kind is p.KEYWORD_ONLY and p.default is None


def _messages_graph_calls(saver: Any, threads: int, steps: int) -> None:
    """Write ``threads`` threads of ``steps`` supersteps through a real graph, ~400-byte messages."""
    from langgraph.graph import START, MessagesState, StateGraph

    def agent(state: MessagesState) -> dict:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"reply {n} " + "words " * 60, id=f"m{n}")]}

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    graph = b.compile(checkpointer=saver)
    for t in range(threads):
        config = {"configurable": {"thread_id": f"t{t}"}}
        for s in range(steps):
            graph.invoke({"messages": [AIMessage(content=f"ask {s} " + "words " * 60, id=f"h{s}")]}, config)
    for t in (0, threads - 1):
        values = graph.get_state({"configurable": {"thread_id": f"t{t}"}}).values
        assert len(values["messages"]) == 2 * steps


def test_default_bound_and_the_bound_holds_after_many_threads(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        assert saver.blob_codec.cache.max_bytes == DEFAULT_MAX_BYTES == 4 << 20
    bound = 60_000
    with sync_backend.open(cache_max_bytes=bound) as saver:
        cache = saver.blob_codec.cache
        assert cache.max_bytes == bound
        _messages_graph_calls(saver, threads=30, steps=3)
        assert 0 < cache.nbytes <= bound
        assert len(cache) >= 2  # it still caches


def test_constructor_keyword(tmp_path: Any) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "x.db", check_same_thread=False, isolation_level=None)
    saver = threadline.SqliteSaver(conn, cache_max_bytes=1 << 20)
    assert saver.blob_codec.cache.max_bytes == 1 << 20
    conn.close()


def test_zero_keeps_nothing_and_still_round_trips(tmp_path: Any) -> None:
    with threadline.SqliteSaver.from_conn_string(str(tmp_path / "z.db"), cache_max_bytes=0) as saver:
        _messages_graph_calls(saver, threads=2, steps=3)
        assert saver.blob_codec.cache.nbytes == 0 and len(saver.blob_codec.cache) == 0


def test_forgetting_threads_drops_their_entries_and_their_bytes_only() -> None:
    """What prune, retention and TTL deletes call per thread: the thread's values, versions
    and head go, everything else stays, and the counted bytes are what the rest counted."""
    entry = codec.Entry(codec.container(b"\x91\xa1x"), "msgpack", 3)
    cache = codec.BlobCache(max_bytes=1 << 20)
    for t in range(50):
        for ch in ("messages", "todo"):
            cache.put((f"t{t}", "", ch, "1"), entry)
        cache.put_versions((f"t{t}", "", "ck1"), codec.Versions({"messages": "1", "todo": "1"}))
    alone = codec.BlobCache(max_bytes=1 << 20)
    for t in range(50):
        if t not in (3, 7):
            for ch in ("messages", "todo"):
                alone.put((f"t{t}", "", ch, "1"), entry)
            alone.put_versions((f"t{t}", "", "ck1"), codec.Versions({"messages": "1", "todo": "1"}))
    cache.forget_threads(["t3", "t7", "never-cached"])
    assert len(cache) == 96 and cache.nbytes == alone.nbytes
    assert cache.get(("t3", "", "messages", "1")) is None and cache.head("t7", "") is None
    assert cache.versions(("t3", "", "ck1")) is None
    assert cache.get(("t4", "", "todo", "1")) is entry and cache.head("t4", "") == "ck1"
    cache.put(("t3", "", "messages", "2"), entry)  # a thread written again after it was forgotten
    assert cache.get(("t3", "", "messages", "2")) is entry
    cache.forget_threads(["t3"])
    assert cache.nbytes == alone.nbytes


@pytest.mark.parametrize("bad", [-1, "1MB", 1.5, True])
def test_bad_bound_is_a_config_error(bad: Any, tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="cache_max_bytes"):
        with threadline.SqliteSaver.from_conn_string(str(tmp_path / "b.db"), cache_max_bytes=bad):
            pass


async def test_async_sqlite_keyword(tmp_path: Any) -> None:
    async with threadline.AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db"), cache_max_bytes=12345) as saver:
        assert saver.blob_codec.cache.max_bytes == 12345


def test_counted_bytes_cover_what_the_cache_holds() -> None:
    """Many small entries (as many threads bring): the real memory (``tracemalloc``) of
    what the cache holds is within its counted bytes."""
    from threadline.codec.serde import default_serde

    serde = default_serde()
    cache = codec.BlobCache(max_bytes=8 << 20)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(3000):
            data = serde.dumps_typed([f"message {i}", i])[1]
            key = (f"thread-{i:06d}", "", "messages", f"{i:032}.0.{i / 7:.16f}")
            cache.put(key, codec.Entry(codec.container(data), "msgpack", len(data)))
            cache.put_versions((key[0], "", f"1f0c{i:032x}"), codec.Versions({"messages": key[3], "count": key[3], "__start__": key[3]}))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(cache) == 3000
    assert held <= cache.nbytes <= cache.max_bytes, (held, cache.nbytes)
    small = codec.BlobCache(max_bytes=cache.nbytes // 10)
    for i in range(3000):
        data = serde.dumps_typed([f"message {i}", i])[1]
        key = (f"thread-{i:06d}", "", "messages", str(i))
        small.put(key, codec.Entry(codec.container(data), "msgpack", len(data)))
        small.put_versions((key[0], "", str(i)), codec.Versions({"messages": key[3]}))
        assert small.nbytes <= small.max_bytes
    assert 0 < len(small) < 3000


def test_versions_maps_never_push_all_values_out() -> None:
    entry = codec.Entry(codec.container(b"\x92\xa1a\xa1b"), "msgpack", 5)
    cache = codec.BlobCache(max_bytes=20_000)
    cache.put(("t", "", "c", "1"), entry)
    for i in range(1000):
        cache.put_versions(("t", "", f"ck{i}"), codec.Versions({"c": "1", "d": "2"}))
    assert cache.get(("t", "", "c", "1")) is entry
    assert cache.nbytes - entry_bytes(("t", "", "c", "1"), entry) <= cache.max_bytes // 8


def test_ttl_refresh_map_is_bounded(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeping, "TOUCHED_MAX_BYTES", 10_000)
    with threadline.SqliteSaver.from_conn_string(str(tmp_path / "t.db"), ttl={"default_ttl": 60, "refresh_on_read": True}) as saver:
        for i in range(1000):
            assert saver._touch_op(f"thread-{i}") is not None
            assert saver._touched_bytes <= 10_000
            assert sum(len(t) + sweeping.TOUCHED_ENTRY_OVERHEAD for t in saver._touched) == saver._touched_bytes
        assert saver._touch_op("thread-999") is None  # still remembered: no second touch


def test_fingerprint_class_maps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprinting, "MAX_CLASSES", 8)
    for i in range(40):
        cls = type(f"Model{i}", (BaseModel,), {"__annotations__": {"x": int}})
        assert fingerprinting.fingerprints([cls(x=i)]) is not None
        assert len(fingerprinting._PLAIN_MODELS) <= 8


def test_a_value_too_big_with_its_fingerprints_is_kept_as_bytes_for_the_next_delta(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A list whose bytes fit the bound but not with its item fingerprints (or a decoded copy) is
    cached as its bytes alone: the next put builds its delta on them instead of reading the whole
    list back through its chain (a long agent's messages past the bound)."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    from threadline.storage.ops import write

    messages = [AIMessage(content=f"tool output {i} " * 300, id=f"m{i}") for i in range(8)]  # ~4.4 KB each serialized
    reads: list = []
    real = write.fetch_blob_rows
    monkeypatch.setattr(write, "fetch_blob_rows", lambda d, keys: reads.append(keys) or real(d, keys))
    with threadline.SqliteSaver.from_conn_string(str(tmp_path / "big.db"), cache_max_bytes=48 << 10) as saver:
        config, version = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, None
        for step in range(3):
            version = saver.get_next_version(version, None)
            checkpoint = {**empty_checkpoint(), "id": str(uuid6(clock_seq=step)), "channel_values": {"messages": messages[: 6 + step]},
                          "channel_versions": {"messages": version}}
            config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"messages": version})
            cached = saver.blob_codec.cache.get(("t", "", "messages", version))
            assert cached is not None and cached.value.fps is None  # too big with them: the bytes alone
            assert saver.blob_codec.cache.nbytes <= 48 << 10
        assert reads == []  # no base read back
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == messages[:8]
    import sqlite3

    with sqlite3.connect(tmp_path / "big.db") as conn:
        stored = conn.execute("SELECT type FROM threadline_blobs ORDER BY version").fetchall()
    assert [t.split(":")[0] for (t,) in stored] == ["msgpack+zstd+sum", "delta-list", "delta-list"]
