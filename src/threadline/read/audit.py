"""The audit trail and task statistics: ``WriteInfo`` and ``audit_op`` / ``audit``
(the stored pending writes of a checkpoint or thread in execution order, sizes only),
and ``TaskStat`` / ``TaskStats`` with ``task_stats_op`` / ``task_stats`` (per-node
write counts and bytes, compared with the blob bytes in scope). No value is decoded.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.dialect.reads import WriteSelection
from threadline.storage.ops import Op, Q
from threadline.errors import ConfigError
from threadline.read.common import NULL_TASK_ID, checkpoint_row_op, iso, node_of_task_path
from threadline.read.tasks import node_of_write, push_index, push_nodes_op, push_tasks_op
from threadline.keys import checkpoint_id_of, checkpoint_ns_of, thread_id_of

@dataclass
class WriteInfo:
    """One stored pending write, without its value: ``bytes`` is the stored size of the value."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    task_id: str
    idx: int
    channel: str
    task_path: str
    node: str | None
    type: str
    bytes: int
    created_at: float

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["created"] = iso(self.created_at)
        return d


def audit_op(
    d: Dialect, thread_id: Any, checkpoint_id: str | None = None, *, checkpoint_ns: str | None = "", limit: int | None = None,
    offset: int = 0,
) -> Op[list[WriteInfo]]:
    """The writes of a checkpoint (or of the whole thread) in execution order (seed 000 "调试/审计读取").

    Order: checkpoint_id, then ``created_at``, then LangGraph's ``writes_sort_key``
    (task_path, task_id, idx). ``checkpoint_ns=None`` means every namespace;
    ``limit``/``offset`` page the list. No value is decoded: ``bytes`` is the stored
    size; ``node`` names Send tasks too (``tasks.push_node``).
    Raises NotFoundError when a named checkpoint does not exist.
    """
    tid = thread_id_of(thread_id)
    ns = None if checkpoint_ns is None else checkpoint_ns_of(checkpoint_ns)
    if checkpoint_id is not None:
        if ns is None:
            raise ConfigError("audit of one checkpoint needs its checkpoint_ns")
        yield from checkpoint_row_op(d, tid, ns, checkpoint_id_of(checkpoint_id))
    found = yield Q(*d.audit_writes(WriteSelection(tid, ns, checkpoint_id), limit, offset))
    pushed = yield from push_nodes_op(d, [(r[0], r[1], r[2], r[3], r[6]) for r in found])
    return [
        WriteInfo(r[0], r[1], r[2], r[3], int(r[4]), r[5], r[6] or "", node_of_write(pushed, (r[0], r[1], r[2], r[3]), r[6]),
                  r[7], int(r[8]), float(r[9]))
        for r in found
    ]


def audit(saver: Any, thread_id: Any, checkpoint_id: str | None = None, **kwargs: Any) -> list[WriteInfo]:
    """Sync ``audit_op``."""
    return saver.run(audit_op(saver.dialect, thread_id, checkpoint_id, **kwargs))


@dataclass
class TaskStat:
    """Per node: number of writes, total and average stored bytes, tasks (distinct task_ids), checkpoints touched."""

    node: str
    writes: int
    total_bytes: int
    avg_bytes: float
    tasks: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TaskStats:
    """Agent behaviour analysis (seed 000 "Agent 行为分析" and "对比 writes vs blobs 数据量").

    ``tasks``: per node, most writes first. ``writes_bytes``: stored bytes of the
    pending writes in scope; ``blobs_bytes``: stored bytes of the blobs in scope
    (for one checkpoint: the blobs its ``channel_versions`` reference, i.e. its
    full state; ``new_blobs_bytes``: those first written for it). When
    ``writes_bytes > blobs_bytes`` several tasks wrote the same channel, or the
    state shares blobs with earlier checkpoints.
    """

    scope: dict[str, Any]
    tasks: list[TaskStat]
    writes: int
    writes_bytes: int
    blobs: int
    blobs_bytes: int
    new_blobs_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "tasks": [t.to_json() for t in self.tasks],
            "writes": self.writes,
            "writes_bytes": self.writes_bytes,
            "blobs": self.blobs,
            "blobs_bytes": self.blobs_bytes,
            "new_blobs_bytes": self.new_blobs_bytes,
        }


def task_stats_op(
    d: Dialect,
    thread_id: Any = None,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str | None = "",
    since: float | None = None,
) -> Op[TaskStats]:
    """Per-task write statistics for one checkpoint, one thread, or the whole database (``thread_id=None``).

    ``since`` keeps writes created at or after that epoch time. ``checkpoint_ns=None``
    covers every namespace. Reads sizes only, never values.
    """
    tid = None if thread_id is None else thread_id_of(thread_id)
    ns = None if checkpoint_ns is None else checkpoint_ns_of(checkpoint_ns)
    scope: dict[str, Any] = {"thread_id": tid, "checkpoint_id": checkpoint_id, "checkpoint_ns": checkpoint_ns, "since": since}
    row = None
    if checkpoint_id is not None:
        if tid is None or ns is None:
            raise ConfigError("task statistics of one checkpoint need its thread_id and checkpoint_ns")
        row = yield from checkpoint_row_op(d, tid, ns, checkpoint_id_of(checkpoint_id))
    selected = WriteSelection(tid, ns, checkpoint_id, None if since is None else float(since))
    grouped = yield Q(*d.task_groups(selected, NULL_TASK_ID))
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for path, is_null, count, total, tasks in grouped:
        if not is_null and push_index(path) is not None:
            continue  # Send tasks: counted below, one by one, under the node each ran
        node = node_of_task_path(path, NULL_TASK_ID if is_null else None) or (path or "?")
        acc = per[node]
        acc[0] += int(count)
        acc[1] += int(total or 0)
        acc[2] += int(tasks)
    if any(not r[1] and push_index(r[0]) is not None for r in grouped):
        for node, count, total in (yield from push_tasks_op(d, selected)):
            acc = per[node]
            acc[0] += count
            acc[1] += total
            acc[2] += 1
    stats = sorted(
        (TaskStat(node, c, b, round(b / c, 1) if c else 0.0, t) for node, (c, b, t) in per.items()),
        key=lambda s: (-s.writes, -s.total_bytes, s.node),
    )
    writes = sum(s.writes for s in stats)
    writes_bytes = sum(s.total_bytes for s in stats)
    new_blobs_bytes = None
    if row is not None:
        doc = d.load_object(row[4], f"checkpoint {checkpoint_id!r}")
        pairs = R.blob_pairs(doc)
        parent_versions: dict[str, Any] = {}
        if row[3]:
            prow = yield Q(d.CHECKPOINT_DOC, (tid, row[1], row[3]))
            if prow:
                parent_versions = {ch: v for ch, v in R.blob_pairs(d.load_object(prow[0][0], f"checkpoint {row[3]!r}"))}
        sizes: dict[tuple[str, str], int] = {}
        for part in ops.chunks([(tid, row[1], ch, v) for ch, v in pairs], d.max_params // 4):
            found = yield Q(d.blob_sizes_by_keys(len(part)), ops.flat(part))
            sizes.update({(r[0], r[1]): int(r[3]) for r in found})
        blobs, blobs_bytes = len(sizes), sum(sizes.values())
        new_blobs_bytes = sum(s for (ch, v), s in sizes.items() if parent_versions.get(ch) != v)
    else:
        found = yield Q(*d.blob_totals(tid, ns))
        blobs, blobs_bytes = int(found[0][0]), int(found[0][1])
    return TaskStats(scope, stats, writes, writes_bytes, blobs, blobs_bytes, new_blobs_bytes)


def task_stats(saver: Any, thread_id: Any = None, checkpoint_id: str | None = None, **kwargs: Any) -> TaskStats:
    """Sync ``task_stats_op``."""
    return saver.run(task_stats_op(saver.dialect, thread_id, checkpoint_id, **kwargs))
