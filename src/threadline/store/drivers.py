"""The Store's drivers: the backends' drivers (``threadline.backends``), with the SQL
functions the Store's queries call registered on each SQLite connection.

A store's filters call ``threadline_ns_match`` (namespace prefix and suffix matching) on
SQLite, and its semantic search the vector distance functions: sqlite-vec where the
connection can load extensions, else their Python versions (``vecmath``). Postgres needs
neither, so the Store runs on the backends' Postgres drivers as they are.
"""

from __future__ import annotations

import sqlite3
from typing import Any, TypeVar

import aiosqlite

from threadline.backends.sqliteconn import AsyncSqliteDriver, SqliteDriver
from threadline.storage.ops import Op
from threadline.storage import vecmath
from threadline.store.ops import ns_match

T = TypeVar("T")
NS_MATCH = "threadline_ns_match"


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


class StoreSqliteDriver(SqliteDriver):
    """``SqliteDriver`` on a connection given the Store's SQL functions."""

    def __init__(self, conn: sqlite3.Connection, dialect: Any, *, vectors: bool = False) -> None:
        super().__init__(conn, dialect)
        conn.create_function(NS_MATCH, 2, ns_match, deterministic=True)
        if vectors:
            _load_vectors(conn)


class AsyncStoreSqliteDriver(AsyncSqliteDriver):
    """``AsyncSqliteDriver`` giving its connection the Store's SQL functions on first use
    (aiosqlite's ``create_function`` and ``load_extension`` are coroutines)."""

    def __init__(self, conn: aiosqlite.Connection, dialect: Any, *, vectors: bool = False) -> None:
        super().__init__(conn, dialect)
        self.vectors = vectors
        self.prepared = False

    async def _prepare(self) -> None:
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
            return await self.transaction(op, write)

