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

from threadline.backends.sqliteconn import aconnect, at_door, connect
from threadline.store.base import AsyncStore, SyncStore
from threadline.store.drivers import AsyncStoreSqliteDriver, StoreSqliteDriver
from threadline.storage.dialect.store import SQLITE


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
        adopt: bool | None = None,
    ) -> None:
        super().__init__()
        self.conn = conn
        self._init_core(index, ttl, deserializer, adopt)
        self._driver = StoreSqliteDriver(conn, SQLITE, vectors=self._index is not None)
        self.lock = self._driver.lock

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, adopt: bool | None = None
    ) -> Iterator[SqliteStore]:
        """Open (creating if needed) a SQLite database: a path, ``":memory:"`` or ``sqlite:///path``."""
        conn = connect(conn_string)
        store = None
        try:
            store = cls(conn, index=index, ttl=ttl, adopt=adopt)
            yield store
        finally:
            if store is not None:
                store.stop_ttl_sweeper()
            conn.close()

    def setup(self) -> None:
        with at_door():
            super().setup()


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
        adopt: bool | None = None,
    ) -> None:
        super().__init__()
        self.conn = conn
        self.loop = self._loop
        self._init_core(index, ttl, deserializer, adopt)
        self._driver = AsyncStoreSqliteDriver(conn, SQLITE, vectors=self._index is not None)
        self.lock = self._driver.lock

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, adopt: bool | None = None
    ) -> AsyncIterator[AsyncSqliteStore]:
        """Open (creating if needed) a SQLite database: a path, ``":memory:"`` or ``sqlite:///path``."""
        conn = await aconnect(conn_string)
        store = None
        try:
            store = cls(conn, index=index, ttl=ttl, adopt=adopt)
            yield store
        finally:
            if store is not None:
                await store.stop_ttl_sweeper()
            await conn.close()

    async def setup(self) -> None:
        with at_door():
            await super().setup()
