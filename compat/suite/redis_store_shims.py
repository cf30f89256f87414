"""threadline's Redis Store in the shapes LangGraph's store tests build their stores in, for the
``redis-store`` and ``redis-sqlite-store`` suites (``threadline_suite_plugin``).

Every store opened here lives on ``THREADLINE_TEST_REDIS`` (default
``redis://127.0.0.1:6379/0``) under a ``store_prefix`` of its own, ``tlsuite:<pid>:<n>``,
whose keys are deleted when the store is closed (and, as a sweep, at the end of the run):

* ``SqliteStore`` / ``AsyncSqliteStore``: ``from_conn_string(conn_string, index=, ttl=)``
  as the official SQLite stores — ``":memory:"`` is a new prefix every time, a file path
  names the same prefix for the whole run (a test that reopens a file sees its items);
* ``store_redis()`` / ``store_redis_aio()``: the langgraph suite's ``_store_postgres`` /
  ``_store_postgres_aio`` fixtures' shape (a store, set up).
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import redis

from threadline.store.redis import AsyncRedisStore, RedisStore

REDIS_URL = os.environ.get("THREADLINE_TEST_REDIS") or "redis://127.0.0.1:6379/0"
_counter = itertools.count()
_used: set[str] = set()


def _prefix(conn_string: str) -> tuple[str, bool]:
    """(store_prefix, whether it is this store's alone) for an official store's ``conn_string``."""
    if conn_string == ":memory:":
        return f"tlsuite:{os.getpid()}:{next(_counter)}", True
    prefix = f"tlsuite:{os.getpid()}:f{hashlib.sha1(conn_string.encode()).hexdigest()[:12]}"
    _used.add(prefix)
    return prefix, False


def drop(prefix: str) -> None:
    """Delete every key of ``prefix`` (its hash tag ``{prefix}``); test code only, so SCAN."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        for key in client.scan_iter(match="{" + prefix + "}*", count=1000):
            client.delete(key)
    finally:
        client.close()


def drop_all() -> None:
    """The end-of-run sweep: the prefixes of every file-named store."""
    for prefix in sorted(_used):
        drop(prefix)


class SqliteStore(RedisStore):
    """``RedisStore`` opened as the official ``SqliteStore`` is."""

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None) -> Iterator[RedisStore]:  # type: ignore[override]
        prefix, own = _prefix(conn_string)
        try:
            with super().from_conn_string(REDIS_URL, index=index, ttl=ttl, store_prefix=prefix) as store:
                yield store
        finally:
            if own:
                drop(prefix)


class AsyncSqliteStore(AsyncRedisStore):
    """``AsyncRedisStore`` opened as the official ``AsyncSqliteStore`` is."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None) -> AsyncIterator[AsyncRedisStore]:  # type: ignore[override]
        prefix, own = _prefix(conn_string)
        try:
            async with super().from_conn_string(REDIS_URL, index=index, ttl=ttl, store_prefix=prefix) as store:
                yield store
        finally:
            if own:
                drop(prefix)


@contextmanager
def store_redis() -> Iterator[RedisStore]:
    with SqliteStore.from_conn_string(":memory:") as store:
        store.setup()
        yield store


@asynccontextmanager
async def store_redis_aio() -> AsyncIterator[AsyncRedisStore]:
    async with AsyncSqliteStore.from_conn_string(":memory:") as store:
        await store.setup()
        yield store
