"""The checkpoint rows' named statements on Redis (``storage/dialect/statements.py`` names them):
a thread's ``ck`` hash (checkpoint_ns, checkpoint_id → the row without values) and its ``ids``
sorted set, read and rewritten by handlers (``storage/redis/base.py``); ``list``'s page too."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

from threadline.storage.dialect.base import metadata_matcher
from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Handler, all_threads, checkpoint_row, ck_row, latest_of, rows_of, thread_checkpoint_rows


def checkpoint(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, ns, cid = params
    raw = (yield [("HGET", d.keys(tid).ck, L.field(ns, cid))])[0]
    return [] if raw is None else [checkpoint_row(tid, ns, cid, raw)]


def latest_checkpoint(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, ns = params
    found = yield from latest_of(d, tid, ns)
    return [] if found is None else [checkpoint_row(tid, ns, found[0], found[1])]


def latest_checkpoint_id(d: Any, params: Sequence[Any], many: bool) -> Generator:
    found = yield from latest_of(d, *params)
    return [] if found is None else [(found[0],)]


def checkpoint_column(index: int) -> Handler:
    def handler(d: Any, params: Sequence[Any], many: bool) -> Generator:
        found = yield from checkpoint(d, params, many)
        return [(r[index],) for r in found]

    return handler


def thread_docs(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(r[0], r[3]) for r in (yield from thread_checkpoint_rows(d, params, many))]


def thread_checkpoints(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(r[0], r[1], r[2], r[3], r[4], r[9]) for r in (yield from thread_checkpoint_rows(d, params, many))]


def thread_checkpoint_full_rows(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """``CHECKPOINT_ROW`` plus run_id."""
    tid = params[0]
    return [(tid, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[8], r[9], r[7]) for r in (yield from thread_checkpoint_rows(d, params, many))]


def has_checkpoints(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(1,)] if (yield [("HLEN", d.keys(params[0]).ck)])[0] else []


def ancestors(d: Any, params: Sequence[Any], many: bool) -> Generator:
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


def checkpoints_of_runs(d: Any, params: Sequence[Any], many: bool) -> Generator:
    wanted = set(params)
    out = []
    for tid in (yield from all_threads(d)):
        out += [(tid, r[0], r[1]) for r in (yield from thread_checkpoint_rows(d, (tid,), False)) if r[7] in wanted]
    return out


def insert_checkpoint_rows(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """INSERT_CHECKPOINT_ROW: (thread_id, ns, cid, parent, checkpoint, metadata, step, source, run_id,
    created_at, checksum), insert-or-ignore."""
    cmds: list = []
    for tid, ns, cid, parent, doc, meta, step, source, run_id, created, checksum in rows_of(params, many):
        k, f = d.keys(tid), L.field(ns, cid)
        cmds += [("HSETNX", k.ck, f, L.pack_checkpoint((parent, doc, meta, step, source, run_id, created, checksum))), ("ZADD", k.ids, 0, f)]
    yield cmds
    return []


def _update_checkpoints(d: Any, rows: Sequence[Sequence[Any]], change: Callable[[list, Sequence[Any]], None]) -> Generator:
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


def set_parent(d: Any, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[0], row[7] = p[0], p[1]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_checksum(d: Any, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[7] = p[0]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_checkpoint_doc(d: Any, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[1], row[7] = p[0], p[1]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_metadata(d: Any, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[2], row[7] = p[0], p[1]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def set_created_at(d: Any, params: Sequence[Any], many: bool) -> Generator:
    def change(row: list, p: Sequence[Any]) -> None:
        row[6] = p[0]

    return (yield from _update_checkpoints(d, rows_of(params, many), change))


def delete_checkpoint(d: Any, params: Sequence[Any], many: bool) -> Generator:
    cmds: list = []
    for tid, ns, cid in rows_of(params, many):
        k, f = d.keys(tid), L.field(ns, cid)
        cmds += [("ZREM", k.ids, f), ("HDEL", k.ck, f)]
    yield cmds
    return []


def list_checkpoints(d: Any, params: Sequence[Any], many: bool, selection: Any, after: bool) -> Generator:
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
