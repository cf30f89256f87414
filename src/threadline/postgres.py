"""Postgres savers: ``PostgresSaver`` (psycopg 3) and ``AsyncPostgresSaver`` (psycopg 3 async).

Thin shells over the shared engine. Each takes a single connection or a pool
(``psycopg_pool.ConnectionPool`` / ``AsyncConnectionPool``). Every operation runs
in one transaction; an operation of one statement (``put_writes``) runs as that
statement alone, and many-row inserts are sent as one multi-row statement.
(Measured here: psycopg's pipeline mode inside a transaction cost more round-trip
waits than it saved, so it is not used.)

Same tables as SQLite (metadata is JSONB with a GIN index serving
``list(filter=…)``, blobs are BYTEA, text keys use the "C" collation). Every key
leads with ``thread_id``, so the tables shard by thread (e.g. Citus
``create_distributed_table('checkpoints', 'thread_id')``).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any

import psycopg
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.engine import ops
from threadline.engine.dialect import POSTGRES
from threadline.engine.runner import adrive, drive, needs_transaction, statements
from threadline.errors import BackendError
from threadline.saver import AsyncShell, SyncShell

def _connect_error(dsn: str, exc: Exception) -> BackendError:
    where = re.sub(r"//[^@/]*@", "//***@", dsn)  # never print a password
    return BackendError(f"cannot connect to Postgres at {where}: {exc}".strip())


class PostgresSaver(SyncShell):
    """Checkpoint saver on Postgres through psycopg 3 (a ``Connection`` or a ``ConnectionPool``).

    With a single connection, a lock serializes operations (LangGraph's
    ``durability="async"`` puts come from a background thread); with a pool,
    each operation borrows its own connection, so many threads run concurrently.

    Usage::

        with PostgresSaver.from_conn_string("postgresql://user@host/db") as saver:
            graph = builder.compile(checkpointer=saver)
    """

    dialect = POSTGRES

    def __init__(self, conn: psycopg.Connection | ConnectionPool, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.conn = conn
        self.lock = threading.RLock()
        self.is_setup = False

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, pool_size: int | None = None, serde: SerializerProtocol | None = None
    ) -> Iterator[PostgresSaver]:
        """Connect to ``conn_string`` (a libpq URL or DSN) and set up the tables.

        ``pool_size``: open a ``ConnectionPool`` of that many connections instead of
        one connection. Raises BackendError when the server cannot be reached.
        """
        try:
            if pool_size:
                pool = ConnectionPool(conn_string, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, open=False)
                pool.open(wait=True, timeout=10)
                resource: Any = pool
            else:
                resource = psycopg.Connection.connect(conn_string, autocommit=True, connect_timeout=10)
        except (psycopg.OperationalError, Exception) as exc:
            if isinstance(exc, BackendError):
                raise
            raise _connect_error(conn_string, exc) from exc
        try:
            saver = cls(resource, serde=serde)
            saver.setup()
            yield saver
        finally:
            resource.close()

    def setup(self) -> None:
        """Create the tables and apply pending numbered migrations. Idempotent; also run on first use."""
        self._transaction(ops.setup(self.dialect))
        self.is_setup = True

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self.lock:
                yield self.conn

    def _run(self, op: ops.Op, *, write: bool) -> Any:
        if not self.is_setup:
            self.setup()
        return self._transaction(op)

    def _transaction(self, op: ops.Op) -> Any:
        with self._connection() as conn, ExitStack() as tx:
            cur = conn.cursor(row_factory=tuple_row)
            began = False

            def execute(q: ops.Q) -> list:
                nonlocal began
                stmts = statements(q, POSTGRES.max_params)
                if not began and (needs_transaction(q, stmts) or not conn.autocommit):
                    tx.enter_context(conn.transaction())
                began = True
                rows: list = []
                for s in stmts:
                    if s.many:
                        cur.executemany(POSTGRES.sql(s.sql), s.params)
                    else:
                        cur.execute(POSTGRES.sql(s.sql), s.params)
                        rows = cur.fetchall() if cur.description else []
                return rows

            return drive(op, execute)


class AsyncPostgresSaver(AsyncShell):
    """Checkpoint saver on Postgres through psycopg 3 async (``AsyncConnection`` or ``AsyncConnectionPool``).

    Usage::

        async with AsyncPostgresSaver.from_conn_string("postgresql://user@host/db", pool_size=32) as saver:
            graph = builder.compile(checkpointer=saver)
    """

    dialect = POSTGRES

    def __init__(
        self, conn: psycopg.AsyncConnection | AsyncConnectionPool, *, serde: SerializerProtocol | None = None
    ) -> None:
        super().__init__(serde=serde)
        self.conn = conn
        self.lock = asyncio.Lock()
        self.loop = asyncio.get_running_loop()
        self.is_setup = False

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, pool_size: int | None = None, serde: SerializerProtocol | None = None
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """Async ``PostgresSaver.from_conn_string``; ``pool_size`` opens an ``AsyncConnectionPool``."""
        try:
            if pool_size:
                pool = AsyncConnectionPool(conn_string, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, open=False)
                await pool.open(wait=True, timeout=10)
                resource: Any = pool
            else:
                resource = await psycopg.AsyncConnection.connect(conn_string, autocommit=True, connect_timeout=10)
        except Exception as exc:
            raise _connect_error(conn_string, exc) from exc
        try:
            saver = cls(resource, serde=serde)
            await saver.asetup()
            yield saver
        finally:
            await resource.close()

    async def asetup(self) -> None:
        """Create the tables and apply pending numbered migrations. Idempotent; also run on first use."""
        await self._transaction(ops.setup(self.dialect))
        self.is_setup = True

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:
            async with self.lock:
                yield self.conn

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        if not self.is_setup:
            await self.asetup()
        return await self._transaction(op)

    async def _transaction(self, op: ops.Op) -> Any:
        async with self._connection() as conn, AsyncExitStack() as tx:
            cur = conn.cursor(row_factory=tuple_row)
            began = False

            async def execute(q: ops.Q) -> list:
                nonlocal began
                stmts = statements(q, POSTGRES.max_params)
                if not began and (needs_transaction(q, stmts) or not conn.autocommit):
                    await tx.enter_async_context(conn.transaction())
                began = True
                rows: list = []
                for s in stmts:
                    if s.many:
                        await cur.executemany(POSTGRES.sql(s.sql), s.params)
                    else:
                        await cur.execute(POSTGRES.sql(s.sql), s.params)
                        rows = await cur.fetchall() if cur.description else []
                return rows

            return await adrive(op, execute)
