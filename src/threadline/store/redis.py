"""Redis stores: ``RedisStore`` (redis-py sync) and ``AsyncRedisStore`` (``redis.asyncio``), on plain
Redis 7 and Redis Cluster, with no modules (no RedisJSON, no RediSearch).

Same constructors and ``from_conn_string`` as LangGraph's official ``langgraph.store.redis``
classes (``conn`` / ``redis_url``, ``redis_client``, ``connection_args``, ``index``, ``ttl``,
``cluster_mode``, ``store_prefix``, ``vector_prefix``), and the same semantics as
threadline's SQL stores: the batch is checked and encoded by ``store.ops.plan`` (one copy of
every input rule), values are canonical JSON (``store.values``), filters mean what they
mean there (``store.pyfilter``).

Keys (``S`` = ``store_prefix``, ``V`` = ``vector_prefix``), all sharing the hash tag ``{S}``,
so every command and script touches one cluster slot (no CROSSSLOT):

* ``{S}:item:<id>`` — a hash per item: ``ns`` (labels joined by ``.``), ``key``, ``value``
  (JSON), ``created_at``, ``updated_at`` (microseconds since the epoch, server time),
  ``ttl_minutes`` (only with a TTL); Redis expires it (``PEXPIREAT``) when its TTL ends.
  ``<id>`` is the SHA-1 of the member ``["<ns>","<key>"]`` (JSON).
* ``{S}:V:<id>`` — a hash of the item's vectors (only with ``index=``): field name → the
  float32 vector, base64; expires with the item.
* ``{S}:ns:<ns>`` — a sorted set per namespace: its keys, scored by ``updated_at``.
* ``{S}:namespaces`` — a sorted set of every namespace (score 0, so ordered by bytes).
* ``{S}:expiry`` — a sorted set of the members with a TTL, scored by their expiry time.
* ``{S}:meta`` — a hash: ``version`` of this layout, ``dims`` of the stored vectors.

Every batch's puts and deletes run in one Lua script (atomic; the script first checks the
type of every key it will touch, so a foreign key under the prefix stops it before any
write). Reads never scan the keyspace: they walk the namespace index. Items whose TTL
ended leave the index in the next ``sweep_ttl`` (which ``search`` and ``list_namespaces``
run first), so they are never listed.

Search with a ``filter`` or a ``query`` reads every item of the namespace prefix and
decides in Python (vectors are scored exactly, cosine, L2 or inner product); it refuses a
prefix holding more than ``scan_limit`` items (default ``SCAN_LIMIT`` = 10,000) with
``ScanLimitError``. A plain search reads only the index and the page it returns.

The keys and scripts are ``storage/redis/store.py``'s, the operations on them
``store/redisops.py``'s; this module runs them on a client and holds the stores.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import redis
import redis.asyncio
from langgraph.store.base import IndexConfig, Op, Result, TTLConfig
from redis import exceptions as rex

from threadline.backends import redisconn
from threadline.storage.redis.store import SCRIPTS, SHAS, Keys
from threadline.store import ops as O
from threadline.store.base import AsyncStore, SyncStore
from threadline.store.redisops import Call, Cmds, RedisOp, ScanLimitError, StoreOps

logger = logging.getLogger(__name__)

SCAN_LIMIT = 10_000  # items a filtered or semantic search may read
STORE_PREFIX = "store"
VECTOR_PREFIX = "store_vectors"


# --- running them -----------------------------------------------------------------------


def _reply_error(cmds: Cmds, reply: list[Any], url: str | None) -> None:
    for (method, args, _), result in zip(cmds.commands, reply):
        if isinstance(result, Exception):
            raise redisconn.door_error(type(result)(f"{result} (key {args[0]}, {method.upper()})"), url) from result


def _now_us() -> int:
    return int(time.time() * 1e6)


def _pipeline(client: Any, step: Cmds) -> Any:
    """``step``'s commands queued on a non-transactional pipeline of ``client`` (sync or async)."""
    pipe = client.pipeline(transaction=False)
    for method, args, kwargs in step.commands:
        getattr(pipe, method)(*args, **kwargs)
    return pipe


def _script(step: Call) -> tuple[Any, ...]:
    """EVALSHA's arguments after the script: key count, keys, arguments."""
    return (len(step.keys), *step.keys, *step.args)


def run(client: Any, op: RedisOp, url: str | None) -> Any:
    """Drive ``op`` on a sync client; redis-py errors become one-line BackendErrors."""
    reply: Any = None
    with redisconn.at_door(url):
        try:
            while True:
                step = op.send(reply)
                if isinstance(step, Cmds):
                    reply = _pipeline(client, step).execute(raise_on_error=False)
                    _reply_error(step, reply, url)
                else:
                    try:
                        reply = client.evalsha(SHAS[step.name], *_script(step))
                    except rex.NoScriptError:  # not cached on that server yet
                        reply = client.eval(SCRIPTS[step.name], *_script(step))
        except StopIteration as stop:
            return stop.value


async def arun(client: Any, op: RedisOp, url: str | None) -> Any:
    """``run`` on a ``redis.asyncio`` client."""
    reply: Any = None
    async with redisconn.aat_door(url):
        try:
            while True:
                step = op.send(reply)
                if isinstance(step, Cmds):
                    reply = await _pipeline(client, step).execute(raise_on_error=False)
                    _reply_error(step, reply, url)
                else:
                    try:
                        reply = await client.evalsha(SHAS[step.name], *_script(step))
                    except rex.NoScriptError:
                        reply = await client.eval(SCRIPTS[step.name], *_script(step))
        except StopIteration as stop:
            return stop.value


# --- the stores ----------------------------------------------------------------------------


class _RedisCore:
    """What both Redis stores add to the SQL stores' shared core."""

    _ops: StoreOps
    _url: str | None

    def _init_redis(
        self,
        index: IndexConfig | None,
        ttl: TTLConfig | None,
        deserializer: Callable[[Any], dict[str, Any]] | None,
        store_prefix: str,
        vector_prefix: str,
        scan_limit: int,
        cluster_mode: bool | None,
    ) -> None:
        if cluster_mode is not None and not isinstance(cluster_mode, bool):
            raise TypeError("cluster_mode must be a boolean or None")
        if isinstance(scan_limit, bool) or not isinstance(scan_limit, int) or scan_limit < 1:
            raise ValueError(f"scan_limit must be a positive integer (items), got {scan_limit!r}")
        self._init_core(index, ttl, deserializer)  # type: ignore[attr-defined]
        self.cluster_mode = cluster_mode  # accepted as the official stores do; the key layout serves both
        self.store_prefix, self.vector_prefix = store_prefix, vector_prefix
        self.scan_limit = scan_limit
        keys = Keys(store_prefix, vector_prefix)
        index_ = self._index  # type: ignore[attr-defined]
        self._ops = StoreOps(keys, scan_limit, deserializer, index_.distance if index_ else "cosine")

    def _dims(self) -> int | None:
        return self._index.dims if self._index else None  # type: ignore[attr-defined]


class RedisStore(_RedisCore, SyncStore):
    """LangGraph ``BaseStore`` on Redis 7 or Redis Cluster through redis-py (sync), no modules needed.

    Usage::

        with RedisStore.from_conn_string("redis://localhost:6379/0") as store:
            store.setup()  # optional: the first operation checks the server
            store.put(("users", "123"), "prefs", {"theme": "dark"})
            graph = builder.compile(checkpointer=saver, store=store)

    ``conn``: a ``redis.Redis`` or ``redis.cluster.RedisCluster``. ``index``, ``ttl`` as the
    other stores (TTL by Redis's own expiry, minutes); ``store_prefix`` / ``vector_prefix``
    name the keys (module docstring); ``scan_limit``: the most items a filtered or semantic
    search reads (ScanLimitError beyond). ``cluster_mode`` is accepted and not needed.

    Raises BackendError naming the problem and the fix when Redis is down, refuses the login,
    replies WRONGTYPE (a foreign key under the prefix) or OOM; CorruptRowError for an item
    hash this store did not write; SchemaError for a layout of a newer threadline.
    """

    def __init__(
        self,
        conn: redis.Redis | redis.cluster.RedisCluster,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        cluster_mode: bool | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        scan_limit: int = SCAN_LIMIT,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._redis = conn
        self._url: str | None = None
        self._init_redis(index, ttl, deserializer, store_prefix, vector_prefix, scan_limit, cluster_mode)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        connection_args: dict[str, Any] | None = None,
        scan_limit: int = SCAN_LIMIT,
    ) -> Iterator[RedisStore]:
        """Connect to ``conn_string`` (``redis://``, ``rediss://``, ``redis+cluster://``,
        ``rediss+cluster://``; see ``threadline.backends.redisconn``), closed on exit."""
        client = redisconn.connect(conn_string, **(connection_args or {}))
        store_prefix = redisconn.prefix_for(conn_string, store_prefix, STORE_PREFIX, "store")
        store = None
        try:
            store = cls(client, index=index, ttl=ttl, store_prefix=store_prefix, vector_prefix=vector_prefix, scan_limit=scan_limit)
            store._url = conn_string
            yield store
        finally:
            if store is not None:
                store.stop_ttl_sweeper()
            client.close()

    def _run(self, op: RedisOp) -> Any:
        return run(self._redis, op, self._url)

    def setup(self) -> None:
        """Check the server (PING) and the store's layout record; log the server's safety warnings."""
        self._run(self._ops.setup(self._dims()))
        for line in redisconn.setup_warnings(self._redis, self._url):
            logger.warning(line)
        self.is_setup = True

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        p = O.plan(ops, self._index)
        vec = self._embed(p)
        if not self.is_setup:
            self.setup()
        results, refresh = self._run(self._ops.batch(p, vec, _now_us()))
        if refresh:
            self._run(self._ops.refresh(refresh))
        return results

    def sweep_ttl(self) -> int:
        """Drop from the index the items Redis expired; returns how many. (Redis deletes the
        items itself; searches and namespace listings sweep first.)"""
        if not self.is_setup:
            self.setup()
        return self._run(self._ops.sweep(_now_us()))


class AsyncRedisStore(_RedisCore, AsyncStore):
    """LangGraph ``BaseStore`` on Redis 7 or Redis Cluster through ``redis.asyncio``; ``setup`` is ``async``.

    Usage::

        async with AsyncRedisStore.from_conn_string("redis://localhost:6379/0") as store:
            await store.aput(("users", "123"), "prefs", {"theme": "dark"})

    ``AsyncRedisStore(redis_url, connection_args=…)`` opens its own client (checked at
    ``setup``, closed by ``aclose`` / ``async with``); ``redis_client=`` uses yours. Other
    keywords and errors as ``RedisStore``.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        redis_client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster | None = None,
        index: IndexConfig | None = None,
        connection_args: dict[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        cluster_mode: bool | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        scan_limit: int = SCAN_LIMIT,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
    ) -> None:
        if redis_url is None and redis_client is None:
            raise ValueError("Either redis_url or redis_client must be provided")
        client = redis_client if redis_client is not None else redisconn.async_client(redis_url, **(connection_args or {}))
        super().__init__()
        self.loop = self._loop
        self._url = redis_url
        self._owns_client = redis_client is None
        self._redis = client
        self._door_checked = not self._owns_client
        self._init_redis(index, ttl, deserializer, store_prefix, vector_prefix, scan_limit, cluster_mode)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        connection_args: dict[str, Any] | None = None,
        scan_limit: int = SCAN_LIMIT,
    ) -> AsyncIterator[AsyncRedisStore]:
        """Async ``RedisStore.from_conn_string``."""
        client = await redisconn.aconnect(conn_string, **(connection_args or {}))
        store_prefix = redisconn.prefix_for(conn_string, store_prefix, STORE_PREFIX, "store")
        store = None
        try:
            store = cls(
                redis_client=client, index=index, ttl=ttl, store_prefix=store_prefix, vector_prefix=vector_prefix, scan_limit=scan_limit
            )
            store._url = conn_string
            yield store
        finally:
            if store is not None:
                await store.stop_ttl_sweeper()
            await client.aclose()

    async def _run(self, op: RedisOp) -> Any:
        return await arun(self._redis, op, self._url)

    async def setup(self) -> None:
        """Check the server (PING; the URL's form against it) and the store's layout record; log
        the server's safety warnings."""
        if not self._door_checked:
            await redisconn.acheck(self._redis, self._url)
            self._door_checked = True
        await self._run(self._ops.setup(self._dims()))
        for line in await redisconn.asetup_warnings(self._redis, self._url):
            logger.warning(line)
        self.is_setup = True

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        p = O.plan(ops, self._index)
        vec = await self._aembed(p)
        if not self.is_setup:
            await self.setup()
        results, refresh = await self._run(self._ops.batch(p, vec, _now_us()))
        if refresh:
            await self._run(self._ops.refresh(refresh))
        return results

    async def sweep_ttl(self) -> int:
        """Drop from the index the items Redis expired; returns how many."""
        if not self.is_setup:
            await self.setup()
        return await self._run(self._ops.sweep(_now_us()))

    async def aclose(self) -> None:
        """Stop the TTL sweeper and close the client this store opened (not one passed in)."""
        await self.stop_ttl_sweeper()
        if self._owns_client:
            await self._redis.aclose()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["SCAN_LIMIT", "AsyncRedisStore", "RedisStore", "ScanLimitError"]
