"""The named statements of ``threadline.web`` on Redis: the names, parameters and rows of
``storage/dialect/web.py``, each a handler (``storage/redis/base.py``).

What spans threads lists them from the ``<prefix>:threads`` index and reads their keys side
by side (``reads.lockstep``); the threads search reads the index rows of the threads whose id
matches first, so a glob narrows what is read. Groups, sums and orders are computed here over
the rows the SQL statements would group, with the same byte counts (``reads``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.dialect.reads import ThreadFilter
from threadline.storage.dialect.web import ThreadSearch, glob_matcher, search_order, timed
from threadline.storage.ops.read import Selection
from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Cmd, all_threads, latest_of, ck_row, statement, thread_checkpoint_rows, thread_writes_of
from threadline.storage.redis.reads import checkpoints_of, kept_threads, lockstep, run, value_size

# The sort key of each order of ``SEARCH_ORDERS`` on an index row (thread_id, created_at,
# updated_at, checkpoint_count, bytes).
_SEARCH_KEYS = {
    "updated": lambda r: (-r[2], r[0]),
    "size": lambda r: (-r[4], r[0]),
    "checkpoints": lambda r: (-r[3], r[0]),
    "thread_id": lambda r: r[0],
}


def _threads(d: Any, thread_id: str | None) -> Generator:
    return [thread_id] if thread_id else (yield from all_threads(d))


def _writes(d: Any, thread_id: str | None) -> Generator:
    """Every pending write of the thread (None: every thread): ``rows.WRITE_COLUMNS`` plus created_at."""
    found = yield from lockstep([thread_writes_of(d, t) for t in (yield from _threads(d, thread_id))])
    return [w for part in found for w in part]


# --- the threads search --------------------------------------------------------------------------


def _searched(d: Any, s: ThreadSearch) -> Generator:
    """The index rows (thread_id, created_at, updated_at, checkpoint_count, bytes) ``s`` keeps."""
    tids = yield from all_threads(d)
    if s.pattern:
        match = glob_matcher(s.pattern).match
        tids = [t for t in tids if match(t)]
    if not tids:
        return []
    return (yield from kept_threads(d, ThreadFilter(thread_ids=tuple(tids), metadata=s.metadata)))


def count_thread_search(d: Any, params: Sequence[Any], many: bool, s: ThreadSearch) -> Generator:
    return [(len((yield from _searched(d, s))),)]


def thread_search_page(d: Any, params: Sequence[Any], many: bool, s: ThreadSearch, order: str, limit: int, offset: int) -> Generator:
    return sorted((yield from _searched(d, s)), key=_SEARCH_KEYS[order])[offset : offset + limit]


def root_heads(d: Any, params: Sequence[Any], many: bool) -> Generator:
    found = yield from lockstep([latest_of(d, t, "") for t in params])
    out = []
    for tid, head in zip(params, found):
        if head is not None:
            row = ck_row(tid, "", head[0], head[1])
            out.append((tid, head[0], row[3], row[4]))
    return out


# --- the branch graph -------------------------------------------------------------------------


def tree_checkpoints(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, ns = params
    out = []
    for r in sorted(r for r in (yield from thread_checkpoint_rows(d, (tid,), False)) if r[0] == ns):
        where = f"checkpoint ({tid!r}, {ns!r}, {r[1]!r})"
        doc, meta = d.load_object(r[3], where), d.load_json(r[4], where)
        out.append((r[1], r[2], r[5], r[6], doc.get("versions_seen"), r[8], r[7], meta.get("merge") if isinstance(meta, dict) else None))
    return out


def stop_writes(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, ns, *channels = params
    return sorted({(w[2], w[5]) for w in (yield from thread_writes_of(d, tid)) if w[1] == ns and w[5] in channels})


def subgraph_runs(d: Any, params: Sequence[Any], many: bool) -> Generator:
    first: dict[str, tuple] = {}
    for r in (yield from thread_checkpoint_rows(d, params, False)):
        if r[0] and (r[0] not in first or r[1] < first[r[0]][1]):
            first[r[0]] = r
    return [(ns, r[4]) for ns, r in sorted(first.items())]


def namespace_counts(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid = params[0]
    counts: dict[str, int] = defaultdict(int)
    for f in (yield [("HKEYS", d.keys(tid).ck)])[0]:  # the checkpoints' keys: no row decoded
        counts[L.split(f, 2, f"checkpoint of thread {tid!r}")[0]] += 1
    return sorted(counts.items())


# --- change markers ---------------------------------------------------------------------------


def newest_checkpoint_at(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """The score of the index's newest thread: the created_at of the newest put (``put``'s ``ZADD GT``)."""
    newest = (yield [("ZRANGE", d.index, -1, -1)])[0]
    score = (yield [("ZSCORE", d.index, newest[0])])[0] if newest else None
    return [(None if score is None else float(score),)]


def thread_writes_mark(d: Any, params: Sequence[Any], many: bool) -> Generator:
    writes = yield from thread_writes_of(d, params[0])
    return [(max((w[9] for w in writes), default=None), len(writes))]


# --- the stats page --------------------------------------------------------------------------


def checkpoint_span(d: Any, params: Sequence[Any], many: bool, thread_id: str | None) -> Generator:
    created = [c[9] for c in (yield from checkpoints_of(d, (yield from _threads(d, thread_id))))]
    return [(min(created), max(created)) if created else (None, None)]


def created_buckets(d: Any, params: Sequence[Any], many: bool, table: str, width: int, thread_id: str | None) -> Generator:
    if table == "checkpoints":
        timed_sizes = [(c[9], value_size(c[4]) + value_size(c[5])) for c in (yield from checkpoints_of(d, (yield from _threads(d, thread_id))))]
    else:
        timed_sizes = [(w[9], value_size(w[8])) for w in (yield from _writes(d, thread_id))]
    buckets: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for created, size in timed_sizes:
        b = buckets[int(created // width)]
        b[0] += 1
        b[1] += size
    return [(b, n, size) for b, (n, size) in buckets.items()]


def task_durations(d: Any, params: Sequence[Any], many: bool, thread_id: str | None, skip_task: str, limit: int) -> Generator:
    tids = yield from _threads(d, thread_id)
    created = {(c[0], c[1], c[2]): c[9] for c in (yield from checkpoints_of(d, tids))}
    tasks: dict[tuple, list[Any]] = {}
    for w in (yield from _writes(d, thread_id)):
        start = created.get((w[0], w[1], w[2]))
        if w[3] == skip_task or start is None:
            continue
        t = tasks.setdefault((w[0], w[1], w[2], w[3]), [w[6], w[9], start])
        t[0], t[1] = min(t[0], w[6]), max(t[1], w[9])
    newest = sorted(tasks.items(), key=lambda kv: kv[1][1], reverse=True)[:limit]
    return [(*key, path, last - start) for key, (path, last, start) in newest]


def delta_totals(d: Any, params: Sequence[Any], many: bool, thread_id: str | None) -> Generator:
    found = yield from lockstep([run(d, d.thread_blob_sizes(), (t,)) for t in (yield from _threads(d, thread_id))])
    blobs = [(b[4] is not None, b[5]) for rows in found for b in rows]
    deltas = [size for is_delta, size in blobs if is_delta]
    return [(len(blobs), sum(size for _, size in blobs), len(deltas), sum(deltas))]


class RedisWebStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides).
    A method's selection travels bound to its handler; its parameter list is empty, or the
    statement's own parameters where the SQL one has them alone."""

    STOP_WRITES = statement(stop_writes)
    SUBGRAPH_RUNS = statement(subgraph_runs)
    NAMESPACE_COUNTS = statement(namespace_counts)
    NEWEST_CHECKPOINT_AT = statement(newest_checkpoint_at)
    THREAD_WRITES_MARK = statement(thread_writes_mark)

    def count_thread_search(self, s: ThreadSearch) -> tuple[Cmd, list[Any]]:
        return Cmd(count_thread_search, (self._search_checked(s),), "count_thread_search"), []

    def thread_search_page(self, s: ThreadSearch, order: str, limit: int, offset: int) -> tuple[Cmd, list[Any]]:
        return Cmd(thread_search_page, (self._search_checked(s), search_order(order), int(limit), int(offset)), "thread_search_page"), []

    def _search_checked(self, s: ThreadSearch) -> ThreadSearch:
        """``s``, its metadata filter checked as ``list`` checks one (FilterError)."""
        if s.metadata:
            self.list_where(Selection(filter=s.metadata))  # type: ignore[attr-defined]
        return s

    def root_heads(self, thread_ids: list[str]) -> tuple[Cmd, list[Any]]:
        return ROOT_HEADS, list(thread_ids)

    def tree_checkpoints(self, thread_id: str, checkpoint_ns: str) -> tuple[Cmd, list[Any]]:
        return TREE_CHECKPOINTS, [thread_id, checkpoint_ns]

    def checkpoint_span(self, thread_id: str | None) -> tuple[Cmd, list[Any]]:
        return Cmd(checkpoint_span, (thread_id,), "checkpoint_span"), []

    def created_buckets(self, table: str, width: int, thread_id: str | None) -> tuple[Cmd, list[Any]]:
        return Cmd(created_buckets, (timed(table), int(width), thread_id), "created_buckets"), []

    def task_durations(self, thread_id: str | None, skip_task: str, limit: int) -> tuple[Cmd, list[Any]]:
        return Cmd(task_durations, (thread_id, skip_task, int(limit)), "task_durations"), []

    def delta_totals(self, thread_id: str | None) -> tuple[Cmd, list[Any]]:
        return Cmd(delta_totals, (thread_id,), "delta_totals"), []


ROOT_HEADS = statement(root_heads)
TREE_CHECKPOINTS = statement(tree_checkpoints)
