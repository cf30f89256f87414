"""SQLite savers: ``SqliteSaver`` (sqlite3) and ``AsyncSqliteSaver`` (aiosqlite).

Thin shells over the shared engine: they open the connection (WAL, busy timeout),
wrap each operation in one transaction — ``BEGIN IMMEDIATE`` for writes so
concurrent processes queue on the busy timeout instead of failing to upgrade a
read lock — and execute its queries.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import aiosqlite
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.engine import ops
from threadline.engine.dialect import SQLITE
from threadline.engine.runner import Statement, adrive, drive, needs_transaction, statements
from threadline.saver import AsyncShell, SyncShell

BUSY_TIMEOUT_MS = 30_000
PRAGMAS = (
    "PRAGMA journal_mode=WAL",  # readers never block the writer
    "PRAGMA synchronous=NORMAL",  # durable across process crashes; WAL's recommended setting
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
    "PRAGMA foreign_keys=OFF",
)


def path_of(conn_string: str) -> str:
    """Accept a plain path, ``:memory:`` or a ``sqlite:///path`` URL."""
    for prefix in ("sqlite:///", "sqlite://"):
        if conn_string.startswith(prefix):
            return conn_string[len(prefix):] or ":memory:"
    return conn_string


def _begin(write: bool) -> str:
    return "BEGIN IMMEDIATE" if write else "BEGIN"


class SqliteSaver(SyncShell):
    """Checkpoint saver on a SQLite file through the standard ``sqlite3`` module.

    Safe to share between threads (LangGraph's ``durability="async"`` puts run in a
    background thread): one lock serializes use of the connection. Several
    processes may share one file (WAL mode, 30 s busy timeout).

    Usage::

        with SqliteSaver.from_conn_string("checkpoints.db") as saver:
            graph = builder.compile(checkpointer=saver)
    """

    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        conn.isolation_level = None  # we issue BEGIN/COMMIT ourselves
        for pragma in PRAGMAS:
            conn.execute(pragma)
        self.conn = conn
        self.lock = threading.RLock()
        self.is_setup = False

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, serde: SerializerProtocol | None = None) -> Iterator[SqliteSaver]:
        """Open (creating if needed) a SQLite database: a path, ``":memory:"`` or ``sqlite:///path``."""
        conn = sqlite3.connect(path_of(conn_string), check_same_thread=False, isolation_level=None)
        try:
            saver = cls(conn, serde=serde)
            saver.setup()
            yield saver
        finally:
            conn.close()

    def setup(self) -> None:
        """Create the tables and apply pending numbered migrations. Idempotent; also run on first use."""
        with self.lock:
            self._transaction(ops.setup(self.dialect), True)
            self.is_setup = True

    def _run(self, op: ops.Op, *, write: bool) -> Any:
        with self.lock:
            if not self.is_setup:
                self.setup()
            return self._transaction(op, write)

    def _transaction(self, op: ops.Op, write: bool) -> Any:
        with self.lock:
            cur = self.conn.cursor()

            def execute(q: ops.Q) -> list:
                stmts = statements(q, self.dialect.max_params)
                if not self.conn.in_transaction and needs_transaction(q, stmts):
                    cur.execute(_begin(write))
                return _execute(cur, stmts)

            try:
                result = drive(op, execute)
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.rollback()
                raise
            if self.conn.in_transaction:
                cur.execute("COMMIT")
            return result


def _execute(cur: sqlite3.Cursor, stmts: list[Statement]) -> list:
    rows: list = []
    for s in stmts:
        if s.many:
            cur.executemany(s.sql, s.params)
        else:
            cur.execute(s.sql, s.params)
            rows = cur.fetchall() if cur.description else []
    return rows


class AsyncSqliteSaver(AsyncShell):
    """Checkpoint saver on a SQLite file through ``aiosqlite``, for ``graph.ainvoke``/``astream``.

    Usage::

        async with AsyncSqliteSaver.from_conn_string("checkpoints.db") as saver:
            graph = builder.compile(checkpointer=saver)
    """

    dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.conn = conn
        self.lock = asyncio.Lock()
        self.loop = asyncio.get_running_loop()
        self.is_setup = False

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, serde: SerializerProtocol | None = None
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """Open (creating if needed) a SQLite database: a path, ``":memory:"`` or ``sqlite:///path``."""
        async with aiosqlite.connect(path_of(conn_string), isolation_level=None) as conn:
            saver = cls(conn, serde=serde)
            await saver.asetup()
            yield saver

    async def asetup(self) -> None:
        """Apply pragmas and migrations. Idempotent; also run on first use."""
        async with self.lock:
            await self._setup_locked()

    async def _setup_locked(self) -> None:
        for pragma in PRAGMAS:
            await self.conn.execute(pragma)
        await self._transaction(ops.setup(self.dialect), True)
        self.is_setup = True

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        async with self.lock:
            if not self.is_setup:
                await self._setup_locked()
            return await self._transaction(op, write)

    async def _transaction(self, op: ops.Op, write: bool) -> Any:
        async def execute(q: ops.Q) -> list:
            stmts = statements(q, self.dialect.max_params)
            if not self.conn.in_transaction and needs_transaction(q, stmts):
                await self.conn.execute(_begin(write))
            rows: list = []
            for s in stmts:
                if s.many:
                    await self.conn.executemany(s.sql, s.params)
                else:
                    async with self.conn.execute(s.sql, s.params) as cur:
                        rows = list(await cur.fetchall()) if cur.description else []
            return rows

        try:
            result = await adrive(op, execute)
        except BaseException:
            if self.conn.in_transaction:
                await self.conn.rollback()
            raise
        if self.conn.in_transaction:
            await self.conn.execute("COMMIT")
        return result
