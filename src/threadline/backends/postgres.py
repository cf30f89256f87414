"""Postgres savers: ``PostgresSaver`` (psycopg 3) and ``AsyncPostgresSaver`` (psycopg 3 async).

Thin shells over the shared storage operations: they open connections and transactions
and hand a cursor to the one statement loop (``threadline.storage.runner``). Each takes a
single connection or a pool (``psycopg_pool.ConnectionPool`` / ``AsyncConnectionPool``).
Every operation runs in one transaction; an operation of one statement (``put_writes``)
runs as that statement alone, and many-row inserts are sent as one multi-row statement.
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

from threadline.storage import ops
from threadline.storage.dialect import POSTGRES
from threadline.storage.runner import adrive, drive
from threadline.errors import BackendError
from threadline.saver import AsyncShell, SyncShell


# Connections that survive idle-connection kills and poolers (docs/operations.md): server-side
# prepared statements only when asked (``prepare_threshold``), as PgBouncer's transaction
# pooling cannot keep them; pools check a connection before lending it, close connections
# idle for 5 minutes (before most firewalls and poolers drop them) and reconnect for 5 minutes.
CONNECT = {"autocommit": True, "prepare_threshold": None}
POOL = {"max_idle": 300.0, "reconnect_timeout": 300.0}


def _masked(dsn: str) -> str:
    return re.sub(r"//[^@/]*@", "//***@", dsn)  # never print a password


def door_error(exc: Exception, dsn: str | None = None) -> BackendError:
    """The one-line error for a Postgres failure while connecting or setting up."""
    where = f"Postgres at {_masked(dsn)}" if dsn else "Postgres"
    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return BackendError(f"{where}: {text}; threadline needs CREATE on the schema to set up its tables (or run setup once as its owner)")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return BackendError(f"{where} is read-only ({text}); run setup once on the primary")
    if isinstance(exc, psycopg.OperationalError):
        return BackendError(f"cannot connect to {where}: {text}; check the host, port, user and password")
    return BackendError(f"{where}: {text}")


class PostgresSaver(SyncShell):
    """Checkpoint saver on Postgres through psycopg 3 (a ``Connection`` or a ``ConnectionPool``).

    Same constructor and ``from_conn_string`` as LangGraph's official
    ``langgraph.checkpoint.postgres.PostgresSaver`` (``pipe``/``pipeline=True`` run the
    connection in pipeline mode). With a single connection, a lock serializes operations
    (LangGraph's ``durability="async"`` puts come from a background thread); with a pool,
    each operation borrows its own connection, so many threads run concurrently. A
    connection passed in should be in autocommit mode, as for the official saver.

    ``adopt=False`` turns off adopting threads of an official ``PostgresSaver`` in the
    same schema (see ``threadline.storage.adopt``).

    Usage::

        with PostgresSaver.from_conn_string("postgresql://user@host/db") as saver:
            graph = builder.compile(checkpointer=saver)

    Raises BackendError when the server cannot be reached or refuses the user;
    SchemaError for a schema of a newer release.
    """

    dialect = POSTGRES

    def __init__(
        self,
        conn: psycopg.Connection | ConnectionPool,
        pipe: psycopg.Pipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        adopt: bool = True,
        ttl: Any = None,
        retention: Any = None,
        cache_max_bytes: int | None = None,
    ) -> None:
        super().__init__(serde=serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)
        if pipe is not None and isinstance(conn, ConnectionPool):
            raise ValueError("a pipeline can only be used with a single Connection, not a ConnectionPool")
        self.conn = conn
        self.pipe = pipe
        self.lock = threading.RLock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_size: int | None = None,
        serde: SerializerProtocol | None = None,
        adopt: bool = True,
        ttl: Any = None,
        retention: Any = None,
        prepare_threshold: int | None = None,
        cache_max_bytes: int | None = None,
    ) -> Iterator[PostgresSaver]:
        """Connect to ``conn_string`` (a libpq URL or DSN) and set up the tables.

        ``pipeline``: run the connection in pipeline mode (as the official saver).
        ``pool_size``: open a ``ConnectionPool`` of that many connections instead of
        one connection; it checks each connection before lending it and replaces dead
        ones. ``prepare_threshold``: let psycopg prepare statements on the server after
        that many runs (default None: never, which PgBouncer's transaction pooling needs).
        ``cache_max_bytes``: the bound of the saver's value cache (default 64 MiB; ``EngineSaver``).
        Raises BackendError when the server cannot be reached.
        """
        if pipeline and pool_size:
            raise ValueError("pipeline=True needs a single connection; do not combine it with pool_size")
        try:
            kwargs = {**CONNECT, "prepare_threshold": prepare_threshold}
            if pool_size:
                pool = ConnectionPool(conn_string, min_size=1, max_size=pool_size, kwargs=kwargs, open=False,
                                      check=ConnectionPool.check_connection, **POOL)
                pool.open(wait=True, timeout=10)
                resource: Any = pool
            else:
                resource = psycopg.Connection.connect(conn_string, connect_timeout=10, **kwargs)
        except Exception as exc:
            raise door_error(exc, conn_string) from exc
        try:
            with ExitStack() as stack:
                pipe = stack.enter_context(resource.pipeline()) if pipeline else None
                saver = cls(resource, pipe, serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)
                saver.setup()
                with saver._sweeping():
                    yield saver
        finally:
            resource.close()

    def setup(self) -> None:
        try:
            super().setup()
        except psycopg.Error as exc:
            raise door_error(exc) from exc

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self.lock:
                yield self.conn

    def _transaction(self, op: ops.Op, write: bool) -> Any:
        with self._connection() as conn, ExitStack() as tx:

            def begin(needed: bool) -> None:
                # outside autocommit even one statement needs its commit; at most one transaction
                if (needed or not conn.autocommit) and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    tx.enter_context(conn.transaction())

            flush = self.pipe.sync if self.pipe is not None else None
            try:
                return drive(op, conn.cursor(row_factory=tuple_row), self.dialect, begin, flush)
            finally:
                if flush is not None:
                    flush()


@contextmanager
def open_read_only(url: str, serde: Any = None) -> Iterator[tuple[PostgresSaver, ops.SchemaState]]:
    """A ``PostgresSaver`` on one connection whose transactions are READ ONLY
    (``default_transaction_read_only``), never set up, and what the schema holds.
    BackendError when the server cannot be reached."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        conn.execute("SET default_transaction_read_only = on")
    except psycopg.Error as exc:
        raise door_error(exc, url) from exc
    with conn:
        saver = PostgresSaver(conn, serde=serde, adopt=False)
        yield saver, saver.peek(ops.schema_state(saver.dialect))


def describe(url: str) -> str:
    """How messages name the database at ``url`` (password masked)."""
    return f"Postgres at {_masked(url)}"


class AsyncPostgresSaver(AsyncShell):
    """Checkpoint saver on Postgres through psycopg 3 async (``AsyncConnection`` or ``AsyncConnectionPool``).

    Same constructor and ``from_conn_string`` as LangGraph's official
    ``langgraph.checkpoint.postgres.aio.AsyncPostgresSaver``; ``setup`` is ``async``.

    Usage::

        async with AsyncPostgresSaver.from_conn_string("postgresql://user@host/db") as saver:
            await saver.setup()  # optional: from_conn_string already did it
            graph = builder.compile(checkpointer=saver)

    ``pool_size=N`` opens an ``AsyncConnectionPool`` for concurrent graphs.
    """

    dialect = POSTGRES

    def __init__(
        self,
        conn: psycopg.AsyncConnection | AsyncConnectionPool,
        pipe: psycopg.AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
        *,
        adopt: bool = True,
        ttl: Any = None,
        retention: Any = None,
        cache_max_bytes: int | None = None,
    ) -> None:
        super().__init__(serde=serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)
        if pipe is not None and isinstance(conn, AsyncConnectionPool):
            raise ValueError("a pipeline can only be used with a single AsyncConnection, not an AsyncConnectionPool")
        self.conn = conn
        self.pipe = pipe
        self.lock = asyncio.Lock()
        self.loop = asyncio.get_running_loop()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        pool_size: int | None = None,
        adopt: bool = True,
        ttl: Any = None,
        retention: Any = None,
        prepare_threshold: int | None = None,
        cache_max_bytes: int | None = None,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """Async ``PostgresSaver.from_conn_string``; ``pool_size`` opens an ``AsyncConnectionPool``."""
        if pipeline and pool_size:
            raise ValueError("pipeline=True needs a single connection; do not combine it with pool_size")
        try:
            kwargs = {**CONNECT, "prepare_threshold": prepare_threshold}
            if pool_size:
                pool = AsyncConnectionPool(conn_string, min_size=1, max_size=pool_size, kwargs=kwargs, open=False,
                                           check=AsyncConnectionPool.check_connection, **POOL)
                await pool.open(wait=True, timeout=10)
                resource: Any = pool
            else:
                resource = await psycopg.AsyncConnection.connect(conn_string, connect_timeout=10, **kwargs)
        except Exception as exc:
            raise door_error(exc, conn_string) from exc
        try:
            async with AsyncExitStack() as stack:
                pipe = await stack.enter_async_context(resource.pipeline()) if pipeline else None
                saver = cls(resource, pipe, serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)
                await saver.setup()
                async with saver._sweeping():
                    yield saver
        finally:
            await resource.close()

    async def setup(self) -> None:
        try:
            await super().setup()
        except psycopg.Error as exc:
            raise door_error(exc) from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:
            async with self.lock:
                yield self.conn

    async def _atransaction(self, op: ops.Op, write: bool) -> Any:
        async with self._connection() as conn, AsyncExitStack() as tx:

            async def begin(needed: bool) -> None:
                if (needed or not conn.autocommit) and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    await tx.enter_async_context(conn.transaction())

            flush = self.pipe.sync if self.pipe is not None else None
            try:
                return await adrive(op, conn.cursor(row_factory=tuple_row), self.dialect, begin, flush)
            finally:
                if flush is not None:
                    await flush()
