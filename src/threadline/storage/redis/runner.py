"""Drive a sans-IO operation (``storage.ops``) on a Redis client, sync or async.

The Redis twin of ``storage.runner``: each ``Q`` the operation yields names a Redis
statement (``dialect.Cmd``); its handler yields batches of commands, each batch sent as
one pipeline (one round trip; a batch of one, as one command), and the replies go back
into the handler, whose rows go back into the operation. Scripts run by their SHA1
(``EVALSHA``) and are loaded on a ``NOSCRIPT`` reply (a restarted or flushed server).

Errors become threadline's one-line ``BackendError`` (``backends.redisconn.door_error``): a
connection failure, an out-of-memory reply, a key of the wrong type under the saver's prefix.
A damaged value a statement finds (CorruptRowError) is raised in the operation at the step that
asked for it, as an operation's own decoding raises it on SQL: an operation reading many threads
can then list the one damaged (``read.common.isolated``) and go on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar

from redis import exceptions as rx

from threadline.backends.redisconn import door_error
from threadline.errors import CorruptRowError, UnsafeOperationError
from threadline.storage.ops import Op, Q
from threadline.storage.redis.base import Call
from threadline.storage.redis.dialect import RedisDialect
from threadline.storage.redis.scripts import SCRIPTS

T = TypeVar("T")

SHA = {name: hashlib.sha1(text.encode()).hexdigest() for name, text in SCRIPTS.items()}


def _args(c: Any) -> Sequence[Any]:
    if isinstance(c, Call):
        return ("EVALSHA", SHA[c.script], len(c.keys), *c.keys, *c.args)
    return c


def error(exc: BaseException, d: RedisDialect) -> Exception:
    """The threadline error for a Redis client error (``redisconn.door_error``'s one line)."""
    return door_error(exc)


def _sync_batch(client: Any, batch: list) -> list:
    if len(batch) == 1:
        return [client.execute_command(*_args(batch[0]))]
    pipe = client.pipeline(transaction=False)
    for c in batch:
        pipe.execute_command(*_args(c))
    return pipe.execute()


async def _async_batch(client: Any, batch: list) -> list:
    if len(batch) == 1:
        return [await client.execute_command(*_args(batch[0]))]
    pipe = client.pipeline(transaction=False)
    for c in batch:
        pipe.execute_command(*_args(c))
    return await pipe.execute()


def _load_scripts(client: Any) -> None:
    for text in SCRIPTS.values():
        client.script_load(text)


async def _aload_scripts(client: Any) -> None:
    for text in SCRIPTS.values():
        await client.script_load(text)


# What a saver opened read-only may send: reads, and the scripts that only read.
READS = frozenset({"HGET", "HGETALL", "HMGET", "HLEN", "HKEYS", "HVALS", "HEXISTS", "ZRANGE", "ZCARD", "ZSCORE", "EXISTS", "TYPE", "MEMORY"})
READ_SCRIPTS = frozenset({"latest", "chains", "writes_of", "get", "blobs"})


def refuse_writes(batch: list) -> None:
    """UnsafeOperationError when ``batch`` holds a command that writes."""
    for c in batch:
        if not (c.script in READ_SCRIPTS if isinstance(c, Call) else str(c[0]).upper() in READS):
            name = c.script if isinstance(c, Call) else c[0]
            raise UnsafeOperationError(f"the Redis database was opened read-only, and this operation writes ({name}); open it for writing")


def drive(op: Op[T], client: Any, d: RedisDialect, read_only: bool = False) -> T:
    """Run ``op`` on the sync client (``redis.Redis`` or ``redis.cluster.RedisCluster``);
    ``read_only``: refuse any command that writes (``refuse_writes``)."""

    def send(batch: list) -> list:
        if read_only:
            refuse_writes(batch)
        try:
            return _sync_batch(client, batch)
        except rx.NoScriptError:
            _load_scripts(client)
            return _sync_batch(client, batch)

    def execute(q: Q) -> list:
        gen = q.sql.handler(d, q.params, q.many, *q.sql.bound)
        try:
            batch = next(gen)
            while True:
                batch = gen.send(send(batch))
        except StopIteration as stop:
            return stop.value

    try:
        q = next(op)
        while True:
            try:
                rows = execute(q)
            except CorruptRowError as exc:
                q = op.throw(exc)
            else:
                q = op.send(rows)
    except StopIteration as stop:
        return stop.value
    except (rx.RedisError, rx.RedisClusterException) as exc:
        raise error(exc, d) from exc


async def adrive(op: Op[T], client: Any, d: RedisDialect) -> T:
    """``drive`` on an async client (``redis.asyncio.Redis`` or its ``RedisCluster``)."""

    async def send(batch: list) -> list:
        try:
            return await _async_batch(client, batch)
        except rx.NoScriptError:
            await _aload_scripts(client)
            return await _async_batch(client, batch)

    async def execute(q: Q) -> list:
        gen = q.sql.handler(d, q.params, q.many, *q.sql.bound)
        try:
            batch = next(gen)
            while True:
                batch = gen.send(await send(batch))
        except StopIteration as stop:
            return stop.value

    try:
        q = next(op)
        while True:
            try:
                rows = await execute(q)
            except CorruptRowError as exc:
                q = op.throw(exc)
            else:
                q = op.send(rows)
    except StopIteration as stop:
        return stop.value
    except (rx.RedisError, rx.RedisClusterException) as exc:
        raise error(exc, d) from exc
