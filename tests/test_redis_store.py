"""``RedisStore`` / ``AsyncRedisStore`` on the plain test Redis and on the session's local cluster:
side by side with threadline's ``SqliteStore`` (the same calls give the same results, key for
key and in order), TTL by Redis expiry, filters, exact vector search, the scan limit, bad
input (foreign keys under the prefix, corrupt items), Redis down, and the drop-in surface."""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from redis_support import RedisTarget, free_ports, private_server
from store_fixtures import call

from threadline.errors import BackendError, CorruptRowError
from threadline.store import AsyncRedisStore, RedisStore, SqliteStore
from threadline.store.redis import ScanLimitError


@asynccontextmanager
async def opened(target: RedisTarget, is_async: bool, **kwargs: Any) -> AsyncIterator[Any]:
    """A store of the test's own prefix on ``target``, set up."""
    if is_async:
        async with AsyncRedisStore.from_conn_string(target.url, store_prefix=target.prefix, **kwargs) as store:
            await store.setup()
            yield store
    else:
        with RedisStore.from_conn_string(target.url, store_prefix=target.prefix, **kwargs) as store:
            store.setup()
            yield store


def view(found: Any) -> Any:
    """Items as (namespace, key, value, score): what must agree between the stores."""
    if found is None:
        return None
    if isinstance(found, list):
        return [view(i) for i in found]
    return (tuple(found.namespace), found.key, found.value, getattr(found, "score", None))


ITEMS = [
    (("users", "u1", "prefs"), "theme", {"mode": "dark", "size": 12, "beta": True, "tags": ["a", "b"], "user": {"level": 3}}),
    (("users", "u1", "prefs"), "lang", {"mode": "fr", "size": 3, "beta": False, "tags": [], "user": {"level": 1}}),
    (("users", "u2", "prefs"), "theme", {"mode": "light", "size": 14.0, "beta": True, "tags": ["a"], "note": None}),
    (("users", "u2", "notes"), "n1", {"text": "O'Brien's note", "size": 7.5, "user": {"level": "x"}}),
    (("users_x",), "decoy", {"mode": "dark", "size": 12}),
    (("users-y", "a:b"), "k:1", {"mode": "dark", "size": -1}),
    (("docs",), "readme", {"mode": "dark", "size": 100, "ünï": "çødé"}),
]

FILTERS = [
    None,
    {"mode": "dark"},
    {"size": 12},
    {"size": 14},
    {"beta": True},
    {"beta": False},
    {"tags": ["a"]},
    {"note": None},
    {"user.level": 3},
    {"user": {"level": 3}},
    {"mode": {"$eq": "dark"}},
    {"mode": {"$ne": "light"}},
    {"size": {"$gt": 12}},
    {"size": {"$gte": 12, "$lte": 14}},
    {"size": {"$lt": 10}},
    {"mode": {"$gt": "e"}},
    {"user.level": {"$gte": 2}},
    {"size": float("nan")},
    {"mode": "dark", "size": {"$ne": 12}},
]


async def transcript(s: Any) -> list[Any]:
    """One sequence of calls: every result, in order."""
    out: list[Any] = []
    for ns, key, value in ITEMS:
        out.append(await call(s, "put", ns, key, value))
    for ns, key, _ in ITEMS:
        out.append(view(await call(s, "get", ns, key)))
    out.append(view(await call(s, "get", ("users",), "theme")))
    await call(s, "put", ("users", "u1", "prefs"), "theme", {"mode": "dim", "size": 13, "beta": True})
    updated = await call(s, "get", ("users", "u1", "prefs"), "theme")
    out.append((updated.value, updated.updated_at > updated.created_at))
    for prefix in [(), ("users",), ("users", "u1"), ("users_x",), ("users-y",), ("nobody",)]:
        for flt in FILTERS:
            out.append((prefix, repr(flt), view(await call(s, "search", prefix, filter=flt, limit=50))))
    out.append([view(await call(s, "search", ("users",), limit=2, offset=o)) for o in (0, 2, 4, 6)])
    out.append([view(await call(s, "search", (), filter={"mode": "dark"}, limit=1, offset=o)) for o in (0, 1, 2, 3)])
    for kwargs in [
        dict(),
        dict(prefix=("users",)),
        dict(suffix=("prefs",)),
        dict(prefix=("users", "*", "prefs")),
        dict(prefix=("*", "u1")),
        dict(prefix=("users",), suffix=("notes",)),
        dict(max_depth=1),
        dict(max_depth=2, prefix=("users",)),
        dict(limit=2, offset=1),
        dict(prefix=("users-y", "a:b")),
    ]:
        out.append((kwargs, await call(s, "list_namespaces", **kwargs)))
    results = await call(
        s,
        "batch",
        [
            GetOp(("docs",), "readme"),
            SearchOp(("users", "u2"), filter={"mode": "light"}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("users",)),), max_depth=2),
            PutOp(("docs",), "readme", None),
            PutOp(("docs",), "b", {"v": 1}),
            PutOp(("docs",), "a", {"v": 2}),
            PutOp(("docs", "sub"), "a", {"v": 3}),
        ],
    )
    out.append([view(results[0]), view(results[1]), results[2], results[3:]])
    out.append(view(await call(s, "search", ("docs",))))  # one batch: one time, ordered by namespace and key
    await call(s, "delete", ("users", "u2", "notes"), "n1")
    await call(s, "delete", ("nobody",), "nothing")
    out.append(await call(s, "list_namespaces", prefix=("users", "u2")))
    out.append(await call(s, "list_namespaces"))
    return out


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_same_calls_same_results_as_sqlite(any_redis_target: RedisTarget, tmp_path: Path, is_async: bool) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "ref.db")) as ref:
        want = await transcript(ref)
    async with opened(any_redis_target, is_async) as s:
        got = await transcript(s)
    assert len(got) == len(want)
    for n, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"step {n} differs"


async def test_random_operations_agree_with_sqlite(any_redis_target: RedisTarget, tmp_path: Path) -> None:
    rng = random.Random(2611)
    namespaces = [("a",), ("a", "b"), ("a", "b", "c"), ("a", "x"), ("ab",), ("z", "a")]
    with SqliteStore.from_conn_string(str(tmp_path / "ref.db")) as ref:
        async with opened(any_redis_target, False) as s:
            for step in range(250):
                roll = rng.random()
                ns, key = rng.choice(namespaces), f"k{rng.randrange(8)}"
                if roll < 0.45:
                    value = {"n": rng.randrange(-3, 4), "s": rng.choice(["x", "y", "é"]), "f": rng.choice([True, False, None])}
                    for store in (ref, s):
                        store.put(ns, key, value)
                elif roll < 0.6:
                    for store in (ref, s):
                        store.delete(ns, key)
                elif roll < 0.9:
                    prefix = rng.choice(namespaces + [()])
                    flt = rng.choice([None, {"n": {"$gt": 0}}, {"s": "x"}, {"f": None}, {"n": {"$ne": 1}}, {"f": True}])
                    kw = dict(filter=flt, limit=rng.randrange(1, 6), offset=rng.randrange(3))
                    assert view(s.search(prefix, **kw)) == view(ref.search(prefix, **kw)), f"step {step}: search {prefix} {kw}"
                else:
                    kw = dict(prefix=rng.choice([None, ("a",), ("a", "*")]), max_depth=rng.choice([None, 1, 2]))
                    assert s.list_namespaces(**kw) == ref.list_namespaces(**kw), f"step {step}: list_namespaces {kw}"


async def test_ttl_expires_items_and_their_index(any_redis_target: RedisTarget) -> None:
    async with opened(any_redis_target, False, ttl={"default_ttl": 0.01}) as s:  # 0.6 s
        s.put(("t",), "short", {"v": 1})
        s.put(("t", "keep"), "forever", {"v": 2}, ttl=None)
        s.put(("gone",), "short", {"v": 3}, ttl=0.005)
        raw = any_redis_target.client()
        item_key = s._ops.keys.item("t", "short")
        assert 0 < raw.pttl(item_key) <= 600 and raw.pttl(s._ops.keys.item("t.keep", "forever")) == -1
        assert [i.key for i in s.search(("t",))] == ["forever", "short"]
        time.sleep(0.9)
        assert s.get(("t",), "short") is None and s.get(("gone",), "short") is None
        assert [i.key for i in s.search(())] == ["forever"]
        assert s.list_namespaces() == [("t", "keep")]  # the search swept the index first
        assert raw.zcard(s._ops.keys.expiry) == 0 and not raw.exists(s._ops.keys.ns("gone"))
        assert s.sweep_ttl() == 0


async def test_reads_restart_the_ttl_unless_told_not_to(any_redis_target: RedisTarget) -> None:
    async with opened(any_redis_target, True, ttl={"default_ttl": 0.02, "refresh_on_read": True}) as s:  # 1.2 s
        await s.aput(("r",), "read", {"v": 1})
        await s.aput(("r",), "peek", {"v": 2})
        await asyncio.sleep(0.8)
        assert (await s.aget(("r",), "read")) is not None
        assert (await s.aget(("r",), "peek", refresh_ttl=False)) is not None
        await asyncio.sleep(0.7)
        assert (await s.aget(("r",), "read", refresh_ttl=False)) is not None  # restarted at 0.8 s
        assert (await s.aget(("r",), "peek")) is None
        found = await s.asearch(("r",))
        assert [i.key for i in found] == ["read"]
        assert await s.sweep_ttl() == 0


class Letters:
    """A deterministic embedding: letter counts plus one (never all zeros)."""

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return [[float(t.count(c)) for c in "abcdefghijklmnopqrstuvwxyz"] + [1.0] for t in texts]


DOCS = {"d1": "apple pie", "d2": "apricot jam", "d3": "banana bread", "d4": "zebra crossing"}


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
async def test_vector_search_scores_match_sqlite(any_redis_target: RedisTarget, tmp_path: Path, distance: str) -> None:
    index = {"dims": 27, "embed": Letters(), "fields": ["text"], "distance_type": distance}

    async def run(s: Any) -> list[Any]:
        for key, text in DOCS.items():
            await call(s, "put", ("docs",), key, {"text": text, "kind": "food" if key != "d4" else "road"})
        await call(s, "put", ("docs",), "hidden", {"text": "apple apple"}, index=False)
        await call(s, "put", ("docs", "sub"), "d5", {"title": "apple tart", "text": "zzz"}, index=["title"])
        return [
            [(r.key, round(r.score, 4)) for r in await call(s, "search", ("docs",), query="apple tart", limit=10)],
            [(r.key, round(r.score, 4)) for r in await call(s, "search", ("docs",), query="apple", filter={"kind": "food"}, limit=2, offset=1)],
            sorted(r.key for r in await call(s, "search", ("docs",), limit=10)),
        ]

    with SqliteStore.from_conn_string(str(tmp_path / "ref.db"), index=index) as ref:
        want = await run(ref)
    async with opened(any_redis_target, True, index=index) as s:
        got = await run(s)
    assert got == want
    assert "hidden" not in [k for k, _ in got[0]] and "hidden" in got[2] and got[0][0][0] == "d5"


async def test_vector_dims_must_agree(redis_target: RedisTarget) -> None:
    async with opened(redis_target, False, index={"dims": 27, "embed": Letters()}) as s:
        s.put(("d",), "k", {"text": "a"})
    with pytest.raises(ValueError, match=r"holds vectors of 27 dimensions; index\['dims'\] is 5"):
        async with opened(redis_target, False, index={"dims": 5, "embed": lambda t: [[1.0] * 5 for _ in t]}):
            pass


async def test_scan_limit(any_redis_target: RedisTarget) -> None:
    async with opened(any_redis_target, False, scan_limit=5) as s:
        for n in range(6):
            s.put(("big",), f"k{n}", {"n": n})
        s.put(("small",), "k", {"n": 1})
        assert len(s.search(("big",), limit=100)) == 6  # a plain search reads only the index
        assert [i.key for i in s.search(("small",), filter={"n": 1})] == ["k"]
        with pytest.raises(ScanLimitError, match=r"would read 7 items, more than this store's scan_limit of 5: narrow"):
            s.search((), filter={"n": 1})
    with pytest.raises(ValueError, match="scan_limit must be a positive integer"):
        RedisStore(any_redis_target.client(), store_prefix=any_redis_target.prefix, scan_limit=0)


async def test_foreign_key_under_the_prefix_stops_the_batch(any_redis_target: RedisTarget) -> None:
    async with opened(any_redis_target, False) as s:
        raw = any_redis_target.client()
        keys = s._ops.keys
        raw.set(keys.ns("a"), b"not a sorted set")
        with pytest.raises(BackendError, match=r"WRONGTYPE threadline store key \{.*\}:ns:a holds a string, not a zset") as e:
            s.batch([PutOp(("b",), "first", {"v": 1}), PutOp(("a",), "k", {"v": 1})])
        assert "\n" not in str(e.value)
        assert s.get(("b",), "first") is None and not raw.exists(keys.item("b", "first"))  # nothing half-written
        raw.delete(keys.ns("a"))
        raw.rpush(keys.item("c", "k"), b"x")
        with pytest.raises(BackendError, match=r"WRONGTYPE.*key \{.*\}:item:[0-9a-f]{40}, HMGET"):
            s.get(("c",), "k")


async def test_corrupt_item_is_named(redis_target: RedisTarget) -> None:
    async with opened(redis_target, True) as s:
        await s.aput(("c",), "k", {"v": 1})
        key = s._ops.keys.item("c", "k")
        redis_target.client().hset(key, "value", b"{not json")
        with pytest.raises(CorruptRowError, match=re.escape(f"Redis store key {key} (item ('c',)/'k'): stored value is not readable JSON")):
            await s.aget(("c",), "k")


async def test_bad_values_store_nothing(redis_target: RedisTarget) -> None:
    async with opened(redis_target, False) as s:
        with pytest.raises(ValueError, match="cannot be stored as JSON"):
            s.batch([PutOp(("v",), "ok", {"v": 1}), PutOp(("v",), "bad", {"v": float("nan")})])
        assert redis_target.keys() == [s._ops.keys.meta.encode()]


async def test_redis_down() -> None:
    url = f"redis://127.0.0.1:{free_ports(1)[0]}/0"
    with pytest.raises(BackendError, match=r"^cannot connect to Redis at redis://127\.0\.0\.1:\d+/0 .*check that the server is running"):
        with RedisStore.from_conn_string(url):
            pass
    with pytest.raises(BackendError, match=r"^cannot connect to Redis"):
        async with AsyncRedisStore.from_conn_string(url):
            pass
    store = AsyncRedisStore(url)  # the official constructor: its own client, checked at setup
    with pytest.raises(BackendError, match=r"^cannot connect to Redis"):
        await store.aput(("a",), "k", {"v": 1})
    await store.aclose()


async def test_cluster_store_lives_in_one_slot(redis_cluster_target: RedisTarget) -> None:
    async with opened(redis_cluster_target, False, index={"dims": 27, "embed": Letters()}, ttl={"default_ttl": 5}) as s:
        for n in range(20):
            s.put(("ns", str(n % 4)), f"k{n}", {"text": f"item {n}"})
        raw = redis_cluster_target.client()
        keys = redis_cluster_target.keys()
        assert len(keys) == 20 * 2 + 4 + 3  # items, vectors, namespace sets, registry + expiry + meta
        assert len({raw.keyslot(k) for k in keys}) == 1


async def test_setup_logs_the_servers_safety_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with private_server(tmp_path, "--maxmemory-policy", "allkeys-lru") as port:
        with caplog.at_level(logging.WARNING, logger="threadline.store.redis"):
            with RedisStore.from_conn_string(f"redis://127.0.0.1:{port}/0") as s:
                s.setup()
    lines = [r.getMessage() for r in caplog.records]
    assert any("maxmemory-policy is allkeys-lru" in line for line in lines)
    assert any("persistence is off" in line for line in lines)


def test_official_constructors_and_from_conn_string() -> None:
    """Every parameter of the official classes' constructors and ``from_conn_string`` exists here
    with the same kind and default (threadline adds keywords; it drops none)."""
    from langgraph.store.redis import AsyncRedisStore as OfficialAsync
    from langgraph.store.redis import RedisStore as OfficialSync

    for official, ours in ((OfficialSync, RedisStore), (OfficialAsync, AsyncRedisStore)):
        for name in ("__init__", "from_conn_string"):
            theirs = inspect.signature(getattr(official, name)).parameters
            mine = inspect.signature(getattr(ours, name)).parameters
            for param in theirs.values():
                assert param.name in mine, f"{ours.__name__}.{name} lacks {param.name}"
                assert (mine[param.name].kind, mine[param.name].default) == (param.kind, param.default), f"{ours.__name__}.{name}({param.name})"
        for name in ("setup", "sweep_ttl", "start_ttl_sweeper", "stop_ttl_sweeper"):
            assert inspect.iscoroutinefunction(getattr(ours, name)) == inspect.iscoroutinefunction(getattr(official, name)), name


async def test_official_constructor_shapes(redis_target: RedisTarget) -> None:
    store = RedisStore(redis_target.client(), store_prefix=redis_target.prefix)  # a client you own
    store.put(("o",), "k", {"v": 1})
    async with AsyncRedisStore(redis_target.url, store_prefix=redis_target.prefix, connection_args={"socket_timeout": 5}) as a:
        assert (await a.aget(("o",), "k")).value == {"v": 1}
    with pytest.raises(ValueError, match="without braces"):
        RedisStore(redis_target.client(), store_prefix="a{b}")


async def test_out_of_memory_stores_nothing_of_the_batch(tmp_path: Path) -> None:
    with private_server(tmp_path, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction") as port:
        with RedisStore.from_conn_string(f"redis://127.0.0.1:{port}/0") as s:
            with pytest.raises(BackendError, match=r"is out of memory .*nothing was written: raise maxmemory") as e:
                for n in range(100):
                    s.batch([PutOp(("fill",), f"k{n}", {"blob": "x" * 50_000}), PutOp(("pair",), f"k{n}", {"n": n})])
            written = len(s.search(("fill",), limit=1000))
            assert len(s.search(("pair",), limit=1000)) == written > 0  # every batch whole, or not at all
            assert "\n" not in str(e.value)


async def test_a_client_that_decodes_replies(redis_target: RedisTarget) -> None:
    import redis

    client = redis.Redis.from_url(redis_target.url, decode_responses=True)
    s = RedisStore(client, store_prefix=redis_target.prefix, index={"dims": 27, "embed": Letters()}, ttl={"default_ttl": 1})
    s.put(("d",), "k", {"text": "apple"})
    assert s.get(("d",), "k").value == {"text": "apple"}
    assert [i.key for i in s.search(("d",), query="apple")] == ["k"]
    client.close()


async def test_corrupt_vectors_are_named(redis_target: RedisTarget) -> None:
    async with opened(redis_target, False, index={"dims": 27, "embed": Letters()}) as s:
        s.put(("d",), "k", {"text": "apple"})
        key = s._ops.keys.vectors("d", "k")
        redis_target.client().hset(key, "$", b"%%not base64%%")
        with pytest.raises(CorruptRowError, match=re.escape(f"Redis store key {key}: a vector is not base64")):
            s.search(("d",), query="apple")
