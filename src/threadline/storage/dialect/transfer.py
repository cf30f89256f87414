"""The named statements of ``threadline.transfer``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). Each statement's comment gives its parameters, then (→) the
columns of the rows it returns; ``storage/redis/transfer.py`` implements the same names on Redis.

Tables are named by their short name (``checkpoints`` for ``threadline_checkpoints``) and
columns by the names ``columns_sql`` lists; both come from threadline's own schema or from an
archive's, checked against it, never from other input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from threadline.storage.dialect.statements import placeholders


class TransferStatements:
    """Mixed into ``Dialect``."""

    bytes_of: Callable[[str, str], str]
    checkpoint_size: Callable[[], str]
    # Whether an operation's writes are undone when it raises (a transaction); where not (Redis),
    # a restore or import that fails its verification deletes the thread's rows it wrote.
    rolls_back = True

    # --- a thread's rows as stored (backup, restore, bundles) ------------------------------

    # (thread_id): what adopting an official database recorded for the thread
    DELETE_ADOPTED = "DELETE FROM threadline_adopted WHERE thread_id = ?"

    def thread_ids_in(self, tables: Sequence[str]) -> str:
        """() → every thread_id with a row in any of ``tables``, in order"""
        union = " UNION ".join(f"SELECT thread_id FROM threadline_{t}" for t in tables)
        return f"SELECT thread_id FROM ({union}) u ORDER BY thread_id"

    def thread_table_rows(self, table: str, columns: Sequence[str]) -> str:
        """(thread_id) → ``columns`` of every row of the thread in ``table``, values as stored"""
        return f"SELECT {', '.join(columns)} FROM threadline_{table} WHERE thread_id = ?"

    def insert_table_rows(self, table: str, columns: Sequence[str]) -> str:
        """(``columns`` of a row, values as stored), executed for many: rows inserted into ``table``"""
        return f"INSERT INTO threadline_{table} ({', '.join(columns)}) VALUES ({placeholders(len(columns))})"

    def count_rows(self, table: str) -> str:
        """() → the number of rows of ``table``"""
        return f"SELECT COUNT(*) FROM threadline_{table}"

    # --- archives: threadline SQLite files (``transfer.backup``) ----------------------------

    # (path): a consistent, compacted copy of the whole database file (SQLite, ``file_sql``)
    VACUUM_INTO = "VACUUM INTO ?"
    # () → kind ("table", "index", "view", "trigger" or "virtual table"), name of every schema object named
    # threadline_* or on a threadline_* table
    ARCHIVE_OBJECTS = (
        "SELECT CASE WHEN type = 'table' AND upper(ltrim(sql)) LIKE 'CREATE VIRTUAL%' THEN 'virtual table' ELSE type END, name "
        "FROM sqlite_master WHERE name LIKE 'threadline\\_%' ESCAPE '\\' OR tbl_name LIKE 'threadline\\_%' ESCAPE '\\'"
    )
    # () → "ok", or the first problem SQLite's quick check finds
    QUICK_CHECK = "PRAGMA quick_check(1)"
    # () → name of every table
    TABLE_NAMES = "SELECT name FROM sqlite_master WHERE type = 'table'"
    # () → redacted (JSON text: channel names) of a bundle's one threadline_bundle row
    BUNDLE_REDACTED = "SELECT redacted FROM threadline_bundle"
    # (): the table naming a bundle's threads and redacted channels
    CREATE_BUNDLE_TABLE = "CREATE TABLE threadline_bundle (created_at REAL, threads TEXT, redacted TEXT)"
    # (created_at, threads JSON, redacted JSON)
    INSERT_BUNDLE_ROW = "INSERT INTO threadline_bundle VALUES (?, ?, ?)"

    def oversized_value(self, table: str, columns: Sequence[str]) -> str:
        """(a byte limit once per column) → thread_id of a row of ``table`` with a value in ``columns`` longer than it"""
        return f"SELECT thread_id FROM threadline_{table} WHERE {' OR '.join(f'length({c}) > ?' for c in columns)} LIMIT 1"

    # --- the Parquet export (``transfer.export``), one thread at a time --------------------

    def export_checkpoints(self) -> str:
        """(thread_id) → thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, run_id, created_at,
        metadata, checkpoint, stored bytes; by checkpoint_ns, checkpoint_id"""
        return (
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, run_id, created_at, metadata, "
            f"checkpoint, {self.checkpoint_size()} FROM threadline_checkpoints WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id"
        )

    def export_writes(self, values: bool) -> str:
        """(thread_id) → thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, stored bytes,
        created_at[, blob with ``values``]; by checkpoint_ns, checkpoint_id, created_at, task_path, task_id, idx"""
        return (
            f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, {self.bytes_of('blob', 'blob')}, created_at"
            f"{', ' + self.value_read.format('blob') if values else ''} FROM threadline_writes WHERE thread_id = ? "
            "ORDER BY checkpoint_ns, checkpoint_id, created_at, task_path, task_id, idx"
        )

    def export_blobs(self) -> str:
        """(thread_id) → thread_id, checkpoint_ns, channel, version, type, stored bytes, base_version; by checkpoint_ns, channel, version"""
        return (
            f"SELECT thread_id, checkpoint_ns, channel, version, type, {self.bytes_of('blob', 'blob')}, base_version FROM threadline_blobs "
            "WHERE thread_id = ? ORDER BY checkpoint_ns, channel, version"
        )
