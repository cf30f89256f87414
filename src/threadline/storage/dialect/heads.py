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


@lru_cache(maxsize=4)
def get_with_head(latest: bool, held: bool = False) -> str:
    """``get_tuple`` in one statement on a backend that keeps heads: the checkpoint row with its head,
    and its pending writes, as the rows of ``PostgresDialect.get_statement`` (13 columns, the kind
    first) without the blobs, which the head holds (what it lacks is read after). (thread_id,
    checkpoint_ns[, checkpoint_id unless ``latest``]) → 0, the checkpoint (as Postgres's, with the
    head's type in the 8th column and its data in the 13th: NULL when the namespace's head describes
    another checkpoint; ``held``: also for the checkpoint_id bound as ``?4`` (``?3`` then unused by the
    latest form), whose head the reading process holds already: its bytes are not read off their
    overflow pages); 2, a write (as Postgres's), in no order (the caller sorts them: an ORDER BY over
    the union costs SQLite a sorter on every read). No kind-0 row: no such checkpoint (a write row may
    come then). One statement: a consistent read without a transaction. The ``held`` form only where
    a head is held: its ``CASE`` and fourth parameter cost a read of a new thread 13 % more instructions.

    Neither a common table expression (SQLite materializes one used twice) nor a sort: the latest
    checkpoint is found twice, by its index, in the same snapshot (a new thread's read: 50k → 29k
    instructions in SQLite)."""
    which = "ORDER BY c.checkpoint_id DESC LIMIT 1" if latest else "AND c.checkpoint_id = ?3"
    checkpoint = "(SELECT max(checkpoint_id) FROM threadline_checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2)" if latest else "?3"
    return (
        "SELECT * FROM (SELECT 0 AS kind, c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.source, "
        "c.checksum, h.type, c.step, c.created_at, c.checkpoint, c.metadata, "
        f"{'CASE WHEN h.checkpoint_id = ?4 THEN NULL ELSE CAST(h.data AS BLOB) END' if held else 'CAST(h.data AS BLOB)'} "
        "FROM threadline_checkpoints c "
        "LEFT JOIN threadline_heads h ON h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns "
        f"AND h.checkpoint_id = c.checkpoint_id WHERE c.thread_id = ?1 AND c.checkpoint_ns = ?2 {which}) "
        "UNION ALL SELECT 2, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.task_path, w.type, w.idx, "
        "NULL, NULL, NULL, CAST(w.blob AS BLOB) FROM threadline_writes w "
        f"WHERE w.thread_id = ?1 AND w.checkpoint_ns = ?2 AND w.checkpoint_id = {checkpoint}"
    )


class HeadStatements:
    """Mixed into ``Dialect``."""

    # whether a put writes head rows and a get_tuple reads them (False: the backend reads as format 1)
    head_rows: bool = False
    # whether a JSON column reads back as the very text written (a checkpoint's checksum then covers
    # the text: ``codec.seal``'s ``x3:``; False where JSONB normalizes it)
    keeps_json_text: bool = False
    # whether a put stores its document's versions compacted (``jsontext.compact_doc``; read through
    # ``load_json``, in SQL through ``jsontext.expanded_sql``): where the text is kept as written and not
    # compressed (Redis zstd-compresses its rows, which takes those runs of zeros already)
    compacts_docs: bool = False
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
