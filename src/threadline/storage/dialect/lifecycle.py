"""The named statements of ``threadline.lifecycle``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). Each statement's comment gives its parameters, then (→) the
columns of the rows it returns; ``storage/redis/lifecycle.py`` implements the same names on Redis.
"""

from __future__ import annotations

from collections.abc import Callable

# A thread has expired (``threadline.ttl``) when its last activity — the last put
# (``updated_at``) or the last read that restarted its clock (``accessed_at``) — is older
# than its TTL: its own (``ttl_minutes``; negative: never), else the default TTL it was
# written under (``default_ttl``), else — only when the sweep takes the whole database — the
# sweep's; unless it is pinned or holds a tagged checkpoint.
# Parameters: the sweep's default TTL in minutes for threads written without one (NULL: they never expire), the same, now.
EXPIRED = (
    "COALESCE(ttl_minutes, default_ttl, ?) > 0 AND (CASE WHEN accessed_at > updated_at THEN accessed_at ELSE updated_at END) "
    "+ COALESCE(ttl_minutes, default_ttl, ?) * 60 <= ? "
    # a pinned thread, or one holding a tagged checkpoint, never expires (``lifecycle.tags``)
    "AND thread_id NOT IN (SELECT thread_id FROM threadline_pins) AND thread_id NOT IN (SELECT thread_id FROM threadline_tags)"
)
# The rows after a listing's last one, in (updated_at, thread_id) order: (updated_at, the same, thread_id).
AFTER = "(updated_at > ? OR (updated_at = ? AND thread_id > ?))"


class LifecycleStatements:
    """Mixed into ``Dialect``."""

    lock_rows: str
    checkpoint_size: Callable[[], str]
    bytes_of: Callable[[str, str], str]
    # Whether deleting rows leaves space a maintenance pass gives back (``lifecycle.vacuum``);
    # False where the store frees memory as it deletes (Redis): ``vacuum`` does not apply.
    reclaims_space = True

    # --- the sweeper's job lease (table threadline_sweeps, one row a job) ----------------

    # (name): the job's row with a free lease, unless it exists
    ENSURE_SWEEP_JOB = "INSERT INTO threadline_sweeps (name, lease_until) VALUES (?, 0) ON CONFLICT (name) DO NOTHING"
    # (owner, lease_until, started_at, name, now, now - min_gap) → name, when the lease was free and
    # the last run finished at or before now - min_gap: this owner holds it until lease_until
    CLAIM_SWEEP = (
        "UPDATE threadline_sweeps SET owner = ?, lease_until = ?, started_at = ? "
        "WHERE name = ? AND lease_until < ? AND (finished_at IS NULL OR finished_at <= ?) RETURNING name"
    )
    # (lease_until, name, owner) → name, when owner still held the lease (now extended)
    RENEW_SWEEP = "UPDATE threadline_sweeps SET lease_until = ? WHERE name = ? AND owner = ? RETURNING name"
    # (finished_at, result JSON, name, owner): owner's lease released, the run's end recorded
    FINISH_SWEEP = "UPDATE threadline_sweeps SET lease_until = 0, finished_at = ?, result = ? WHERE name = ? AND owner = ?"
    # (name) → owner, lease_until, started_at, finished_at, result (JSON text) of the job's row
    SWEEP_RUN = "SELECT owner, lease_until, started_at, finished_at, result FROM threadline_sweeps WHERE name = ?"

    # --- health (``lifecycle.health``): what was written lately -----------------------------

    def checkpoints_since(self) -> str:
        """(since) → one row: how many checkpoints were created at or after ``since`` (unix
        seconds) and their stored bytes (checkpoint and metadata JSON; 0 for none)."""
        return f"SELECT COUNT(*), COALESCE(SUM({self.checkpoint_size()}), 0) FROM threadline_checkpoints WHERE created_at >= ?"

    def writes_since(self) -> str:
        """(since, since) → one row: how many pending writes were created at or after ``since`` in
        the threads updated since then (the ``threads`` index narrows the scan), and their stored bytes."""
        return (
            f"SELECT COUNT(*), COALESCE(SUM({self.bytes_of('blob', 'blob')}), 0) FROM threadline_writes "
            "WHERE created_at >= ? AND thread_id IN (SELECT thread_id FROM threadline_threads WHERE updated_at >= ?)"
        )

    # --- expiry and retention --------------------------------------------------------------

    # (the sweep's default TTL minutes or NULL, the same, now, after updated_at, the same, after thread_id, limit) →
    # thread_id, updated_at, checkpoint_count of expired threads after that one, least recently updated first
    EXPIRED_THREADS = f"SELECT thread_id, updated_at, checkpoint_count FROM threadline_threads WHERE {EXPIRED} AND {AFTER} ORDER BY updated_at, thread_id LIMIT ?"
    # () → thread_id of every thread with a row in any table (fsck also checks rows whose thread has no checkpoint)
    EVERY_THREAD_ID = (
        "SELECT thread_id FROM threadline_checkpoints UNION SELECT thread_id FROM threadline_blobs UNION SELECT thread_id FROM threadline_writes "
        "UNION SELECT thread_id FROM threadline_threads"
    )

    def expiring_thread(self) -> str:
        """(thread_id, the sweep's default TTL minutes or NULL, the same, now) → checkpoint_count of the thread when
        it is still expired, its index row locked until the transaction ends (``lock_rows``)."""
        return f"SELECT checkpoint_count FROM threadline_threads WHERE thread_id = ? AND {EXPIRED}{self.lock_rows}"

    def lock_thread(self) -> str | None:
        """(thread_id): lock the thread's index row until the transaction ends; None where rows do
        not lock (a write transaction already holds the database's one write lock)."""
        return f"SELECT 1 FROM threadline_threads WHERE thread_id = ?{self.lock_rows}" if self.lock_rows else None

    def retention_candidates(self, keep_last: bool, older_than: bool, idle: bool) -> str:
        """Threads after a thread_id that a retention policy may change, in order: (for each rule given,
        in this order: after and keep_last — more checkpoints than that; after and a time — a checkpoint
        created before it; after and a time — no update since; then limit) → thread_id"""
        parts = [
            sql for on, sql in (
                (keep_last, "SELECT thread_id FROM threadline_threads WHERE thread_id > ? AND checkpoint_count > ?"),
                (older_than, "SELECT thread_id FROM threadline_checkpoints WHERE thread_id > ? AND created_at < ?"),
                (idle, "SELECT thread_id FROM threadline_threads WHERE thread_id > ? AND updated_at <= ?"),
            ) if on
        ]
        return f"SELECT thread_id FROM ({' UNION '.join(parts)}) u ORDER BY thread_id LIMIT ?"

    # --- monthly partitions (``partitions``: Postgres) ------------------------------------

    # () → one row when threadline_checkpoints is a partitioned table of the current schema
    IS_PARTITIONED = (
        "SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relname = 'threadline_checkpoints'"
    )
    # (parent table name) → relname of each of its partitions
    PARTITIONS_OF = (
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
        "JOIN pg_namespace n ON n.oid = p.relnamespace WHERE n.nspname = current_schema() AND p.relname = ?"
    )
    # () → the oldest uuid6 checkpoint_id (NULL: none)
    FIRST_UUID6_ID = "SELECT MIN(checkpoint_id) FROM threadline_checkpoints WHERE checkpoint_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-6'"

    # DDL takes no bound parameters: the names and bounds below are computed from dates and the
    # fixed table names, never from input.
    def create_partition(self, name: str, table: str, lo: str, hi: str) -> tuple[str, str]:
        """() each: the partition ``name`` of ``threadline_<table>`` for checkpoint ids in [lo, hi), tuned to vacuum early."""
        return (
            f"CREATE TABLE {name} PARTITION OF threadline_{table} FOR VALUES FROM ('{lo}') TO ('{hi}')",
            f"ALTER TABLE {name} SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02)",
        )

    def partition_used(self, name: str) -> str:
        """() → one row when the partition ``name`` holds a row"""
        return f"SELECT 1 FROM {name} LIMIT 1"

    def drop_partition(self, name: str) -> str:
        """(): the partition ``name`` dropped"""
        return f"DROP TABLE IF EXISTS {name}"

    def repartition(self, table: str) -> tuple[str, ...]:
        """() each: ``threadline_<table>`` renamed aside and created again partitioned by checkpoint_id, with a default partition"""
        return (
            f"ALTER TABLE threadline_{table} RENAME TO threadline_{table}_unpartitioned",
            f"CREATE TABLE threadline_{table} (LIKE threadline_{table}_unpartitioned INCLUDING ALL) PARTITION BY RANGE (checkpoint_id)",
            f"CREATE TABLE threadline_{table}_default PARTITION OF threadline_{table} DEFAULT",
        )

    def move_unpartitioned(self, table: str) -> tuple[str, str]:
        """() → rows moved, then (): the rows set aside by ``repartition`` moved in, the old table dropped"""
        return (
            f"WITH m AS (INSERT INTO threadline_{table} SELECT * FROM threadline_{table}_unpartitioned RETURNING 1) SELECT COUNT(*) FROM m",
            f"DROP TABLE threadline_{table}_unpartitioned",
        )
