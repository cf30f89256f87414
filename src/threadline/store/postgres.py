"""Postgres stores: ``PostgresStore`` (psycopg 3) and ``AsyncPostgresStore`` (psycopg 3 async).

Same constructors and ``from_conn_string`` (``pipeline=``, ``pool_config=``, ``index=``,
``ttl=``) as LangGraph's official ``langgraph.store.postgres`` stores; the tables are
threadline's (``threadline_store*``) in the connection's current schema, beside
threadline's checkpoints and cache. Values are JSONB; namespaces and keys are TEXT in
the "C" collation. Semantic search (``index=``) needs the pgvector extension on the
server; without it ``setup`` raises BackendError saying so, and nothing is created.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypedDict

import psycopg
from langgraph.store.base import IndexConfig, TTLConfig
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.backends.postgresconn import AsyncPostgresDriver, Piped, PostgresDriver, aconnect, at_door, connect
from threadline.store.base import AsyncStore, SyncStore
from threadline.storage.dialect.store import POSTGRES


class PoolConfig(TypedDict, total=False):
    """Connection pool settings for ``from_conn_string(pool_config=…)``, as the official stores:
    ``min_size`` (default 1), ``max_size`` (default unlimited), ``kwargs`` (passed to each
    connection; autocommit and ``prepare_threshold=0`` are set unless given)."""

    min_size: int
    max_size: int | None
    kwargs: dict


# as the official stores: autocommit, statements prepared on the server at their first run
CONNECT = {"autocommit": True, "prepare_threshold": 0}


def open_args(pool_config: PoolConfig | None) -> dict[str, Any]:
    """Keywords for ``backends.postgres.connect``: one connection with the official stores'
    settings, or a pool of ``pool_config`` whose ``kwargs`` add to (or override) them."""
    if pool_config is None:
        return dict(CONNECT)
    pc = dict(pool_config)
    kwargs = {**CONNECT, **(pc.pop("kwargs", None) or {})}
    return {"pool": {"min_size": pc.pop("min_size", 1), "max_size": pc.pop("max_size", None), **pc}, **kwargs}


class PostgresStore(Piped, SyncStore):
    """LangGraph ``BaseStore`` on Postgres (a psycopg ``Connection`` or ``ConnectionPool``).

    Usage::

        with PostgresStore.from_conn_string("postgresql://user@host/db") as store:
            store.setup()  # optional: the first operation sets up the tables
            graph = builder.compile(checkpointer=saver, store=store)

    A connection passed in should be in autocommit mode, as for the official store.
    Raises BackendError when the server cannot be reached, refuses the user, or lacks
    pgvector for ``index``.
    """

    sql = POSTGRES
    MIGRATIONS = POSTGRES.store_statements  # as the official attribute; setup() applies numbered migrations

    def __init__(
        self,
        conn: psycopg.Connection | ConnectionPool,
        *,
        pipe: psycopg.Pipeline | None = None,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        adopt: bool | None = None,
    ) -> None:
        super().__init__()
        self._driver = PostgresDriver(conn, POSTGRES, pipe)
        self.conn, self.lock = conn, self._driver.lock
        self._init_core(index, ttl, deserializer, adopt)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: PoolConfig | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        adopt: bool | None = None,
    ) -> Iterator[PostgresStore]:
        """Connect to ``conn_string`` (a libpq URL or DSN). ``pool_config`` opens a
        ``ConnectionPool`` instead of one connection (and overrides ``pipeline``)."""
        resource = connect(conn_string, **open_args(pool_config))
        store = None
        try:
            if pipeline and pool_config is None:
                with resource.pipeline() as pipe:
                    store = cls(resource, pipe=pipe, index=index, ttl=ttl, adopt=adopt)
                    yield store
            else:
                store = cls(resource, index=index, ttl=ttl, adopt=adopt)
                yield store
        finally:
            if store is not None:
                store.stop_ttl_sweeper()
            resource.close()

    def setup(self) -> None:
        with at_door():
            super().setup()

    @contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor]:
        """A dict-row cursor on the store's connection: the official stores' private helper,
        kept for code written against them. The store's tables are ``threadline_store*``."""
        with self._driver.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            yield cur


class AsyncPostgresStore(Piped, AsyncStore):
    """LangGraph ``BaseStore`` on Postgres through psycopg async (``AsyncConnection`` or
    ``AsyncConnectionPool``); ``setup`` is ``async``.

    Usage::

        async with AsyncPostgresStore.from_conn_string("postgresql://user@host/db") as store:
            await store.setup()  # optional: the first operation sets up the tables
            graph = builder.compile(checkpointer=saver, store=store)
    """

    sql = POSTGRES
    MIGRATIONS = POSTGRES.store_statements  # as the official attribute; setup() applies numbered migrations

    def __init__(
        self,
        conn: psycopg.AsyncConnection | AsyncConnectionPool,
        *,
        pipe: psycopg.AsyncPipeline | None = None,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        adopt: bool | None = None,
    ) -> None:
        self._driver = AsyncPostgresDriver(conn, POSTGRES, pipe)
        super().__init__()
        self.conn, self.lock, self.loop = conn, self._driver.lock, self._loop
        self._init_core(index, ttl, deserializer, adopt)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: PoolConfig | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        adopt: bool | None = None,
    ) -> AsyncIterator[AsyncPostgresStore]:
        """Async ``PostgresStore.from_conn_string``; ``pool_config`` opens an ``AsyncConnectionPool``."""
        resource = await aconnect(conn_string, **open_args(pool_config))
        store = None
        try:
            if pipeline and pool_config is None:
                async with resource.pipeline() as pipe:
                    store = cls(resource, pipe=pipe, index=index, ttl=ttl, adopt=adopt)
                    yield store
            else:
                store = cls(resource, index=index, ttl=ttl, adopt=adopt)
                yield store
        finally:
            if store is not None:
                await store.stop_ttl_sweeper()
            await resource.close()

    async def setup(self) -> None:
        with at_door():
            await super().setup()

    @asynccontextmanager
    async def _cursor(self) -> AsyncIterator[psycopg.AsyncCursor]:
        """A dict-row cursor on the store's connection: the official stores' private helper,
        kept for code written against them. The store's tables are ``threadline_store*``."""
        async with self._driver.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            yield cur
