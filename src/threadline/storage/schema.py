"""The schema every backend stores: table names, the numbered migrations and the legacy layout.

Every table is named ``threadline_<name>`` (``table(name)``) on every backend, so
threadline's tables never collide with the official savers' (``checkpoints``,
``writes``, ``checkpoint_blobs``, …) or an application's (``migrations``), and a
database can hold both during a switch. The statements are written once, with the
column types as ``{text}``, ``{json}``, ``{blob}``, ``{real}`` and ``{int}``, which a
dialect fills in (``Dialect.migrations``); ``ops.setup`` applies them.
"""

from __future__ import annotations

PREFIX = "threadline_"
# The logical tables, each stored as PREFIX + name.
LOGICAL_TABLES = (
    "checkpoints", "blobs", "writes", "threads", "migrations", "adopted", "sweeps", "thread_records", "leases", "tags", "pins", "cold",
    "heads",
)


def table(name: str) -> str:
    """The stored name of a logical table: ``threadline_<name>``."""
    return PREFIX + name


# Numbered migrations, recorded in threadline_migrations. Each entry is (version,
# statements); {json}, {blob}, {real} and {int} are replaced by the dialect's column
# types. Never edit a shipped entry (beyond the table prefix, see LEGACY_RENAMES):
# add a new one. {text} is TEXT with byte-order collation, so ORDER BY and
# comparisons agree with Python's string order (LangGraph's writes_sort_key).
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS threadline_checkpoints (
                thread_id {text} NOT NULL,
                checkpoint_ns {text} NOT NULL DEFAULT '',
                checkpoint_id {text} NOT NULL,
                parent_checkpoint_id {text},
                checkpoint {json} NOT NULL,
                metadata {json} NOT NULL,
                step {int},
                source {text},
                run_id {text},
                created_at {real} NOT NULL,
                PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
            )""",
            "CREATE INDEX IF NOT EXISTS threadline_checkpoints_run_id ON threadline_checkpoints (run_id)",
            "CREATE INDEX IF NOT EXISTS threadline_checkpoints_source_step ON threadline_checkpoints (source, step)",
            "CREATE INDEX IF NOT EXISTS threadline_checkpoints_created_at ON threadline_checkpoints (created_at)",
            """CREATE TABLE IF NOT EXISTS threadline_blobs (
                thread_id {text} NOT NULL,
                checkpoint_ns {text} NOT NULL DEFAULT '',
                channel {text} NOT NULL,
                version {text} NOT NULL,
                type {text} NOT NULL,
                blob {blob},
                base_version {text},
                PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
            )""",
            """CREATE TABLE IF NOT EXISTS threadline_writes (
                thread_id {text} NOT NULL,
                checkpoint_ns {text} NOT NULL DEFAULT '',
                checkpoint_id {text} NOT NULL,
                task_id {text} NOT NULL,
                idx {int} NOT NULL,
                channel {text} NOT NULL,
                task_path {text} NOT NULL DEFAULT '',
                type {text} NOT NULL,
                blob {blob},
                created_at {real} NOT NULL,
                PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
            )""",
            """CREATE TABLE IF NOT EXISTS threadline_threads (
                thread_id {text} NOT NULL PRIMARY KEY,
                created_at {real} NOT NULL,
                updated_at {real} NOT NULL,
                checkpoint_count {int} NOT NULL DEFAULT 0,
                bytes {int} NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX IF NOT EXISTS threadline_threads_updated_at ON threadline_threads (updated_at)",
        ],
    ),
    (
        2,
        [
            # Threads adopted from the official saver's tables on first touch: the newest
            # official checkpoint_id imported, so later touches import only what is newer
            # and a thread deleted in threadline is not adopted again.
            """CREATE TABLE IF NOT EXISTS threadline_adopted (
                thread_id {text} NOT NULL PRIMARY KEY,
                checkpoint_id {text} NOT NULL,
                adopted_at {real} NOT NULL
            )""",
        ],
    ),
    (
        3,
        [
            # TTL (``threadline.lifecycle.sweeper``): a thread's own TTL in minutes (NULL: the
            # saver's default_ttl; negative: never expires) and when a read last restarted its clock.
            "ALTER TABLE threadline_threads ADD COLUMN ttl_minutes {real}",
            "ALTER TABLE threadline_threads ADD COLUMN accessed_at {real}",
            # One row per background job (the sweeper): who holds its lease until when, and
            # its last run, so many processes sweep one database one at a time.
            """CREATE TABLE IF NOT EXISTS threadline_sweeps (
                name {text} NOT NULL PRIMARY KEY,
                owner {text},
                lease_until {real} NOT NULL DEFAULT 0,
                started_at {real},
                finished_at {real},
                result {json}
            )""",
        ],
    ),
    (
        4,
        [
            # A checkpoint row's checksum (threadline.codec.seal): its key, parent, checkpoint and
            # metadata, checked on load. NULL for rows written before it (they still load).
            "ALTER TABLE threadline_checkpoints ADD COLUMN checksum {text}",
        ],
    ),
    (
        5,
        [
            # SQLite only (``SqliteDialect.extra_migrations``): blobs and writes rebuilt as
            # WITHOUT ROWID tables, stored in their primary key's order, so the key is not kept
            # a second time in an index (10 % of the file in the agent benchmark). Checkpoints
            # keep their rowid: their three secondary indexes would each hold the whole key.
        ],
    ),
    (
        6,
        [
            # No query filters on (source, step): the index only cost every put an insert and
            # its bytes. (Metadata filters read the metadata column, as the official savers do.)
            "DROP INDEX IF EXISTS threadline_checkpoints_source_step",
        ],
    ),
    (
        7,
        [
            # Thread records (``threadline.lifecycle.records``, issue 29): a thread's own metadata
            # (title, owner, tags, any JSON object), set without writing a checkpoint, and whether
            # it is archived (hidden from listings unless asked). A table of its own, joined to
            # the threads index by its primary key, so that rebuilding or re-counting the index
            # never loses a record; created_at/updated_at: when the record was first set / last changed.
            """CREATE TABLE IF NOT EXISTS threadline_thread_records (
                thread_id {text} NOT NULL PRIMARY KEY,
                metadata {json} NOT NULL,
                archived {int} NOT NULL DEFAULT 0,
                created_at {real} NOT NULL,
                updated_at {real} NOT NULL
            )""",
            # the threads search sorts by creation as well as by update
            "CREATE INDEX IF NOT EXISTS threadline_threads_created_at ON threadline_threads (created_at)",
            # the heads waiting on an interrupt or stopped by an error (the status search): only
            # those writes are indexed, so an ordinary put_writes never touches this index
            "CREATE INDEX IF NOT EXISTS threadline_writes_stops ON threadline_writes (thread_id, checkpoint_id) "
            "WHERE channel IN ('__interrupt__', '__error__') AND checkpoint_ns = ''",
        ],
    ),
    (
        8,
        [
            # The thread guard (``threadline.guard``): one row a thread while a run holds it — who
            # (``holder``), since when and until when (seconds since the epoch, the database's clock).
            # Not a thread's data: backups leave it out; deleting the thread deletes it.
            """CREATE TABLE IF NOT EXISTS threadline_leases (
                thread_id {text} NOT NULL PRIMARY KEY,
                holder {text} NOT NULL,
                acquired_at {real} NOT NULL,
                expires_at {real} NOT NULL
            )""",
        ],
    ),
    (
        10,
        [
            # Tags and pins (``threadline.lifecycle.tags``): a name for a checkpoint, unique in its
            # thread, and threads pinned. Retention, TTL expiry, the sweeper and ``delete`` keep
            # both (unless forced). Versions 7 to 9 may be absent: setup applies every missing one.
            """CREATE TABLE IF NOT EXISTS threadline_tags (
                thread_id {text} NOT NULL,
                name {text} NOT NULL,
                checkpoint_ns {text} NOT NULL DEFAULT '',
                checkpoint_id {text} NOT NULL,
                created_at {real} NOT NULL,
                PRIMARY KEY (thread_id, name)
            )""",
            """CREATE TABLE IF NOT EXISTS threadline_pins (
                thread_id {text} NOT NULL PRIMARY KEY,
                pinned_at {real} NOT NULL
            )""",
        ],
    ),
    (
        12,
        [
            # The cold tier (``threadline.lifecycle.cold``, docs/offload.md): a thread moved whole to
            # the object store keeps this stub, naming its archive, until its first read or write.
            """CREATE TABLE IF NOT EXISTS threadline_cold (
                thread_id {text} NOT NULL PRIMARY KEY,
                object {text} NOT NULL,
                checkpoints {int} NOT NULL DEFAULT 0,
                bytes {int} NOT NULL DEFAULT 0,
                tiered_at {real} NOT NULL
            )""",
        ],
    ),
    (
        13,
        [
            # A cold thread's times and TTL, copied from its ``threads`` row when it is moved (stubs
            # written before take the time they were moved): the listings show them, TTL expiry
            # reads them. The table is rebuilt rather than altered, so that applying this again
            # (its record lost) still works, every stub kept (its times then those it was moved at).
            """CREATE TABLE IF NOT EXISTS threadline_cold_v13 (
                thread_id {text} NOT NULL PRIMARY KEY,
                object {text} NOT NULL,
                checkpoints {int} NOT NULL DEFAULT 0,
                bytes {int} NOT NULL DEFAULT 0,
                tiered_at {real} NOT NULL,
                created_at {real},
                updated_at {real},
                accessed_at {real},
                ttl_minutes {real}
            )""",
            "INSERT INTO threadline_cold_v13 (thread_id, object, checkpoints, bytes, tiered_at, created_at, updated_at) "
            "SELECT thread_id, object, checkpoints, bytes, tiered_at, tiered_at, tiered_at FROM threadline_cold",
            "DROP TABLE threadline_cold",
            "ALTER TABLE threadline_cold_v13 RENAME TO threadline_cold",
        ],
    ),
    (
        14,
        [
            # No table changes: from this version a blob may reference pending writes whose values
            # are not lists (a ``Topic`` channel's ``Send``s, ``codec.refs``), which a release before
            # it would report as damaged; recording the version makes such a release refuse the
            # database instead (docs/operations.md, "Upgrading threadline").
        ],
    ),
    (
        15,
        [
            # TTL is a thread's own (``threadline.ttl``): the default TTL in minutes of the saver
            # that last wrote the thread with one (a write without one keeps it). NULL: written
            # without a TTL, which a sweep expires only when told to take the whole database
            # (threads written before this migration included). Copied onto a cold thread's stub.
            "ALTER TABLE threadline_threads ADD COLUMN default_ttl {real}",
            "ALTER TABLE threadline_cold ADD COLUMN default_ttl {real}",
        ],
    ),
    (
        16,
        [
            # The guard's fencing token (docs/concurrency.md, "Fencing"): a number per thread that
            # grows with every run taking the lease; a put under a lease checks it. A released lease
            # keeps its row (expired) so the number keeps growing; running leases keep token 1.
            "ALTER TABLE threadline_leases ADD COLUMN token {int} NOT NULL DEFAULT 1",
        ],
    ),
    (
        17,
        [
            # Storage format 2, head rows (``storage.heads``): a namespace's latest channel values in one
            # row, sealed, so that reading the latest checkpoint is one keyed read. Derived from the
            # blobs (which stay the record): a database without them reads as before.
            """CREATE TABLE IF NOT EXISTS threadline_heads (
                thread_id {text} NOT NULL,
                checkpoint_ns {text} NOT NULL DEFAULT '',
                checkpoint_id {text} NOT NULL,
                type {text} NOT NULL,
                data {blob} NOT NULL,
                PRIMARY KEY (thread_id, checkpoint_ns)
            ){clustered}""",
        ],
    ),
    (
        18,
        [
            # Storage format 2: the run_id index holds only the checkpoints a run_id was given to (a
            # graph run by LangGraph's server; local runs have none), so a put without one writes no
            # index entry; ``delete_for_runs`` (``run_id IN (…)``) still finds them through it. On
            # Redis it records that checkpoint rows may carry ``x3:`` checksums (of the JSON as
            # stored), which a release before it would report as damaged rows.
            "DROP INDEX IF EXISTS threadline_checkpoints_run_id",
            "CREATE INDEX IF NOT EXISTS threadline_checkpoints_run_id ON threadline_checkpoints (run_id) WHERE run_id IS NOT NULL",
        ],
    ),
    (
        19,
        # Storage format 2: a checksummed value row (``+sum``) is sealed with xxh3-64 (``codec.seal``,
        # envelope ``C1 03``), and a Postgres checkpoint row's unkeyed checksum is ``c3:`` (xxh3-128
        # of its parsed JSON), which a release before it would report as damaged rows: recorded so
        # that such a release refuses the database with its version message instead. Rows written
        # before (BLAKE2b-64, ``C1 01``; ``b2:``) are read as they are.
        [],
    ),
    (
        20,
        # Storage format 2: a checkpoint's channels that hold None or are empty are kept in its document
        # (``rows.NULLS`` / ``rows.EMPTIES``, out of its stored ``channel_versions``) with no blob row; a
        # release before it would read such a checkpoint without them: recorded so that it refuses the
        # database with its version message instead.
        [],
    ),
    (
        21,
        # Storage format 2: a checkpoint's channels that hold a small str, int or bool are kept in its
        # document too (``rows.SCALARS``: channel → [version, value]) with no blob row; recorded so that
        # a release before it refuses the database instead of reading such a checkpoint without them.
        [],
    ),
    (
        22,
        # Storage format 2: on SQLite a checkpoint's document may be stored with its versions compacted
        # (``jsontext.compact_doc``: the first 24 of a version's 32 zeros as ``~``), which a release
        # before it would read as versions no blob has; recorded so that it refuses the database instead.
        [],
    ),
    (
        23,
        # SQLite only (``SqliteDialect.extra_migrations``): the heads table rebuilt as a rowid table, whose
        # rows keep up to a page in their leaf (a WITHOUT ROWID row spills past ~1 KB): a put writes one
        # overflow page less.
        [],
    ),
]

LATEST_VERSION = max(v for v, _ in MIGRATIONS)

# Databases written before the table prefix (threadline 0.1) used the bare names; setup()
# renames them in place, tables and indexes, before applying the migrations above.
LEGACY_RENAMES = {name: table(name) for name in LOGICAL_TABLES if name not in ("adopted", "sweeps", "thread_records", "leases", "tags", "pins", "cold", "heads")}
LEGACY_INDEXES = {
    "checkpoints_run_id": ("threadline_checkpoints_run_id", "threadline_checkpoints (run_id)"),
    "checkpoints_source_step": ("threadline_checkpoints_source_step", "threadline_checkpoints (source, step)"),
    "checkpoints_created_at": ("threadline_checkpoints_created_at", "threadline_checkpoints (created_at)"),
    "threads_updated_at": ("threadline_threads_updated_at", "threadline_threads (updated_at)"),
}
