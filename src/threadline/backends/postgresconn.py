"""Postgres below the savers: connections, the transaction around one operation
(``PostgresDriver``, ``AsyncPostgresDriver``), errors as one line, and a read-only connection.

What the savers (``threadline.backends.postgres``), the Store and the Cache share, and what a
read-only listing needs (``threadline.backends.readonly.Database``): nothing here loads
LangGraph, whose saver base class imports LangChain (most of a CLI listing's start-up).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.backends.registry import masked
from threadline.errors import BackendError
from threadline.storage import ops
from threadline.storage.dialect import POSTGRES
from threadline.storage.ops.schema import looked_up
from threadline.storage.runner import adrive, drive

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


@contextmanager
def open_connection(url: str) -> Iterator[tuple[PostgresDriver, ops.SchemaState]]:
    """A driver on one connection whose transactions are READ ONLY
    (``default_transaction_read_only``), and what the schema holds; nothing is set up.
    BackendError when the server cannot be reached."""
    with at_door(url):
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        conn.execute("SET default_transaction_read_only = on")
    with conn:
        driver = PostgresDriver(conn, POSTGRES)
        with at_door(url):
            state = driver.run(ops.schema_state(POSTGRES), write=False)
        yield driver, state


@contextmanager
def open_database(url: str) -> Iterator[tuple[Any, ops.SchemaState]]:
    """``open_connection``'s driver as a ``readonly.Database`` (the registry's ``database`` role)."""
    from threadline.backends.readonly import Database

    with open_connection(url) as (driver, state):
        yield Database(driver, state), state


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
