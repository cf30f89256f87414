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
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any, TypeVar

import psycopg
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.backends.registry import masked
from threadline.storage import ops
from threadline.storage.dialect import POSTGRES
from threadline.storage.ops.schema import looked_up
from threadline.storage.runner import adrive, drive
from threadline.errors import BackendError
from threadline.saver import AsyncShell, SyncShell


# Connections that survive idle-connection kills and poolers (docs/operations.md): pools check a
# connection before lending it, close connections idle for 5 minutes (before most firewalls and
# poolers drop them) and reconnect for 5 minutes.
CONNECT = {"autocommit": True}
# statements prepared on the server at their first run, as the official savers' from_conn_string
PREPARE_THRESHOLD = 0
T = TypeVar("T")
POOL = {"max_idle": 300.0, "reconnect_timeout": 300.0}


def door_error(exc: Exception, dsn: str | None = None) -> BackendError:
    """The one-line error for a Postgres failure while connecting or setting up."""
    where = f"Postgres at {masked(dsn)}" if dsn else "Postgres"
    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return BackendError(f"{where}: {text}; threadline needs CREATE on the schema to set up its tables (or run setup once as its owner)")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return BackendError(f"{where} is read-only ({text}); run setup once on the primary")
    if isinstance(exc, psycopg.OperationalError):
        return BackendError(f"cannot connect to {where}: {text}; check the host, port, user and password")
    return BackendError(f"{where}: {text}")


@contextmanager
def at_door(dsn: str | None = None) -> Iterator[None]:
    """psycopg errors in the block (connecting, setting up) raised as ``door_error``'s one line."""
    try:
        yield
    except psycopg.Error as exc:
        raise door_error(exc, dsn) from exc


def connect(conn_string: str, *, pool: dict[str, Any] | None = None, **kwargs: Any) -> psycopg.Connection | ConnectionPool:
    """One psycopg ``Connection`` to ``conn_string`` (a libpq URL or DSN) with ``kwargs``, or,
    when ``pool`` gives ``ConnectionPool`` settings (``min_size``, ``max_size``, ``check``, …),
    an open pool whose connections get ``kwargs``. BackendError when the server cannot be
    reached (10 s)."""
    try:
        if pool is None:
            return psycopg.Connection.connect(conn_string, connect_timeout=10, **kwargs)
        opened = ConnectionPool(conn_string, kwargs=kwargs, open=False, **pool)
        opened.open(wait=True, timeout=10)
        return opened
    except Exception as exc:
        raise door_error(exc, conn_string) from exc


async def aconnect(conn_string: str, *, pool: dict[str, Any] | None = None, **kwargs: Any) -> psycopg.AsyncConnection | AsyncConnectionPool:
    """``connect`` through psycopg async (an ``AsyncConnection`` or an ``AsyncConnectionPool``)."""
    try:
        if pool is None:
            return await psycopg.AsyncConnection.connect(conn_string, connect_timeout=10, **kwargs)
        opened = AsyncConnectionPool(conn_string, kwargs=kwargs, open=False, **pool)
        await opened.open(wait=True, timeout=10)
        return opened
    except Exception as exc:
        raise door_error(exc, conn_string) from exc


def _saver_pool(pool_size: int | None, kind: type) -> dict[str, Any] | None:
    """Pool settings of a saver's ``from_conn_string(pool_size=…)``; None for one connection."""
    return {"min_size": 1, "max_size": pool_size, "check": kind.check_connection, **POOL} if pool_size else None


def _idle(conn: psycopg.Connection | psycopg.AsyncConnection) -> bool:
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


class PostgresDriver:
    """A psycopg ``Connection`` (operations serialized by a lock; optionally in pipeline mode)
    or a ``ConnectionPool`` (each operation borrows a connection): savers, stores and caches.

    ``run(op, write=)`` runs a sans-IO operation in one transaction (at most one, opened
    when the operation first needs it), commits, and rolls back on any error."""

    def __init__(self, conn: psycopg.Connection | ConnectionPool, dialect: Any, pipe: psycopg.Pipeline | None = None) -> None:
        if pipe is not None and isinstance(conn, ConnectionPool):
            raise ValueError("a pipeline can only be used with a single Connection, not a ConnectionPool")
        self.conn = conn
        self.dialect = dialect
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

    def run(self, op: ops.Op[T], *, write: bool) -> T:
        with self.connection() as conn, ExitStack() as tx:

            def begin(needed: bool) -> None:
                # outside autocommit even one statement needs its commit; at most one transaction
                if (needed or not conn.autocommit) and _idle(conn):
                    tx.enter_context(conn.transaction())

            flush = self.pipe.sync if self.pipe is not None else None
            cur = (_Cursor if flush is None else _PipedCursor)(conn, row_factory=tuple_row)
            try:
                return drive(op, cur, self.dialect, begin, flush)
            finally:
                if flush is not None:
                    flush()


# The reads of every open (``ops.schema_state``) are not prepared on the server: they run once a
# connection, and preparing one costs a round trip of its own (psycopg waits for the Parse before
# it sends Bind and Execute).
ONCE = frozenset((POSTGRES.tables_among(looked_up(POSTGRES)), POSTGRES.APPLIED_MIGRATIONS))


class _Cursor(psycopg.Cursor):
    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None) -> Any:
        return super().execute(query, params, prepare=False if query in ONCE else prepare, binary=binary)


class _AsyncCursor(psycopg.AsyncCursor):
    async def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None) -> Any:
        return await super().execute(query, params, prepare=False if query in ONCE else prepare, binary=binary)


# In pipeline mode statements are not prepared on the server: psycopg (3.3) there deallocates
# a statement it has just prepared when a DDL statement or a ROLLBACK came before, and the
# statement's next run fails ("prepared statement … does not exist").
class _PipedCursor(psycopg.Cursor):
    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None) -> Any:
        return super().execute(query, params, prepare=False, binary=binary)


class _AsyncPipedCursor(psycopg.AsyncCursor):
    async def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None) -> Any:
        return await super().execute(query, params, prepare=False, binary=binary)


class AsyncPostgresDriver:
    """The async ``PostgresDriver``: an ``AsyncConnection`` or an ``AsyncConnectionPool``."""

    def __init__(self, conn: psycopg.AsyncConnection | AsyncConnectionPool, dialect: Any, pipe: psycopg.AsyncPipeline | None = None) -> None:
        if pipe is not None and isinstance(conn, AsyncConnectionPool):
            raise ValueError("a pipeline can only be used with a single AsyncConnection, not an AsyncConnectionPool")
        self.conn = conn
        self.dialect = dialect
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

    async def run(self, op: ops.Op[T], *, write: bool) -> T:
        async with self.connection() as conn, AsyncExitStack() as tx:

            async def begin(needed: bool) -> None:
                if (needed or not conn.autocommit) and _idle(conn):
                    await tx.enter_async_context(conn.transaction())

            flush = self.pipe.sync if self.pipe is not None else None
            cur = (_AsyncCursor if flush is None else _AsyncPipedCursor)(conn, row_factory=tuple_row)
            try:
                return await adrive(op, cur, self.dialect, begin, flush)
            finally:
                if flush is not None:
                    await flush()


class Piped:
    """``pipe`` as the official Postgres classes expose it: assignable after opening (LangGraph's
    own tests set ``saver.pipe = pipe`` inside ``conn.pipeline()``), read by the driver at
    every operation."""

    _driver: PostgresDriver | AsyncPostgresDriver

    @property
    def pipe(self) -> Any:
        return self._driver.pipe

    @pipe.setter
    def pipe(self, pipe: Any) -> None:
        self._driver.pipe = pipe


class _PostgresSaverParts(Piped):
    """The constructor both Postgres savers share (the official savers' signature): ``conn``
    a connection or pool (sync or async as the saver), ``pipe`` a pipeline of that
    connection; ``cache_max_bytes`` bounds the value cache (``EngineSaver``)."""

    _driver_class: type[PostgresDriver] | type[AsyncPostgresDriver]

    def __init__(
        self,
        conn: Any,
        pipe: Any = None,
        serde: SerializerProtocol | None = None,
        *,
        adopt: bool | None = None,
        ttl: Any = None,
        retention: Any = None,
        cache_max_bytes: int | None = None,
    ) -> None:
        super().__init__(serde=serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)
        self._driver = self._driver_class(conn, self.dialect, pipe)
        self.conn, self.lock = conn, self._driver.lock


class PostgresSaver(_PostgresSaverParts, SyncShell):
    """Checkpoint saver on Postgres through psycopg 3 (a ``Connection`` or a ``ConnectionPool``).

    Same constructor and ``from_conn_string`` as LangGraph's official
    ``langgraph.checkpoint.postgres.PostgresSaver`` (``pipe``/``pipeline=True`` run the
    connection in pipeline mode). With a single connection, a lock serializes operations
    (LangGraph's ``durability="async"`` puts come from a background thread); with a pool,
    each operation borrows its own connection, so many threads run concurrently. A
    connection passed in should be in autocommit mode, as for the official saver.

    ``adopt``: whether to adopt threads of an official ``PostgresSaver`` in the same schema
    (see ``EngineSaver`` and ``threadline.storage.adopt``).

    Usage::

        with PostgresSaver.from_conn_string("postgresql://user@host/db") as saver:
            graph = builder.compile(checkpointer=saver)

    Raises BackendError when the server cannot be reached or refuses the user;
    SchemaError for a schema of a newer release.
    """

    dialect = POSTGRES
    _driver_class = PostgresDriver

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_size: int | None = None,
        serde: SerializerProtocol | None = None,
        adopt: bool | None = None,
        ttl: Any = None,
        retention: Any = None,
        prepare_threshold: int | None = PREPARE_THRESHOLD,
        cache_max_bytes: int | None = None,
    ) -> Iterator[PostgresSaver]:
        """Connect to ``conn_string`` (a libpq URL or DSN) and set up the tables.

        ``pipeline``: run the connection in pipeline mode (as the official saver).
        ``pool_size``: open a ``ConnectionPool`` of that many connections instead of
        one connection; it checks each connection before lending it and replaces dead
        ones. ``prepare_threshold``: psycopg prepares a statement on the server after that
        many runs (default 0: at once, as the official saver; None: never, for PgBouncer's
        transaction pooling without prepared-statement support).
        ``cache_max_bytes``: the bound of the saver's value cache (default 4 MiB; ``EngineSaver``).
        Raises BackendError when the server cannot be reached.
        """
        if pipeline and pool_size:
            raise ValueError("pipeline=True needs a single connection; do not combine it with pool_size")
        resource = connect(conn_string, pool=_saver_pool(pool_size, ConnectionPool), **CONNECT, prepare_threshold=prepare_threshold)
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
        with at_door():
            super().setup()

    def _transaction(self, op: ops.Op, write: bool) -> Any:
        return self._driver.run(op, write=write)


@contextmanager
def open_read_only(url: str, serde: Any = None) -> Iterator[tuple[PostgresSaver, ops.SchemaState]]:
    """A ``PostgresSaver`` on one connection whose transactions are READ ONLY
    (``default_transaction_read_only``), never set up, and what the schema holds.
    BackendError when the server cannot be reached."""
    with at_door(url):
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        conn.execute("SET default_transaction_read_only = on")
    with conn:
        saver = PostgresSaver(conn, serde=serde, adopt=False)
        yield saver, saver.peek(ops.schema_state(saver.dialect))


# standby, read-only session, and whether the role may write threadline's tables (or create them)
_WRITE_CHECK = (
    "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on', "
    "CASE WHEN to_regclass('threadline_checkpoints') IS NULL THEN has_schema_privilege(current_schema(), 'CREATE') "
    "ELSE has_table_privilege('threadline_checkpoints', 'INSERT') AND has_table_privilege('threadline_checkpoints', 'UPDATE') "
    "AND has_table_privilege('threadline_checkpoints', 'DELETE') END"
)


def write_refusal(url: str) -> str | None:
    """Why this session cannot write threadline's tables at ``url`` (the server is a standby, the
    session is read-only, the role lacks the privileges), or None. BackendError when the server
    cannot be reached."""
    with at_door(url), psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        standby, read_only, can_write = conn.execute(_WRITE_CHECK).fetchone()
    if standby:
        return "the server is a standby (in recovery)"
    if read_only:
        return "the session is read-only (default_transaction_read_only)"
    if not can_write:
        return "this role cannot write threadline's tables"
    return None


def describe(url: str) -> str:
    """How messages name the database at ``url`` (password masked)."""
    return f"Postgres at {masked(url)}"


class AsyncPostgresSaver(_PostgresSaverParts, AsyncShell):
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
    _driver_class = AsyncPostgresDriver

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        pool_size: int | None = None,
        adopt: bool | None = None,
        ttl: Any = None,
        retention: Any = None,
        prepare_threshold: int | None = PREPARE_THRESHOLD,
        cache_max_bytes: int | None = None,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """Async ``PostgresSaver.from_conn_string``; ``pool_size`` opens an ``AsyncConnectionPool``."""
        if pipeline and pool_size:
            raise ValueError("pipeline=True needs a single connection; do not combine it with pool_size")
        resource = await aconnect(conn_string, pool=_saver_pool(pool_size, AsyncConnectionPool), **CONNECT, prepare_threshold=prepare_threshold)
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
        with at_door():
            await super().setup()

    async def _atransaction(self, op: ops.Op, write: bool) -> Any:
        return await self._driver.run(op, write=write)
