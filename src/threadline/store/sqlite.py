"""SQLite stores: ``SqliteStore`` (sqlite3) and ``AsyncSqliteStore`` (aiosqlite).

Same constructors and ``from_conn_string`` as LangGraph's official
``langgraph.store.sqlite.SqliteStore`` / ``AsyncSqliteStore``; the tables are
threadline's (``threadline_store*``), so the file may also hold threadline's
checkpoints and cache. Semantic search (``index=``) uses the sqlite-vec extension.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import aiosqlite
from langgraph.store.base import IndexConfig, TTLConfig

from threadline.backends.sqlite import PRAGMAS, door_error, path_of
from threadline.store.base import AsyncStore, SyncStore
from threadline.store.drivers import AsyncSqliteDriver, SqliteDriver
from threadline.store.sql import SQLITE


def connect(conn_string: str) -> sqlite3.Connection:
    """A connection for ``from_conn_string``: autocommit, WAL, a 30 s busy timeout.
    Accepts a path, ``":memory:"`` or ``sqlite:///path``; BackendError when it cannot open."""
    path = path_of(conn_string)
    try:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        for pragma in PRAGMAS:
            conn.execute(pragma)
    except sqlite3.Error as exc:
        raise door_error(exc, path) from exc
    return conn


class SqliteStore(SyncStore):
    """LangGraph ``BaseStore`` on a SQLite file (``sqlite3``), with optional semantic search and TTL.

    Usage::

        with SqliteStore.from_conn_string("agent.db") as store:
            store.setup()  # optional: the first operation sets up the tables
            store.put(("users", "123"), "prefs", {"theme": "dark"})
            graph = builder.compile(checkpointer=saver, store=store)

    ``index={"dims": 1536, "embed": embeddings, "fields": ["text"]}`` enables
    ``search(..., query=...)``; ``ttl={"default_ttl": minutes, ...}`` item lifetimes.
    Safe to share between threads (one lock serializes use of the connection).

    Raises BackendError (at setup) for a file that is not a SQLite database, is
    read-only or cannot be opened, or when sqlite-vec is missing for ``index``.
    """

    sql = SQLITE
    MIGRATIONS = SQLITE.store_statements  # as the official attribute; setup() applies numbered migrations

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        super().__init__()
        self.conn = conn
        self._init_core(index, ttl, deserializer)
        self._driver = SqliteDriver(conn, vectors=self._index is not None)
        self.lock = self._driver.lock

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> Iterator[SqliteStore]:
        """Open (creating if needed) a SQLite database: a path, ``":memory:"`` or ``sqlite:///path``."""
        conn = connect(conn_string)
        store = None
        try:
            store = cls(conn, index=index, ttl=ttl)
            yield store
        finally:
            if store is not None:
                store.stop_ttl_sweeper()
            conn.close()

    def setup(self) -> None:
        try:
            super().setup()
        except sqlite3.Error as exc:
            raise door_error(exc, "the SQLite database") from exc


class AsyncSqliteStore(AsyncStore):
    """LangGraph ``BaseStore`` on a SQLite file through ``aiosqlite``; ``setup`` is ``async``.

    Usage::

        async with AsyncSqliteStore.from_conn_string("agent.db") as store:
            await store.setup()  # optional: the first operation sets up the tables
            await store.aput(("users", "123"), "prefs", {"theme": "dark"})
    """

    sql = SQLITE
    MIGRATIONS = SQLITE.store_statements  # as the official attribute; setup() applies numbered migrations

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        super().__init__()
        self.conn = conn
        self.loop = self._loop
        self._init_core(index, ttl, deserializer)
        self._driver = AsyncSqliteDriver(conn, vectors=self._index is not None)
        self.lock = self._driver.lock

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> AsyncIterator[AsyncSqliteStore]:
        """Open (creating if needed) a SQLite database: a path, ``":memory:"`` or ``sqlite:///path``."""
        path = path_of(conn_string)
        conn = None
        try:
            conn = await aiosqlite.connect(path, isolation_level=None)
            for pragma in PRAGMAS:
                await conn.execute(pragma)
        except sqlite3.Error as exc:
            if conn is not None:
                await conn.close()
            raise door_error(exc, path) from exc
        store = None
        try:
            store = cls(conn, index=index, ttl=ttl)
            yield store
        finally:
            if store is not None:
                await store.stop_ttl_sweeper()
            await conn.close()

    async def setup(self) -> None:
        try:
            await super().setup()
        except sqlite3.Error as exc:
            raise door_error(exc, "the SQLite database") from exc
