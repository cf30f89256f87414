"""``RedisCache``: LangGraph's ``langgraph.cache.redis.RedisCache`` (same constructor: a redis-py
client, ``serde=``, ``prefix=``; an instance of it) made safe for managed Redis and Redis
Cluster, plus ``from_conn_string(url)``.

What changes from LangGraph's class, and why:

* Keys share the hash tag ``{<prefix>}``, so a ``get`` of many entries (one MGET) and a
  ``set`` (one MULTI/EXEC) work on a cluster; LangGraph's keys spread over slots, where its
  MGET fails and the failure is swallowed (every lookup a miss).
* ``clear`` reads an index the cache keeps (a sorted set per namespace, of its keys scored by
  expiry, and a set of namespaces) instead of ``KEYS``, which managed services block.
  Each ``set`` drops the expired keys from its namespace's index.
* A namespace is kept as its JSON array (as ``SqliteCache``): ``("a:b",)`` and ``("a", "b")``
  are different namespaces (LangGraph's joins labels with ``:``).
* Values are serialized by threadline's serializer (no pickle) and compressed when that
  pays, as ``SqliteCache``; an entry that cannot be decoded raises ``CorruptRowError``.
* Redis errors raise ``BackendError`` in one line (LangGraph's cache returns misses and drops
  writes silently, so an outage looks like a cold cache).

Keys: ``{P}:e:<ns JSON>:<key>`` (the entry, with Redis's own TTL), ``{P}:ns:<ns JSON>`` (the
namespace's index), ``{P}:namespaces``. The async methods run the sync ones in a worker
thread, as the other caches.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from langgraph.cache.base import FullKey, Namespace, ValueT
from langgraph.cache.redis import RedisCache as LangGraphRedisCache
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.backends import redisconn
from threadline.cache import ops
from threadline.codec.serde import default_serde
from threadline.errors import CorruptRowError

PREFIX = "langgraph:cache:"


class RedisCache(LangGraphRedisCache[ValueT]):
    """Node cache on Redis or Redis Cluster through a sync redis-py client (``redis.Redis`` or
    ``redis.cluster.RedisCluster``, bytes replies: ``decode_responses=False``).

    Usage::

        with RedisCache.from_conn_string("redis://localhost:6379/0") as cache:
            graph = builder.compile(checkpointer=saver, cache=cache)

    TTLs are the ``CachePolicy``'s, in seconds (Redis expires the entry). Raises BackendError
    when Redis fails (down, login refused, OOM, a foreign key under the prefix).
    """

    def __init__(self, redis: Any, *, serde: SerializerProtocol | None = None, prefix: str = PREFIX) -> None:
        if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            raise ValueError(f"prefix must be a string without braces (it forms the cluster hash tag), got {prefix!r}")
        super().__init__(redis, serde=serde or default_serde(), prefix=prefix)
        self._url: str | None = None
        self._tag = "{" + prefix + "}"
        self._namespaces = f"{self._tag}:namespaces"

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        prefix: str = PREFIX,
        connection_args: dict[str, Any] | None = None,
    ) -> Iterator[RedisCache]:
        """Connect to ``conn_string`` (``redis://``, ``rediss://``, ``redis+cluster://``,
        ``rediss+cluster://``), closed on exit. BackendError when Redis cannot be used."""
        client = redisconn.connect(conn_string, **(connection_args or {}))
        try:
            cache = cls(client, serde=serde, prefix=prefix)
            cache._url = conn_string
            yield cache
        finally:
            client.close()

    def _make_key(self, ns: Namespace, key: str) -> str:
        return f"{self._tag}:e:{ops.ns_text(ns)}:{key}"

    def _index(self, ns_text: str) -> str:
        return f"{self._tag}:ns:{ns_text}"

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The stored, unexpired values of ``keys``; missing and expired keys are absent."""
        if not keys:
            return {}
        names = [self._make_key(ns, key) for ns, key in keys]
        with redisconn.at_door(self._url):
            raw = self.redis.mget(names)
        out: dict[FullKey, ValueT] = {}
        for full, name, value in zip(keys, names, raw):
            if value is not None:
                out[full] = self._load(name, value)
        return out

    def _load(self, name: str, value: Any) -> Any:
        where = f"Redis cache key {name}"
        if not isinstance(value, bytes) or b":" not in value:
            raise CorruptRowError(f"{where}: not an entry this cache wrote (expected bytes '<encoding>:<data>'); delete the key")
        encoding, data = value.split(b":", 1)
        return codec.decode(self.serde, encoding.decode("ascii", "replace"), data, where)

    def set(self, mapping: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store each ``(namespace, key) → (value, ttl seconds or None)``, replacing what was there;
        a TTL of 0 or less stores nothing (and deletes the entry)."""
        if not mapping:
            return
        now_ms = int(time.time() * 1000)
        pipe = self.redis.pipeline(transaction=True)
        for (ns, key), (value, ttl) in mapping.items():
            name, ns_text = self._make_key(ns, key), ops.ns_text(ns)
            index = self._index(ns_text)
            if ttl is not None and ttl <= 0:
                pipe.delete(name)
                pipe.zrem(index, key)
                continue
            encoding, data = codec.compress(*codec.encode(self.serde, value))
            if ttl is None:
                pipe.set(name, encoding.encode() + b":" + data)
                pipe.zadd(index, {key: "+inf"})
            else:
                pipe.set(name, encoding.encode() + b":" + data, px=int(ttl * 1000))
                pipe.zadd(index, {key: now_ms + int(ttl * 1000)})
            pipe.zremrangebyscore(index, "-inf", now_ms)
            pipe.sadd(self._namespaces, ns_text)
        with redisconn.at_door(self._url):
            pipe.execute()

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Delete the entries of ``namespaces``, or every entry when None (from the cache's own
        index: no ``KEYS``)."""
        with redisconn.at_door(self._url):
            if namespaces is None:
                texts = sorted(n.decode() if isinstance(n, bytes) else n for n in self.redis.smembers(self._namespaces))
            else:
                texts = [ops.ns_text(ns) for ns in namespaces]
            if not texts:
                return
            read = self.redis.pipeline(transaction=False)
            for text in texts:
                read.zrange(self._index(text), 0, -1)
            members = read.execute()
            pipe = self.redis.pipeline(transaction=True)
            for text, keys in zip(texts, members):
                names = [f"{self._tag}:e:{text}:{k.decode() if isinstance(k, bytes) else k}" for k in keys]
                for part in range(0, len(names), 1000):
                    pipe.delete(*names[part : part + 1000])
                pipe.delete(self._index(text))
                pipe.srem(self._namespaces, text)
            pipe.execute()

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        return await asyncio.to_thread(self.get, keys)

    async def aset(self, mapping: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        await asyncio.to_thread(self.set, mapping)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        await asyncio.to_thread(self.clear, namespaces)


__all__ = ["RedisCache"]
