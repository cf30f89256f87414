"""threadline's savers are drop-in replacements for LangGraph's official ones: the
official idioms, each on a real database.

``from_conn_string`` entered the official way, ``setup()`` / ``await setup()``,
``pipeline=True``, construction on a psycopg connection / pool made as the official
docs do, instances carrying the official public attributes, and "never mutate a
caller's connection" (isolation level, PRAGMAs, transaction control of a
``sqlite3`` / ``aiosqlite`` connection; ``autocommit`` / ``row_factory`` of a
psycopg one). The classes' API, by introspection, is in ``test_drop_in_api.py``.
"""

from __future__ import annotations

import inspect
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.base.id import uuid6


@pytest.fixture
def sqlite_path(tmp_path: Path) -> str:
    return str(tmp_path / "app.db")


def _checkpoint(step: int = 1) -> dict:
    return {
        "v": 4,
        "id": str(uuid6(clock_seq=step)),
        "ts": "2024-05-04T06:32:42.235444+00:00",
        "channel_values": {"count": step, "items": ["a", {"b": step}]},
        "channel_versions": {"count": f"{step:032}.{0.5:016}", "items": f"{step:032}.{0.25:016}"},
        "versions_seen": {"node": {"count": f"{step:032}.{0.5:016}"}},
        "updated_channels": ["count", "items"],
    }


def _put_args(thread_id: str = "1") -> tuple[dict, dict, dict, dict]:
    cp = _checkpoint()
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    metadata = {"source": "input", "step": 1, "parents": {}}
    return config, cp, metadata, dict(cp["channel_versions"])


def _assert_roundtrip(saved: dict, got: CheckpointTuple | None, cp: dict) -> None:
    assert saved["configurable"]["checkpoint_id"] == cp["id"]
    assert got is not None
    assert got.config["configurable"]["checkpoint_id"] == cp["id"]
    assert got.checkpoint["channel_values"] == cp["channel_values"]
    assert got.metadata["source"] == "input" and got.metadata["step"] == 1


def _roundtrip(cp_saver: Any, thread_id: str = "1") -> None:
    config, cp, metadata, versions = _put_args(thread_id)
    saved = cp_saver.put(config, cp, metadata, versions)
    _assert_roundtrip(saved, cp_saver.get_tuple({"configurable": {"thread_id": thread_id}}), cp)


async def _aroundtrip(cp_saver: Any, thread_id: str = "1") -> None:
    config, cp, metadata, versions = _put_args(thread_id)
    saved = await cp_saver.aput(config, cp, metadata, versions)
    _assert_roundtrip(saved, await cp_saver.aget_tuple({"configurable": {"thread_id": thread_id}}), cp)


async def _aset_up_and_run(cp_saver: Any) -> None:
    """``await setup()``, a put read back, and a real graph run and read through the saver."""
    await cp_saver.setup()
    await _aroundtrip(cp_saver)
    graph = _tiny_graph(cp_saver)
    config = {"configurable": {"thread_id": "g"}}
    assert await graph.ainvoke(3, config) == 4
    assert (await graph.aget_state(config)).values == 4


def _tiny_graph(checkpointer: Any) -> Any:
    from langgraph.graph import StateGraph

    builder = StateGraph(int)
    builder.add_node("add_one", lambda x: x + 1)
    builder.set_entry_point("add_one")
    builder.set_finish_point("add_one")
    return builder.compile(checkpointer=checkpointer)


# from_conn_string, entered the official way


@pytest.mark.parametrize("name, target", [("SqliteSaver", "sqlite_path"), ("PostgresSaver", "pg_url")])
def test_from_conn_string_is_a_context_manager_and_setup_is_sync(name: str, target: str, request: pytest.FixtureRequest) -> None:
    import threadline

    cls = getattr(threadline, name)
    cm = cls.from_conn_string(request.getfixturevalue(target))
    assert hasattr(cm, "__enter__") and hasattr(cm, "__exit__"), f"{type(cm)} is not a context manager"
    with cm as cp:
        assert isinstance(cp, cls)
        assert cp.setup() is None
        _roundtrip(cp)


@pytest.mark.parametrize("name, target", [("AsyncSqliteSaver", "sqlite_path"), ("AsyncPostgresSaver", "pg_url")])
async def test_async_from_conn_string_then_await_setup(name: str, target: str, request: pytest.FixtureRequest) -> None:
    import threadline

    cls = getattr(threadline, name)
    cm = cls.from_conn_string(request.getfixturevalue(target))
    assert hasattr(cm, "__aenter__") and hasattr(cm, "__aexit__"), f"{type(cm)} is not an async context manager"
    async with cm as cp:
        assert isinstance(cp, cls)
        result = cp.setup()  # official: a coroutine
        assert inspect.isawaitable(result), f"{name}.setup() returned {result!r}, not an awaitable"
        await result
        await _aroundtrip(cp)


def test_postgres_from_conn_string_pipeline(pg_url: str) -> None:
    from threadline import PostgresSaver

    with PostgresSaver.from_conn_string(pg_url, pipeline=True) as cp:
        cp.setup()
        _roundtrip(cp)
        config, cp_, metadata, versions = _put_args("2")
        saved = cp.put(config, cp_, metadata, versions)
        cp.put_writes(saved, [("count", 5), ("__error__", "boom")], "task-1")
        got = cp.get_tuple(saved)
        assert got is not None and sorted(got.pending_writes) == sorted([("task-1", "count", 5), ("task-1", "__error__", "boom")])
        assert [t.config["configurable"]["thread_id"] for t in cp.list(None)] == ["2", "1"]


async def test_async_postgres_from_conn_string_pipeline(pg_url: str) -> None:
    from threadline import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(pg_url, pipeline=True) as cp:
        await cp.setup()
        await _aroundtrip(cp)
        assert [t.config["configurable"]["thread_id"] async for t in cp.alist(None)] == ["1"]


def test_postgres_saver_with_explicit_pipe(pg_url: str) -> None:
    """Official signature ``PostgresSaver(conn, pipe=None, serde=None)``: a pipeline passed positionally."""
    import psycopg
    from psycopg.rows import dict_row

    from threadline import PostgresSaver

    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn, conn.pipeline() as pipe:
        cp = PostgresSaver(conn, pipe)
        cp.setup()
        _roundtrip(cp)


# construction on connections / pools made as the official docs do


def test_postgres_saver_on_official_style_connection(pg_url: str) -> None:
    import psycopg
    from psycopg.rows import dict_row

    from threadline import PostgresSaver

    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        cp = PostgresSaver(conn)
        cp.setup()
        _roundtrip(cp)
        graph = _tiny_graph(cp)
        config = {"configurable": {"thread_id": "g"}}
        assert graph.invoke(3, config) == 4
        assert graph.get_state(config).values == 4
        # the caller's connection is as they made it
        assert conn.autocommit is True
        assert conn.row_factory is dict_row
        assert conn.prepare_threshold == 0
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}


def test_postgres_saver_on_official_style_pool(pg_url: str) -> None:
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from threadline import PostgresSaver

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(pg_url, max_size=4, kwargs=kwargs, open=True) as pool:
        cp = PostgresSaver(pool)
        cp.setup()
        _roundtrip(cp)
        with pool.connection() as conn:
            assert conn.autocommit is True and conn.row_factory is dict_row


async def test_async_postgres_saver_on_official_style_pool(pg_url: str) -> None:
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from threadline import AsyncPostgresSaver

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool = AsyncConnectionPool(pg_url, max_size=4, kwargs=kwargs, open=False)
    await pool.open()
    try:
        cp = AsyncPostgresSaver(pool)
        await _aset_up_and_run(cp)
        async with pool.connection() as conn:
            assert conn.autocommit is True and conn.row_factory is dict_row
    finally:
        await pool.close()


async def test_async_postgres_saver_on_official_style_connection(pg_url: str) -> None:
    import psycopg
    from psycopg.rows import dict_row

    from threadline import AsyncPostgresSaver

    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        cp = AsyncPostgresSaver(conn)
        await cp.setup()
        await _aroundtrip(cp)
        assert conn.autocommit is True
        assert conn.row_factory is dict_row
        assert conn.prepare_threshold == 0
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        await conn.close()


async def test_async_sqlite_saver_on_aiosqlite_connection(sqlite_path: str) -> None:
    """Official docstring idiom: ``async with aiosqlite.connect(path) as conn: AsyncSqliteSaver(conn)``."""
    import aiosqlite

    from threadline import AsyncSqliteSaver

    async with aiosqlite.connect(sqlite_path) as conn:
        cp = AsyncSqliteSaver(conn)
        await _aset_up_and_run(cp)


# instances carry the official public attributes

# Public instance attributes of the official savers that are implementation
# details, not API: ``jsonplus_serde`` (SqliteSaver/AsyncSqliteSaver build it in
# __init__ and never use it) and ``supports_pipeline`` (the Postgres savers cache
# ``psycopg.Capabilities().has_pipeline()`` there).
OFFICIAL_INTERNAL_INSTANCE_ATTRS = frozenset({"jsonplus_serde", "supports_pipeline"})


def _assert_has_official_attributes(off: Any, mine: Any) -> None:
    """``mine`` has every public instance attribute the official instance ``off`` has."""
    want = {n for n in vars(off) if not n.startswith("_")} - OFFICIAL_INTERNAL_INSTANCE_ATTRS
    missing = sorted(n for n in want if not hasattr(mine, n))
    assert not missing, f"{type(mine).__name__} instances lack {missing}"


def test_sqlite_instance_attributes(sqlite_path: str) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as Official

    from threadline import SqliteSaver

    off_conn = sqlite3.connect(sqlite_path + ".official", check_same_thread=False)
    my_conn = sqlite3.connect(sqlite_path, check_same_thread=False)
    try:
        off, mine = Official(off_conn), SqliteSaver(my_conn)
        _assert_has_official_attributes(off, mine)
        assert mine.conn is my_conn
    finally:
        off_conn.close()
        my_conn.close()


def test_postgres_instance_attributes(pg_url: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as Official
    from psycopg.rows import dict_row

    from threadline import PostgresSaver

    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        off, mine = Official(conn), PostgresSaver(conn)
        _assert_has_official_attributes(off, mine)
        assert mine.conn is conn


async def test_async_postgres_instance_attributes(pg_url: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as Official
    from psycopg.rows import dict_row

    from threadline import AsyncPostgresSaver

    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        off, mine = Official(conn), AsyncPostgresSaver(conn)
        _assert_has_official_attributes(off, mine)
        assert mine.conn is conn
    finally:
        await conn.close()


# never mutate a caller's connection

_PRAGMAS = ("busy_timeout", "synchronous", "foreign_keys", "journal_mode")


def _prepare_app_connection(path: str) -> sqlite3.Connection:
    """A connection as an application would make it, with its own (non-default) settings."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=1234")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _sqlite_state(conn: sqlite3.Connection) -> dict[str, Any]:
    state: dict[str, Any] = {"isolation_level": conn.isolation_level, "in_transaction": conn.in_transaction}
    for p in _PRAGMAS:
        state[p] = conn.execute(f"PRAGMA {p}").fetchone()[0]
    return state


def _app_transaction_rolls_back(conn: sqlite3.Connection) -> list:
    """The app's own DDL + commit, then an INSERT it rolls back: what is left in its table."""
    conn.execute("CREATE TABLE app(x)")
    conn.commit()
    conn.execute("INSERT INTO app VALUES (1)")
    conn.rollback()
    return conn.execute("SELECT x FROM app").fetchall()


def _use_sync_saver(saver: Any) -> None:
    _roundtrip(saver)
    graph = _tiny_graph(saver)
    config = {"configurable": {"thread_id": "g"}}
    assert graph.invoke(3, config) == 4
    assert graph.get_state(config).values == 4


def _sqlite_scenario(saver_cls: type, path: str) -> tuple[dict, dict, list]:
    conn = _prepare_app_connection(path)
    try:
        before = _sqlite_state(conn)
        saver = saver_cls(conn)
        _use_sync_saver(saver)
        after = _sqlite_state(conn)
        left = _app_transaction_rolls_back(conn)
        return before, after, left
    finally:
        conn.close()


def test_sqlite_saver_never_mutates_the_callers_connection(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as Official

    from threadline import SqliteSaver

    off_before, off_after, off_left = _sqlite_scenario(Official, str(tmp_path / "official.db"))
    before, after, left = _sqlite_scenario(SqliteSaver, str(tmp_path / "threadline.db"))

    # The official saver: isolation level and connection PRAGMAs untouched (its
    # setup switches the FILE to WAL, a property of the database, not the
    # connection), and the app's rollback undoes the app's INSERT.
    assert off_after["isolation_level"] == off_before["isolation_level"] == ""
    assert off_left == []
    assert all(off_after[p] == off_before[p] for p in ("busy_timeout", "synchronous", "foreign_keys"))

    assert_connection_untouched("SqliteSaver(conn)", before, after, left, off_after)


def assert_connection_untouched(who: str, before: dict, after: dict, left: list, off_after: dict) -> None:
    """Every way ``who`` changed the caller's connection, in one message."""
    problems = []
    if after["isolation_level"] != before["isolation_level"]:
        problems.append(f"conn.isolation_level changed from {before['isolation_level']!r} to {after['isolation_level']!r}")
    for p in ("busy_timeout", "synchronous", "foreign_keys"):
        if before[p] != after[p]:
            problems.append(f"PRAGMA {p} changed from {before[p]!r} to {after[p]!r}")
    if after["journal_mode"] != off_after["journal_mode"]:
        problems.append(f"journal_mode is {after['journal_mode']!r}, the official saver leaves {off_after['journal_mode']!r}")
    if after["in_transaction"]:
        problems.append("a transaction was left open on the caller's connection")
    if left != []:
        problems.append(f"the app's rollback() did not roll back its INSERT: {left} left in table app")
    assert not problems, f"{who} mutated the caller's connection:\n  " + "\n  ".join(problems)


async def _async_sqlite_scenario(saver_cls: type, path: str) -> tuple[dict, dict, list]:
    import aiosqlite

    async with aiosqlite.connect(path) as conn:
        await conn.execute("PRAGMA busy_timeout=1234")
        await conn.execute("PRAGMA synchronous=FULL")
        await conn.execute("PRAGMA foreign_keys=ON")

        async def state() -> dict[str, Any]:
            s: dict[str, Any] = {"isolation_level": conn.isolation_level, "in_transaction": conn.in_transaction}
            for p in _PRAGMAS:
                async with conn.execute(f"PRAGMA {p}") as cur:
                    s[p] = (await cur.fetchone())[0]
            return s

        before = await state()
        saver = saver_cls(conn)
        await _aroundtrip(saver)
        graph = _tiny_graph(saver)
        config = {"configurable": {"thread_id": "g"}}
        assert await graph.ainvoke(3, config) == 4
        after = await state()
        await conn.execute("CREATE TABLE app(x)")
        await conn.commit()
        await conn.execute("INSERT INTO app VALUES (1)")
        await conn.rollback()
        async with conn.execute("SELECT x FROM app") as cur:
            left = list(await cur.fetchall())
        return before, after, left


async def test_async_sqlite_saver_never_mutates_the_callers_connection(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as Official

    from threadline import AsyncSqliteSaver

    off_before, off_after, off_left = await _async_sqlite_scenario(Official, str(tmp_path / "official.db"))
    before, after, left = await _async_sqlite_scenario(AsyncSqliteSaver, str(tmp_path / "threadline.db"))

    assert off_after["isolation_level"] == off_before["isolation_level"]
    assert off_left == []
    assert all(off_after[p] == off_before[p] for p in ("busy_timeout", "synchronous", "foreign_keys"))

    assert_connection_untouched("AsyncSqliteSaver(conn)", before, after, left, off_after)


def test_sqlite_saver_official_docstring_example(sqlite_path: str) -> None:
    """The official class docstring, verbatim apart from the import."""
    from threadline import SqliteSaver

    conn = sqlite3.connect(sqlite_path, check_same_thread=False)
    try:
        memory = SqliteSaver(conn)
        graph = _tiny_graph(memory)
        config = {"configurable": {"thread_id": "1"}}
        graph.get_state(config)
        assert graph.invoke(3, config) == 4
        snap = graph.get_state(config)
        assert snap.values == 4 and snap.next == ()
    finally:
        conn.close()


def test_sqlite_saver_cursor(sqlite_path: str) -> None:
    """Official ``SqliteSaver.cursor(transaction=True)``: a context manager yielding a
    ``sqlite3.Cursor`` on the saver's connection, committing on exit when asked to."""
    from threadline import SqliteSaver

    with SqliteSaver.from_conn_string(sqlite_path) as cp:
        with cp.cursor() as cur:
            assert isinstance(cur, sqlite3.Cursor)
            assert cur.execute("SELECT 1").fetchone() == (1,)
            cur.execute("CREATE TABLE app(x)")
            cur.execute("INSERT INTO app VALUES (1)")
        with cp.cursor(transaction=False) as cur:
            assert cur.execute("SELECT x FROM app").fetchall() == [(1,)]
        _roundtrip(cp)
    other = sqlite3.connect(sqlite_path)
    try:
        assert other.execute("SELECT x FROM app").fetchall() == [(1,)], "cursor() did not commit on exit"
    finally:
        other.close()


def test_sqlite_from_conn_string_memory() -> None:
    """``SqliteSaver.from_conn_string(":memory:")`` (official docstring)."""
    from threadline import SqliteSaver

    with SqliteSaver.from_conn_string(":memory:") as memory:
        _roundtrip(memory)
