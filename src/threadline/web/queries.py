"""Read operations the browser needs beyond ``threadline.read``, written the same way:
sans-IO generators yielding ``Q`` that a saver runs in one transaction (``saver.run``).

* ``search_threads_op``: the threads index searched by thread_id glob and metadata,
  sorted by updated / size / checkpoints / thread_id, paged — reads the index only,
  then the head checkpoint of the page's threads;
* ``thread_status_op``: ``threadline.read.status``'s status of a thread's head, re-exported;
* ``tree_op``: a namespace's checkpoints, narrowed to what the branch graph draws;
* ``namespaces_op``, ``change_marker_op``: small lookups for the thread picture and for
  live updates;
* ``storage_timeline_op``, ``task_durations_op``, ``delta_stats_op``: the stats page.

Nothing here decodes a value (``thread_status_op``, which does, is ``threadline.read``'s).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from threadline.read.tags import thread_tags_op
from threadline.errors import NotFoundError
from threadline.read import ERROR, INTERRUPT, NULL_TASK_ID, ThreadInfo, node_of_task_path
from threadline.read.status import ThreadStatus
from threadline.read.threads import cold_listed_op, records_table_op
from threadline.read.status import thread_status_op as status_op
from threadline.read.official import Scope, heads_op, matching_op, merge, unadopted_threads_op
from threadline.read.tasks import push_index, push_nodes_op
from threadline.storage.dialect.web import SEARCH_ORDERS, ThreadSearch, glob_matcher, search_order
from threadline.storage.ops import Op, Q

ORDERS = tuple(SEARCH_ORDERS)  # the sort orders of the threads search, by name


@dataclass
class SearchPage:
    """A page of the threads index: ``ThreadInfo`` rows, the number matching, paging offsets."""

    threads: list[ThreadInfo]
    total: int
    offset: int
    limit: int

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def prev_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None


def search_threads_op(
    d: Any,
    *,
    pattern: str = "",
    metadata: Mapping[str, Any] | None = None,
    order: str = "updated",
    limit: int = 50,
    offset: int = 0,
    scope: Scope | None = None,
    archived: bool | None = False,
) -> Op[SearchPage]:
    """A page of threads from the ``threads`` index (no checkpoint scan unless ``metadata`` is given),
    with, when ``scope`` shows them, the threads of the official saver's tables not adopted yet
    (``read.official``: marked ``official_only``, or a number of ``unadopted`` checkpoints).

    ``pattern`` is a ``ThreadSearch`` glob; ``metadata`` keeps threads with at least one
    checkpoint whose metadata matches, as ``list(filter=…)`` matches it; ``archived``: False
    hides archived threads (``read.records``), True shows only them, None both. Raises ValueError
    for an unknown order or bad paging, FilterError for an unusable metadata filter.
    """
    search_order(order)
    if limit < 1 or offset < 0:
        raise ValueError(f"paging needs limit >= 1 and offset >= 0, got limit={limit}, offset={offset}")
    scope = scope or Scope()
    search = ThreadSearch(pattern, metadata or None, archived, (yield from records_table_op(d)), (yield from cold_listed_op(d)))
    waiting = yield from unadopted_threads_op(d, scope)
    partly = {t.thread_id: t.checkpoints for t in waiting if t.in_threadline}
    match = glob_matcher(pattern).match if pattern else None
    only = [t for t in waiting if not t.in_threadline and (match is None or match(t.thread_id))]
    if metadata and only:
        keep = yield from matching_op(d, only, metadata, {})
        only = [t for t in only if t.thread_id in keep]
    total, rows = 0, []
    if scope.threadline:
        total = int((yield Q(*d.count_thread_search(search)))[0][0])
        rows = yield Q(*d.thread_search_page(search, order, offset + limit if only else limit, 0 if only else offset))
    threads = [ThreadInfo(r[0], float(r[1]), float(r[2]), int(r[3]), int(r[4]), None, None, None, partly.get(r[0], 0),
                          cold=bool(r[5]) if len(r) > 5 else False) for r in rows]
    if only:
        extra = [ThreadInfo(t.thread_id, t.created_at, t.updated_at, t.checkpoints, t.bytes, None, None, None, t.checkpoints, True) for t in only]
        threads = merge(threads, extra, SEARCH_KEYS[order], offset, limit)
        total += len(extra)
    own = [t.thread_id for t in threads if not t.official_only]
    heads: dict[str, tuple] = {}
    if own:
        heads = {r[0]: tuple(r[1:]) for r in (yield Q(*d.root_heads(own)))}
    heads.update((yield from heads_op(d, [t.thread_id for t in threads if t.official_only])))
    for t in threads:
        t.head_checkpoint_id, t.head_step, t.head_source = heads.get(t.thread_id, (None, None, None))
    return SearchPage(threads, total, offset, limit)


# The orders of SEARCH_ORDERS as Python sort keys (merging the official saver's threads in).
SEARCH_KEYS = {
    "updated": lambda t: (-t.updated_at, t.thread_id),
    "size": lambda t: (-t.bytes, t.thread_id),
    "checkpoints": lambda t: (-t.checkpoint_count, t.thread_id),
    "thread_id": lambda t: t.thread_id,
}


Status = ThreadStatus  # the browser shows ``threadline.read.status``'s rule, the one copy
thread_status_op = status_op  # (d, serde, thread_id, head, bc=None, *, busy=None: the lease) → ThreadStatus


@dataclass
class TreeRow:
    """One checkpoint of a namespace, as the branch graph needs it (see ``tree_op``)."""

    checkpoint_id: str
    parent: str | None
    step: int | None
    source: str | None
    versions_seen: dict[str, Any]
    created_at: float = 0.0
    run_id: str | None = None
    interrupted: bool = False
    error: bool = False
    subgraphs: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    merge: dict[str, Any] | None = None  # a merge's parents (metadata ``merge``: source, target, fork_point)


def tree_op(d: Any, thread_id: str, checkpoint_ns: str = "") -> Op[list[TreeRow]]:
    """The checkpoints of one namespace of a thread, in checkpoint_id order, for the branch graph.

    What ``read.history_op`` reads, narrowed for threads of 10,000s of checkpoints: only
    ``versions_seen`` of each checkpoint (extracted by the database, not the whole
    checkpoint and metadata), whether an ``__interrupt__`` or ``__error__`` write is stored
    against it, and
    the namespaces of subgraph runs started from each checkpoint (read from the
    ``parents`` metadata of each run's first checkpoint). Raises NotFoundError when the
    namespace has no checkpoint.
    """
    found = yield Q(*d.tree_checkpoints(thread_id, checkpoint_ns))
    if not found:
        raise NotFoundError(f"thread {thread_id!r} has no checkpoint" + (f" in checkpoint_ns {checkpoint_ns!r}" if checkpoint_ns else ""))
    rows = {}
    for r in found:
        where = f"checkpoint ({thread_id!r}, {checkpoint_ns!r}, {r[0]!r})"
        merged = d.load_json(r[7], where) if r[7] is not None else None
        rows[r[0]] = TreeRow(r[0], r[1], r[2], r[3], d.load_json(r[4], where) if r[4] is not None else {},
                             float(r[5]), r[6], merge=merged if isinstance(merged, dict) else None)
    stops = yield Q(d.STOP_WRITES, (thread_id, checkpoint_ns, INTERRUPT, ERROR))
    for cid, channel in stops:
        if cid in rows:
            setattr(rows[cid], "interrupted" if channel == INTERRUPT else "error", True)
    runs = yield Q(d.SUBGRAPH_RUNS, (thread_id,))
    for ns, meta in runs:
        enclosing = ns.rsplit("|", 1)[0] if "|" in ns else ""
        parents = (d.load_object(meta, f"metadata of checkpoint_ns {ns!r}").get("parents") or {}) if enclosing == checkpoint_ns else {}
        anchor = parents.get(enclosing) if isinstance(parents, dict) else None
        if anchor in rows:
            rows[anchor].subgraphs.append(ns)
    for t in (yield from thread_tags_op(d, thread_id)):
        if t.checkpoint_ns == checkpoint_ns and t.checkpoint_id in rows:
            rows[t.checkpoint_id].tags.append(t.name)
    return list(rows.values())


def namespaces_op(d: Any, thread_id: str) -> Op[list[tuple[str, int]]]:
    """(checkpoint_ns, checkpoints) of a thread, root namespace first."""
    found = yield Q(d.NAMESPACE_COUNTS, (thread_id,))
    return [(r[0], int(r[1])) for r in found]


def change_marker_op(d: Any, thread_id: str | None = None) -> Op[list[Any]]:
    """What changes when a thread (or, without one, any thread) is written: for polling.

    A thread: its ``updated_at``, checkpoint count and the newest pending write time;
    the database: the newest checkpoint's ``created_at`` (a put moves ``updated_at`` only
    once a second) and the number of threads, each read through an index.
    """
    if thread_id is None:
        newest = yield Q(d.NEWEST_CHECKPOINT_AT)
        found = yield Q(*d.thread_count(None))
        return [newest[0][0], int(found[0][0])]
    found = yield Q(d.THREAD, (thread_id,))
    writes = yield Q(d.THREAD_WRITES_MARK, (thread_id,))
    base = [found[0][1], found[0][2]] if found else [None, 0]
    return [*base, writes[0][0], int(writes[0][1])]


# --- the stats page ----------------------------------------------------------------


def _bucket_width(span: float) -> int:
    for width in (60, 600, 3600, 6 * 3600, 86400, 7 * 86400):
        if span / width <= 120:
            return width
    return 30 * 86400


def storage_timeline_op(d: Any, thread_id: str | None = None) -> Op[dict[str, Any]]:
    """Checkpoints and pending writes stored over time, bucketed (≤ ~120 buckets).

    Returns ``{"bucket_seconds", "points": [{"t", "checkpoints", "checkpoint_bytes",
    "writes", "write_bytes"}]}`` per non-empty bucket (``t``: bucket start, epoch
    seconds). Blobs carry no timestamp, so channel values are counted in the per-table
    totals, not here.
    """
    span = yield Q(*d.checkpoint_span(thread_id))
    lo, hi = span[0]
    if lo is None:
        return {"bucket_seconds": None, "points": []}
    width = _bucket_width(float(hi) - float(lo))
    points: dict[int, dict[str, Any]] = {}
    for table, count_key, bytes_key in (("checkpoints", "checkpoints", "checkpoint_bytes"), ("writes", "writes", "write_bytes")):
        found = yield Q(*d.created_buckets(table, width, thread_id))
        for b, count, total in found:
            p = points.setdefault(int(b), {"t": int(b) * width, "checkpoints": 0, "checkpoint_bytes": 0, "writes": 0, "write_bytes": 0})
            p[count_key] = int(count)
            p[bytes_key] = int(total or 0)
    return {"bucket_seconds": width, "points": [points[k] for k in sorted(points)]}


def task_durations_op(d: Any, thread_id: str | None = None, *, limit: int = 200_000) -> Op[list[dict[str, Any]]]:
    """Per node: tasks and their durations in ms, newest ``limit`` writes at most.

    A task's duration is measured from the creation of the checkpoint it ran from
    (its step's start) to its last stored write (when it finished), so it includes
    waiting for the slowest sibling only when writes are stored at the step's end.
    Writes of the null task (input, ``update_state``) are left out. A ``Send`` task (a
    tool call of a prebuilt agent) counts under the node it ran (``read.tasks``), as the
    audit shows it; one whose node cannot be told is ``"Send task"``.
    """
    found = yield Q(*d.task_durations(thread_id, NULL_TASK_ID, limit))
    pushed = yield from push_nodes_op(d, [(r[0], r[1], r[2], r[3], r[4]) for r in found])
    per: dict[str, list[float]] = defaultdict(list)
    for tid, ns, cid, task_id, path, seconds in found:
        node = node_of_task_path(path, task_id) or pushed.get((tid, ns, cid, task_id)) or ("Send task" if push_index(path) is not None else "?")
        per[node].append(max(0.0, float(seconds or 0.0)) * 1000.0)
    out = []
    for node, ms in per.items():
        ms.sort()
        out.append({
            "node": node,
            "tasks": len(ms),
            "avg_ms": round(statistics.fmean(ms), 1),
            "p50_ms": round(ms[len(ms) // 2], 1),
            "p95_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 1),
            "max_ms": round(ms[-1], 1),
        })
    return sorted(out, key=lambda r: (-r["tasks"], r["node"]))


def delta_stats_op(d: Any, thread_id: str | None = None) -> Op[dict[str, int]]:
    """Blob rows and bytes stored whole vs as deltas on an earlier version (``base_version`` set)."""
    found = yield Q(*d.delta_totals(thread_id))
    rows, total, deltas, delta_bytes = (int(v) for v in found[0])
    return {"blobs": rows, "blob_bytes": total, "delta_blobs": deltas, "delta_bytes": delta_bytes}
