"""The named statements of pending writes (``threadline_writes``: one row per (thread_id,
checkpoint_ns, checkpoint_id, task_id, idx)), in the standard SQL both backends accept; written and
documented as ``statements`` (``?`` placeholders; each comment gives the parameters, then (→) the
columns returned). ``storage/redis/writes.py`` implements the same names on Redis.
"""

from __future__ import annotations

from functools import lru_cache

from threadline.storage.dialect.statements import CHECKPOINT_KEY, WHERE_CHECKPOINT, WRITE_KEY, placeholders, read_values
from threadline.storage.rows import WRITE_COLUMNS

_INSERT_WRITES = f"INSERT INTO threadline_writes ({WRITE_COLUMNS}, created_at) "


class WriteStatements:
    """Mixed into ``Dialect`` (after ``Statements``, whose ``join_keys`` and ``value_read`` they use;
    ``check_fence`` is ``LeaseStatements``')."""


    # (thread_id, checkpoint_ns, checkpoint_id)
    DELETE_WRITES = f"DELETE FROM threadline_writes {WHERE_CHECKPOINT}"
    # (type, blob, thread_id, checkpoint_ns, checkpoint_id, task_id, idx): a value re-sealed in place (``rekey``)
    SET_WRITE_VALUE = (
        "UPDATE threadline_writes SET type = ?, blob = ? "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? AND task_id = ? AND idx = ?"
    )
    # (thread_id) → WRITE_COLUMNS, created_at of every write of a thread
    THREAD_WRITES = f"SELECT {WRITE_COLUMNS}, created_at FROM threadline_writes WHERE thread_id = ?"
    # (thread_id) → checkpoint_ns, checkpoint_id, task_id, idx of every pending write of a thread
    THREAD_WRITE_KEYS = "SELECT checkpoint_ns, checkpoint_id, task_id, idx FROM threadline_writes WHERE thread_id = ?"
    # (thread_id, channel) → checkpoint_ns, checkpoint_id of the checkpoints with writes to that channel
    CHECKPOINTS_WRITING = "SELECT DISTINCT checkpoint_ns, checkpoint_id FROM threadline_writes WHERE thread_id = ? AND channel = ?"

    @lru_cache(maxsize=64)  # built on every put_writes: built once
    def insert_writes(self, replace: bool, live: bool = False, fenced: int = 0, returning: bool = True) -> str:
        """(WRITE_COLUMNS, created_at): insert-or-ignore → task_id, idx of the rows inserted (without
        ``returning``: no rows, run it counted, ``Q(count=True)``: SQLite buffers a RETURNING's rows in
        a temporary table, ~50k instructions a statement); or with ``replace`` (special channels) an
        upsert of the dialect's ``replaced_write_columns``.

        ``live`` (a running graph's ``put_writes``): a row whose checkpoint is not stored while a
        newer one of its namespace is, is not inserted. Its checkpoint was pruned after LangGraph
        wrote the next one (its writes are saved in the background, and may land after a sweep's
        prune): they could only be orphans. Writes ahead of their checkpoint are kept.

        ``fenced`` (with ``live``, on a dialect with ``fences_in_statement``): ``fenced`` rows
        written under a thread guard lease, checked in this statement — (thread_id, holder, token
        as ``check_fence``, then the rows' parameters) → task_id, idx of the rows written, and
        (NULL, 1 or 0): whether the lease held (nothing is written when it did not)."""
        replaced = ", ".join(f"{c} = excluded.{c}" for c in self.replaced_write_columns)
        conflict = f"DO UPDATE SET {replaced}" if replace else "DO NOTHING" + (" RETURNING task_id, idx" if returning or fenced else "")
        row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        if not live:
            return _INSERT_WRITES + f"VALUES {row} ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict}"
        same = "c.thread_id = v.column1 AND c.checkpoint_ns = v.column2 AND c.checkpoint_id"
        keep = (
            f"EXISTS (SELECT 1 FROM threadline_checkpoints c WHERE {same} = v.column3) "
            f"OR NOT EXISTS (SELECT 1 FROM threadline_checkpoints c WHERE {same} > v.column3)"
        )
        on = "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)"
        if fenced:
            rows, returning = ", ".join([row] * fenced), " RETURNING task_id, idx" if replace else ""
            return (
                f"WITH l AS ({self.check_fence()}), w AS ({_INSERT_WRITES}SELECT * FROM (VALUES {rows}) AS v "
                f"WHERE EXISTS (SELECT 1 FROM l) AND ({keep}) {on} {conflict}{returning}) "
                "SELECT task_id, idx FROM w UNION ALL SELECT NULL, COUNT(*) FROM l"
            )
        return _INSERT_WRITES + f"SELECT * FROM (VALUES {row}) AS v WHERE {keep} {on} {conflict}"

    @lru_cache(maxsize=512)
    def writes_by_write_keys(self, count: int) -> str:
        """(``count`` write keys (thread_id, checkpoint_ns, checkpoint_id, task_id, idx), flattened) → WRITE_COLUMNS"""
        return self.join_keys("threadline_writes", WRITE_KEY, count, read_values(WRITE_COLUMNS, self.value_read, "t"))

    @lru_cache(maxsize=512)
    def writes_by_keys(self, count: int, channel: bool = False) -> str:
        """(``count`` checkpoint keys, flattened[, a channel]) → WRITE_COLUMNS in LangGraph's
        ``writes_sort_key`` order (task_path, task_id, idx); with ``channel`` only that channel's."""
        return (
            self.join_keys("threadline_writes", CHECKPOINT_KEY, count, read_values(WRITE_COLUMNS, self.value_read, "t"))
            + (" WHERE t.channel = ?" if channel else "")
            + " ORDER BY t.task_path, t.task_id, t.idx"
        )

    @lru_cache(maxsize=512)
    def sends_by_parent(self, count: int) -> str:
        """(``count`` (thread_id, checkpoint_id) pairs, flattened, TASKS) → WRITE_COLUMNS of those
        checkpoints' TASKS writes in ANY namespace, in ``writes_sort_key`` order: the pending sends
        of a LangGraph < v4 child, looked up as the official PostgresSaver does."""
        return (
            self.join_keys("threadline_writes", ("thread_id", "checkpoint_id"), count, read_values(WRITE_COLUMNS, self.value_read, "t"))
            + " WHERE t.channel = ? ORDER BY t.task_path, t.task_id, t.idx"
        )

    def channel_writes(self, checkpoints: int, channels: int) -> str:
        """(thread_id, checkpoint_ns, ``checkpoints`` checkpoint_ids, ``channels`` channels) →
        checkpoint_id, task_id, channel, type, blob, task_path, idx"""
        return (
            f"SELECT checkpoint_id, task_id, channel, type, {self.value_read.format('blob')}, task_path, idx FROM threadline_writes "
            f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN ({placeholders(checkpoints)}) "
            f"AND channel IN ({placeholders(channels)})"
        )

    def thread_write_sizes(self) -> str:
        """(thread_id) → checkpoint_ns, checkpoint_id, writes, stored bytes: per checkpoint with writes"""
        return (
            f"SELECT checkpoint_ns, checkpoint_id, COUNT(*), COALESCE(SUM({self.bytes_of('blob', 'blob')}), 0) FROM threadline_writes "
            "WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id"
        )
