"""The named statements that read the official saver's tables (``checkpoints`` and its blobs,
``threadline.storage.adopt``) and record what was adopted (``threadline_adopted``), in the SQL both
backends accept; written and documented as ``statements``. Redis has none: no official saver
shares its keys (``RedisDialect.official_tables``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadline.storage.dialect.statements import placeholders, values_list


class AdoptionStatements:
    """Mixed into ``Dialect`` (after ``Statements``, whose ``value_read`` they use)."""

    # (thread_id, thread_id, thread_id) → newest official checkpoint_id of the thread, checkpoint_id adopted
    # up to, newest checkpoint_id of the thread in threadline's own table
    OFFICIAL_PROGRESS = (
        "SELECT (SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ?), "
        "(SELECT checkpoint_id FROM threadline_adopted WHERE thread_id = ?), "
        "(SELECT MAX(checkpoint_id) FROM threadline_checkpoints WHERE thread_id = ?)"
    )
    # (thread_id, checkpoint_id) → checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata of
    # the thread's official checkpoints newer than checkpoint_id, oldest first (both official savers' ``checkpoints``)
    OFFICIAL_CHECKPOINTS = (
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_id > ? ORDER BY checkpoint_id"
    )
    # () → thread_id of every thread in the official checkpoints table
    OFFICIAL_THREAD_IDS = "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
    # (thread_id, checkpoint_id, adopted_at)
    MARK_ADOPTED = (
        "INSERT INTO threadline_adopted (thread_id, checkpoint_id, adopted_at) VALUES (?, ?, ?) "
        "ON CONFLICT (thread_id) DO UPDATE SET checkpoint_id = excluded.checkpoint_id, adopted_at = excluded.adopted_at"
    )

    # how a text column of the official tables compares with threadline's (byte order) text
    collate_official = ""

    def unadopted_threads(self, threadline: bool, thread_ids: Sequence[str] | None = None) -> tuple[str, list[Any]]:
        """→ thread_id, how many official checkpoints are not adopted yet, the first and the last of
        their checkpoint_ids, their stored bytes (checkpoint and metadata), whether threadline's
        index holds the thread (1 or 0) — of every thread (of ``thread_ids``; None: any) with
        official checkpoints to adopt as ``adopt.progress_op`` decides (newer than the thread's
        marker, and none of threadline's own since), by thread_id. ``threadline``: whether
        threadline's tables exist (without them every official checkpoint is still to adopt)."""
        c = self.collate_official
        size = f"SUM({self.bytes_of('o.checkpoint', 'json')} + {self.bytes_of('o.metadata', 'json')})"
        where: list[str] = []
        params: list[Any] = list(thread_ids or ())
        if thread_ids is not None:
            where.append(f"o.thread_id{c} IN ({placeholders(len(thread_ids))})")
        head = f"SELECT o.thread_id, COUNT(*), MIN(o.checkpoint_id{c}), MAX(o.checkpoint_id{c}), {size}"
        if not threadline:
            clause = f" WHERE {' AND '.join(where)}" if where else ""
            return f"{head}, 0 FROM checkpoints o{clause} GROUP BY o.thread_id ORDER BY o.thread_id{c}", params
        where += [
            f"(a.checkpoint_id IS NULL OR o.checkpoint_id{c} > a.checkpoint_id)",
            f"NOT EXISTS (SELECT 1 FROM threadline_checkpoints t WHERE t.thread_id = o.thread_id{c} "
            "AND (a.checkpoint_id IS NULL OR t.checkpoint_id > a.checkpoint_id))",
        ]
        return (
            f"{head}, MAX(CASE WHEN x.thread_id IS NULL THEN 0 ELSE 1 END) FROM checkpoints o "
            f"LEFT JOIN threadline_adopted a ON a.thread_id = o.thread_id{c} "
            f"LEFT JOIN threadline_threads x ON x.thread_id = o.thread_id{c} "
            f"WHERE {' AND '.join(where)} GROUP BY o.thread_id ORDER BY o.thread_id{c}",
            params,
        )

    # (thread_id) → the newest official checkpoint_id of the thread (NULL: none)
    OFFICIAL_LATEST = "SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ?"
    # (thread_id) → checkpoint_id, metadata of the newest official checkpoint of the thread's root namespace
    OFFICIAL_ROOT_HEAD = "SELECT checkpoint_id, metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1"
    # (thread_id, checkpoint_id) → metadata of the thread's official checkpoints newer than checkpoint_id
    OFFICIAL_METADATA = "SELECT metadata FROM checkpoints WHERE thread_id = ? AND checkpoint_id > ?"
    # (thread_id, checkpoint_id) → type, checkpoint of that official checkpoint (any namespace)
    OFFICIAL_CHECKPOINT_DOC = "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ? LIMIT 1"

    def official_blobs(self, count: int) -> str:
        """(``count`` (checkpoint_ns, channel, version) keys, flattened, then thread_id) → checkpoint_ns,
        channel, version, type, blob from the official saver's blobs table (``official_blobs_table``)."""
        return (
            f"SELECT t.checkpoint_ns, t.channel, t.version, t.type, {self.value_read.format('t.blob')} FROM ({values_list(3, count)}) k "
            f"JOIN {self.official_blobs_table} t ON t.thread_id = ? AND t.checkpoint_ns = k.column1 "
            "AND t.channel = k.column2 AND t.version = k.column3"
        )
