"""The Store on every backend (SQLite, Postgres; sync, async): items, namespaces, search
filters, pagination, list_namespaces, batches, setup and migrations."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime, timezone
from typing import Any

import aiosqlite
import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp, SearchOp

import threadline
from store_fixtures import StoreDb, call, db, store  # noqa: F401
from threadline.errors import CorruptRowError, SchemaError


async def keys_of(s: Any, prefix: tuple[str, ...], **kwargs: Any) -> list[str]:
    return [i.key for i in await call(s, "search", prefix, limit=100, **kwargs)]


async def test_put_get_update_delete(store: Any) -> None:
    value = {"title": "Notes", "tags": ["a", "b"], "nested": {"n": 1.5, "ok": True, "none": None}, "uni": "中文 ✓"}
    await call(store, "put", ("users", "u1"), "doc", value)
    item = await call(store, "get", ("users", "u1"), "doc")
    assert (item.namespace, item.key, item.value) == (("users", "u1"), "doc", value)
    assert item.created_at.tzinfo is not None and item.created_at == item.updated_at
    assert abs((datetime.now(timezone.utc) - item.created_at).total_seconds()) < 3600

    await call(store, "put", ("users", "u1"), "doc", {"title": "v2"})
    again = await call(store, "get", ("users", "u1"), "doc")
    assert again.value == {"title": "v2"}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at

    assert await call(store, "get", ("users",), "doc") is None
    assert await call(store, "get", ("users", "u2"), "doc") is None
    await call(store, "delete", ("users", "u1"), "doc")
    assert await call(store, "get", ("users", "u1"), "doc") is None


async def test_search_scopes_to_whole_labels(store: Any) -> None:
    namespaces = [("foo",), ("foo", "child"), ("foo", "child", "deep"), ("foobar",), ("foo2",), ("Foo",), ("fo",)]
    for ns in namespaces:
        await call(store, "put", ns, "k", {"ns": list(ns)})
    found = {i.namespace for i in await call(store, "search", ("foo",), limit=100)}
    assert found == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert {i.namespace for i in await call(store, "search", ("foo", "child"), limit=100)} == {("foo", "child"), ("foo", "child", "deep")}
    assert {i.namespace for i in await call(store, "search", (), limit=100)} == set(namespaces)
    assert {i.namespace for i in await call(store, "search", ("f",), limit=100)} == set()


async def test_search_labels_with_pattern_characters_are_literal(store: Any) -> None:
    pairs = [("user_1", "userX1"), ("a%b", "axxb"), ("star*", "starX"), ("q?m", "qXm"), ("br[ck]t", "brct"), ("back\\slash", "backXslash")]
    for label, decoy in pairs:
        for ns in ((label,), (decoy,), (label, "child")):
            await call(store, "put", ns, "k", {"v": 1})
    for label, decoy in pairs:
        assert {i.namespace for i in await call(store, "search", (label,), limit=100)} == {(label,), (label, "child")}
        assert set(await call(store, "list_namespaces", prefix=(label,))) == {(label,), (label, "child")}


@pytest.fixture
async def catalog(store: Any) -> Any:
    docs = {
        "a": {"color": "red", "price": 10, "score": 4.5, "active": True, "tags": ["x"], "meta": {"lvl": "hi"}, "name": "alpha"},
        "b": {"color": "red", "price": 20, "score": 3.0, "active": False, "tags": ["x", "y"], "meta": {"lvl": "lo"}, "name": "beta"},
        "c": {"color": "blue", "price": 30, "score": 4.0, "active": True, "tags": [], "meta": {}, "name": "gamma", "opt": None},
        "d": {"color": "blue", "price": -5, "score": 1, "active": 1, "name": "delta", "opt": "set"},
    }
    for key, value in docs.items():
        await call(store, "put", ("shop", "items"), key, value)
    await call(store, "put", ("shop",), "other", {"color": "red", "price": 10})
    return store


@pytest.mark.parametrize(
    "filter, expected",
    [
        ({"color": "red"}, "ab"),
        ({"color": "red", "price": 20}, "b"),
        ({"price": 10}, "a"),
        ({"price": 10.0}, "a"),
        ({"score": 1}, "d"),
        ({"active": True}, "ac"),  # JSON true only: the integer 1 of "d" is not True
        ({"active": 1}, "d"),
        ({"active": False}, "b"),
        ({"tags": ["x", "y"]}, "b"),
        ({"tags": []}, "c"),
        ({"meta": {"lvl": "hi"}}, "a"),
        ({"meta.lvl": "lo"}, "b"),
        ({"opt": None}, "abc"),  # null or missing
        ({"missing": "x"}, ""),
        ({"price": {"$gt": 10}}, "bc"),
        ({"price": {"$gte": 10, "$lt": 30}}, "ab"),
        ({"price": {"$lte": 0}}, "d"),
        ({"price": {"$lt": float("inf")}}, "abcd"),
        ({"price": {"$gt": float("-inf")}}, "abcd"),
        ({"price": {"$lt": 10**100}}, "abcd"),
        ({"price": {"$eq": float("nan")}}, ""),
        ({"price": {"$gt": float("nan")}}, ""),
        ({"score": {"$gt": 3.5}}, "ac"),
        ({"name": {"$gt": "beta"}}, "cd"),
        ({"name": {"$lte": "beta"}}, "ab"),
        ({"color": {"$ne": "red"}}, "cd"),
        ({"opt": {"$ne": None}}, "d"),
        ({"opt": {"$ne": "set"}}, "c"),  # present and different: a missing field does not match
        ({"opt": {"$ne": float("nan")}}, "cd"),
        ({"color": {"$eq": "blue"}, "price": {"$gt": 0}}, "c"),
        ({"name": "al\x00pha"}, ""),
        ({"color": {"$in": ["blue", "green"]}}, "cd"),
        ({"price": {"$in": [10.0, -5, "10"]}}, "ad"),
        ({"meta.lvl": {"$in": ["hi", "lo"]}}, "ab"),
        ({"opt": {"$in": [None]}}, "abc"),
        ({"color": {"$in": []}}, ""),
        ({"color": {"$nin": ["red", "green"]}}, "cd"),
        ({"opt": {"$nin": ["set"]}}, "c"),  # as $ne: present and different from each
        ({"color": {"$nin": []}}, "abcd"),
    ],
)
async def test_search_filters(catalog: Any, filter: dict, expected: str) -> None:
    assert sorted(await keys_of(catalog, ("shop", "items"), filter=filter)) == list(expected)


async def test_bad_filters_raise_one_clear_error(catalog: Any) -> None:
    with pytest.raises(ValueError, match="Unsupported operator"):
        await call(catalog, "search", ("shop",), filter={"price": {"$regex": "1"}})
    with pytest.raises(ValueError, match="needs a list"):
        await call(catalog, "search", ("shop",), filter={"price": {"$in": 1}})
    with pytest.raises(ValueError, match="needs a number or a string"):
        await call(catalog, "search", ("shop",), filter={"price": {"$gt": [1]}})
    with pytest.raises(ValueError, match="Invalid filter key"):
        await call(catalog, "search", ("shop",), filter={"a..b": 1})


async def test_search_orders_by_update_and_pages(store: Any) -> None:
    for i in range(7):
        await call(store, "put", ("log",), f"k{i}", {"i": i})
    await call(store, "put", ("log",), "k2", {"i": 2, "touched": True})
    newest_first = ["k2", "k6", "k5", "k4", "k3", "k1", "k0"]
    assert await keys_of(store, ("log",)) == newest_first
    pages = [[i.key for i in await call(store, "search", ("log",), limit=3, offset=o)] for o in (0, 3, 6, 9)]
    assert pages == [newest_first[:3], newest_first[3:6], newest_first[6:], []]
    assert [i.score for i in await call(store, "search", ("log",), limit=2)] == [None, None]


async def test_list_namespaces(store: Any) -> None:
    namespaces = [
        ("a", "docs", "public"),
        ("a", "docs", "private"),
        ("a", "img", "public"),
        ("b", "docs", "public"),
        ("b", "docs", "some", "nesting", "public"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("users", "alice\n"),
    ]
    for ns in namespaces:
        await call(store, "put", ns, "k", {"v": 1})
    ls = lambda **kw: call(store, "list_namespaces", limit=100, **kw)  # noqa: E731
    assert await ls() == sorted(namespaces, key=".".join)
    assert set(await ls(prefix=("a",))) == {ns for ns in namespaces if ns[0] == "a"}
    assert set(await ls(suffix=("public",))) == {ns for ns in namespaces if ns[-1] == "public"}
    assert set(await ls(suffix=("alice",))) == {("uid", "users", "alice")}
    assert set(await ls(prefix=("*", "docs"))) == {ns for ns in namespaces if ns[1] == "docs"}
    assert set(await ls(suffix=("some", "*", "public"))) == {("b", "docs", "some", "nesting", "public")}
    assert set(await ls(prefix=("a",), suffix=("public",))) == {("a", "docs", "public"), ("a", "img", "public")}
    assert await ls(max_depth=2) == [("a", "docs"), ("a", "img"), ("b", "docs"), ("uid", "users"), ("users", "alice\n")]
    assert await ls(max_depth=1, prefix=("b",)) == [("b",)]
    assert await call(store, "list_namespaces", limit=2, offset=1) == sorted(namespaces, key=".".join)[1:3]
    assert await call(store, "list_namespaces", max_depth=2, limit=2, offset=1) == [("a", "img"), ("b", "docs")]


async def test_batch_runs_in_order_and_last_put_wins(store: Any) -> None:
    await call(store, "put", ("t", "foo"), "key1", {"data": "value1"})
    results = await call(
        store,
        "batch",
        [
            GetOp(("t", "foo"), "key1"),
            PutOp(("t", "bar"), "key2", {"data": "first"}),
            SearchOp(("t",), filter={"data": "value1"}),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            PutOp(("t", "bar"), "key2", {"data": "second"}),
            GetOp(("t",), "nothing"),
        ],
    )
    assert results[0].value == {"data": "value1"} and results[1] is None and results[4] is None and results[5] is None
    assert [i.key for i in results[2]] == ["key1"]
    assert results[3] == [("t", "foo")]  # reads see the store as it was before the batch's puts
    assert (await call(store, "get", ("t", "bar"), "key2")).value == {"data": "second"}


@pytest.mark.parametrize("namespace", [("foo.bar",), ("foo", ""), ("foo", 1), ("a\x00b",)])
async def test_invalid_namespaces_reject_the_whole_batch(store: Any, namespace: tuple) -> None:
    await call(store, "put", ("foo", "bar"), "key", {"original": True})
    for op in (
        GetOp(namespace, "key"),
        PutOp(namespace, "key", {"changed": True}),
        SearchOp(namespace),
        ListNamespacesOp((MatchCondition("suffix", namespace),)),
    ):
        with pytest.raises(InvalidNamespaceError):
            await call(store, "batch", [PutOp(("valid",), "key", {}), op])
    assert (await call(store, "get", ("foo", "bar"), "key")).value == {"original": True}
    assert await call(store, "get", ("valid",), "key") is None


@pytest.mark.parametrize(
    "value, match",
    [({"x": float("nan")}, "cannot be stored as JSON"), ({"x": "a\x00b"}, "NUL"), ({"x": object()}, "cannot be stored as JSON")],
)
async def test_unstorable_values_store_nothing(store: Any, value: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        await call(store, "batch", [PutOp(("ok",), "a", {"v": 1}), PutOp(("ok",), "b", value)])
    assert await call(store, "search", ("ok",)) == []


async def test_values_json_types_round_trip(store: Any) -> None:
    from uuid import UUID

    moment = datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc)
    await call(store, "put", ("types",), "k", {"when": moment, "id": UUID(int=7), "big": 2**70, "t": (1, 2)})
    assert (await call(store, "get", ("types",), "k")).value == {
        "when": "2024-05-01T12:30:00+00:00",
        "id": "00000000-0000-0000-0000-000000000007",
        "big": 2**70,
        "t": [1, 2],
    }


async def test_tampered_row_raises_corrupt_row_error(db: StoreDb, store: Any) -> None:
    await call(store, "put", ("x",), "k", {"v": 1})
    if db.is_postgres:
        db.sql("UPDATE threadline_store SET value = '[1, 2]'::jsonb")
    else:
        db.sql("UPDATE threadline_store SET value = '{not json'")
    with pytest.raises(CorruptRowError, match="'k'"):
        await call(store, "get", ("x",), "k")


async def test_setup_is_idempotent_and_numbered(db: StoreDb) -> None:
    for _ in range(2):
        if db.is_async:
            async with db.open() as s:
                await s.setup()
                await s.setup()
        else:
            with db.open() as s:
                s.setup()
                s.setup()
    assert sorted(db.sql("SELECT component, v FROM threadline_store_migrations")) == [("store", 1), ("store", 2)]
    db.sql("INSERT INTO threadline_store_migrations (component, v, applied_at) VALUES ('store', 99, 0)")
    with pytest.raises(SchemaError, match="newer threadline"):
        if db.is_async:
            async with db.open() as s:
                await s.setup()
        else:
            with db.open() as s:
                s.setup()


async def test_first_operation_sets_up(db: StoreDb) -> None:
    if db.is_async:
        async with db.open() as s:
            await s.aput(("a",), "k", {"v": 1})
    else:
        with db.open() as s:
            s.put(("a",), "k", {"v": 1})
    assert db.sql("SELECT prefix, key FROM threadline_store") == [("a", "k")]


async def test_deserializer_reads_the_stored_json(db: StoreDb, store: Any) -> None:
    if db.is_postgres:
        pytest.skip("Postgres hands values back as dicts; the deserializer applies to raw text (as the official stores)")
    await call(store, "put", ("a",), "k", {"v": 1})
    seen = []

    def loader(raw: Any) -> dict:
        seen.append(raw)
        return {"loaded": raw}

    if db.is_async:
        async with aiosqlite.connect(db.url) as conn:
            got = await db.store_class()(conn, deserializer=loader).aget(("a",), "k")
    else:
        conn = sqlite3.connect(db.url, check_same_thread=False)
        got = db.store_class()(conn, deserializer=loader).get(("a",), "k")
        conn.close()
    assert got.value == {"loaded": '{"v":1}'} and seen == ['{"v":1}']


async def test_async_store_sync_methods_work_off_the_loop(db: StoreDb) -> None:
    if not db.is_async:
        with db.open() as s:
            s.put(("a",), "k", {"v": 1})
            assert (await s.aget(("a",), "k")).value == {"v": 1}  # sync stores run abatch in a thread
        return
    async with db.open() as s:
        with pytest.raises(asyncio.InvalidStateError):
            s.put(("a",), "k", {"v": 1})
        await asyncio.to_thread(s.put, ("a",), "k", {"v": 2})
        assert (await asyncio.to_thread(s.get, ("a",), "k")).value == {"v": 2}


async def test_concurrent_async_calls_are_batched(db: StoreDb) -> None:
    if not db.is_async:
        pytest.skip("async stores only")
    async with db.open() as s:
        await asyncio.gather(*(s.aput(("many", str(i % 3)), f"k{i}", {"i": i}) for i in range(60)))
        got = await asyncio.gather(*(s.aget(("many", str(i % 3)), f"k{i}") for i in range(60)))
        assert [g.value["i"] for g in got] == list(range(60))
        assert len(await s.asearch(("many",), limit=100)) == 60


def test_public_api() -> None:
    for name in ("SqliteStore", "AsyncSqliteStore", "PostgresStore", "AsyncPostgresStore", "open_store", "aopen_store"):
        assert name in threadline.__all__
