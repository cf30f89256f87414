"""Drivers: run a sans-IO operation in one transaction on sqlite3, aiosqlite or psycopg.

Each ``run(op, write=…)`` opens a transaction (SQLite: ``BEGIN IMMEDIATE`` for writes,
so concurrent processes queue on the busy timeout instead of failing to upgrade a
read lock), executes the operation's queries, commits, and rolls back on any error:
an operation is stored whole or not at all. The Store and the Cache share them.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any, TypeVar

import aiosqlite
import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.storage.ops import Op
from threadline.storage.runner import adrive, drive
from threadline.store import vecmath
from threadline.store.ops import ns_match
from threadline.store.sql import POSTGRES, SQLITE

T = TypeVar("T")
NS_MATCH = "threadline_ns_match"


def _begin(write: bool) -> str:
    return "BEGIN IMMEDIATE" if write else "BEGIN"


def _sqlite_vec_path() -> str | None:
    """The sqlite-vec extension's file, or None when the package is missing."""
    try:
        import sqlite_vec
    except ImportError:
        return None
    return sqlite_vec.loadable_path()


def _load_vectors(conn: sqlite3.Connection) -> None:
    """Give ``conn`` the vector distance functions: sqlite-vec where the connection can load
    extensions, else their Python versions (``vecmath``)."""
    path = _sqlite_vec_path()
    if path is not None and hasattr(conn, "enable_load_extension"):
        try:
            conn.enable_load_extension(True)
            try:
                conn.load_extension(path)
                return
            finally:
                conn.enable_load_extension(False)
        except sqlite3.Error:
            pass  # loading refused (an authorizer, a locked-down build): use the Python versions
    for name, fn in vecmath.FUNCTIONS.items():
        conn.create_function(name, 2, fn, deterministic=True)


class SqliteDriver:
    """One ``sqlite3`` connection, shared by threads under a lock."""

    def __init__(self, conn: sqlite3.Connection, *, vectors: bool = False) -> None:
        self.conn = conn
        self.lock = threading.RLock()
        conn.create_function(NS_MATCH, 2, ns_match, deterministic=True)
        if vectors:
            _load_vectors(conn)

    def run(self, op: Op[T], *, write: bool) -> T:
        with self.lock:
            cur = self.conn.cursor()

            def begin(needed: bool) -> None:
                if needed and not self.conn.in_transaction:
                    cur.execute(_begin(write))

            try:
                result = drive(op, cur, SQLITE, begin)
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.rollback()
                raise
            finally:
                cur.close()
            if self.conn.in_transaction:
                self.conn.commit()
            return result


class AsyncSqliteDriver:
    """One ``aiosqlite`` connection, its operations serialized by an ``asyncio.Lock``."""

    def __init__(self, conn: aiosqlite.Connection, *, vectors: bool = False) -> None:
        self.conn = conn
        self.lock = asyncio.Lock()
        self.vectors = vectors
        self.prepared = False

    async def _prepare(self) -> None:
        # aiosqlite's create_function and load_extension are coroutines: done on first use
        await self.conn.create_function(NS_MATCH, 2, ns_match, deterministic=True)
        if self.vectors and not await self._load_sqlite_vec():
            for name, fn in vecmath.FUNCTIONS.items():
                await self.conn.create_function(name, 2, fn, deterministic=True)
        self.prepared = True

    async def _load_sqlite_vec(self) -> bool:
        """``_load_vectors``'s first half on aiosqlite: whether sqlite-vec is loaded."""
        path = _sqlite_vec_path()
        if path is None:
            return False
        try:
            await self.conn.enable_load_extension(True)
            try:
                await self.conn.load_extension(path)
                return True
            finally:
                await self.conn.enable_load_extension(False)
        except (AttributeError, sqlite3.Error):
            return False

    async def run(self, op: Op[T], *, write: bool) -> T:
        async with self.lock:
            if not self.prepared:
                await self._prepare()

            cur = await self.conn.cursor()

            async def begin(needed: bool) -> None:
                if needed and not self.conn.in_transaction:
                    await cur.execute(_begin(write))

            try:
                result = await adrive(op, cur, SQLITE, begin)
            except BaseException:
                if self.conn.in_transaction:
                    await self.conn.rollback()
                raise
            finally:
                await cur.close()
            if self.conn.in_transaction:
                await self.conn.commit()
            return result


class PostgresDriver:
    """A psycopg ``Connection`` (serialized by a lock; optionally in pipeline mode) or a
    ``ConnectionPool`` (each operation borrows a connection)."""

    def __init__(self, conn: psycopg.Connection | ConnectionPool, pipe: psycopg.Pipeline | None = None) -> None:
        if pipe is not None and isinstance(conn, ConnectionPool):
            raise ValueError("a pipeline can only be used with a single Connection, not a ConnectionPool")
        self.conn = conn
        self.pipe = pipe
        self.lock = threading.RLock()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self.lock:
                yield self.conn

    def run(self, op: Op[T], *, write: bool) -> T:
        with self.connection() as conn, ExitStack() as tx:
            cur = conn.cursor(row_factory=tuple_row)

            def begin(needed: bool) -> None:
                if needed or not conn.autocommit:
                    tx.enter_context(conn.transaction())

            try:
                return drive(op, cur, POSTGRES, begin, self.pipe.sync if self.pipe is not None else None)
            finally:
                if self.pipe is not None:
                    self.pipe.sync()


class AsyncPostgresDriver:
    """The async ``PostgresDriver``: an ``AsyncConnection`` or an ``AsyncConnectionPool``."""

    def __init__(self, conn: psycopg.AsyncConnection | AsyncConnectionPool, pipe: psycopg.AsyncPipeline | None = None) -> None:
        if pipe is not None and isinstance(conn, AsyncConnectionPool):
            raise ValueError("a pipeline can only be used with a single AsyncConnection, not an AsyncConnectionPool")
        self.conn = conn
        self.pipe = pipe
        self.lock = asyncio.Lock()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:
            async with self.lock:
                yield self.conn

    async def run(self, op: Op[T], *, write: bool) -> T:
        async with self.connection() as conn, AsyncExitStack() as tx:
            cur = conn.cursor(row_factory=tuple_row)

            async def begin(needed: bool) -> None:
                if needed or not conn.autocommit:
                    await tx.enter_async_context(conn.transaction())

            try:
                return await adrive(op, cur, POSTGRES, begin, self.pipe.sync if self.pipe is not None else None)
            finally:
                if self.pipe is not None:
                    await self.pipe.sync()


def pool_kwargs(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """Connection settings for pools threadline opens: autocommit, no server-side prepares
    (as the official stores, so PgBouncer in transaction mode works)."""
    return {"autocommit": True, "prepare_threshold": 0, **(kwargs or {})}
