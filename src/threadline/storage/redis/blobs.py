"""The blob rows' named statements on Redis (``storage/dialect/blobs.py`` names them): a thread's
``bl`` hash (checkpoint_ns, channel, version → type, value, base_version), insert-if-absent as the
SQL rows are immutable; delta chains are followed by the ``chains`` script."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Call, blob_row, by_thread, group, pairs, rows_of, thread_blobs_of, thread_hash


def blob_chains(d: Any, params: Sequence[Any], many: bool) -> Generator:
    keys = group(params, 4)
    threads = by_thread(keys)
    found = yield [Call("chains", d.keys(t), [L.field(*k[1:]) for k in ks]) for t, ks in threads.items()]
    return [blob_row(t, f, raw) for t, reply in zip(threads, found) for f, raw in pairs(reply)]


def _blobs_by_keys(d: Any, keys: Sequence[Sequence[Any]]) -> Generator:
    found = yield [("HGET", d.keys(k[0]).bl, L.field(*k[1:4])) for k in keys]
    return [(k, raw) for k, raw in zip(keys, found) if raw is not None]


def blob_sizes_by_keys(d: Any, params: Sequence[Any], many: bool) -> Generator:
    found = yield from _blobs_by_keys(d, group(params, 4))
    return [(k[2], k[3], L.unpack_blob(raw, f"blob {tuple(k)!r}")[0], L.blob_size(raw)) for k, raw in found]


def blobs_with_value(d: Any, params: Sequence[Any], many: bool) -> Generator:
    empty = params[-1]
    found = yield from _blobs_by_keys(d, group(params[:-1], 4))
    return [(k[2], k[3]) for k, raw in found if L.unpack_blob(raw, f"blob {tuple(k)!r}")[0] != empty]


def insert_blobs(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """INSERT_BLOB: insert-or-ignore of (thread_id, ns, channel, version, type, blob, base_version)."""
    yield [("HSETNX", d.keys(r[0]).bl, L.field(*r[1:4]), L.pack_blob(r[4], r[5], r[6])) for r in rows_of(params, many)]
    return []


def thread_blobs(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return (yield from thread_blobs_of(d, params[0]))


def thread_blob_bases(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(b[1], b[2], b[3], b[6]) for b in (yield from thread_blobs_of(d, params[0]))]


def thread_blobs_like(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, pattern = params
    if not pattern.endswith("%") or any(c in pattern[:-1] for c in "%_"):
        raise ValueError(f"the Redis statements match a type by prefix only ('…%'), got {pattern!r}")
    return [b for b in (yield from thread_blobs_of(d, tid)) if b[4].startswith(pattern[:-1])]


def thread_blobs_not_of_type(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, type_ = params
    return [(b[1], b[2], b[3]) for b in (yield from thread_blobs_of(d, tid)) if b[4] != type_]


def thread_blob_sizes(d: Any, params: Sequence[Any], many: bool) -> Generator:
    found = yield from thread_hash(d, params[0], "bl")
    return [(*b[1:5], b[6], L.blob_size(raw)) for b, raw in ((blob_row(params[0], f, raw), raw) for f, raw in found)]


def set_blob_value(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """(type, blob, thread_id, ns, channel, version): a value re-sealed in place, its base kept."""
    rows = rows_of(params, many)
    found = yield [("HGET", d.keys(r[2]).bl, L.field(*r[3:6])) for r in rows]
    cmds = [
        ("HSET", d.keys(r[2]).bl, L.field(*r[3:6]), L.pack_blob(r[0], r[1], L.unpack_blob(raw, f"blob {tuple(r[2:])!r}")[2]))
        for r, raw in zip(rows, found)
        if raw is not None
    ]
    if cmds:
        yield cmds
    return []


def delete_blob(d: Any, params: Sequence[Any], many: bool) -> Generator:
    yield [("HDEL", d.keys(r[0]).bl, L.field(*r[1:4])) for r in rows_of(params, many)]
    return []
