"""The storage engine's named statements on Redis: the same names, parameters and result
rows as the SQL dialects' (``storage.dialect.statements``), each a handler over the keys
of ``layout`` instead of SQL text. The operations of ``storage.ops`` run unchanged on
them: one storage logic for every backend.

A handler is a generator: it yields a batch of commands — ``("HGET", key, field)`` or a
``Call`` of a script of ``scripts`` — which the runner (``storage.redis.runner``) sends in
one pipeline (one round trip), and is sent the replies; it returns the result rows.
``Cmd`` binds a handler to the arguments a statement method was called with.

Atomicity: ``put`` and ``put_writes`` are one script each (all of a thread's keys share a
slot), deleting a thread is one ``DEL``; the maintenance operations (prune, copy, delete
checkpoints) are a sequence of such steps, ordered so that a crash between them leaves
every stored checkpoint readable (rows are written after the values they name, and
deleted before them).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Generator, Sequence
from typing import Any

from threadline.errors import FilterError
from threadline.storage.dialect.base import Dialect, check_filter, metadata_matcher, split_filter
from threadline.storage import rows as R
from threadline.storage.redis import layout as L
from threadline.storage.redis.leases import RedisLeaseStatements, lease_keys
from threadline.storage.redis.records import RedisRecordsStatements
from threadline.storage.redis.lifecycle import RedisLifecycleStatements
from threadline.storage.redis.reads import RedisReadsStatements
from threadline.storage.redis.tags import RedisTagStatements
from threadline.storage.redis.transfer import RedisTransferStatements
from threadline.storage.redis.web import RedisWebStatements
from threadline.storage.redis.base import (
    Call, Cmd, Handler, all_threads, blob_row, by_thread, checkpoint_row, ck_row, expire_thread, frame, group, latest_of, pairs, rows_of, statement,
    thread_blobs_of, thread_checkpoint_rows, thread_hash, thread_writes_of, write_row,
)
from threadline.storage.schema import MIGRATIONS

# --- checkpoints ---------------------------------------------------------------------------


def checkpoint(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    tid, ns, cid = params
    raw = (yield [("HGET", d.keys(tid).ck, L.field(ns, cid))])[0]
    return [] if raw is None else [checkpoint_row(tid, ns, cid, raw)]


def latest_checkpoint(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    tid, ns = params
    found = yield from latest_of(d, tid, ns)
    return [] if found is None else [checkpoint_row(tid, ns, found[0], found[1])]


def latest_checkpoint_id(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    found = yield from latest_of(d, *params)
    return [] if found is None else [(found[0],)]


def checkpoint_column(index: int) -> Handler:
    def handler(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
        found = yield from checkpoint(d, params, many)
        return [(r[index],) for r in found]

    return handler


def thread_docs(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [(r[0], r[3]) for r in (yield from thread_checkpoint_rows(d, params, many))]


def thread_checkpoints(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [(r[0], r[1], r[2], r[3], r[4], r[9]) for r in (yield from thread_checkpoint_rows(d, params, many))]


def thread_checkpoint_full_rows(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    """``CHECKPOINT_ROW`` plus run_id."""
    tid = params[0]
    return [(tid, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[8], r[9], r[7]) for r in (yield from thread_checkpoint_rows(d, params, many))]


def has_checkpoints(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [(1,)] if (yield [("HLEN", d.keys(params[0]).ck)])[0] else []


def ancestors(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    """checkpoint_id, parent, checkpoint, metadata, checksum of a checkpoint and its ancestors."""
    tid, ns, cid = params[:3]
    rows = {r[1]: r for r in (yield from thread_checkpoint_rows(d, (tid,), False)) if r[0] == ns}
    out, seen = [], set()
    while cid in rows and cid not in seen:
        seen.add(cid)
        r = rows[cid]
        out.append((r[1], r[2], r[3], r[4], r[9]))
        cid = r[2]
    return out


def checkpoints_of_runs(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    wanted = set(params)
    out = []
    for tid in (yield from all_threads(d)):
        out += [(tid, r[0], r[1]) for r in (yield from thread_checkpoint_rows(d, (tid,), False)) if r[7] in wanted]
    return out


def insert_checkpoint_rows(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    """INSERT_CHECKPOINT_ROW: (thread_id, ns, cid, parent, checkpoint, metadata, step, source, run_id,
    created_at, checksum), insert-or-ignore."""
    cmds: list = []
    for tid, ns, cid, parent, doc, meta, step, source, run_id, created, checksum in rows_of(params, many):
        k, f = d.keys(tid), L.field(ns, cid)
        cmds += [("HSETNX", k.ck, f, L.pack_checkpoint((parent, doc, meta, step, source, run_id, created, checksum))), ("ZADD", k.ids, 0, f)]
    yield cmds
    return []


def _update_checkpoints(d: RedisDialect, rows: Sequence[Sequence[Any]], change: Callable[[list, Sequence[Any]], None]) -> Generator:
    """Rewrite stored checkpoint rows: ``rows`` end with (thread_id, ns, cid); ``change(row, params)``."""
    keys = [(r[-3], r[-2], r[-1]) for r in rows]
    found = yield [("HGET", d.keys(t).ck, L.field(ns, cid)) for t, ns, cid in keys]
    cmds = []
    for r, (t, ns, cid), raw in zip(rows, keys, found):
        if raw is not None:
            row = ck_row(t, ns, cid, raw)
            change(row, r)
            cmds.append(("HSET", d.keys(t).ck, L.field(ns, cid), L.pack_checkpoint(row)))
    if cmds:
        yield cmds
    return []


def set_parent(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[0], row[7] = p[0], p[1]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_checksum(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[7] = p[0]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_checkpoint_doc(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[1], row[7] = p[0], p[1]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_metadata(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[2], row[7] = p[0], p[1]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_created_at(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[6] = p[0]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def delete_checkpoint(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    cmds: list = []
    for tid, ns, cid in rows_of(params, many):
        k, f = d.keys(tid), L.field(ns, cid)
        cmds += [("ZREM", k.ids, f), ("HDEL", k.ck, f)]
    yield cmds
    return []


# --- blobs -----------------------------------------------------------------------------------


def blob_chains(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    keys = group(params, 4)
    threads = by_thread(keys)
    found = yield [Call("chains", d.keys(t), [L.field(*k[1:]) for k in ks]) for t, ks in threads.items()]
    return [blob_row(t, f, raw) for t, reply in zip(threads, found) for f, raw in pairs(reply)]


def _blobs_by_keys(d: RedisDialect, keys: Sequence[Sequence[Any]]) -> Generator:
    found = yield [("HGET", d.keys(k[0]).bl, L.field(*k[1:4])) for k in keys]
    return [(k, raw) for k, raw in zip(keys, found) if raw is not None]


def blob_sizes_by_keys(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    found = yield from _blobs_by_keys(d, group(params, 4))
    return [(k[2], k[3], L.unpack_blob(raw, f"blob {tuple(k)!r}")[0], L.blob_size(raw)) for k, raw in found]


def blobs_with_value(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    empty = params[-1]
    found = yield from _blobs_by_keys(d, group(params[:-1], 4))
    return [(k[2], k[3]) for k, raw in found if L.unpack_blob(raw, f"blob {tuple(k)!r}")[0] != empty]


def insert_blobs(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    """INSERT_BLOB: insert-or-ignore of (thread_id, ns, channel, version, type, blob, base_version)."""
    yield [("HSETNX", d.keys(r[0]).bl, L.field(*r[1:4]), L.pack_blob(r[4], r[5], r[6])) for r in rows_of(params, many)]
    return []


def thread_blobs(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return (yield from thread_blobs_of(d, params[0]))


def thread_blob_bases(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [(b[1], b[2], b[3], b[6]) for b in (yield from thread_blobs_of(d, params[0]))]


def thread_blobs_like(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    tid, pattern = params
    if not pattern.endswith("%") or any(c in pattern[:-1] for c in "%_"):
        raise ValueError(f"the Redis statements match a type by prefix only ('…%'), got {pattern!r}")
    return [b for b in (yield from thread_blobs_of(d, tid)) if b[4].startswith(pattern[:-1])]


def thread_blobs_not_of_type(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    tid, type_ = params
    return [(b[1], b[2], b[3]) for b in (yield from thread_blobs_of(d, tid)) if b[4] != type_]


def thread_blob_sizes(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    found = yield from thread_hash(d, params[0], "bl")
    return [(*b[1:5], b[6], L.blob_size(raw)) for b, raw in ((blob_row(params[0], f, raw), raw) for f, raw in found)]


def set_blob_value(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
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


def delete_blob(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    yield [("HDEL", d.keys(r[0]).bl, L.field(*r[1:4])) for r in rows_of(params, many)]
    return []


# --- writes ----------------------------------------------------------------------------------


def insert_writes(d: RedisDialect, params: Sequence[Any], many: bool, replace: bool, live: bool, fenced: int = 0) -> Generator:
    """(WRITE_COLUMNS, created_at) rows → task_id, idx of those inserted (none with ``replace``);
    ``live`` as the SQL statement's (a running graph's writes, all of one checkpoint); ``fenced``
    as the SQL statement's (thread_id, holder, token, then the rows' parameters; one thread)."""
    fence = params[:3] if fenced else None
    rows = list(group(params[3:], 10)) if fenced else rows_of(params, many)
    threads = by_thread(rows)
    calls = []
    for tid, part in threads.items():
        args: list[Any] = ["1" if replace else "0", L.field(part[0][1], part[0][2]) if live else ""]
        for r in part:
            args += [L.field(r[1], r[2], r[3], r[4]), L.pack((r[5], r[6], r[7], r[8], r[9]))]
        if fence is None:
            calls.append(Call("writes", d.keys(tid), [frame(args)]))
        else:
            calls.append(Call("writes", (*d.keys(tid), L.lease_key(d.prefix, tid)), [frame(args), fence[1], str(fence[2])]))
    found = yield calls
    if fence is not None:
        reply = found[0] if found else []
        return [(None, 0)] if 0 in reply else [(None, 1)] + ([] if replace else [(rows[i - 1][3], rows[i - 1][4]) for i in reply])
    if replace:
        return []
    return [(part[i - 1][3], part[i - 1][4]) for part, reply in zip(threads.values(), found) for i in reply]


def _writes_of(d: RedisDialect, checkpoints: Sequence[Sequence[Any]]) -> Generator:
    """Every write of (thread_id, ns, checkpoint_id) keys: WRITE_COLUMNS plus created_at."""
    threads = by_thread(checkpoints)
    found = yield [Call("writes_of", d.keys(t), [L.field(k[1], k[2]) for k in ks]) for t, ks in threads.items()]
    return [write_row(t, f, raw) for t, reply in zip(threads, found) for f, raw in pairs(reply)]


def writes_by_keys(d: RedisDialect, params: Sequence[Any], many: bool, channel: bool) -> Generator:
    keys = group(params[:-1] if channel else params, 3)
    rows = yield from _writes_of(d, keys)
    if channel:
        rows = [w for w in rows if w[5] == params[-1]]
    rows.sort(key=lambda w: (w[6], w[3], w[4]))  # LangGraph's writes_sort_key
    return [w[:9] for w in rows]


def writes_by_write_keys(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    keys = group(params, 5)
    found = yield [("HGET", d.keys(k[0]).wr, L.field(*k[1:])) for k in keys]
    return [write_row(k[0], L.field(*k[1:]), raw)[:9] for k, raw in zip(keys, found) if raw is not None]


def thread_writes(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return (yield from thread_writes_of(d, params[0]))


def thread_write_keys(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [w[1:5] for w in (yield from thread_writes_of(d, params[0]))]


def checkpoints_writing(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    tid, channel = params
    return sorted({(w[1], w[2]) for w in (yield from thread_writes_of(d, tid)) if w[5] == channel})


def channel_writes(d: RedisDialect, params: Sequence[Any], many: bool, checkpoints: int) -> Generator:
    tid, ns = params[:2]
    cids, channels = params[2 : 2 + checkpoints], set(params[2 + checkpoints :])
    rows = yield from _writes_of(d, [(tid, ns, c) for c in cids])
    return [(w[2], w[3], w[5], w[7], w[8], w[6], w[4]) for w in rows if w[5] in channels]


def thread_write_sizes(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    sizes: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for w in (yield from thread_writes_of(d, params[0])):
        s = sizes[(w[1], w[2])]
        s[0] += 1
        s[1] += len(w[8] or b"")
    return [(ns, cid, n, b) for (ns, cid), (n, b) in sizes.items()]


def delete_writes(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    keys = rows_of(params, many)
    rows = yield from _writes_of(d, keys)
    cmds: list = [("HDEL", d.keys(w[0]).wr, L.field(*w[1:5])) for w in rows]
    cmds += [("HDEL", d.keys(tid).wix, L.field(ns, cid)) for tid, ns, cid in keys]
    yield cmds
    return []


# --- the thread index ------------------------------------------------------------------------


def thread_row(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    row = (yield [("HMGET", d.keys(params[0]).th, "created", "updated", "count", "bytes")])[0]
    return [] if row[0] is None else [(float(row[0]), float(row[1]), int(row[2]), int(row[3]))]


def restat_thread(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    tid = params[0]
    k = d.keys(tid)
    count, blobs, exists = yield [("HLEN", k.ck), ("HVALS", k.bl), ("EXISTS", k.th)]
    if exists:
        yield [("HSET", k.th, "count", count, "bytes", sum(L.blob_size(b) for b in blobs))]
    return []


def drop_empty_thread(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    k = d.keys(params[0])
    if int((yield [("HGET", k.th, "count")])[0] or 0) == 0:  # its rows: its record and tags stay, as on SQL
        yield [("DEL", k.ck, k.ids, k.bl, k.wr, k.wix, k.th), ("ZREM", d.index, params[0])]
    return []


def delete_thread(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    yield [("DEL", *d.keys(params[0]), *lease_keys(d.prefix, params[0])), ("ZREM", d.index, params[0])]
    return []


def ensure_thread(d: RedisDialect, params: Sequence[Any], many: bool, only_with_checkpoints: bool) -> Generator:
    tid, created, updated = params[:3]
    k = d.keys(tid)
    if only_with_checkpoints and not (yield [("HLEN", k.ck)])[0]:
        return []
    yield [("HSETNX", k.th, "created", created), ("HSETNX", k.th, "updated", updated), ("HSETNX", k.th, "count", 0),
           ("HSETNX", k.th, "bytes", 0), ("ZADD", d.index, "NX", updated, tid)]
    return []


def set_thread_ttl(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    minutes, tid = params
    yield [expire_thread(d, tid, minutes)]
    return []


def touch_read(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    now, tid = params
    yield [expire_thread(d, tid), ("HSET", d.keys(tid).th, "accessed", now)]
    return []


def get_checkpoint(d: RedisDialect, params: Sequence[Any], many: bool, latest: bool) -> Generator:
    """``Dialect.get_statement``'s parameters and rows in two round trips: the checkpoint row, then
    its blobs with their delta chains and its writes in one pipeline (the values the saver's
    cache holds, the last two parameters, are not fetched)."""
    tid, ns = params[0], params[1]
    k = d.keys(tid)
    if latest:
        found = yield from latest_of(d, tid, ns)
        if found is None:
            return []
        cid, raw = found
    else:
        cid = params[2]
        raw = (yield [("HGET", k.ck, L.field(ns, cid))])[0]
        if raw is None:
            return []
    row = checkpoint_row(tid, ns, cid, raw)
    doc = d.load_object(row[4], f"checkpoint ({tid!r}, {ns!r}, {cid!r})")  # parsed once: load_tuples takes it as is
    cached = set(zip(params[-2], params[-1]))
    fields = [L.field(ns, ch, v) for ch, v in R.blob_pairs(doc) if (ch, v) not in cached]
    blobs, writes = yield [Call("chains", k, fields), Call("writes_of", k, [L.field(ns, cid)])]
    out: list[tuple] = [(0, tid, ns, cid, row[3], row[7], row[9], None, row[6], row[8], doc, row[5], None)]
    for f, b in pairs(blobs):
        _, bns, ch, v, type_, blob, base = blob_row(tid, f, b)
        out.append((1, tid, bns, ch, v, type_, base, None, None, None, None, None, blob))
    rows = sorted((write_row(tid, f, w) for f, w in pairs(writes)), key=lambda w: (w[6], w[3], w[4]))
    out += [(2, tid, ns, cid, w[3], w[5], w[6], w[7], w[4], None, None, None, w[8]) for w in rows]
    return out


# --- put ---------------------------------------------------------------------------------------


def put_checkpoint(d: RedisDialect, params: Sequence[Any], many: bool, blobs: int, fenced: bool = False) -> Generator:
    """``Dialect.put_statement``'s parameters and result, as one script."""
    fence = params[-3:] if fenced else None
    tid, ns, cid, parent, doc, meta, step, source, run_id, created, checksum, expected, size, needs_parent, default_ttl = params[:15]
    args: list[Any] = [
        L.field(ns, cid), L.pack_checkpoint((parent, doc, meta, step, source, run_id, created, checksum)),
        L.field(ns, parent) if parent else "", "1" if needs_parent else "0", expected, size, repr(float(created)), default_ttl or 0, blobs,
    ]
    for b in group(params[15 : len(params) - 3 if fenced else None], 10):
        _, bns, ch, v, type_, blob, base, guard_type, guard_size, checked = b
        guarded = base is not None and guard_type is not None
        args += [L.field(bns, ch, v), L.pack_blob(type_, blob, base), L.field(bns, ch, base) if guarded else "",
                 guard_type or "", guard_size if guard_size is not None else 0, "1" if checked else "0"]
    args.append(tid)
    if fence is not None:  # the lease checked in the script; on a cluster the index once it held
        keys = (*d.keys(tid), L.lease_key(d.prefix, tid), *((d.index,) if d.single_node else ()))
        found = yield [Call("put", keys, [frame(args), fence[1], str(fence[2])])]
        if not d.single_node and int(found[-1][4]):
            yield [("ZADD", d.index, "GT", float(created), tid)]
    elif d.single_node:  # the thread index in the script: one command, not a pipeline of two
        found = yield [Call("put", (*d.keys(tid), d.index), [frame(args)])]
    else:
        found = yield [("ZADD", d.index, "GT", float(created), tid), Call("put", d.keys(tid), [frame(args)])]
    return [tuple(int(x) for x in found[-1])]


# --- listing --------------------------------------------------------------------------------


def list_checkpoints(d: RedisDialect, params: Sequence[Any], many: bool, selection: Any, after: bool) -> Generator:
    """``list``'s page, newest checkpoint_id first (then thread_id, checkpoint_ns, descending)."""
    size = params[-1]
    cursor = tuple(params[:3]) if after else None
    threads = [selection.thread_id] if selection.thread_id is not None else (yield from all_threads(d))
    found = yield [("ZRANGE", d.keys(t).ids, 0, -1) for t in threads]
    candidates = []
    for tid, members in zip(threads, found):
        for m in members:
            ns, cid = L.split(m, 2, f"checkpoint of thread {tid!r}")
            if selection.checkpoint_ns is not None and ns != selection.checkpoint_ns:
                continue
            if selection.checkpoint_id is not None and cid != selection.checkpoint_id:
                continue
            if selection.before_id is not None and not cid < selection.before_id:
                continue
            if cursor is not None and not (cid, tid, ns) < cursor:
                continue
            candidates.append((cid, tid, ns))
    candidates.sort(reverse=True)
    match = metadata_matcher(selection.filter) if selection.filter else None
    out: list[tuple] = []
    step = max(int(size), 16)
    for i in range(0, len(candidates), step):
        part = candidates[i : i + step]
        rows = yield [("HGET", d.keys(tid).ck, L.field(ns, cid)) for cid, tid, ns in part]
        for (cid, tid, ns), raw in zip(part, rows):
            if raw is None:
                continue
            row = checkpoint_row(tid, ns, cid, raw)
            if match is not None:
                meta = d.load_json(row[5], f"checkpoint ({tid!r}, {ns!r}, {cid!r})")
                if not isinstance(meta, dict) or not match(meta):
                    continue
            out.append(row)
            if len(out) == size:
                return out
    return out


# --- schema ---------------------------------------------------------------------------------


def tables(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [("threadline_migrations",)] if (yield [("EXISTS", d.migrations_key)])[0] else []


def applied_migrations(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [(int(v),) for v in (yield [("HKEYS", d.migrations_key)])[0]]


def record_migration(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    yield [("HSET", d.migrations_key, params[0], params[1])]
    return []


def nothing(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return []
    yield  # a generator


class RedisDialect(
    RedisRecordsStatements, RedisReadsStatements, RedisLifecycleStatements, RedisLeaseStatements, RedisTransferStatements,
    RedisWebStatements, RedisTagStatements, Dialect,
):
    """The named statements on Redis under a key ``prefix``."""

    offloads = False  # no object sweep statements (storage/dialect/objects.py): offload is SQL only

    name = "redis"
    types: dict[str, str] = {}
    max_params = 1 << 20
    setup_lock = None
    official_tables = ("\x00none",)  # no official saver shares these keys: nothing to adopt
    migrates_parent_sends = False
    echoes_config = False
    replaced_write_columns = ()
    reput_sets_parent = True  # the official RedisSaver writes a checkpoint put again whole
    prune_refuses_delta_threads = False
    single_node = False  # set by the saver once its client is known not to be a cluster's

    def __init__(self, prefix: str = "threadline") -> None:
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "{}\x00"):
            raise ValueError(f"key prefix must be a non-empty string without braces or NUL, got {prefix!r}")
        self.prefix = prefix
        self.index = f"{prefix}:threads"
        self.migrations_key = f"{prefix}:migrations"

    def keys(self, thread_id: str) -> L.ThreadKeys:
        return L.thread_keys(self.prefix, thread_id)

    # statements with parameters in their name (the SQL dialects' methods)
    def put_statement(self, blobs: int, fenced: bool = False) -> Cmd:
        return Cmd(put_checkpoint, (blobs, fenced) if fenced else (blobs,), "put")

    def get_statement(self, latest: bool) -> Cmd:  # type: ignore[override]
        return GET_LATEST if latest else GET_CHECKPOINT

    def insert_writes(self, replace: bool, live: bool = False, fenced: int = 0) -> Cmd:  # type: ignore[override]
        return Cmd(insert_writes, (replace, live, fenced) if fenced else (replace, live), "insert_writes")

    def writes_by_keys(self, count: int, channel: bool = False) -> Cmd:
        return Cmd(writes_by_keys, (channel,), "writes_by_keys")

    def channel_writes(self, checkpoints: int, channels: int) -> Cmd:
        return Cmd(channel_writes, (checkpoints,), "channel_writes")

    def list_where(self, selection: Any) -> tuple[Any, list[Any]]:
        if selection.filter:
            check_filter(selection.filter)
            split_filter(selection.filter)  # FilterError for an unknown operator before anything runs
            try:
                json.dumps(dict(selection.filter))
            except (TypeError, ValueError) as exc:
                raise FilterError(f"metadata filter cannot be matched: {exc}") from exc
        return selection, []

    def list_checkpoints(self, where: Any, after: bool) -> Cmd:
        return Cmd(list_checkpoints, (where, after), "list_checkpoints")

    def migrations(self) -> list[tuple[int, list[str]]]:
        return [(v, []) for v, _ in MIGRATIONS]

    def create_migrations_table(self) -> Cmd:  # type: ignore[override]
        return NOTHING

    def delete_by_keys(self, table: str, key: Sequence[str]) -> None:
        return None

    def blob_chains(self, count: int) -> Cmd:  # type: ignore[override]
        return BLOB_CHAINS

    def blob_sizes_by_keys(self, count: int) -> Cmd:  # type: ignore[override]
        return BLOB_SIZES

    def blobs_with_value(self, count: int) -> Cmd:  # type: ignore[override]
        return BLOBS_WITH_VALUE

    def writes_by_write_keys(self, count: int) -> Cmd:  # type: ignore[override]
        return WRITES_BY_WRITE_KEYS

    def checkpoints_of_runs(self, count: int) -> Cmd:  # type: ignore[override]
        return CHECKPOINTS_OF_RUNS

    def restat_thread(self) -> Cmd:  # type: ignore[override]
        return RESTAT_THREAD

    def thread_blob_sizes(self) -> Cmd:  # type: ignore[override]
        return THREAD_BLOB_SIZES

    def thread_write_sizes(self) -> Cmd:  # type: ignore[override]
        return THREAD_WRITE_SIZES


NOTHING = statement(nothing)
GET_LATEST = Cmd(get_checkpoint, (True,), "get_latest")
GET_CHECKPOINT = Cmd(get_checkpoint, (False,), "get_checkpoint")
BLOB_CHAINS = statement(blob_chains)
BLOB_SIZES = statement(blob_sizes_by_keys)
BLOBS_WITH_VALUE = statement(blobs_with_value)
WRITES_BY_WRITE_KEYS = statement(writes_by_write_keys)
CHECKPOINTS_OF_RUNS = statement(checkpoints_of_runs)
RESTAT_THREAD = statement(restat_thread)
THREAD_BLOB_SIZES = statement(thread_blob_sizes)
THREAD_WRITE_SIZES = statement(thread_write_sizes)

# the named statements that are attributes on the SQL dialects
for _name, _fn in {
    "tables_sql": tables,
    "APPLIED_MIGRATIONS": applied_migrations,
    "RECORD_MIGRATION": record_migration,
    "CHECKPOINT": checkpoint,
    "LATEST_CHECKPOINT": latest_checkpoint,
    "LATEST_CHECKPOINT_ID": latest_checkpoint_id,
    "CHECKPOINT_DOC": checkpoint_column(4),
    "CHECKPOINT_PARENT": checkpoint_column(3),
    "THREAD_DOCS": thread_docs,
    "THREAD_CHECKPOINTS": thread_checkpoints,
    "THREAD_CHECKPOINT_ROWS": thread_checkpoint_full_rows,
    "HAS_CHECKPOINTS": has_checkpoints,
    "ANCESTORS": ancestors,
    "SET_PARENT": set_parent,
    "SET_CHECKSUM": set_checksum,
    "SET_CHECKPOINT_DOC": set_checkpoint_doc,
    "SET_CREATED_AT": set_created_at,
    "SET_METADATA": set_metadata,
    "DELETE_CHECKPOINT": delete_checkpoint,
    "INSERT_CHECKPOINT_ROW": insert_checkpoint_rows,
    "INSERT_BLOB": insert_blobs,
    "THREAD_BLOBS": thread_blobs,
    "THREAD_BLOB_BASES": thread_blob_bases,
    "THREAD_BLOBS_LIKE": thread_blobs_like,
    "THREAD_BLOBS_NOT_OF_TYPE": thread_blobs_not_of_type,
    "SET_BLOB_VALUE": set_blob_value,
    "DELETE_BLOB": delete_blob,
    "DELETE_WRITES": delete_writes,
    "THREAD_WRITES": thread_writes,
    "THREAD_WRITE_KEYS": thread_write_keys,
    "CHECKPOINTS_WRITING": checkpoints_writing,
    "THREAD": thread_row,
    "DROP_EMPTY_THREAD": drop_empty_thread,
    "SET_THREAD_TTL": set_thread_ttl,
    "TOUCH_READ": touch_read,
}.items():
    setattr(RedisDialect, _name, statement(_fn))
RedisDialect.DELETE_THREAD = (statement(delete_thread),)  # type: ignore[assignment]
RedisDialect.ENSURE_THREAD = Cmd(ensure_thread, (False,), "ENSURE_THREAD")  # type: ignore[assignment]
RedisDialect.ENSURE_COPIED_THREAD = Cmd(ensure_thread, (True,), "ENSURE_COPIED_THREAD")  # type: ignore[assignment]
