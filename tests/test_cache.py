"""The node cache: SqliteCache and PostgresCache (get/set/clear, per-entry TTL, sync and async,
the load policy), and a real graph whose cached node is skipped after a process restart, with
the checkpointer, store and cache on one database."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import threadline
from backends import PgSchemas, pg_dsn, postgres_unavailable, with_search_path
from store_fixtures import require
from threadline import cache as cache_module
from threadline.errors import CorruptRowError

SCHEMAS = PgSchemas()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "cache.db")
    require(postgres_unavailable())
    schema = SCHEMAS.create()
    request.addfinalizer(lambda: SCHEMAS.drop(schema))
    return with_search_path(pg_dsn(), schema)


@pytest.fixture
def cache(url: str):
    with threadline.open_cache(url) as c:
        yield c


class Clock:
    now = time.time()

    def time(self) -> float:
        return self.now


async def test_get_set_clear_with_ttl(cache, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(cache_module, "time", clock)
    a, b, c = (("node", "a"), "k1"), (("node", "b"), "k2"), (("other",), "k3")
    cache.set({a: ({"x": [1, 2]}, None), b: ("text", 10), c: (b"\x00bytes", 5)})
    assert cache.get([a, b, c, (("node", "a"), "missing")]) == {a: {"x": [1, 2]}, b: "text", c: b"\x00bytes"}
    clock.now += 6
    assert await cache.aget([a, b, c]) == {a: {"x": [1, 2]}, b: "text"}
    clock.now += 5
    assert cache.get([a, b, c]) == {a: {"x": [1, 2]}}
    await cache.aset({b: ("again", None)})
    assert cache.get([b]) == {b: "again"}
    cache.clear([("node", "a")])
    assert cache.get([a, b]) == {b: "again"}
    await cache.aclear()
    assert cache.get([a, b, c]) == {}
    assert cache.get([]) == {}


def test_large_values_are_compressed_and_round_trip(cache) -> None:
    value = {"rows": ["same text"] * 5000}
    cache.set({(("n",), "big"): (value, None)})
    assert cache.get([(("n",), "big")]) == {(("n",), "big"): value}


def test_unreadable_or_pickled_entries_raise(url: str, cache) -> None:
    cache.set({(("n",), "k"): ("v", None)})
    import psycopg

    def tamper(sql: str) -> None:
        if url.startswith("postgresql"):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql)
        else:
            import sqlite3

            conn = sqlite3.connect(url, isolation_level=None)
            conn.execute(sql)
            conn.close()

    tamper("UPDATE threadline_cache SET encoding = 'pickle'")
    with pytest.raises(CorruptRowError, match="refusing"):
        cache.get([(("n",), "k")])
    postgres = url.startswith("postgresql")
    tamper("UPDATE threadline_cache SET encoding = 'msgpack', value = " + ("'\\xc1'::bytea" if postgres else "X'C1'"))
    with pytest.raises(CorruptRowError, match="threadline_cache"):
        cache.get([(("n",), "k")])
    if not postgres:  # SQLite columns take any type
        tamper("UPDATE threadline_cache SET value = 'text'")
        with pytest.raises(CorruptRowError, match="not bytes"):
            cache.get([(("n",), "k")])


def test_sqlite_cache_constructor_is_the_official_one(tmp_path: Path) -> None:
    from langgraph.cache.sqlite import SqliteCache as Official

    for cls in (Official, threadline.SqliteCache):
        c = cls(path=str(tmp_path / f"{cls.__module__}.db"))
        c.set({(("a", "b"), "k"): ({"v": 1}, None)})
        assert c.get([(("a", "b"), "k")]) == {(("a", "b"), "k"): {"v": 1}}


GRAPH = textwrap.dedent(
    """
    import json, sys
    from typing import TypedDict
    from langgraph.graph import START, StateGraph
    from langgraph.types import CachePolicy
    import threadline

    url, counter = sys.argv[1], sys.argv[2]

    class State(TypedDict):
        x: int
        y: int

    def expensive(state: State, *, store) -> dict:
        with open(counter, "a") as f:
            f.write("ran\\n")
        store.put(("results",), str(state["x"]), {"y": state["x"] * 10})
        return {"y": state["x"] * 10}

    builder = StateGraph(State)
    builder.add_node("expensive", expensive, cache_policy=CachePolicy(ttl=None))
    builder.add_edge(START, "expensive")
    with threadline.open_saver(url) as saver, threadline.open_store(url) as store, threadline.open_cache(url) as cache:
        graph = builder.compile(checkpointer=saver, store=store, cache=cache)
        chunks = list(graph.stream({"x": 4}, {"configurable": {"thread_id": sys.argv[3]}}, stream_mode="updates"))
        print(json.dumps({"chunks": chunks, "stored": store.get(("results",), "4").value}))
    """
)


def test_cached_node_is_skipped_after_a_restart(url: str, tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    outputs = []
    for thread in ("first", "second"):  # two processes, one database
        proc = subprocess.run([sys.executable, "-c", GRAPH, url, str(counter), thread], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        outputs.append(__import__("json").loads(proc.stdout))
    assert counter.read_text() == "ran\n"  # the node ran once
    assert outputs[0]["chunks"] == [{"expensive": {"y": 40}}]
    assert outputs[1]["chunks"] == [{"expensive": {"y": 40}, "__metadata__": {"cached": True}}]
    assert outputs[0]["stored"] == outputs[1]["stored"] == {"y": 40}
