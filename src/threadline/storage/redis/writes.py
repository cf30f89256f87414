"""The pending writes' named statements on Redis (``storage/dialect/writes.py`` names them): a
thread's ``wr`` hash (checkpoint_ns, checkpoint_id, task_id, idx → the write) with its ``wix``
index per checkpoint, written by the ``writes`` script and read by ``writes_of``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Call, by_thread, frame, group, pairs, rows_of, thread_writes_of, write_row


def insert_writes(d: Any, params: Sequence[Any], many: bool, replace: bool, live: bool, fenced: int = 0, returning: bool = True) -> Generator:
    """(WRITE_COLUMNS, created_at) rows → task_id, idx of those inserted (none with ``replace``);
    without ``returning``, ``[(rows written,)]`` as the SQL statement run counted gives;
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
        return [] if returning else [(len(rows),)]
    inserted = [(part[i - 1][3], part[i - 1][4]) for part, reply in zip(threads.values(), found) for i in reply]
    return inserted if returning else [(len(inserted),)]


def _writes_of(d: Any, checkpoints: Sequence[Sequence[Any]]) -> Generator:
    """Every write of (thread_id, ns, checkpoint_id) keys: WRITE_COLUMNS plus created_at."""
    threads = by_thread(checkpoints)
    found = yield [Call("writes_of", d.keys(t), [L.field(k[1], k[2]) for k in ks]) for t, ks in threads.items()]
    return [write_row(t, f, raw) for t, reply in zip(threads, found) for f, raw in pairs(reply)]


def writes_by_keys(d: Any, params: Sequence[Any], many: bool, channel: bool) -> Generator:
    keys = group(params[:-1] if channel else params, 3)
    rows = yield from _writes_of(d, keys)
    if channel:
        rows = [w for w in rows if w[5] == params[-1]]
    rows.sort(key=lambda w: (w[6], w[3], w[4]))  # LangGraph's writes_sort_key
    return [w[:9] for w in rows]


def writes_by_write_keys(d: Any, params: Sequence[Any], many: bool) -> Generator:
    keys = group(params, 5)
    found = yield [("HGET", d.keys(k[0]).wr, L.field(*k[1:])) for k in keys]
    return [write_row(k[0], L.field(*k[1:]), raw)[:9] for k, raw in zip(keys, found) if raw is not None]


def thread_writes(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return (yield from thread_writes_of(d, params[0]))


def thread_write_keys(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [w[1:5] for w in (yield from thread_writes_of(d, params[0]))]


def checkpoints_writing(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, channel = params
    return sorted({(w[1], w[2]) for w in (yield from thread_writes_of(d, tid)) if w[5] == channel})


def channel_writes(d: Any, params: Sequence[Any], many: bool, checkpoints: int) -> Generator:
    tid, ns = params[:2]
    cids, channels = params[2 : 2 + checkpoints], set(params[2 + checkpoints :])
    rows = yield from _writes_of(d, [(tid, ns, c) for c in cids])
    return [(w[2], w[3], w[5], w[7], w[8], w[6], w[4]) for w in rows if w[5] in channels]


def thread_write_sizes(d: Any, params: Sequence[Any], many: bool) -> Generator:
    sizes: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for w in (yield from thread_writes_of(d, params[0])):
        s = sizes[(w[1], w[2])]
        s[0] += 1
        s[1] += len(w[8] or b"")
    return [(ns, cid, n, b) for (ns, cid), (n, b) in sizes.items()]


def delete_writes(d: Any, params: Sequence[Any], many: bool) -> Generator:
    keys = rows_of(params, many)
    rows = yield from _writes_of(d, keys)
    cmds: list = [("HDEL", d.keys(w[0]).wr, L.field(*w[1:5])) for w in rows]
    cmds += [("HDEL", d.keys(tid).wix, L.field(ns, cid)) for tid, ns, cid in keys]
    yield cmds
    return []
