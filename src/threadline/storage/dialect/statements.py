"""The storage engine's SQL, named, in the standard SQL both backends accept.

Written once with ``?`` placeholders (``Dialect.sql`` turns them into the driver's
style): ``ON CONFLICT``, ``RETURNING``, row values, ``VALUES`` lists and recursive
CTEs, which SQLite (3.35+) and Postgres both run. Each statement's comment gives its
parameters in order, then (→) the columns it returns. A dialect overrides a
statement only where its backend needs other SQL; what always differs (column
types, byte counts, JSON functions, introspection) are the ``Dialect`` hooks these
methods call. Key columns: a checkpoint is (thread_id, checkpoint_ns,
checkpoint_id), a blob (thread_id, checkpoint_ns, channel, version), a write
(thread_id, checkpoint_ns, checkpoint_id, task_id, idx).

This module holds the checkpoints', the thread index's and the migrations' statements and
the helpers every statement module uses; the other tables' statements stand beside it, one
module a concern (``blobs``, ``writes``, ``adoption``, ``reads``, ``lifecycle`` …), each
a class mixed into ``Dialect``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from threadline.storage.rows import CHECKPOINT_COLUMNS, CHECKPOINT_ROW

BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
CHECKPOINT_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id")
WRITE_KEY = (*CHECKPOINT_KEY, "task_id", "idx")
WHERE_CHECKPOINT = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
_INSERT_CHECKPOINTS = (
    "INSERT INTO threadline_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, "
    "step, source, run_id, created_at, checksum) "
)


def placeholders(n: int) -> str:
    return ",".join("?" * n)


@lru_cache(maxsize=512)  # SQL text built per call on the hot path: built once
def values_list(width: int, count: int) -> str:
    row = "(" + ",".join("?" * width) + ")"
    return "VALUES " + ",".join([row] * count)


@lru_cache(maxsize=512)  # SQL text built per call on the hot path: built once
def prefixed(columns: str, alias: str) -> str:
    """A column list (``rows.CHECKPOINT_ROW`` …) on a table alias: ``a, b`` → ``c.a, c.b``."""
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


@lru_cache(maxsize=512)  # SQL text built per call on the hot path: built once
def read_values(columns: str, value_read: str, alias: str | None = None) -> str:
    """A SELECT list of ``columns`` (on ``alias`` when given) whose value column ``blob`` is
    read through ``value_read`` (a dialect's ``"CAST({} AS BLOB)"``: the stored bytes, whatever
    the column holds)."""
    names = [c.strip() for c in columns.split(",")]
    return ", ".join(value_read.format(q) if n == "blob" else q for n, q in ((n, f"{alias}.{n}" if alias else n) for n in names))


# A put moves its thread's ``updated_at`` only when it is a second or more newer (never back):
# the column is indexed (listing order, TTL), and a row whose indexed columns keep their
# values is updated in place on Postgres (a HOT update, no new index entries), so the
# puts of a busy thread do not leave a dead row version and index entry each.
UPDATED_AT_RESOLUTION = 1.0  # seconds
THREAD_UPDATED_AT = (
    "updated_at = CASE WHEN excluded.updated_at >= threadline_threads.updated_at + "
    f"{UPDATED_AT_RESOLUTION} THEN excluded.updated_at ELSE threadline_threads.updated_at END"
)
# A put records its saver's default TTL on the thread (``threadline.ttl``); a put without one keeps the thread's.
THREAD_DEFAULT_TTL = "default_ttl = COALESCE(excluded.default_ttl, threadline_threads.default_ttl)"


class Statements:
    """Named statements; mixed into ``Dialect``, whose hooks (``types``, ``bytes_of``,
    ``replaced_write_columns``, ``reput_sets_parent``, ``probe``) some of them use."""

    def probe(self, table: str, on: str) -> str:
        """The FROM-clause part that reads the rows of ``table`` (alias ``t``) matching ``on``,
        a condition on ``t``'s key columns and an earlier alias: a join (SQLite probes the
        primary key per outer row)."""
        return f"JOIN {table} t ON {on}"

    @lru_cache(maxsize=512)
    def join_keys(self, table: str, columns: Sequence[str], count: int, select: str) -> str:
        """``SELECT select FROM (VALUES …) k`` and the rows of ``table`` (alias ``t``) whose
        ``columns`` match a key (``probe``); parameters: ``count`` keys of ``columns``, flattened.

        Looking rows up by a list of keys as a join on a VALUES list lets SQLite and
        Postgres probe the primary key per key; ``(a, b) IN (VALUES …)`` scans the table.
        """
        on = " AND ".join(f"t.{col} = k.column{i + 1}" for i, col in enumerate(columns))
        return f"SELECT {select} FROM ({values_list(len(columns), count)}) k {self.probe(table, on)}"

    types: dict[str, str]
    # How a SELECT reads a value column (``blob``): as stored on Postgres (BYTEA holds bytes
    # only); SQLite reads it as bytes whatever a damaged row holds (TEXT that is not UTF-8
    # would otherwise fail the whole statement), so the row is reported, not the read.
    value_read = "{}"
    # (thread_id) → checkpoint_ns, channel, version, storage class of the blob rows whose value
    # column holds neither bytes nor NULL (SQLite's dynamic typing; None where types are enforced)
    MISTYPED_BLOBS: str | None = None
    # (thread_id) → checkpoint_ns, checkpoint_id, task_id, idx, storage class: the same for writes
    MISTYPED_WRITES: str | None = None
    replaced_write_columns: tuple[str, ...]
    reput_sets_parent: bool
    official_blobs_table: str | None
    bytes_of: Callable[[str, str], str]
    metadata_filter: Callable[[Any], tuple[str, list[Any]]]

    # --- checkpoints ------------------------------------------------------------------

    # (thread_id, checkpoint_ns, checkpoint_id) → CHECKPOINT_ROW
    CHECKPOINT = f"SELECT {CHECKPOINT_ROW} FROM threadline_checkpoints {WHERE_CHECKPOINT}"
    # (thread_id, checkpoint_ns) → CHECKPOINT_ROW of the namespace's latest checkpoint
    LATEST_CHECKPOINT = (
        f"SELECT {CHECKPOINT_ROW} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
        "ORDER BY checkpoint_id DESC LIMIT 1"
    )
    # (thread_id, checkpoint_ns) → checkpoint_id of the namespace's latest checkpoint
    LATEST_CHECKPOINT_ID = (
        "SELECT checkpoint_id FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1"
    )
    # (thread_id, checkpoint_ns, checkpoint_id) → checkpoint
    CHECKPOINT_DOC = f"SELECT checkpoint FROM threadline_checkpoints {WHERE_CHECKPOINT}"
    # (thread_id, checkpoint_ns, checkpoint_id) → parent_checkpoint_id
    CHECKPOINT_PARENT = f"SELECT parent_checkpoint_id FROM threadline_checkpoints {WHERE_CHECKPOINT}"
    # (thread_id) → checkpoint_ns, checkpoint
    THREAD_DOCS = "SELECT checkpoint_ns, checkpoint FROM threadline_checkpoints WHERE thread_id = ?"
    # (thread_id) → checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, checksum. The JSON
    # comes as text (a driver would parse JSONB as it fetches): callers parse only the rows they use
    # (``prune`` of a long thread, the doomed rows' documents are never read).
    THREAD_CHECKPOINTS = (
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, CAST(checkpoint AS TEXT), CAST(metadata AS TEXT), checksum "
        "FROM threadline_checkpoints WHERE thread_id = ?"
    )
    # (thread_id) → CHECKPOINT_ROW plus run_id of every checkpoint of a thread
    THREAD_CHECKPOINT_ROWS = f"SELECT {CHECKPOINT_ROW}, run_id FROM threadline_checkpoints WHERE thread_id = ?"
    # (thread_id) → one row when the thread has a checkpoint, none otherwise
    HAS_CHECKPOINTS = "SELECT 1 FROM threadline_checkpoints WHERE thread_id = ? LIMIT 1"
    # (parent_checkpoint_id, checksum, thread_id, checkpoint_ns, checkpoint_id)
    SET_PARENT = f"UPDATE threadline_checkpoints SET parent_checkpoint_id = ?, checksum = ? {WHERE_CHECKPOINT}"
    # (checksum, thread_id, checkpoint_ns, checkpoint_id)
    SET_CHECKSUM = f"UPDATE threadline_checkpoints SET checksum = ? {WHERE_CHECKPOINT}"
    # (checkpoint, checksum, thread_id, checkpoint_ns, checkpoint_id)
    SET_CHECKPOINT_DOC = f"UPDATE threadline_checkpoints SET checkpoint = ?, checksum = ? {WHERE_CHECKPOINT}"
    # (metadata JSON, checksum, thread_id, checkpoint_ns, checkpoint_id): a checkpoint's metadata annotated
    # (``lifecycle.annotate``: a merge's parents, a bulk edit's mark), re-sealed
    SET_METADATA = f"UPDATE threadline_checkpoints SET metadata = ?, checksum = ? {WHERE_CHECKPOINT}"
    # (created_at, thread_id, checkpoint_ns, checkpoint_id)
    SET_CREATED_AT = f"UPDATE threadline_checkpoints SET created_at = ? {WHERE_CHECKPOINT}"
    # (thread_id, checkpoint_ns, checkpoint_id)
    DELETE_CHECKPOINT = f"DELETE FROM threadline_checkpoints {WHERE_CHECKPOINT}"
    # (thread_id, checkpoint_ns, checkpoint_id, then thread_id, checkpoint_ns twice) → checkpoint_id,
    # parent_checkpoint_id, checkpoint, metadata, checksum of the checkpoint and of every ancestor, in no
    # order. UNION keeps each (checkpoint_id, parent) once, so a parent cycle (a damaged row) ends the
    # recursion where it loops instead of walking on.
    ANCESTORS = (
        "WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id) AS ("
        " SELECT checkpoint_id, parent_checkpoint_id FROM threadline_checkpoints"
        " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        " UNION"
        " SELECT c.checkpoint_id, c.parent_checkpoint_id FROM threadline_checkpoints c"
        " JOIN chain ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = chain.parent_checkpoint_id"
        ") SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.metadata, c.checksum FROM chain"
        " JOIN threadline_checkpoints c ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = chain.checkpoint_id"
    )

    def checkpoint_size(self) -> str:
        """SQL for a checkpoint row's stored bytes (checkpoint + metadata JSON)."""
        return f"{self.bytes_of('checkpoint', 'json')} + {self.bytes_of('metadata', 'json')}"

    @lru_cache(maxsize=512)  # built on every put: built once
    def insert_checkpoint(self, checked: int, guarded: bool = True) -> str:
        """Insert-or-ignore of a checkpoint row, returning its checkpoint_id and how many of
        ``checked`` blob rows are stored as written (``count_stored``); with ``checked`` 0 it returns
        nothing (run it counted, ``Q(count=True)``: 1 inserted, 0 not). ``guarded``: not inserted either
        when a required parent checkpoint is not stored (another process deleted it); without it the
        caller has checked that (``put_guards``).
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source,
        run_id, created_at, checksum, [when ``guarded``: the required parent's checkpoint_id (NULL: none),
        its key (thread_id, checkpoint_ns, checkpoint_id),] then the ``count_stored`` parameters)
        → checkpoint_id, count"""
        returning = f" RETURNING checkpoint_id, {self.count_stored(checked)}" if checked else ""
        guard = (
            "WHERE ? IS NULL OR EXISTS (SELECT 1 FROM threadline_checkpoints p "
            "WHERE p.thread_id = ? AND p.checkpoint_ns = ? AND p.checkpoint_id = ?) "
        ) if guarded else ""
        return (
            _INSERT_CHECKPOINTS + "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
            f"{guard}ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING{returning}"
        )

    def reput_checkpoint(self) -> str:
        """A checkpoint put again: ([parent_checkpoint_id when ``reput_sets_parent``,] checkpoint, metadata,
        step, source, run_id, checksum, thread_id, checkpoint_ns, checkpoint_id)"""
        parent = "parent_checkpoint_id = ?, " if self.reput_sets_parent else ""
        return (
            f"UPDATE threadline_checkpoints SET {parent}checkpoint = ?, metadata = ?, step = ?, source = ?, run_id = ?, checksum = ? "
            f"{WHERE_CHECKPOINT}"
        )

    def checkpoints_by_keys(self, count: int) -> str:
        """(``count`` checkpoint keys, flattened) → CHECKPOINT_COLUMNS"""
        return self.join_keys("threadline_checkpoints", CHECKPOINT_KEY, count, prefixed(CHECKPOINT_COLUMNS, "t"))

    def list_checkpoints(self, where: str, after: bool) -> str:
        """``list``'s page, newest checkpoint_id first: (the parameters of ``where`` on alias ``c``, [the
        cursor's checkpoint_id, thread_id, checkpoint_ns when ``after``,] page size) → CHECKPOINT_ROW"""
        if after:
            where = f"({where}) AND (c.checkpoint_id, c.thread_id, c.checkpoint_ns) < (?, ?, ?)"
        return (
            f"SELECT {prefixed(CHECKPOINT_ROW, 'c')} FROM threadline_checkpoints c WHERE {where} "
            "ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC LIMIT ?"
        )

    def list_where(self, selection: Any) -> tuple[str, list[Any]]:
        """``list``'s WHERE clause on alias ``c`` and its parameters for a ``ops.read.Selection``
        (the metadata filter through ``metadata_filter``: all bound parameters)."""
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("thread_id", selection.thread_id), ("checkpoint_ns", selection.checkpoint_ns), ("checkpoint_id", selection.checkpoint_id)):
            if value is not None:
                clauses.append(f"c.{column} = ?")
                params.append(value)
        if selection.filter:
            sql, p = self.metadata_filter(selection.filter)
            clauses.append(sql)
            params.extend(p)
        if selection.before_id is not None:
            clauses.append("c.checkpoint_id < ?")
            params.append(selection.before_id)
        return (" AND ".join(clauses) or "1 = 1"), params

    def checkpoints_of_runs(self, count: int) -> str:
        """(``count`` run_ids) → thread_id, checkpoint_ns, checkpoint_id"""
        return f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM threadline_checkpoints WHERE run_id IN ({placeholders(count)})"

    def thread_checkpoint_sizes(self) -> str:
        """(thread_id) → checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at,
        checkpoint, metadata, stored bytes, checksum"""
        return (
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, checkpoint, metadata, "
            f"{self.checkpoint_size()}, checksum FROM threadline_checkpoints WHERE thread_id = ?"
        )

    # --- threads (the index kept with every put) ------------------------------------------

    # (thread_id, created_at, updated_at, checkpoint_count, bytes, default_ttl): counts and bytes are added to an
    # existing row; the writer's default TTL (minutes) recorded, a writer without one keeping the row's
    UPSERT_THREAD = (
        "INSERT INTO threadline_threads (thread_id, created_at, updated_at, checkpoint_count, bytes, default_ttl) VALUES (?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT (thread_id) DO UPDATE SET {THREAD_UPDATED_AT}, {THREAD_DEFAULT_TTL}, "
        "checkpoint_count = threadline_threads.checkpoint_count + excluded.checkpoint_count, bytes = threadline_threads.bytes + excluded.bytes"
    )
    # (thread_id, created_at, updated_at): a row with zero counts unless one exists (``restat`` fills it in)
    ENSURE_THREAD = (
        "INSERT INTO threadline_threads (thread_id, created_at, updated_at, checkpoint_count, bytes) VALUES (?, ?, ?, 0, 0) "
        "ON CONFLICT (thread_id) DO NOTHING"
    )
    # (thread_id) → created_at, updated_at, checkpoint_count, bytes
    THREAD = "SELECT created_at, updated_at, checkpoint_count, bytes FROM threadline_threads WHERE thread_id = ?"
    # (updated_at, thread_id)
    TOUCH_THREAD = "UPDATE threadline_threads SET updated_at = ? WHERE thread_id = ?"
    # (thread_id, thread_id, thread_id): created_at and updated_at from the thread's oldest and newest checkpoint
    RETIME_THREAD = (
        "UPDATE threadline_threads SET created_at = (SELECT MIN(created_at) FROM threadline_checkpoints WHERE thread_id = ?), "
        "updated_at = (SELECT MAX(created_at) FROM threadline_checkpoints WHERE thread_id = ?) WHERE thread_id = ?"
    )
    # (ttl_minutes, thread_id): the thread's own TTL (``threadline.ttl``; negative: never expires)
    SET_THREAD_TTL = "UPDATE threadline_threads SET ttl_minutes = ? WHERE thread_id = ?"
    # (now, thread_id): a read restarts the thread's TTL clock (``refresh_on_read``)
    TOUCH_READ = "UPDATE threadline_threads SET accessed_at = ? WHERE thread_id = ?"
    # (thread_id)
    DROP_EMPTY_THREAD = "DELETE FROM threadline_threads WHERE thread_id = ? AND checkpoint_count = 0"
    # (thread_id) each, in this order: what deleting a thread deletes (its guard's lease too)
    DELETE_THREAD = tuple(
        f"DELETE FROM threadline_{name} WHERE thread_id = ?"
        for name in ("writes", "blobs", "checkpoints", "heads", "threads", "leases", "thread_records", "cold")
    )

    def restat_thread(self) -> str:
        """(thread_id, thread_id, thread_id): the row's count and bytes recomputed from the tables."""
        return (
            "UPDATE threadline_threads SET "
            "checkpoint_count = (SELECT COUNT(*) FROM threadline_checkpoints WHERE thread_id = ?), "
            f"bytes = (SELECT COALESCE(SUM({self.bytes_of('blob', 'blob')}), 0) FROM threadline_blobs WHERE thread_id = ?) "
            "WHERE thread_id = ?"
        )

    # --- copying a thread -------------------------------------------------------------

    # (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source, run_id,
    # created_at, checksum): insert-or-ignore of a whole checkpoint row
    INSERT_CHECKPOINT_ROW = _INSERT_CHECKPOINTS + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    # (thread_id, created_at, updated_at, thread_id): the index row of a thread that has checkpoints, unless one exists
    ENSURE_COPIED_THREAD = (
        "INSERT INTO threadline_threads (thread_id, created_at, updated_at, checkpoint_count, bytes) "
        "SELECT ?, ?, ?, 0, 0 WHERE EXISTS (SELECT 1 FROM threadline_checkpoints WHERE thread_id = ?) ON CONFLICT (thread_id) DO NOTHING"
    )

    # --- migrations ---------------------------------------------------------------------

    # () → v of every applied migration
    APPLIED_MIGRATIONS = "SELECT v FROM threadline_migrations"
    # (v, applied_at)
    RECORD_MIGRATION = "INSERT INTO threadline_migrations (v, applied_at) VALUES (?, ?)"

    def create_migrations_table(self) -> str:
        return f"CREATE TABLE IF NOT EXISTS threadline_migrations (v INTEGER PRIMARY KEY, applied_at {self.types['real']} NOT NULL)"
