"""Switching a Store from LangGraph's official classes to threadline's: adoption and import.

A graph writes its memories through the official ``SqliteStore`` / ``PostgresStore`` (sync
and async); the program then switches its import to threadline's store on the same
database, which finds every memory (``search``, ``get``, ``list_namespaces``) with its
times and TTL, adopts later official writes on its next open, never lets an official row
override an item it wrote itself, and does none of this with ``adopt=False``. The
official table is never changed. ``import_langgraph_store`` (and ``threadline store
import``) copies an official store's items from another database.
"""

from __future__ import annotations

import datetime
import json
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import START, StateGraph

import threadline
from cli_support import cli, one_line_error
from store_fixtures import StoreDb, call, db, make_db, sync_db  # noqa: F401
from threadline.errors import AdoptionError, ConfigError
from threadline.store.official import aimport_langgraph_store, import_langgraph_store

OFFICIAL_ROWS = "SELECT prefix, key, value, created_at, updated_at, expires_at, ttl_minutes FROM store ORDER BY prefix, key"
YESTERDAY = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
YESTERDAY_PG = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
NOTES = [("u1", "likes green tea"), ("u1", "lives in Lyon"), ("u2", "plays the cello")]


class State(TypedDict):
    user: str
    text: str


def memory_graph() -> Any:
    """A graph whose one node remembers the turn's text in the user's namespace, through
    whatever store the graph was compiled with (``get_store()``)."""

    def remember(state: State) -> dict:
        store = get_store()
        ns = ("memories", state["user"])
        store.put(ns, f"note-{len(store.search(ns, limit=100))}", {"text": state["text"], "kind": "fact"})
        return {}

    return StateGraph(State).add_node("remember", remember).add_edge(START, "remember")


@asynccontextmanager
async def opened(db: StoreDb, *, official: bool = False, **kw: Any):
    """A store of ``db``'s kind on ``db.url`` itself (the official one too: the same database)."""
    cls = db.store_class(official)
    if db.is_async:
        async with cls.from_conn_string(db.url, **kw) as s:
            await s.setup()
            yield s
    else:
        with cls.from_conn_string(db.url, **kw) as s:
            s.setup()
            yield s


async def official_memories(db: StoreDb) -> None:
    """The graph's turns, stored by the official store; a TTL'd item beside them."""
    async with opened(db, official=True) as store:
        graph = memory_graph().compile(checkpointer=InMemorySaver(), store=store)
        for i, (user, text) in enumerate(NOTES):
            config = {"configurable": {"thread_id": f"t{i}"}}
            if db.is_async:
                await graph.ainvoke({"user": user, "text": text}, config)
            else:
                assert graph.invoke({"user": user, "text": text}, config) == {"user": user, "text": text}
        await call(store, "put", ("sessions",), "s1", {"open": True}, ttl=90)


async def test_items_the_official_store_wrote_are_found(db: StoreDb) -> None:
    await official_memories(db)
    async with opened(db, official=True) as off:
        expected = {(i.namespace, i.key): i for i in await call(off, "search", (), limit=100, refresh_ttl=False)}
    assert len(expected) == 4
    before = db.sql(OFFICIAL_ROWS)

    async with opened(db) as store:
        found = await call(store, "search", ("memories",), limit=100)
        assert sorted((i.namespace, i.key, i.value["text"]) for i in found) == [
            (("memories", "u1"), "note-0", "likes green tea"),
            (("memories", "u1"), "note-1", "lives in Lyon"),
            (("memories", "u2"), "note-0", "plays the cello"),
        ]
        assert [i.key for i in await call(store, "search", ("memories", "u1"), filter={"kind": "fact"}, limit=10)] != []
        item = await call(store, "get", ("memories", "u2"), "note-0", refresh_ttl=False)
        theirs = expected[(("memories", "u2"), "note-0")]
        assert item.value == theirs.value == {"text": "plays the cello", "kind": "fact"}
        assert item.created_at.timestamp() == pytest.approx(_seconds(theirs.created_at), abs=1.0)  # SQLite's official times are whole seconds
        assert item.updated_at.timestamp() == pytest.approx(_seconds(theirs.updated_at), abs=1.0)
        assert sorted(await call(store, "list_namespaces")) == [("memories", "u1"), ("memories", "u2"), ("sessions",)]
        assert await call(store, "list_namespaces", prefix=("memories",), max_depth=1) == [("memories",)]
        # the TTL came along: expires_at as the official row's, ttl_minutes 90
        ttl = db.sql("SELECT ttl_minutes, expires_at IS NOT NULL FROM threadline_store WHERE key = 's1'")
        assert [(float(a), bool(b)) for a, b in ttl] == [(90.0, True)]
        # the graph, switched to threadline's store, remembers on top of what it remembered
        graph = memory_graph().compile(checkpointer=InMemorySaver(), store=store)
        if db.is_async:
            await graph.ainvoke({"user": "u2", "text": "reads Proust"}, {"configurable": {"thread_id": "t9"}})
        else:
            graph.invoke({"user": "u2", "text": "reads Proust"}, {"configurable": {"thread_id": "t9"}})
        assert [i.key for i in await call(store, "search", ("memories", "u2"), limit=10)] == ["note-1", "note-0"]

    assert db.sql(OFFICIAL_ROWS) == before  # the official rows are never changed
    adopted = db.sql("SELECT COUNT(*) FROM threadline_store_adopted")[0][0]
    assert adopted == 4
    async with opened(db) as store:  # a second open adopts nothing again
        assert len(await call(store, "search", (), limit=100)) == 5
    assert db.sql("SELECT COUNT(*) FROM threadline_store_adopted")[0][0] == 4


def _seconds(value: Any) -> float:
    return value.timestamp() if hasattr(value, "timestamp") else datetime.datetime.fromisoformat(str(value)).timestamp()


async def test_later_official_writes_are_caught_up_but_never_override_threadline_writes(db: StoreDb) -> None:
    """A mixed fleet: official workers keep writing after threadline adopted the store."""
    async with opened(db, official=True) as off:
        for key in ("a", "b", "c"):
            await call(off, "put", ("m",), key, {"v": "official-1"})
    # written yesterday (the official SQLite store keeps whole seconds: a change within the
    # second an item was adopted in is seen with its next change)
    db.sql("UPDATE store SET created_at = ?, updated_at = ?", [YESTERDAY, YESTERDAY] if not db.is_postgres else [YESTERDAY_PG, YESTERDAY_PG])
    async with opened(db) as store:
        assert len(await call(store, "search", ("m",), limit=10)) == 3
        await call(store, "put", ("m",), "a", {"v": "threadline"})  # threadline's own write
        await call(store, "delete", ("m",), "c")
    async with opened(db, official=True) as off:
        for key in ("a", "b", "d"):
            await call(off, "put", ("m",), key, {"v": "official-2"})
    async with opened(db) as store:
        values = {i.key: i.value["v"] for i in await call(store, "search", ("m",), limit=10)}
    assert values == {"a": "threadline", "b": "official-2", "d": "official-2"}  # c stays deleted


async def test_adopt_false_serves_threadline_items_only(db: StoreDb) -> None:
    await official_memories(db)
    async with opened(db, adopt=False) as store:
        assert await call(store, "search", (), limit=100) == []
        assert await call(store, "list_namespaces") == []
        assert await call(store, "get", ("memories", "u1"), "note-0") is None
    assert db.sql("SELECT COUNT(*) FROM threadline_store")[0][0] == 0
    with pytest.raises(ConfigError, match="adopt must be True, False or None"):
        threadline.SqliteStore(sqlite3.connect(":memory:"), adopt="yes")


async def test_an_item_threadline_cannot_store_is_one_clear_error(db: StoreDb) -> None:
    async with opened(db, official=True) as off:
        await call(off, "put", ("ok",), "k", {"v": 1})
        await call(off, "put", ("bad",), "k", {"v": 2})
    db.sql("UPDATE store SET value = ? WHERE prefix = 'bad'", ["[1, 2]"])
    with pytest.raises(AdoptionError, match=r"official store's item \('bad',\)/'k'.*not a JSON object"):
        async with opened(db):
            pass
    assert db.sql("SELECT COUNT(*) FROM threadline_store")[0][0] == 0  # nothing adopted, not even the good one
    async with opened(db, adopt=False) as store:
        assert await call(store, "search", (), limit=10) == []


def test_adoption_embeds_items_for_semantic_search(tmp_path: Path) -> None:
    from langgraph.store.sqlite import SqliteStore as OfficialSqliteStore

    from threadline import SqliteStore

    path = str(tmp_path / "agent.db")
    with OfficialSqliteStore.from_conn_string(path) as off:
        off.setup()
        off.put(("docs",), "tea", {"text": "green tea"})
        off.put(("docs",), "bike", {"text": "bicycle repair"})

    def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] if "tea" in t else [0.0, 1.0] for t in texts]

    with SqliteStore.from_conn_string(path, index={"dims": 2, "embed": embed, "fields": ["text"]}) as store:
        found = store.search(("docs",), query="a cup of tea", limit=2)
        assert [i.key for i in found] == ["tea", "bike"] and found[0].score > found[1].score


async def test_import_copies_an_official_store_from_another_database(db: StoreDb) -> None:
    source = db.twin  # the official store's own database
    async with db.store_class(official=True).from_conn_string(source) if db.is_async else _sync(db.store_class(official=True), source) as off:
        await _setup(off)
        await call(off, "put", ("users", "u1"), "prefs", {"theme": "dark"})
        await call(off, "put", ("users", "u2"), "prefs", {"theme": "light"})
    async with opened(db) as store:
        await call(store, "put", ("users", "u2"), "prefs", {"theme": "threadline"})
        run = aimport_langgraph_store if db.is_async else _sync_import
        report = await run(source, store)
        assert (report.items, report.kept, report.namespaces) == (1, 1, ["users.u1", "users.u2"])
        assert (await call(store, "get", ("users", "u2"), "prefs")).value == {"theme": "threadline"}
        report = await run(source, store, replace=True)
        assert (report.items, report.kept) == (2, 0)
        assert (await call(store, "get", ("users", "u2"), "prefs")).value == {"theme": "light"}
        with pytest.raises(ConfigError, match="holds no store of LangGraph's official"):
            await run(db.url, store)


async def _setup(store: Any) -> None:
    result = store.setup()
    if hasattr(result, "__await__"):
        await result


@asynccontextmanager
async def _sync(cls: type, url: str):
    with cls.from_conn_string(url) as s:
        yield s


async def _sync_import(source: str, store: Any, **kw: Any) -> Any:
    return import_langgraph_store(source, store, **kw)


def test_cli_store_import(tmp_path: Path) -> None:
    from langgraph.store.sqlite import SqliteStore as OfficialSqliteStore

    source, target = tmp_path / "official.db", tmp_path / "threadline.db"
    with OfficialSqliteStore.from_conn_string(str(source)) as off:
        off.setup()
        graph = memory_graph().compile(checkpointer=InMemorySaver(), store=off)
        for i, (user, text) in enumerate(NOTES):
            graph.invoke({"user": user, "text": text}, {"configurable": {"thread_id": f"t{i}"}})
    digest = source.read_bytes()

    done = cli("store", "import", str(source), "--db", str(target))
    assert done.returncode == 0, done.stderr
    assert "3 items" in done.stdout and "memories.u1" in done.stdout
    assert source.read_bytes() == digest  # the source is only read
    found = cli("store", "search", "memories", "--db", str(target), "--json")
    assert found.returncode == 0, found.stderr
    assert sorted(i["value"]["text"] for i in json.loads(found.stdout)) == sorted(t for _, t in NOTES)
    again = cli("store", "import", str(source), "--db", str(target), "--json")
    assert json.loads(again.stdout)["kept"] == 3

    not_official = tmp_path / "plain.db"
    sqlite3.connect(not_official).execute("CREATE TABLE t (x)").connection.close()
    one_line_error(cli("store", "import", str(not_official), "--db", str(target)), 2, "holds no store of LangGraph's official")
    one_line_error(cli("store", "import", str(tmp_path / "missing.db"), "--db", str(target)), 2, "missing.db")


def test_cli_store_reads_say_what_is_not_adopted(tmp_path: Path) -> None:
    """A database the official store wrote, not yet opened by threadline's store: the read
    commands write nothing, say the official items are there and how to adopt them."""
    from langgraph.store.sqlite import SqliteStore as OfficialSqliteStore

    path = tmp_path / "official.db"
    with OfficialSqliteStore.from_conn_string(str(path)) as off:
        off.setup()
        off.put(("memories", "u1"), "k", {"text": "hello"})
    digest = path.read_bytes()
    listed = cli("store", "ls", "--db", str(path))
    one_line_error(listed, 2, "LangGraph's official store", "1 item", "store import")
    assert path.read_bytes() == digest


def test_store_reads_name_official_items_not_adopted_yet(tmp_path: Path) -> None:
    """Beside a threadline store, the CLI's store reads and the browser's Store page say how many
    official items are not adopted yet (and write nothing)."""
    from langgraph.store.sqlite import SqliteStore as OfficialSqliteStore

    from threadline import SqliteStore
    from threadline.web import UIConfig
    from web_helpers import client

    path = tmp_path / "agent.db"
    with SqliteStore.from_conn_string(str(path), adopt=False) as store, threadline.SqliteSaver.from_conn_string(str(path)):
        store.put(("mine",), "k", {"v": 1})
    with OfficialSqliteStore.from_conn_string(str(path)) as off:
        off.setup()
        off.put(("memories", "u1"), "a", {"text": "one"})
        off.put(("memories", "u1"), "b", {"text": "two"})
    digest = path.read_bytes()
    listed = cli("store", "ls", "--db", str(path))
    assert listed.returncode == 0 and listed.stdout.split() == ["mine"]
    assert "2 items of LangGraph's official store in this database are not adopted yet" in listed.stderr
    with client(UIConfig(db=str(path), read_only=True)) as c:
        page = c.get("/store").text
    assert "2 items of LangGraph's official store in this database are not adopted yet" in page
    assert path.read_bytes() == digest
