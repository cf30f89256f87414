"""Findings 7, 8 and 9 of issue 27 (limits), each a regression test on SQLite and Postgres.

7. A Store item holding a number beyond a double (``10**400``) broke every range search of
   its namespace on Postgres; ``put(ttl=1e308)`` was stored and then every read of the
   item failed.
8. Store and Cache TTLs that are NaN, infinite, booleans or strings were accepted; Store
   filters with 2,000 keys or 70-deep paths, negative or huge ``limit``/``offset``, a
   1,000-label namespace, a 1 MB key and a NUL in a Cache key leaked raw driver errors.
9. Nesting ~1,000 deep in Store values, filters or checkpoint metadata escaped as
   ``RecursionError``; a Postgres checkpoint with 10,000 channels hit the driver's
   parameter limit; checkpoint metadata had no size limit.

Each is now one threadline error naming the limit (``threadline.limits``), with nothing
written, or works.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from backends import Backend
from bad_input_access import Api, cfg, ckpt
from store_fixtures import StoreDb, call, db, make_db, store  # noqa: F401
from threadline import ConfigError, FilterTooLargeError, KeyTooLongError, ValueTooLargeError, limits


def nested(depth: int, leaf: Any = 1) -> Any:
    """``{"a": {"a": … leaf}}`` with ``depth`` objects."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def store_rows(db: StoreDb) -> list[tuple]:
    return db.sql("SELECT prefix, key, value, expires_at, ttl_minutes FROM threadline_store ORDER BY prefix, key")


# --- 7. a huge number or TTL never breaks reading the namespace -------------------------------


async def test_f7_a_number_beyond_a_double_does_not_break_range_search(store: Any) -> None:
    await call(store, "put", ("n",), "huge", {"x": 10**400})
    await call(store, "put", ("n",), "tiny", {"x": -(10**400)})
    await call(store, "put", ("n",), "five", {"x": 5})
    await call(store, "put", ("n",), "text", {"x": "5"})

    async def keys(flt: dict) -> list[str]:
        return sorted(i.key for i in await call(store, "search", ("n",), filter=flt))

    assert await keys({"x": {"$gt": 1}}) == ["five", "huge"]
    assert await keys({"x": {"$lte": 5.0}}) == ["five", "tiny"]
    assert await keys({"x": {"$gte": -1e308, "$lt": 1e308}}) == ["five"]
    assert await keys({"x": {"$gt": math.inf}}) == []
    assert await keys({"x": {"$gte": "5"}}) == ["text"]
    assert (await call(store, "get", ("n",), "huge")).value == {"x": 10**400}


async def test_f7_a_ttl_beyond_max_ttl_seconds_is_refused_and_the_longest_one_reads(db: StoreDb, store: Any) -> None:
    with pytest.raises(ConfigError, match="max_ttl_seconds"):
        await call(store, "put", ("t",), "k", {"a": 1}, ttl=1e308)
    assert store_rows(db) == []
    longest = limits.current().max_ttl_seconds / 60
    await call(store, "put", ("t",), "k", {"a": 1}, ttl=longest)
    assert (await call(store, "get", ("t",), "k")).value == {"a": 1}  # refreshes the TTL
    assert [i.key for i in await call(store, "search", ("t",))] == ["k"]
    assert await (store.sweep_ttl() if db.is_async else asyncio.to_thread(store.sweep_ttl)) == 0


# --- 8. TTLs, filters, pages, namespaces and keys: threadline errors --------------------------

BAD_TTLS = [math.nan, math.inf, -math.inf, True, "5", 1e308, -1e308]


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
async def test_f8_a_store_ttl_must_be_a_finite_number(db: StoreDb, store: Any, ttl: Any) -> None:
    with pytest.raises(ConfigError, match="ttl"):
        await call(store, "put", ("t",), "k", {"a": 1}, ttl=ttl)
    assert store_rows(db) == []


async def test_f8_a_nan_default_ttl_is_refused(db: StoreDb, store: Any) -> None:
    store.ttl_config = {"default_ttl": math.nan}
    with pytest.raises(ConfigError, match="ttl"):
        await call(store, "put", ("t",), "k", {"a": 1})
    assert store_rows(db) == []


@pytest.fixture(params=("sqlite", "postgres"))
def cache(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    import threadline

    cdb = make_db(request.param, tmp_path, request)
    if cdb.is_postgres:
        with threadline.PostgresCache.from_conn_string(cdb.url) as c:
            yield c
    else:
        c = threadline.SqliteCache(path=cdb.url)
        yield c
        c.close()


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
def test_f8_a_cache_ttl_must_be_a_finite_number(cache: Any, ttl: Any) -> None:
    with pytest.raises(ConfigError, match="ttl"):
        cache.set({(("ns",), "k"): ({"v": 1}, ttl)})
    assert cache.get([(("ns",), "k")]) == {}
    cache.set({(("ns",), "k"): ({"v": 1}, 0.5)})
    assert cache.get([(("ns",), "k")]) == {(("ns",), "k"): {"v": 1}}


def test_f8_cache_keys_with_nul_or_too_long_are_refused(cache: Any) -> None:
    for key, error in (("k\x00", ConfigError), ("k" * (1 << 20), KeyTooLongError), ("a\ud800", ConfigError)):
        with pytest.raises(error):
            cache.set({(("ns",), key): (1, None)})
        with pytest.raises(error):
            cache.get([(("ns",), key)])
    with pytest.raises(KeyTooLongError, match="max_namespace_bytes"):
        cache.set({(tuple(f"l{i}" for i in range(1000)), "k"): (1, None)})
    assert cache.get([(("ns",), "k")]) == {}


async def test_f8_store_filters_are_bounded_like_the_savers(db: StoreDb, store: Any) -> None:
    top = limits.current()
    deep = ".".join(["a"] * top.max_filter_path_depth)
    await call(store, "put", ("n",), "deep", nested(top.max_filter_path_depth))
    assert [i.key for i in await call(store, "search", ("n",), filter={deep: 1})] == ["deep"]
    with pytest.raises(FilterTooLargeError, match="max_filter_keys"):
        await call(store, "search", ("n",), filter={f"k{i}": i for i in range(2000)})
    ops = {"$gt": 0, "$gte": 0, "$lt": 9, "$lte": 9, "$ne": 5}
    with pytest.raises(FilterTooLargeError, match="max_filter_keys"):  # each operator is a condition
        await call(store, "search", ("n",), filter={f"k{i}": dict(ops) for i in range(top.max_filter_keys // 4)})
    for depth in (top.max_filter_path_depth + 1, 70, 300):
        with pytest.raises(FilterTooLargeError, match="max_filter_path_depth"):
            await call(store, "search", ("n",), filter={".".join(["a"] * depth): 1})
    with pytest.raises(FilterTooLargeError, match="max_filter_bytes"):
        await call(store, "search", ("n",), filter={"a": "x" * (top.max_filter_bytes + 1)})


@pytest.mark.parametrize("name", ["limit", "offset"])
@pytest.mark.parametrize("value", [-1, 2**63, 2**70, 1.5, True, "3", None], ids=repr)
async def test_f8_limit_and_offset_must_be_integers_a_database_takes(store: Any, name: str, value: Any) -> None:
    await call(store, "put", ("n",), "k", {"a": 1})
    with pytest.raises(ConfigError, match=name):
        await call(store, "search", ("n",), **{name: value})
    with pytest.raises(ConfigError, match=name):
        await call(store, "list_namespaces", **{name: value})
    with pytest.raises(ConfigError, match=name):
        await call(store, "list_namespaces", max_depth=1, **{name: value})
    assert [i.key for i in await call(store, "search", ("n",), limit=2**63 - 1, offset=0)] == ["k"]


async def test_f8_namespaces_and_keys_no_backend_can_index_are_refused(db: StoreDb, store: Any) -> None:
    long_ns = tuple(f"l{i}" for i in range(1000))
    calls = [
        ("put", long_ns, "k", {"a": 1}),
        ("get", long_ns, "k"),
        ("delete", long_ns, "k"),
        ("search", long_ns),
        ("put", ("n",), "k" * (1 << 20), {"a": 1}),
        ("get", ("n",), "k" * (1 << 20)),
    ]
    for name, *args in calls:
        with pytest.raises(KeyTooLongError, match="max_namespace_bytes|max_key_bytes"):
            await call(store, name, *args)
    with pytest.raises(KeyTooLongError, match="max_namespace_bytes"):
        await call(store, "list_namespaces", prefix=long_ns)
    assert store_rows(db) == []
    widest = ("x" * (limits.current().max_namespace_bytes - 2), "y")
    await call(store, "put", widest, "k" * limits.current().max_key_bytes, {"a": 1})
    assert [i.namespace for i in await call(store, "search", widest)] == [widest]


# --- 9. nesting, many channels, metadata size --------------------------------------------------


async def test_f9_deep_store_values_and_filters_are_limit_errors(db: StoreDb, store: Any) -> None:
    top = limits.current().max_json_depth
    await call(store, "put", ("n",), "deepest", nested(top))
    for depth in (top + 1, 2000, 100_000):
        with pytest.raises(ValueTooLargeError, match="max_json_depth"):
            await call(store, "put", ("n",), "deep", nested(depth))
        with pytest.raises(FilterTooLargeError, match="max_json_depth"):  # the filter object is one more level
            await call(store, "search", ("n",), filter={"a": nested(depth - 1)})
    assert [r[1] for r in store_rows(db)] == ["deepest"]
    assert (await call(store, "get", ("n",), "deepest")).value == nested(top)


async def test_f9_deep_or_large_metadata_is_refused_before_anything_is_written(backend: Backend, saver: Any) -> None:
    top = limits.current()
    api = Api(saver, backend.is_async)
    await api.call("put", cfg("t"), ckpt({"x": 1}, {"x": "1"}), {"step": 0, "deepest": nested(top.max_json_depth - 1)}, {"x": "1"})
    before = backend.snapshot()
    for depth in (top.max_json_depth, 2000, 100_000):
        with pytest.raises(ValueTooLargeError, match="max_json_depth"):
            await api.call("put", cfg("t"), ckpt({"x": 1}, {"x": "2"}), {"step": 1, "deep": nested(depth)}, {"x": "2"})
        with pytest.raises(FilterTooLargeError, match="max_json_depth"):
            await api.list(None, filter={"deep": nested(depth)})
    with limits.override(max_metadata_bytes=1000):
        with pytest.raises(ValueTooLargeError, match="max_metadata_bytes"):
            await api.call("put", cfg("t"), ckpt({"x": 1}, {"x": "2"}), {"step": 1, "note": "é" * 500}, {"x": "2"})
        assert backend.snapshot() == before
        await api.call("put", cfg("t"), ckpt({"x": 1}, {"x": "2"}), {"step": 1, "note": "e" * 500}, {"x": "2"})
    assert len(backend.snapshot()["checkpoints"]) == len(before["checkpoints"]) + 1  # 500 ASCII bytes fit


async def test_f9_a_checkpoint_with_10000_channels_is_stored_and_read(backend: Backend, saver: Any) -> None:
    channels = {f"c{i}": ([i, "item"] if i % 2 else i) for i in range(10_000)}
    versions = {ch: "1" for ch in channels}
    api = Api(saver, backend.is_async)
    stored = await api.call("put", cfg("wide"), ckpt(channels, versions), {"step": 0}, versions)
    more = {**channels, **{ch: [*v, "more"] for ch, v in channels.items() if isinstance(v, list)}}
    new = {ch: "2" for ch in channels}
    stored = await api.call("put", stored, ckpt(more, new), {"step": 1}, new)
    got = await api.call("get_tuple", stored)
    assert got.checkpoint["channel_values"] == more
    assert [t.metadata["step"] for t in await api.list(cfg("wide"))] == [1, 0]


# --- the documentation states each limit, its default and its error -----------------------------


def test_docs_state_the_limits_and_their_errors() -> None:
    import dataclasses
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    security, store_md = (docs / "security.md").read_text(), (docs / "store.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in security.splitlines() if line.startswith("| `max_")}
    assert set(rows) == {f"`{f.name}`" for f in dataclasses.fields(limits.Limits)}
    for name, default, error in (
        ("max_filter_path_depth", "16", "FilterTooLargeError"),
        ("max_json_depth", "64", "ValueTooLargeError"),
        ("max_metadata_bytes", "16 MiB", "ValueTooLargeError"),
        ("max_namespace_bytes", "1024", "KeyTooLongError"),
        ("max_ttl_seconds", "10¹¹", "ConfigError"),
    ):
        assert f"| {default}" in rows[f"`{name}`"] and error in rows[f"`{name}`"], name
        assert name in store_md or name == "max_metadata_bytes", name
    for words in ("never\na `RecursionError`", "compare JSON numbers exactly", "stored in chunks in one transaction"):
        assert words in security, words
    for words in ("`threadline.store.checks`", "NaN, an infinity", "from 0 to 2⁶³ − 1", "each operator counts", "`10**400`"):
        assert words in store_md, words
    assert limits.Limits().max_metadata_bytes == 16 << 20 and limits.Limits().max_ttl_seconds == 10**11


@pytest.mark.parametrize("minutes", [math.inf, 1e308, math.nan, 0, -5, True, "60"])
def test_a_saver_ttl_beyond_the_limit_is_refused(minutes: Any, tmp_path) -> None:
    """The savers' TTLs (``ttl={"default_ttl"}`` and a thread's own ``ttl_minutes``) have the
    Store's bound: an infinite or 1e308-minute TTL would overflow every sweep's expiry arithmetic."""
    from threadline import SqliteSaver

    with pytest.raises(ConfigError, match="max_ttl_seconds"):
        SqliteSaver.from_conn_string(str(tmp_path / "a.db"), ttl={"default_ttl": minutes}).__enter__()
    with SqliteSaver.from_conn_string(str(tmp_path / "b.db")) as saver:
        with pytest.raises(ConfigError, match="max_ttl_seconds"):
            saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": "", "ttl_minutes": minutes}}, ckpt({}, {}), {}, {})
        assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
