"""The named statements of head rows (storage format 2, ``storage.heads``), in SQL for both
dialects: one row of ``threadline_heads`` per (thread_id, checkpoint_ns), the latest values of
the namespace sealed in one blob. Each statement's comment gives its parameters, then (→) the
columns it returns."""

from __future__ import annotations

from functools import lru_cache

from threadline.storage.rows import CHECKPOINT_ROW

_ROW = ", ".join(f"c.{column}" for column in CHECKPOINT_ROW.split(", "))
_JOIN = (
    f"SELECT {_ROW}, h.type, h.data FROM threadline_checkpoints c LEFT JOIN threadline_heads h "
    "ON h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns AND h.checkpoint_id = c.checkpoint_id "
    "WHERE c.thread_id = ? AND c.checkpoint_ns = ? "
)


@lru_cache(maxsize=2)
def get_with_head(latest: bool) -> str:
    """``get_tuple`` in one statement on a backend that keeps heads: the checkpoint row with its head,
    and its pending writes, as the rows of ``PostgresDialect.get_statement`` (13 columns, the kind
    first) without the blobs, which the head holds (what it lacks is read after). (thread_id,
    checkpoint_ns[, checkpoint_id unless ``latest``]) → 0, the checkpoint (as Postgres's, with the
    head's type in the 8th column and its data in the 13th: NULL when the namespace's head describes
    another checkpoint); 2, a write (as Postgres's), in ``writes_sort_key`` order. No rows: no such
    checkpoint. One statement: a consistent read without a transaction."""
    which = "ORDER BY checkpoint_id DESC LIMIT 1" if latest else "AND checkpoint_id = ?"
    same = "{t}.thread_id = ck.thread_id AND {t}.checkpoint_ns = ck.checkpoint_ns AND {t}.checkpoint_id = ck.checkpoint_id"
    return (
        f"WITH ck AS (SELECT {CHECKPOINT_ROW} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? {which}) "
        "SELECT 0 AS kind, ck.thread_id, ck.checkpoint_ns, ck.checkpoint_id, ck.parent_checkpoint_id, ck.source, ck.checksum, "
        "h.type, ck.step, ck.created_at, ck.checkpoint, ck.metadata, CAST(h.data AS BLOB) "
        f"FROM ck LEFT JOIN threadline_heads h ON {same.format(t='h')} "
        "UNION ALL SELECT 2, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.task_path, w.type, w.idx, "
        f"NULL, NULL, NULL, CAST(w.blob AS BLOB) FROM ck JOIN threadline_writes w ON {same.format(t='w')} "
        "ORDER BY 1, 7, 5, 9"  # kind, then the writes' task_path, task_id, idx
    )


class HeadStatements:
    """Mixed into ``Dialect``."""

    # whether a put writes head rows and a get_tuple reads them (False: the backend reads as format 1)
    head_rows: bool = False
    # whether a JSON column reads back as the very text written (a checkpoint's checksum then covers
    # the text: ``codec.seal``'s ``x3:``; False where JSONB normalizes it)
    keeps_json_text: bool = False
    # (thread_id, checkpoint_ns, checkpoint_id, type, data): the namespace's head, replaced only by a
    # newer checkpoint's (a checkpoint put again keeps the head its first put wrote, as its blobs do)
    UPSERT_HEAD = (
        "INSERT INTO threadline_heads (thread_id, checkpoint_ns, checkpoint_id, type, data) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE SET checkpoint_id = excluded.checkpoint_id, type = excluded.type, "
        "data = excluded.data WHERE excluded.checkpoint_id > threadline_heads.checkpoint_id"
    )
    # (thread_id, checkpoint_ns) → CHECKPOINT_ROW of the namespace's latest checkpoint, then the type and
    # data of its head row (NULL when the namespace's head describes another checkpoint, or there is none)
    LATEST_WITH_HEAD = _JOIN + "ORDER BY c.checkpoint_id DESC LIMIT 1"
    # (thread_id): what re-sealing or deleting a thread's values deletes (the next put writes a new head)
    DELETE_HEADS = "DELETE FROM threadline_heads WHERE thread_id = ?"
    # (thread_id, checkpoint_ns): one namespace's head
    DELETE_HEAD = "DELETE FROM threadline_heads WHERE thread_id = ? AND checkpoint_ns = ?"
    # (thread_id) → checkpoint_ns of each namespace with checkpoints
    THREAD_NAMESPACES = "SELECT DISTINCT checkpoint_ns FROM threadline_checkpoints WHERE thread_id = ?"
    # (thread_id) → checkpoint_ns, checkpoint_id, type, data of the thread's head rows (``fsck``)
    THREAD_HEADS = "SELECT checkpoint_ns, checkpoint_id, type, data FROM threadline_heads WHERE thread_id = ?"
