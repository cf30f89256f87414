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

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.backends.postgresconn import (CONNECT, POOL, PREPARE_THRESHOLD, AsyncPostgresDriver, Piped, PostgresDriver, aconnect,
                                              at_door, connect, open_connection)
from threadline.saver import AsyncShell, SyncShell
from threadline.storage import ops
from threadline.storage.dialect import POSTGRES


def _saver_pool(pool_size: int | None, kind: type) -> dict[str, Any] | None:
    """Pool settings of a saver's ``from_conn_string(pool_size=…)``; None for one connection."""
    return {"min_size": 1, "max_size": pool_size, "check": kind.check_connection, **POOL} if pool_size else None


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
    """A ``PostgresSaver`` on one read-only connection (``postgresconn.open_connection``), never
    set up, and what the schema holds. BackendError when the server cannot be reached."""
    with open_connection(url) as (driver, state):
        yield PostgresSaver(driver.conn, serde=serde, adopt=False), state


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
