"""LangGraph Store (cross-thread long-term memory) on threadline's databases.

``SqliteStore``, ``AsyncSqliteStore``, ``PostgresStore``, ``AsyncPostgresStore``: drop-in
for the official ``langgraph.store.sqlite`` / ``langgraph.store.postgres`` classes, with
one storage logic (``ops``, ``sql``) under thin backend shells. ``RedisStore``,
``AsyncRedisStore`` (``store.redis``): drop-in for ``langgraph.store.redis``, on plain
Redis and Redis Cluster. ``open_store(url)``
picks the backend from a URL, as ``open_saver`` does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from langgraph.store.base import IndexConfig, TTLConfig

from threadline.backends import entry_of
from threadline.store.base import AsyncStore, SyncStore

# Each backend's store loads on first use: a SQLite user never imports psycopg or redis-py.
_LAZY = {
    **dict.fromkeys(("SqliteStore", "AsyncSqliteStore"), "threadline.store.sqlite"),
    **dict.fromkeys(("PostgresStore", "AsyncPostgresStore", "PoolConfig"), "threadline.store.postgres"),
    **dict.fromkeys(("RedisStore", "AsyncRedisStore"), "threadline.store.redis"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'threadline.store' has no attribute {name!r}")


@contextmanager
def open_store(url: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None) -> Iterator[SyncStore]:
    """A sync store for ``url`` (a path, ``sqlite:///path`` or ``postgresql://…``), tables set
    up, closed on exit. Raises BackendError for an unknown scheme or an unreachable server."""
    with entry_of(url).get("store").from_conn_string(url, index=index, ttl=ttl) as store:
        store.setup()
        yield store


@asynccontextmanager
async def aopen_store(url: str, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None) -> AsyncIterator[AsyncStore]:
    """The async ``open_store``: an ``AsyncSqliteStore`` or ``AsyncPostgresStore``."""
    async with entry_of(url).get("async_store").from_conn_string(url, index=index, ttl=ttl) as store:
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
