"""Redis shell: ``RedisSaver``, ``AsyncRedisSaver`` and their shallow twins, on plain Redis 7
or Redis Cluster (no modules), drop-in for ``langgraph-checkpoint-redis``'s classes of the
same names. Connect and run only: the storage logic is ``storage.ops`` on the Redis
statements (``storage.redis``).

URLs: as ``backends.redisconn`` opens them (``redis://``, ``rediss://``, ``redis+cluster://``,
``rediss+cluster://``), with ``?prefix=`` naming the key prefix.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from redis import Redis
from redis import exceptions as rx
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from threadline.backends import redisconn
from threadline.errors import ConfigError
from threadline.saver import AsyncShell, SyncShell
from threadline.storage import ops
from threadline.storage.redis import RedisDialect
from threadline.storage.redis.runner import adrive, drive

logger = logging.getLogger("threadline.redis")

DEFAULT_PREFIX = "checkpoint"  # the official default; threadline's keys have another shape (``layout``)


def _check_ttl(ttl: Any) -> Any:
    if ttl is not None and not isinstance(ttl, dict):
        raise ConfigError(f"ttl must be a dict such as {{'default_ttl': minutes, 'refresh_on_read': True}}, got {ttl!r}")
    return ttl


class _RedisParts:
    """The constructor all four savers share: the official classes' keywords, plus threadline's."""

    shallow = False

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        redis_client: Any = None,
        connection_args: dict[str, Any] | None = None,
        ttl: dict[str, Any] | None = None,
        checkpoint_prefix: str = DEFAULT_PREFIX,
        checkpoint_write_prefix: str = "checkpoint_write",
        serde: SerializerProtocol | None = None,
        retention: Any = None,
        cache_max_bytes: int | None = None,
        key_cache_max_size: int | None = None,
        channel_cache_max_size: int | None = None,
    ) -> None:
        # key_cache_max_size / channel_cache_max_size size the official shallow saver's client-side
        # caches; threadline's value cache is bounded by cache_max_bytes instead.
        super().__init__(serde=serde, adopt=False, ttl=_check_ttl(ttl), retention=retention, cache_max_bytes=cache_max_bytes)  # type: ignore[call-arg]
        if checkpoint_prefix == DEFAULT_PREFIX and redis_url:
            checkpoint_prefix = redisconn.prefix_of(redis_url) or DEFAULT_PREFIX
        try:
            self.dialect = RedisDialect(checkpoint_prefix)
        except ValueError as exc:
            raise ConfigError(f"checkpoint_prefix: {exc}") from exc
        self.checkpoint_prefix = checkpoint_prefix
        # accepted as the official savers take it; a thread's writes live with its other keys (one hash tag)
        self.checkpoint_write_prefix = checkpoint_write_prefix
        if redis_client is None and redis_url is None:
            raise ConfigError("give redis_url='redis://…' or redis_client=")
        self._url = redis_url
        self._connection_args = connection_args
        self._redis = redis_client
        self._owns_client = redis_client is None

    @property
    def cluster_mode(self) -> bool:
        """Whether the client is a Redis Cluster client (the official attribute)."""
        return isinstance(self._redis, (RedisCluster, AsyncRedisCluster))

    def configure_client(self, redis_url: str | None = None, redis_client: Any = None, connection_args: dict[str, Any] | None = None) -> None:
        """Use ``redis_client``, or a client for ``redis_url`` opened on the next ``setup``/first use
        (the official method)."""
        if redis_client is None and redis_url is None:
            raise ConfigError("give redis_url='redis://…' or redis_client=")
        self._url, self._connection_args, self._redis = redis_url, connection_args, redis_client
        self._owns_client = redis_client is None
        self.dialect.single_node = False  # until setup() sees the client

    def create_indexes(self) -> None:
        """The official saver creates its RediSearch indexes here; on plain Redis threadline needs
        none (its keys are their own index), so there is nothing to create. ``setup()`` checks the server."""

    def get_channel_values(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str = "", channel_versions: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The channel values of a checkpoint (the latest of the namespace when ``checkpoint_id`` is
        empty), as the official method returns them; ``channel_versions`` restricts to those channels."""
        found = self.get_tuple(_config(thread_id, checkpoint_ns, checkpoint_id))  # type: ignore[attr-defined]
        return _values(found, channel_versions)

    async def aget_channel_values(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str = "", channel_versions: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Async ``get_channel_values``."""
        found = await self.aget_tuple(_config(thread_id, checkpoint_ns, checkpoint_id))  # type: ignore[attr-defined]
        return _values(found, channel_versions)

    def prune(self, thread_ids: Any, *, strategy: str = "keep_latest", keep_last: int | None = None, max_results: int = 10000) -> None:
        """``prune`` with the official RedisSaver's ``keep_last`` (keep each namespace's N newest
        checkpoints); ``max_results`` bounds the official saver's index search and has no use here."""
        for tid in ops.thread_ids_of(thread_ids):
            self._adopt(tid)  # type: ignore[attr-defined]
        self._run(ops.prune(self.dialect, thread_ids, strategy, self.blob_codec, keep_last or 1), write=True)  # type: ignore[attr-defined]

    async def aprune(self, thread_ids: Any, *, strategy: str = "keep_latest", keep_last: int | None = None, max_results: int = 10000) -> None:
        """Async ``prune``."""
        await self._arun(ops.prune(self.dialect, thread_ids, strategy, self.blob_codec, keep_last or 1), write=True)  # type: ignore[attr-defined]

    async def aput(self, config: dict, checkpoint: Any, metadata: Any, new_versions: Any, stream_mode: str = "values") -> dict:
        """``aput``; ``stream_mode`` is the official AsyncRedisSaver's extra argument, with no effect on storage."""
        return await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc]

    def set_client_info(self) -> None:
        """Name threadline to the server (``CLIENT SETINFO LIB-NAME``) where it knows the command (Redis 7.2+)."""
        try:
            self._redis.client_setinfo("LIB-NAME", LIB_NAME)
        except rx.ResponseError:
            pass  # older servers: the name is only informative

    async def aset_client_info(self) -> None:
        """Async ``set_client_info``."""
        try:
            await self._redis.client_setinfo("LIB-NAME", LIB_NAME)
        except rx.ResponseError:
            pass

    def _warn(self, lines: list[str]) -> None:
        for line in lines:
            if line not in _WARNED:  # once a process: every saver of a server would say the same
                _WARNED.add(line)
                logger.warning(line)

    def _shallow_op(self, op: ops.Op, config: dict) -> ops.Op:
        """``op`` (a put), then its thread pruned to each namespace's latest checkpoint."""
        result = yield from op
        # after every put: without reading the thread's values for stored DeltaChannel snapshots (ops.prune)
        yield from ops.prune(self.dialect, [result["configurable"]["thread_id"]], "keep_latest", self.blob_codec, snapshots=False)  # type: ignore[attr-defined]
        return result

    def _put_op(self, config: dict, checkpoint: Any, metadata: Any, new_versions: Any) -> ops.Op:
        op = super()._put_op(config, checkpoint, metadata, new_versions)  # type: ignore[misc]
        return self._shallow_op(op, config) if self.shallow else op

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Nothing to sweep for TTL: Redis expires a thread's keys itself. Retention still needs
        ``sweep()``."""
        return super().start_ttl_sweeper(sweep_interval_minutes) if self.retention is not None else _done()  # type: ignore[misc]


LIB_NAME = "threadline"
_WARNED: set[str] = set()


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}}


def _values(found: Any, channel_versions: dict[str, Any] | None) -> dict[str, Any]:
    values = dict(found.checkpoint["channel_values"]) if found is not None else {}
    return values if channel_versions is None else {k: v for k, v in values.items() if k in channel_versions}


def _done() -> Any:
    import concurrent.futures

    f: Any = concurrent.futures.Future()
    f.set_result(None)
    return f


class RedisSaver(_RedisParts, SyncShell):
    """Checkpoint saver on plain Redis 7 or Redis Cluster (no modules), sync.

    Same constructor and ``from_conn_string`` keywords as ``langgraph.checkpoint.redis.RedisSaver``
    (``redis_url``, ``redis_client``, ``connection_args``, ``ttl`` with ``default_ttl`` minutes and
    ``refresh_on_read``, ``checkpoint_prefix``, ``checkpoint_write_prefix``); ``setup()`` checks
    the server and warns (log ``threadline.redis``) about settings that can lose threads.
    Storage as on the SQL backends: version-addressed blobs written only when a channel
    changes, deltas, zstd, seals or encryption; TTL is Redis's own expiry on all of a thread's
    keys at once. Raises BackendError when Redis cannot be reached or refuses a command.
    """

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        redis_url: str | None = None,
        *,
        redis_client: Any = None,
        connection_args: dict[str, Any] | None = None,
        ttl: dict[str, Any] | None = None,
        checkpoint_prefix: str = DEFAULT_PREFIX,
        checkpoint_write_prefix: str = "checkpoint_write",
        key_cache_max_size: int | None = None,
        channel_cache_max_size: int | None = None,
        **options: Any,
    ) -> Iterator[RedisSaver]:
        """A saver on ``redis_url`` (or ``redis_client=``), set up; the client it opened is closed on
        exit. ``options``: threadline's (``serde``, ``retention``, ``cache_max_bytes``)."""
        saver = cls(
            redis_url, redis_client=redis_client, connection_args=connection_args, ttl=ttl, checkpoint_prefix=checkpoint_prefix,
            checkpoint_write_prefix=checkpoint_write_prefix, key_cache_max_size=key_cache_max_size,
            channel_cache_max_size=channel_cache_max_size, **options,
        )
        try:
            saver.setup()
            with saver._sweeping():
                yield saver
        finally:
            if saver._owns_client and saver._redis is not None:
                saver._redis.close()

    def setup(self) -> None:
        if self._redis is None:
            self._redis = redisconn.connect(self._url, **(self._connection_args or {}))  # type: ignore[arg-type]
        with redisconn.at_door(self._url):
            self._warn(redisconn.setup_warnings(self._redis, self._url))
        self.dialect.single_node = isinstance(self._redis, Redis) and not self.cluster_mode
        super().setup()

    read_only = False  # set by open_read_only: the runner then refuses every command that writes

    def _transaction(self, op: ops.Op, write: bool) -> Any:
        return drive(op, self._redis, self.dialect, self.read_only)


@contextmanager
def open_read_only(url: str, serde: Any = None) -> Iterator[tuple[RedisSaver, ops.SchemaState]]:
    """A ``RedisSaver`` on ``url`` that refuses every command that writes, never set up, and what
    the server holds under the URL's prefix (``?prefix=``). BackendError when Redis cannot be used."""
    saver = RedisSaver(url, serde=serde)
    saver.read_only = True
    saver._redis = redisconn.connect(url)
    try:
        yield saver, saver.peek(ops.schema_state(saver.dialect))
    finally:
        saver._redis.close()


def write_refusal(url: str) -> str | None:
    """Why this process cannot write the server at ``url`` (a read-only replica), or None; a
    cluster client writes to the primaries. BackendError when it cannot be reached."""
    client = redisconn.connect(url)
    try:
        if isinstance(client, RedisCluster):
            return None
        role = client.execute_command("ROLE")
        return "the server is a read-only replica" if role and role[0] in (b"slave", "slave", b"replica", "replica") else None
    except rx.ResponseError:
        return None
    finally:
        client.close()


class AsyncRedisSaver(_RedisParts, AsyncShell):
    """``RedisSaver`` for asyncio (``redis.asyncio``): same keywords; ``setup`` is async;
    ``from_conn_string`` an async context manager."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        redis_url: str | None = None,
        *,
        redis_client: Any = None,
        connection_args: dict[str, Any] | None = None,
        ttl: dict[str, Any] | None = None,
        checkpoint_prefix: str = DEFAULT_PREFIX,
        checkpoint_write_prefix: str = "checkpoint_write",
        key_cache_max_size: int | None = None,
        channel_cache_max_size: int | None = None,
        **options: Any,
    ) -> AsyncIterator[AsyncRedisSaver]:
        """``RedisSaver.from_conn_string`` for asyncio."""
        saver = cls(
            redis_url, redis_client=redis_client, connection_args=connection_args, ttl=ttl, checkpoint_prefix=checkpoint_prefix,
            checkpoint_write_prefix=checkpoint_write_prefix, key_cache_max_size=key_cache_max_size,
            channel_cache_max_size=channel_cache_max_size, **options,
        )
        try:
            await saver.asetup()
            async with saver._sweeping():
                yield saver
        finally:
            if saver._owns_client and saver._redis is not None:
                await saver._redis.aclose()

    async def setup(self) -> None:
        if self._redis is None:
            self._redis = await redisconn.aconnect(self._url, **(self._connection_args or {}))  # type: ignore[arg-type]
        async with redisconn.aat_door(self._url):
            self._warn(await redisconn.asetup_warnings(self._redis, self._url))
        self.dialect.single_node = isinstance(self._redis, AsyncRedis) and not self.cluster_mode
        await super().setup()

    async def _atransaction(self, op: ops.Op, write: bool) -> Any:
        return await adrive(op, self._redis, self.dialect)


class ShallowRedisSaver(RedisSaver):
    """``RedisSaver`` keeping only each namespace's latest checkpoint (and its writes), as
    ``langgraph.checkpoint.redis.shallow.ShallowRedisSaver``."""

    shallow = True


class AsyncShallowRedisSaver(AsyncRedisSaver):
    """``AsyncRedisSaver`` keeping only each namespace's latest checkpoint."""

    shallow = True
