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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from threadline.storage.rows import BLOB_COLUMNS, CHECKPOINT_COLUMNS, CHECKPOINT_ROW, WRITE_COLUMNS

BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
CHECKPOINT_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id")
WRITE_KEY = (*CHECKPOINT_KEY, "task_id", "idx")
WHERE_CHECKPOINT = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
_INSERT_BLOBS = f"INSERT INTO threadline_blobs ({BLOB_COLUMNS}) "
_INSERT_WRITES = f"INSERT INTO threadline_writes ({WRITE_COLUMNS}, created_at) "
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

    def insert_checkpoint(self, checked: int) -> str:
        """Insert-or-ignore of a checkpoint row, returning its checkpoint_id and how many of
        ``checked`` blob rows are stored as written (``count_stored``; 0 when none); not inserted
        either when a required parent checkpoint is not stored (another process deleted it).
        (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source,
        run_id, created_at, checksum, the required parent's checkpoint_id (NULL: none), its key (thread_id,
        checkpoint_ns, checkpoint_id), then the ``count_stored`` parameters) → checkpoint_id, count"""
        count = self.count_stored(checked) if checked else "0"
        return (
            _INSERT_CHECKPOINTS + "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
            "WHERE ? IS NULL OR EXISTS (SELECT 1 FROM threadline_checkpoints p "
            "WHERE p.thread_id = ? AND p.checkpoint_ns = ? AND p.checkpoint_id = ?) "
            f"ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING RETURNING checkpoint_id, {count}"
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

    # --- blobs ------------------------------------------------------------------------

    # (thread_id, checkpoint_ns, channel, version, type, blob, base_version): insert-or-ignore (blobs are immutable)
    INSERT_BLOB = _INSERT_BLOBS + "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    # (thread_id) → BLOB_COLUMNS of every blob of a thread
    THREAD_BLOBS = f"SELECT {BLOB_COLUMNS} FROM threadline_blobs WHERE thread_id = ?"
    # (type, blob, thread_id, checkpoint_ns, channel, version): a value re-sealed in place (``rekey``)
    SET_BLOB_VALUE = "UPDATE threadline_blobs SET type = ?, blob = ? WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
    # (thread_id, checkpoint_ns, channel, version)
    DELETE_BLOB = "DELETE FROM threadline_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
    # (thread_id) → checkpoint_ns, channel, version, base_version
    THREAD_BLOB_BASES = "SELECT checkpoint_ns, channel, version, base_version FROM threadline_blobs WHERE thread_id = ?"
    # (thread_id, LIKE pattern) → BLOB_COLUMNS of the thread's blobs whose type matches (``codec.DELTA_REF`` + "%")
    THREAD_BLOBS_LIKE = f"SELECT {BLOB_COLUMNS} FROM threadline_blobs WHERE thread_id = ? AND type LIKE ?"
    # (thread_id, type) → checkpoint_ns, channel, version of the blobs not of that type (``codec.EMPTY``: those with a value)
    THREAD_BLOBS_NOT_OF_TYPE = "SELECT checkpoint_ns, channel, version FROM threadline_blobs WHERE thread_id = ? AND type <> ?"

    def insert_blob_guarded(self) -> str:
        """Insert-or-ignore of one blob row: (the INSERT_BLOB parameters, then the type and stored size
        its base row must have, NULL for a snapshot). A delta is inserted only while its base row still
        has that type and size, so a stale cache entry can never leave a delta on a base that changed."""
        return (
            _INSERT_BLOBS + f"SELECT column1, column2, column3, column4, column5, CAST(column6 AS {self.types['blob']}), column7 "
            f"FROM ({values_list(9, 1)}) v "
            "WHERE column7 IS NULL OR EXISTS (SELECT 1 FROM threadline_blobs b WHERE b.thread_id = v.column1 AND b.checkpoint_ns = v.column2 "
            "AND b.channel = v.column3 AND b.version = v.column7 AND b.type = v.column8 "
            f"AND {self.bytes_of('b.blob', 'blob')} = CAST(v.column9 AS {self.types['int']})) "
            "ON CONFLICT DO NOTHING"
        )

    def count_stored(self, count: int) -> str:
        """A scalar subquery: how many of ``count`` (channel, version, type, stored size) rows of one
        (thread_id, checkpoint_ns) are stored exactly so. (the rows, flattened, then thread_id, checkpoint_ns)"""
        return (
            f"(SELECT COUNT(*) FROM ({values_list(4, count)}) k JOIN threadline_blobs b ON b.thread_id = ? AND b.checkpoint_ns = ? "
            "AND b.channel = k.column1 AND b.version = k.column2 AND b.type = k.column3 "
            f"AND {self.bytes_of('b.blob', 'blob')} = CAST(k.column4 AS {self.types['int']}))"
        )

    def delete_by_keys(self, table: str, key: Sequence[str]) -> str | None:
        """One statement deleting the rows of ``table`` whose ``key`` columns (text) match one
        of a list of keys; its parameters are one list per key column. None where the
        dialect deletes a list of keys one statement each (``executemany``: SQLite runs them
        in process, a client–server backend would pay a round trip each)."""
        return None

    def blob_sizes_by_keys(self, count: int) -> str:
        """(``count`` blob keys, flattened) → channel, version, type, stored bytes"""
        return self.join_keys("threadline_blobs", BLOB_KEY, count, f"t.channel, t.version, t.type, {self.bytes_of('t.blob', 'blob')}")

    def blobs_with_value(self, count: int) -> str:
        """(``count`` blob keys, flattened, then ``codec.EMPTY``) → channel, version of those holding a value"""
        return self.join_keys("threadline_blobs", BLOB_KEY, count, "t.channel, t.version") + " WHERE t.type <> ?"

    @lru_cache(maxsize=512)
    def blob_chains(self, count: int) -> str:
        """The blob rows of ``count`` keys and of every version their deltas are built on.
        (``count`` blob keys, flattened) → BLOB_COLUMNS

        A recursive CTE follows ``base_version`` (``UNION`` returns each row once however
        many keys share a chain). Each step looks the next base up by a correlated
        subquery, which both databases answer with one primary-key probe (a join there
        lets Postgres plan a scan of ``blobs`` per step); the keys' rows and the chain's are
        read by ``probe``."""
        on = " AND ".join(f"t.{col} = k.column{i + 1}" for i, col in enumerate(BLOB_KEY))
        return (
            "WITH RECURSIVE chain(thread_id, checkpoint_ns, channel, version, base_version) AS ("
            f" SELECT t.thread_id, t.checkpoint_ns, t.channel, t.version, t.base_version FROM ({values_list(4, count)}) k"
            f" {self.probe('threadline_blobs', on)}"
            " UNION"
            " SELECT c.thread_id, c.checkpoint_ns, c.channel, c.base_version,"
            " (SELECT b.base_version FROM threadline_blobs b WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns"
            " AND b.channel = c.channel AND b.version = c.base_version)"
            " FROM chain c WHERE c.base_version IS NOT NULL"
            f") SELECT {read_values(BLOB_COLUMNS, self.value_read, 't')} FROM chain c"
            " " + self.probe("threadline_blobs", "t.thread_id = c.thread_id AND t.checkpoint_ns = c.checkpoint_ns"
            " AND t.channel = c.channel AND t.version = c.version")
        )

    def thread_blob_sizes(self) -> str:
        """(thread_id) → checkpoint_ns, channel, version, type, base_version, stored bytes"""
        return f"SELECT checkpoint_ns, channel, version, type, base_version, {self.bytes_of('blob', 'blob')} FROM threadline_blobs WHERE thread_id = ?"

    # --- writes -----------------------------------------------------------------------

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

    def insert_writes(self, replace: bool, live: bool = False, fenced: int = 0) -> str:
        """(WRITE_COLUMNS, created_at): insert-or-ignore → task_id, idx of the rows inserted; or with
        ``replace`` (special channels) an upsert of the dialect's ``replaced_write_columns``.

        ``live`` (a running graph's ``put_writes``): a row whose checkpoint is not stored while a
        newer one of its namespace is, is not inserted. Its checkpoint was pruned after LangGraph
        wrote the next one (its writes are saved in the background, and may land after a sweep's
        prune): they could only be orphans. Writes ahead of their checkpoint are kept.

        ``fenced`` (with ``live``, on a dialect with ``fences_in_statement``): ``fenced`` rows
        written under a thread guard lease, checked in this statement — (thread_id, holder, token
        as ``check_fence``, then the rows' parameters) → task_id, idx of the rows written, and
        (NULL, 1 or 0): whether the lease held (nothing is written when it did not)."""
        replaced = ", ".join(f"{c} = excluded.{c}" for c in self.replaced_write_columns)
        conflict = f"DO UPDATE SET {replaced}" if replace else "DO NOTHING RETURNING task_id, idx"
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
        for name in ("writes", "blobs", "checkpoints", "threads", "leases", "thread_records", "cold")
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

    # --- migrations and adoption --------------------------------------------------------

    # () → v of every applied migration
    APPLIED_MIGRATIONS = "SELECT v FROM threadline_migrations"
    # (v, applied_at)
    RECORD_MIGRATION = "INSERT INTO threadline_migrations (v, applied_at) VALUES (?, ?)"
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

    def create_migrations_table(self) -> str:
        return f"CREATE TABLE IF NOT EXISTS threadline_migrations (v INTEGER PRIMARY KEY, applied_at {self.types['real']} NOT NULL)"
