"""LangGraph Store (cross-thread long-term memory) on threadline's databases.

``SqliteStore``, ``AsyncSqliteStore``, ``PostgresStore``, ``AsyncPostgresStore``: drop-in
for the official ``langgraph.store.sqlite`` / ``langgraph.store.postgres`` classes, with
one storage logic (``ops``, asking ``storage/dialect/store.py`` for its statements) under
thin backend shells. ``RedisStore``, ``AsyncRedisStore`` (``store.redis``): drop-in for
``langgraph.store.redis``, on plain Redis and Redis Cluster. ``open_store(url)`` picks
the backend from a URL, as ``open_saver`` does. The SQL stores adopt the items of the
official stores' table of the same database (``official``); ``official.import_langgraph_store``
copies them from another database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from langgraph.store.base import IndexConfig, TTLConfig

from threadline.backends import entry_of
from threadline.lazy import lazy_names
from threadline.store.base import AsyncStore, SyncStore

# Each backend's store loads on first use: a SQLite user never imports psycopg or redis-py.
_LAZY = {
    **dict.fromkeys(("SqliteStore", "AsyncSqliteStore"), "threadline.store.sqlite"),
    **dict.fromkeys(("PostgresStore", "AsyncPostgresStore", "PoolConfig"), "threadline.store.postgres"),
    **dict.fromkeys(("RedisStore", "AsyncRedisStore"), "threadline.store.redis"),
}


__getattr__ = lazy_names(globals(), _LAZY)


@contextmanager
def open_store(
    url: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, adopt: bool | None = None
) -> Iterator[SyncStore]:
    """A sync store for ``url`` (a path, ``sqlite:///path`` or ``postgresql://…``), tables set
    up, closed on exit; on SQLite and Postgres the official store's items of the database are
    adopted (``threadline.store.official``) unless ``adopt=False``. Raises BackendError for an
    unknown scheme or an unreachable server."""
    kw = {} if adopt is None else {"adopt": adopt}
    with entry_of(url).get("store").from_conn_string(url, index=index, ttl=ttl, **kw) as store:
        store.setup()
        yield store


@asynccontextmanager
async def aopen_store(
    url: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, adopt: bool | None = None
) -> AsyncIterator[AsyncStore]:
    """The async ``open_store``: an ``AsyncSqliteStore`` or ``AsyncPostgresStore``."""
    kw = {} if adopt is None else {"adopt": adopt}
    async with entry_of(url).get("async_store").from_conn_string(url, index=index, ttl=ttl, **kw) as store:
        await store.setup()
        yield store


__all__ = [
    "AsyncPostgresStore",
    "AsyncRedisStore",
    "AsyncSqliteStore",
    "PoolConfig",
    "PostgresStore",
    "RedisStore",
    "SqliteStore",
    "aopen_store",
    "open_store",
]
