"""Hostile input to the Store and Cache: namespace labels, keys, filter keys and filter values
that are SQL, JSON-path or pattern syntax. Every one is a bound parameter, so each is matched
literally (or refused with a clear error) and nothing else in the database is touched.
Values are stored as JSON text, never pickled."""

from __future__ import annotations

import json
from typing import Any

import pytest

import threadline
from store_fixtures import StoreDb, call, db, store  # noqa: F401

HOSTILE = [
    "'; DROP TABLE threadline_store; --",
    "\" OR 1=1 --",
    "access') = 'public' OR '1'='1' OR json_extract(value, '$",
    "$[0]",
    "%",
    "_",
    "*",
    "[a-z]",
    "\\",
    "ключ 🔑",
    "x' UNION SELECT prefix, key, value, created_at, updated_at FROM threadline_store --",
    "%s",
    "?",
    "$1",
]


@pytest.fixture
async def seeded(store: Any) -> Any:
    await call(store, "put", ("docs",), "public", {"access": "public"})
    await call(store, "put", ("docs",), "private", {"access": "private", "password": "123"})
    return store


@pytest.mark.parametrize("label", HOSTILE)
async def test_hostile_labels_and_keys_are_literal(seeded: Any, label: str) -> None:
    await call(seeded, "put", (label, "inner"), label, {"label": label})
    item = await call(seeded, "get", (label, "inner"), label)
    assert (item.namespace, item.key, item.value) == ((label, "inner"), label, {"label": label})
    assert [i.key for i in await call(seeded, "search", (label,))] == [label]
    assert (label, "inner") in await call(seeded, "list_namespaces", prefix=(label,))
    if label != "*":  # in list_namespaces a "*" label is LangGraph's one-label wildcard
        assert await call(seeded, "list_namespaces", suffix=(label,)) == []
        assert await call(seeded, "list_namespaces", prefix=("*", "inner"), limit=100) == [(label, "inner")]
    await call(seeded, "delete", (label, "inner"), label)
    assert await call(seeded, "get", (label, "inner"), label) is None
    assert sorted(i.key for i in await call(seeded, "search", ("docs",))) == ["private", "public"]


@pytest.mark.parametrize("key", [k for k in HOSTILE if '"' not in k and ".." not in k and not k.endswith(".")])
async def test_hostile_filter_keys_match_only_that_field(seeded: Any, key: str) -> None:
    assert await call(seeded, "search", ("docs",), filter={key: "public"}) == []
    await call(seeded, "put", ("docs",), "odd", {key: "public"} if "." not in key else {})
    expected = ["odd"] if "." not in key else []
    assert [i.key for i in await call(seeded, "search", ("docs",), filter={key: "public"})] == expected
    assert [i.key for i in await call(seeded, "search", ("docs",), filter={key: {"$gte": "public"}})] == expected


async def test_filter_keys_with_quotes_and_empty_segments(seeded: Any) -> None:
    for key in ('a"b', "a\\b", "tab\tnew\nline"):
        await call(seeded, "put", ("docs",), "odd", {key: 1, "n": {key: 2}})
        assert [i.key for i in await call(seeded, "search", ("docs",), filter={key: 1})] == ["odd"]
        assert [i.key for i in await call(seeded, "search", ("docs",), filter={"n." + key: {"$gt": 1}})] == ["odd"]
    with pytest.raises(ValueError, match="Invalid filter key"):
        await call(seeded, "search", ("docs",), filter={"access') = 'public' OR '1'='1' OR json_extract(value, '$.": "x"})


@pytest.mark.parametrize("value", HOSTILE + ["public' OR '1'='1", "public\x00' OR '1'='1", "''''"])
async def test_hostile_filter_values_are_literal(seeded: Any, value: str) -> None:
    assert await call(seeded, "search", ("docs",), filter={"access": value}) == []
    assert sorted(i.key for i in await call(seeded, "search", ("docs",), filter={"access": {"$ne": value}})) == ["private", "public"]


async def test_values_are_json_text(db: StoreDb, store: Any) -> None:
    await call(store, "put", ("v",), "k", {"a": [1, "x"], "b": {"c": None}})
    (raw,) = db.sql("SELECT value FROM threadline_store")[0]
    assert (json.loads(raw) if isinstance(raw, str) else raw) == {"a": [1, "x"], "b": {"c": None}}


def test_cache_namespaces_and_keys_are_literal(tmp_path) -> None:
    cache = threadline.SqliteCache(path=str(tmp_path / "c.db"))
    try:
        pairs = {((label, "n"), label): ({"v": label}, None) for label in HOSTILE}
        cache.set(pairs)
        assert cache.get(list(pairs)) == {k: v for k, (v, _) in pairs.items()}
        cache.clear([(HOSTILE[0], "n")])
        assert len(cache.get(list(pairs))) == len(HOSTILE) - 1
    finally:
        cache.close()
