"""The thread index's named statements on Redis (``storage/dialect/statements.py`` names them): a
thread's ``th`` hash (created, updated, count, bytes, accessed) and the ``<prefix>:threads``
sorted set by update time; deleting a thread is one ``DEL`` of all its keys."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis import layout as L
from threadline.storage.redis.base import expire_thread
from threadline.storage.redis.leases import lease_keys


def thread_row(d: Any, params: Sequence[Any], many: bool) -> Generator:
    row = (yield [("HMGET", d.keys(params[0]).th, "created", "updated", "count", "bytes")])[0]
    return [] if row[0] is None else [(float(row[0]), float(row[1]), int(row[2]), int(row[3]))]


def restat_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid = params[0]
    k = d.keys(tid)
    count, blobs, exists = yield [("HLEN", k.ck), ("HVALS", k.bl), ("EXISTS", k.th)]
    if exists:
        yield [("HSET", k.th, "count", count, "bytes", sum(L.blob_size(b) for b in blobs))]
    return []


def drop_empty_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    k = d.keys(params[0])
    if int((yield [("HGET", k.th, "count")])[0] or 0) == 0:  # its rows: its record and tags stay, as on SQL
        yield [("DEL", k.ck, k.ids, k.bl, k.wr, k.wix, k.th), ("ZREM", d.index, params[0])]
    return []


def delete_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    yield [("DEL", *d.keys(params[0]), *lease_keys(d.prefix, params[0])), ("ZREM", d.index, params[0])]
    return []


def ensure_thread(d: Any, params: Sequence[Any], many: bool, only_with_checkpoints: bool) -> Generator:
    tid, created, updated = params[:3]
    k = d.keys(tid)
    if only_with_checkpoints and not (yield [("HLEN", k.ck)])[0]:
        return []
    yield [("HSETNX", k.th, "created", created), ("HSETNX", k.th, "updated", updated), ("HSETNX", k.th, "count", 0),
           ("HSETNX", k.th, "bytes", 0), ("ZADD", d.index, "NX", updated, tid)]
    return []


def set_thread_ttl(d: Any, params: Sequence[Any], many: bool) -> Generator:
    minutes, tid = params
    yield [expire_thread(d, tid, minutes)]
    return []


def touch_read(d: Any, params: Sequence[Any], many: bool) -> Generator:
    now, tid = params
    yield [expire_thread(d, tid), ("HSET", d.keys(tid).th, "accessed", now)]
    return []
