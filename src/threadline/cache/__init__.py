"""LangGraph node cache (``BaseCache``) on threadline's databases: ``SqliteCache``, ``PostgresCache``.

``graph.compile(cache=…)`` with a ``CachePolicy`` on a node skips the node when an
entry for its input is stored and not expired, across processes and restarts.
Entries are ``(namespace, key) → value`` with a per-entry TTL in seconds (the
``CachePolicy``'s); values are serialized by the cache's ``serde`` — by default
threadline's (``threadline.codec.serde``: no pickle, stored constructors only for
safe and allowed types) — zstd-compressed when that pays, and a stored entry
that cannot be decoded raises CorruptRowError naming it. Keys, namespaces and TTLs are
checked as the Store's (``threadline.store.checks``) before anything runs.

Both caches run on a sync connection (or pool); the async methods (``aget``,
``aset``, ``aclear``) run the sync ones in a worker thread, as the official
``SqliteCache`` does.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic

from langgraph.cache.base import BaseCache, FullKey, Namespace, ValueT
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.backends import entry_of
from threadline.lazy import lazy_names
from threadline.backends.sqliteconn import SqliteDriver, connect, door_error as sqlite_door_error
from threadline.cache import ops
from threadline.codec.serde import default_serde
from threadline.errors import CorruptRowError
from threadline.store import checks, schema
from threadline.storage.dialect.cache import CACHE
from threadline.storage.dialect.store import SQLITE, StoreSql


class SqlCache(BaseCache[ValueT], Generic[ValueT]):
    """``BaseCache`` over a sync driver; the tables are set up on first use (or by ``setup()``)."""

    sql: StoreSql

    def __init__(self, driver: Any, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde or default_serde())
        self._driver = driver
        self.is_setup = False

    def setup(self) -> None:
        """Create or migrate the cache table (idempotent; safe from many processes at once)."""
        self._driver.run(schema.setup_cache(self.sql), write=True)
        self.is_setup = True

    def _run(self, op: Any, *, write: bool) -> Any:
        if not self.is_setup:
            self.setup()
        return self._driver.run(op, write=write)

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The stored, unexpired values of ``keys``; missing and expired keys are absent."""
        if not keys:
            return {}
        rows = self._run(ops.get(self.sql, [_checked(ns, key) for ns, key in keys], time.time()), write=False)
        return {(ops.ns_tuple(ns), key): self._load(ns, key, encoding, value) for ns, key, encoding, value in rows}

    def _load(self, ns: str, key: str, encoding: str, value: Any) -> Any:
        where = f"{CACHE} entry {ns}/{key!r}"
        if not isinstance(value, (bytes, memoryview)):
            raise CorruptRowError(f"{where}: stored value is {type(value).__name__}, not bytes")
        return codec.decode(self.serde, encoding, value, where)

    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store each ``(namespace, key) → (value, ttl seconds or None)``, replacing what was there."""
        if not pairs:
            return
        now = time.time()
        rows = []
        for (ns, key), (value, ttl) in pairs.items():
            ns_text, key = _checked(ns, key)
            seconds = checks.ttl(ttl, 1, f"ttl of cache entry {ns!r}/{key!r}")
            encoding, data = codec.compress(*codec.encode(self.serde, value))
            rows.append((ns_text, key, encoding, data, now, None if seconds is None else now + seconds))
        self._run(ops.put(self.sql, rows, now), write=True)

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Delete the entries of ``namespaces``, or every entry when None."""
        self._run(ops.clear(self.sql, None if namespaces is None else [ops.ns_text(ns) for ns in namespaces]), write=True)

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        return await asyncio.to_thread(self.get, keys)

    async def aset(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        await asyncio.to_thread(self.set, pairs)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        await asyncio.to_thread(self.clear, namespaces)


def _checked(ns: Namespace, key: str) -> tuple[str, str]:
    """(namespace as stored, key), or ConfigError / KeyTooLongError (``store.checks``)."""
    return checks.namespace(ops.ns_text(ns), "cache namespace"), checks.key(key, "cache key")


class SqliteCache(SqlCache[ValueT]):
    """Node cache in a SQLite file: same constructor as the official
    ``langgraph.cache.sqlite.SqliteCache`` (``path=``, ``serde=``); the table is
    ``threadline_cache``, so the file may also hold threadline's checkpoints and store.

    Raises BackendError when ``path`` cannot be opened or is not a SQLite database.
    """

    sql = SQLITE

    def __init__(self, *, path: str, serde: SerializerProtocol | None = None) -> None:
        self.conn = connect(path)
        super().__init__(SqliteDriver(self.conn, SQLITE), serde=serde)
        try:
            self.setup()
        except sqlite3.Error as exc:
            self.conn.close()
            raise sqlite_door_error(exc, path) from exc

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, *, serde: SerializerProtocol | None = None) -> Iterator[SqliteCache]:
        """Open the cache on a path or ``sqlite:///path`` (as ``PostgresCache.from_conn_string``), closed on exit."""
        cache = cls(path=conn_string, serde=serde)
        try:
            yield cache
        finally:
            cache.close()

    def close(self) -> None:
        self.conn.close()


@contextmanager
def open_cache(url: str, *, serde: SerializerProtocol | None = None) -> Iterator[SqlCache]:
    """A cache for ``url`` (a path, ``sqlite:///path`` or ``postgresql://…``), table set up,
    closed on exit. Raises BackendError for an unknown scheme or an unreachable server."""
    with entry_of(url).get("cache").from_conn_string(url, serde=serde) as cache:
        yield cache


# psycopg and redis-py are imported on first use of their cache: a SQLite user never loads them
__getattr__ = lazy_names(globals(), {"PostgresCache": "threadline.cache.postgres", "RedisCache": "threadline.cache.redis"})


__all__ = ["PostgresCache", "RedisCache", "SqliteCache", "open_cache"]
