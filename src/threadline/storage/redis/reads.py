"""The named statements of ``threadline.read`` on Redis: the names, parameters and rows of
``storage/dialect/reads.py``, each a handler (``storage/redis/base.py``).

Aggregations (counts, sums, groups) are computed here over a thread's keys; what spans
threads lists them from the ``<prefix>:threads`` index (never KEYS or SCAN) and reads their
keys side by side (``lockstep``: one pipeline a round, whatever the number of threads). A
thread of the index whose keys are gone (expired by its TTL) has no ``th`` row and is no
thread any more, as a swept row on the SQL backends. Byte counts are those of the SQL
statements on the same values: a checkpoint's JSON text, a blob's and a write's stored value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage import rows as R
from threadline.keys import is_reserved
from threadline.storage.dialect.reads import ThreadFilter, WriteSelection, counted
from threadline.storage.ops.read import Selection
from threadline.storage.redis import layout as L
from threadline.storage.redis.base import (
    Call, Cmd, all_threads, ck_row, latest_of, statement, text, thread_checkpoint_rows, thread_writes_of, write_row,
)

# --- running handlers side by side ------------------------------------------------------------


def lockstep(handlers: Sequence[Generator]) -> Generator[list, list, list]:
    """Run handler generators side by side: each round sends the commands all of them wait on
    as one batch (one round trip) and hands each its replies. Returns their results, in order."""
    results: list[Any] = [None] * len(handlers)
    waiting: dict[int, list] = {}
    for i, h in enumerate(handlers):
        try:
            waiting[i] = next(h)
        except StopIteration as stop:
            results[i] = stop.value
    while waiting:
        replies = yield [c for batch in waiting.values() for c in batch]
        start, following = 0, {}
        for i, batch in waiting.items():
            part, start = replies[start : start + len(batch)], start + len(batch)
            try:
                following[i] = handlers[i].send(part)
            except StopIteration as stop:
                results[i] = stop.value
        waiting = following
    return results


def run(d: Any, cmd: Cmd, params: Sequence[Any]) -> Generator:
    """The handler of one of the dialect's named statements, on ``params``."""
    return cmd.handler(d, params, False, *cmd.bound)


# --- what several statements read ----------------------------------------------------------


def _threads(d: Any, thread_ids: Sequence[str] | None) -> Generator:
    """The threads of a scope: the given ones (each once) or every thread of the index."""
    return list(dict.fromkeys(thread_ids)) if thread_ids is not None else (yield from all_threads(d))


def _index_rows(d: Any, tids: Sequence[str]) -> Generator:
    """(thread_id, created_at, updated_at, checkpoint_count, bytes) of those of ``tids`` that
    have an index row (``THREAD``)."""
    found = yield from lockstep([run(d, d.THREAD, (t,)) for t in tids])
    return [(t, *rows[0]) for t, rows in zip(tids, found) if rows]


def checkpoints_of(d: Any, tids: Sequence[str]) -> Generator:
    """Per checkpoint of the threads: (thread_id, checkpoint_ns, checkpoint_id, parent, checkpoint,
    metadata, step, source, run_id, created_at, checksum)."""
    found = yield from lockstep([thread_checkpoint_rows(d, (t,), False) for t in tids])
    return [(t, *r) for t, rows in zip(tids, found) for r in rows]


def _blob_sizes(d: Any, tids: Sequence[str]) -> Generator:
    """(thread_id, checkpoint_ns, channel, version) → stored bytes of every blob of the threads."""
    found = yield from lockstep([run(d, d.thread_blob_sizes(), (t,)) for t in tids])
    return {(t, b[0], b[1], b[2]): b[5] for t, rows in zip(tids, found) for b in rows}


def _writes(d: Any, s: WriteSelection) -> Generator:
    """The write rows (``rows.WRITE_COLUMNS`` plus created_at) ``s`` selects: one checkpoint's
    through its write list, else every write of the threads, filtered."""
    if s.thread_id is not None and s.checkpoint_ns is not None and s.checkpoint_id is not None:
        reply = (yield [Call("writes_of", d.keys(s.thread_id), [L.field(s.checkpoint_ns, s.checkpoint_id)])])[0]
        rows = [write_row(s.thread_id, f, raw) for f, raw in zip(reply[::2], reply[1::2])]
    else:
        tids = yield from _threads(d, None if s.thread_id is None else (s.thread_id,))
        rows = [w for part in (yield from lockstep([thread_writes_of(d, t) for t in tids])) for w in part]
    return [
        w for w in rows
        if (s.checkpoint_ns is None or w[1] == s.checkpoint_ns) and (s.checkpoint_id is None or w[2] == s.checkpoint_id)
        and (s.since is None or w[9] >= s.since)
    ]


def value_size(value: bytes | str | None) -> int:
    """Stored bytes of a value or of JSON text, as the SQL backends count them (NULL: 0)."""
    return len(value.encode() if isinstance(value, str) else value or b"")


# --- threads -----------------------------------------------------------------------------------


def all_thread_ids(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(r[0],) for r in sorted((yield from _index_rows(d, (yield from all_threads(d)))))]


def kept_threads(d: Any, f: ThreadFilter) -> Generator:
    """The index rows (``_index_rows``) of the threads ``f`` keeps."""
    rows = [
        r for r in (yield from _index_rows(d, (yield from _threads(d, f.thread_ids))))
        if not is_reserved(r[0]) and (f.updated_until is None or r[2] <= f.updated_until) and (f.updated_since is None or r[2] >= f.updated_since)
    ]
    if f.metadata:
        # ``list(filter=…)``'s own matching: one checkpoint that matches is enough
        found = yield from lockstep([run(d, d.list_checkpoints(Selection(thread_id=r[0], filter=f.metadata), False), [1]) for r in rows])
        rows = [r for r, matched in zip(rows, found) if matched]
    return rows


def count_threads(d: Any, params: Sequence[Any], many: bool, f: ThreadFilter) -> Generator:
    return [(len((yield from kept_threads(d, f))),)]


_ORDER_KEYS = {
    "updated": lambda r: (-r[2], r[0]),
    "created": lambda r: (-r[1], r[0]),
    "bytes": lambda r: (-r[4], r[0]),
    "thread_id": lambda r: r[0],
}


def threads_page(d: Any, params: Sequence[Any], many: bool, f: ThreadFilter, order_by: str, limit: int, offset: int) -> Generator:
    page = sorted((yield from kept_threads(d, f)), key=_ORDER_KEYS[order_by])[offset : offset + limit]
    heads = yield from lockstep([latest_of(d, r[0], "") for r in page])
    out = []
    for r, head in zip(page, heads):
        if head is None:
            out.append((*r, None, None, None))
        else:
            row = ck_row(r[0], "", head[0], head[1])
            out.append((*r, head[0], row[3], row[4]))
    return out


def known_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(1,)] if (yield [("EXISTS", *d.keys(params[0]))])[0] else []


def threads_with_prefix(d: Any, params: Sequence[Any], many: bool, prefix: str) -> Generator:
    tids = [t for t in (yield from all_threads(d)) if t.startswith(prefix)]
    return [(r[0],) for r in (yield from _index_rows(d, tids))]


# --- checkpoints ---------------------------------------------------------------------------------


def checkpoint_id(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, ns, cid = params
    return [(cid,)] if (yield [("HEXISTS", d.keys(tid).ck, L.field(ns, cid))])[0] else []


def namespace_checkpoints(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, ns = params
    return sorted((r[1], r[2], r[5]) for r in (yield from thread_checkpoint_rows(d, (tid,), False)) if r[0] == ns)


def history_checkpoints(d: Any, params: Sequence[Any], many: bool, tid: str, ns: str | None) -> Generator:
    rows = (yield from thread_checkpoint_rows(d, (tid,), False))
    return sorted((r[0], r[1], r[2], r[5], r[6], r[8], r[4], r[3]) for r in rows if ns is None or r[0] == ns)


def heads(d: Any, params: Sequence[Any], many: bool, ns: str, thread_ids: Sequence[str] | None, recent: int | None) -> Generator:
    if thread_ids is not None:
        tids = list(dict.fromkeys(thread_ids))
    elif recent is not None:
        tids = [text(t) for t in (yield [("ZRANGE", d.index, 0, recent - 1, "REV")])[0]] if recent > 0 else []
    else:
        tids = yield from all_threads(d)
    found = yield from lockstep([latest_of(d, t, ns) for t in tids])
    rows = []
    for tid, head in sorted(((t, h) for t, h in zip(tids, found) if h is not None), key=lambda p: p[0]):
        p, doc, meta, step, source, _run, created, checksum = ck_row(tid, ns, head[0], head[1])
        rows.append((tid, ns, head[0], p, doc, meta, step, source, created, checksum))
    return rows


def push_candidates(d: Any, params: Sequence[Any], many: bool, tid: str, ns: str, checkpoint_ids: Sequence[str]) -> Generator:
    rows = [r for r in (yield from thread_checkpoint_rows(d, (tid,), False)) if r[0] == ns]
    wanted = set(checkpoint_ids)
    head = max((r[1] for r in rows), default=None)
    return [(r[1], r[5], r[3]) for r in rows if r[1] in wanted or r[2] in wanted or r[1] == head]


# --- pending writes -----------------------------------------------------------------------------


def checkpoint_write_tasks(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(w[3], w[4], w[6], w[9]) for w in (yield from _writes(d, WriteSelection(*params)))]


def write_counts(d: Any, params: Sequence[Any], many: bool, tid: str, ns: str | None, channel: str) -> Generator:
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for w in (yield from _writes(d, WriteSelection(tid, ns))):
        c = counts[(w[1], w[2])]
        c[0] += 1
        c[1] += w[5] == channel
    return [(ns_, cid, n, hits) for (ns_, cid), (n, hits) in counts.items()]


def audit_writes(d: Any, params: Sequence[Any], many: bool, s: WriteSelection, limit: int | None, offset: int) -> Generator:
    rows = sorted((yield from _writes(d, s)), key=lambda w: (w[1], w[2], w[9], w[6], w[3], w[4]))
    if limit is not None:
        rows = rows[int(offset) : int(offset) + int(limit)]
    return [(*w[:8], value_size(w[8]), w[9]) for w in rows]


def task_groups(d: Any, params: Sequence[Any], many: bool, s: WriteSelection, task_id: str) -> Generator:
    groups: dict[tuple[str, int], list[Any]] = defaultdict(lambda: [0, 0, set()])
    for w in (yield from _writes(d, s)):
        g = groups[(w[6], int(w[3] == task_id))]
        g[0] += 1
        g[1] += value_size(w[8])
        g[2].add(w[3])
    return [(path, is_task, n, size, len(tasks)) for (path, is_task), (n, size, tasks) in groups.items()]


def path_task_totals(d: Any, params: Sequence[Any], many: bool, s: WriteSelection, prefix: str) -> Generator:
    totals: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for w in (yield from _writes(d, s)):
        if w[6].startswith(prefix):
            t = totals[(w[0], w[1], w[2], w[3], w[6])]
            t[0] += 1
            t[1] += value_size(w[8])
    return [(*key, n, size) for key, (n, size) in totals.items()]


def path_tasks(d: Any, params: Sequence[Any], many: bool, tid: str, ns: str | None, prefix: str) -> Generator:
    return sorted({(w[1], w[2], w[3], w[6]) for w in (yield from _writes(d, WriteSelection(tid, ns))) if w[6].startswith(prefix)})


# --- sizes -------------------------------------------------------------------------------------------


def blob_totals(d: Any, params: Sequence[Any], many: bool, tid: str | None, ns: str | None) -> Generator:
    sizes = [s for k, s in (yield from _blob_sizes(d, (yield from _threads(d, None if tid is None else (tid,))))).items() if ns is None or k[1] == ns]
    return [(len(sizes), sum(sizes))]


def table_totals(d: Any, params: Sequence[Any], many: bool, table: str, thread_ids: Sequence[str] | None) -> Generator:
    tids = yield from _threads(d, thread_ids)
    if table == "checkpoints":
        sizes = [value_size(c[4]) + value_size(c[5]) for c in (yield from checkpoints_of(d, tids))]
    elif table == "blobs":
        sizes = list((yield from _blob_sizes(d, tids)).values())
    else:  # writes
        sizes = [value_size(w[8]) for part in (yield from lockstep([thread_writes_of(d, t) for t in tids])) for w in part]
    return [(len(sizes), sum(sizes))]


def thread_count(d: Any, params: Sequence[Any], many: bool, thread_ids: Sequence[str] | None) -> Generator:
    return [(len((yield from _index_rows(d, (yield from _threads(d, thread_ids))))),)]


def namespace_count(d: Any, params: Sequence[Any], many: bool, thread_ids: Sequence[str] | None) -> Generator:
    tids = yield from _threads(d, thread_ids)
    found = (yield [("HKEYS", d.keys(t).ck) for t in tids]) if tids else []
    return [(len({(t, L.split(f, 2, f"checkpoint of thread {t!r}")[0]) for t, fields in zip(tids, found) for f in fields}),)]


def source_counts(d: Any, params: Sequence[Any], many: bool, thread_ids: Sequence[str] | None) -> Generator:
    counts: dict[str | None, int] = defaultdict(int)
    for c in (yield from checkpoints_of(d, (yield from _threads(d, thread_ids)))):
        counts[c[7]] += 1
    return sorted(counts.items(), key=lambda p: (p[0] is not None, p[0] or ""))


def _states(d: Any, thread_ids: Sequence[str] | None) -> Generator:
    """Per checkpoint of the threads naming a channel: the stored bytes of each blob its
    ``channel_versions`` name (0 for one not stored)."""
    tids = yield from _threads(d, thread_ids)
    checkpoints = yield from checkpoints_of(d, tids)
    sizes = yield from _blob_sizes(d, tids)
    out = []
    for c in checkpoints:
        pairs = R.blob_pairs(d.load_object(c[4], f"checkpoint ({c[0]!r}, {c[1]!r}, {c[2]!r})"))
        if pairs:
            out.append([sizes.get((c[0], c[1], ch, v), 0) for ch, v in pairs])
    return out


def reference_totals(d: Any, params: Sequence[Any], many: bool, thread_ids: Sequence[str] | None) -> Generator:
    states = yield from _states(d, thread_ids)
    return [(sum(len(s) for s in states), sum(sum(s) for s in states))]


def _bucket_counts(values: Sequence[float], bounds: Sequence[float]) -> list[int]:
    return [sum(1 for v in values if lo <= v < hi) for lo, hi in zip(bounds, bounds[1:])]


def checkpoint_counts(d: Any, params: Sequence[Any], many: bool, thread_ids: Sequence[str] | None, bounds: Sequence[float]) -> Generator:
    created = [c[9] for c in (yield from checkpoints_of(d, (yield from _threads(d, thread_ids))))]
    return [tuple(_bucket_counts([t for t in created if t >= bounds[0]], bounds))]


def state_size_counts(d: Any, params: Sequence[Any], many: bool, thread_ids: Sequence[str] | None, bounds: Sequence[float]) -> Generator:
    states = [sum(s) for s in (yield from _states(d, thread_ids))]
    return [(*_bucket_counts(states, bounds), len(states))]


_KNOWN_THREAD = statement(known_thread)


class RedisReadsStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides).
    A method's selection travels bound to its handler; its parameter list is empty."""

    ALL_THREAD_IDS = statement(all_thread_ids)
    CHECKPOINT_ID = statement(checkpoint_id)
    NAMESPACE_CHECKPOINTS = statement(namespace_checkpoints)
    CHECKPOINT_WRITE_TASKS = statement(checkpoint_write_tasks)

    def count_threads(self, f: ThreadFilter) -> tuple[Cmd, list[Any]]:
        return Cmd(count_threads, (self._checked(f),), "count_threads"), []

    def threads_page(self, f: ThreadFilter, order_by: str, limit: int, offset: int) -> tuple[Cmd, list[Any]]:
        return Cmd(threads_page, (self._checked(f), order_by, int(limit), int(offset)), "threads_page"), []

    def _checked(self, f: ThreadFilter) -> ThreadFilter:
        """``f``, its metadata filter checked as ``list`` checks one (FilterError)."""
        if f.metadata:
            self.list_where(Selection(filter=f.metadata))  # type: ignore[attr-defined]
        return f

    def known_thread(self, thread_id: str) -> tuple[Cmd, list[Any]]:
        return _KNOWN_THREAD, [thread_id]

    def threads_with_prefix(self, prefix: str) -> tuple[Cmd, list[Any]]:
        return Cmd(threads_with_prefix, (prefix,), "threads_with_prefix"), []

    def history_checkpoints(self, thread_id: str, checkpoint_ns: str | None) -> tuple[Cmd, list[Any]]:
        return Cmd(history_checkpoints, (thread_id, checkpoint_ns), "history_checkpoints"), []

    def heads(self, checkpoint_ns: str, thread_ids: Sequence[str] | None = None, recent: int | None = None) -> tuple[Cmd, list[Any]]:
        return Cmd(heads, (checkpoint_ns, thread_ids, recent), "heads"), []

    def push_candidates(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str]) -> tuple[Cmd, list[Any]]:
        return Cmd(push_candidates, (thread_id, checkpoint_ns, tuple(checkpoint_ids)), "push_candidates"), []

    def write_counts(self, thread_id: str, checkpoint_ns: str | None, channel: str) -> tuple[Cmd, list[Any]]:
        return Cmd(write_counts, (thread_id, checkpoint_ns, channel), "write_counts"), []

    def audit_writes(self, s: WriteSelection, limit: int | None = None, offset: int = 0) -> tuple[Cmd, list[Any]]:
        return Cmd(audit_writes, (s, limit, offset), "audit_writes"), []

    def task_groups(self, s: WriteSelection, task_id: str) -> tuple[Cmd, list[Any]]:
        return Cmd(task_groups, (s, task_id), "task_groups"), []

    def path_task_totals(self, s: WriteSelection, path_prefix: str) -> tuple[Cmd, list[Any]]:
        return Cmd(path_task_totals, (s, path_prefix), "path_task_totals"), []

    def path_tasks(self, thread_id: str, checkpoint_ns: str | None, path_prefix: str) -> tuple[Cmd, list[Any]]:
        return Cmd(path_tasks, (thread_id, checkpoint_ns, path_prefix), "path_tasks"), []

    def blob_totals(self, thread_id: str | None, checkpoint_ns: str | None) -> tuple[Cmd, list[Any]]:
        return Cmd(blob_totals, (thread_id, checkpoint_ns), "blob_totals"), []

    def table_totals(self, table: str, thread_ids: Sequence[str] | None) -> tuple[Cmd, list[Any]]:
        return Cmd(table_totals, (counted(table), thread_ids), "table_totals"), []

    def thread_count(self, thread_ids: Sequence[str] | None) -> tuple[Cmd, list[Any]]:
        return Cmd(thread_count, (thread_ids,), "thread_count"), []

    def namespace_count(self, thread_ids: Sequence[str] | None) -> tuple[Cmd, list[Any]]:
        return Cmd(namespace_count, (thread_ids,), "namespace_count"), []

    def source_counts(self, thread_ids: Sequence[str] | None) -> tuple[Cmd, list[Any]]:
        return Cmd(source_counts, (thread_ids,), "source_counts"), []

    def reference_totals(self, thread_ids: Sequence[str] | None) -> tuple[Cmd, list[Any]]:
        return Cmd(reference_totals, (thread_ids,), "reference_totals"), []

    def checkpoint_counts(self, thread_ids: Sequence[str] | None, bounds: Sequence[float]) -> tuple[Cmd, list[Any]]:
        return Cmd(checkpoint_counts, (thread_ids, tuple(bounds)), "checkpoint_counts"), []

    def state_size_counts(self, thread_ids: Sequence[str] | None, bounds: Sequence[float]) -> tuple[Cmd, list[Any]]:
        return Cmd(state_size_counts, (thread_ids, tuple(bounds)), "state_size_counts"), []

