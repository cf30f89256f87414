"""The Postgres dialect: ``%s`` placeholders, JSONB with its GIN index and ``@>`` filter,
byte counts, introspection of the current schema, and the official ``PostgresSaver``'s
tables and behaviours."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from threadline.errors import FilterError
from threadline.storage.dialect.base import Dialect, check_filter, dumps_json
from threadline.storage.schema import LEGACY_INDEXES, LEGACY_RENAMES


@lru_cache(maxsize=512)
def _to_pyformat(text: str) -> str:
    # Our SQL never contains '?' or '%' except as placeholders.
    return re.sub(r"\?", "%s", text.replace("%", "%%"))


# Table storage that keeps bloat down (docs/operations.md): autovacuum at 5 % dead rows
# instead of 20 % on the append-mostly tables; the threads index is updated by every put, so
# its pages keep 30 % free for HOT updates and it is vacuumed at 2 %.
STORAGE_SETTINGS = [
    *(
        f"ALTER TABLE threadline_{t} SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02)"
        for t in ("checkpoints", "blobs", "writes")
    ),
    "ALTER TABLE threadline_threads SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02)",
]


class PostgresDialect(Dialect):
    name = "postgres"
    types = {"text": 'TEXT COLLATE "C"', "json": "JSONB", "blob": "BYTEA", "real": "DOUBLE PRECISION", "int": "BIGINT"}
    max_params = 20000
    setup_lock = ("SELECT pg_advisory_xact_lock(?)", (0x7468726C,))
    tables_sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    columns_sql = (
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
    )
    # langgraph.checkpoint.postgres.PostgresSaver
    official_tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
    official_writes_sql = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path FROM checkpoint_writes "
        "WHERE thread_id = ? AND checkpoint_id >= ?"
    )
    official_blobs_table = "checkpoint_blobs"
    migrates_parent_sends = True
    echoes_config = False
    replaced_write_columns = ("channel", "type", "blob", "created_at")  # the official upsert keeps task_path
    reput_sets_parent = False  # the official upsert replaces only checkpoint and metadata
    prune_refuses_delta_threads = True
    lock_rows = " FOR UPDATE"
    partitions = True
    snapshot_sql = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
    # transaction-scoped, so it works behind PgBouncer's transaction pooling
    claim_lock = ("SELECT pg_try_advisory_xact_lock(?)", (0x74686C73,))
    tables_bytes_sql = (
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'threadline\\_%'"
    )
    after_large_delete_sql = tuple(f"VACUUM (ANALYZE) threadline_{t}" for t in ("checkpoints", "blobs", "writes", "threads"))
    rebuild_sql = tuple(f"VACUUM (FULL, ANALYZE) threadline_{t}" for t in ("checkpoints", "blobs", "writes", "threads"))

    def sql(self, text: str) -> str:
        return _to_pyformat(text)

    def extra_migrations(self) -> dict[int, list[str]]:
        return {
            1: ["CREATE INDEX IF NOT EXISTS threadline_checkpoints_metadata ON threadline_checkpoints USING GIN (metadata jsonb_path_ops)"],
            3: STORAGE_SETTINGS,
        }

    def legacy_renames(self) -> list[str]:
        indexes = {old: new for old, (new, _) in LEGACY_INDEXES.items()}
        indexes["checkpoints_metadata"] = "threadline_checkpoints_metadata"
        indexes.update({f"{old}_pkey": f"{new}_pkey" for old, new in LEGACY_RENAMES.items()})
        return [f"ALTER TABLE {old} RENAME TO {new}" for old, new in LEGACY_RENAMES.items()] + [
            f"ALTER INDEX IF EXISTS {old} RENAME TO {new}" for old, new in indexes.items()
        ]

    def bytes_of(self, column: str, kind: str) -> str:
        if kind == "json":
            return f"COALESCE(octet_length({column}::text), 0)"
        return f"COALESCE(octet_length({column}), 0)"

    def metadata_filter(self, filter: Any) -> tuple[str, list[Any]]:
        """``metadata @> filter`` (served by the GIN index), as the official PostgresSaver
        matches it: JSON containment, so a key must be present (``None`` matches only a
        stored null), an object or array matches any value containing it, and a dotted key
        is a top-level key. The filter is one bound JSONB parameter. Raises FilterError
        as the SQLite dialect does."""
        check_filter(filter)
        if not filter:
            return "1 = 1", []
        try:
            return "c.metadata @> CAST(? AS JSONB)", [dumps_json(dict(filter))]
        except TypeError as exc:
            raise FilterError(f"metadata filter values must be JSON-like: {exc}") from exc

    def references_from(self, where: str) -> str:
        return (
            "FROM threadline_checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint->'channel_versions') j "
            "LEFT JOIN threadline_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            f"AND b.channel = j.key AND b.version = j.value {where}"
        )


POSTGRES = PostgresDialect()
