"""The SQLite dialect: types, byte counts, ``json_each``/``json_extract``, introspection and
the official ``SqliteSaver``'s tables and behaviours."""

from __future__ import annotations

import json
import re
from typing import Any

from threadline.codec.jsontext import expanded_sql
from threadline.storage.dialect.base import Dialect, check_filter, split_filter
from threadline.storage.jsonfilter import SqliteJson, where_terms
from threadline.storage.dialect.heads import get_with_head
from threadline.storage.dialect.statements import read_values
from threadline.storage.rows import BLOB_COLUMNS, WRITE_COLUMNS
from threadline.storage.schema import LEGACY_INDEXES, LEGACY_RENAMES

_PATH_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")  # the keys the official SqliteSaver accepts


def _extract(key: str) -> tuple[str, str]:
    """SQL for ``metadata``'s value at a filter key and its one parameter.

    A key of the official SqliteSaver's characters is a JSON path split at dots, read by
    ``json_extract`` as the official saver reads it (``"user.access-level"`` →
    ``$."user"."access-level"``); any other key (which the official saver refuses) names
    one top-level key, matched literally through ``json_each``. Either way the key is a
    bound parameter, never SQL text."""
    if _PATH_KEY.match(key):
        return "json_extract(c.metadata, ?)", "$" + "".join(f'."{part}"' for part in key.split("."))
    return "(SELECT j.value FROM json_each(c.metadata) j WHERE j.key = ?)", key


def _rebuilt(name: str, columns: str, key: str, version: int = 5, clustered: bool = True) -> list[str]:
    """Statements that rebuild ``name`` (its ``columns`` as created before schema migration
    ``version``) keyed by ``key``, as a WITHOUT ROWID table (``clustered``) or a rowid table, every
    row copied."""
    names = ", ".join(c.split()[0] for c in columns.split(",\n"))
    return [
        f"CREATE TABLE {name}_v{version} ({columns},\nPRIMARY KEY ({key})){' WITHOUT ROWID' if clustered else ''}",
        f"INSERT INTO {name}_v{version} ({names}) SELECT {names} FROM {name}",
        f"DROP TABLE {name}",
        f"ALTER TABLE {name}_v{version} RENAME TO {name}",
    ]


_CLUSTERED = [
    *_rebuilt(
        "threadline_blobs",
        """thread_id TEXT NOT NULL,
checkpoint_ns TEXT NOT NULL DEFAULT '',
channel TEXT NOT NULL,
version TEXT NOT NULL,
type TEXT NOT NULL,
blob BLOB,
base_version TEXT""",
        "thread_id, checkpoint_ns, channel, version",
    ),
    *_rebuilt(
        "threadline_writes",
        """thread_id TEXT NOT NULL,
checkpoint_ns TEXT NOT NULL DEFAULT '',
checkpoint_id TEXT NOT NULL,
task_id TEXT NOT NULL,
idx INTEGER NOT NULL,
channel TEXT NOT NULL,
task_path TEXT NOT NULL DEFAULT '',
type TEXT NOT NULL,
blob BLOB,
created_at REAL NOT NULL""",
        "thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
    ),
]

# Schema migration 23: the heads table as a rowid table. A WITHOUT ROWID row keeps at most ~1 KB of a 4 KB
# page in its leaf and spills the rest to overflow pages (the last one part empty); a rowid table's row
# keeps up to a page: a 10 KB head takes two overflow pages instead of three, one page less to write at
# every put (its one index entry changes only with a new namespace).
_HEADS_ROWID = _rebuilt(
    "threadline_heads",
    """thread_id TEXT NOT NULL,
checkpoint_ns TEXT NOT NULL DEFAULT '',
checkpoint_id TEXT NOT NULL,
type TEXT NOT NULL,
data BLOB NOT NULL""",
    "thread_id, checkpoint_ns",
    version=23,
    clustered=False,
)


class SqliteDialect(Dialect):
    name = "sqlite"
    checks_hold = True  # a write transaction (BEGIN IMMEDIATE) holds the one write lock to its end
    types = {"text": "TEXT", "json": "TEXT", "blob": "BLOB", "real": "REAL", "int": "INTEGER", "clustered": " WITHOUT ROWID"}
    max_params = 900
    now_sql = "((julianday('now') - 2440587.5) * 86400.0)"  # the Unix epoch is Julian day 2440587.5
    tables_sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    columns_sql = "SELECT name FROM pragma_table_info(?)"
    # langgraph.checkpoint.sqlite.SqliteSaver
    official_tables = ("checkpoints", "writes")
    official_writes_sql = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path FROM writes "
        "WHERE thread_id = ? AND checkpoint_id >= ?"
    )
    migrates_parent_sends = False
    echoes_config = True
    head_rows = True
    keeps_json_text = True
    compacts_docs = True
    value_read = "CAST({} AS BLOB)"
    THREAD_BLOBS = f"SELECT {read_values(BLOB_COLUMNS, value_read)} FROM threadline_blobs WHERE thread_id = ?"
    THREAD_BLOBS_LIKE = f"SELECT {read_values(BLOB_COLUMNS, value_read)} FROM threadline_blobs WHERE thread_id = ? AND type LIKE ?"
    THREAD_WRITES = f"SELECT {read_values(WRITE_COLUMNS, value_read)}, created_at FROM threadline_writes WHERE thread_id = ?"
    MISTYPED_BLOBS = (
        "SELECT checkpoint_ns, channel, version, typeof(blob) FROM threadline_blobs "
        "WHERE thread_id = ? AND typeof(blob) NOT IN ('blob', 'null')"
    )
    MISTYPED_WRITES = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, typeof(blob) FROM threadline_writes "
        "WHERE thread_id = ? AND typeof(blob) NOT IN ('blob', 'null')"
    )
    replaced_write_columns = ("channel", "task_path", "type", "blob", "created_at")  # INSERT OR REPLACE
    reput_sets_parent = True  # INSERT OR REPLACE
    prune_refuses_delta_threads = False  # the official SqliteSaver has no prune
    file_sql = "SELECT file FROM pragma_database_list WHERE name = 'main'"
    free_pages_sql = "PRAGMA freelist_count"
    release_page_sql = "PRAGMA incremental_vacuum"  # sqlite3 runs it one page per statement
    after_delete_sql = ("PRAGMA wal_checkpoint(TRUNCATE)",)  # the WAL file shrinks back too
    after_large_delete_sql = ("PRAGMA optimize",)
    # VACUUM also turns a database made before incremental auto-vacuum into one that has it
    rebuild_sql = ("PRAGMA auto_vacuum=INCREMENTAL", "VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)")

    def get_statement(self, latest: bool, held: bool = False) -> str:
        """``get_tuple`` in one statement, the checkpoint with its head and writes (``heads.get_with_head``)."""
        return get_with_head(latest, held)

    def extra_migrations(self) -> dict[int, list[str]]:
        return {5: _CLUSTERED, 23: _HEADS_ROWID}

    def legacy_renames(self) -> list[str]:
        out = [f"ALTER TABLE {old} RENAME TO {new}" for old, new in LEGACY_RENAMES.items()]
        for old, (new, on) in LEGACY_INDEXES.items():
            out += [f"DROP INDEX IF EXISTS {old}", f"CREATE INDEX IF NOT EXISTS {new} ON {on}"]
        return out

    def bytes_of(self, column: str, kind: str) -> str:
        return f"COALESCE(length(CAST({column} AS BLOB)), 0)"

    def thread_glob(self, pattern: str) -> tuple[str, str]:
        if "*" not in pattern and "?" not in pattern:
            pattern += "*"
        return "thread_id GLOB ?", pattern.replace("[", "[[]")  # "[" is no wildcard here

    def floor_div(self, expr: str) -> str:
        return f"CAST({expr} / ? AS INTEGER)"  # truncates, which is floor for a positive value

    def json_field(self, column: str, key: str) -> str:
        return f"json_extract({expanded_sql(column)}, '$.{key}')"  # a document's versions expanded

    metadata_json = SqliteJson("c.metadata")  # operator filters on a checkpoint's metadata

    @staticmethod
    def record_json(joined: bool) -> SqliteJson:
        """Filters on a thread record's metadata (alias ``r``, joined; ``{}`` without a record or the records table)."""
        return SqliteJson("COALESCE(r.metadata, '{}')" if joined else "'{}'")

    def metadata_filter(self, filter: Any) -> tuple[str, list[Any]]:
        """As the official SqliteSaver matches it: per key, ``json_extract(metadata, path)``
        compared with the value — ``None`` matches a missing key or a JSON null, a dotted key
        names a nested field, ``True``/``1`` and ``False``/``0`` match each other (SQLite has
        no boolean), an object or array matches the same JSON text (key order included).

        Unlike the official saver, any string key is accepted (``_extract``): keys of its
        characters are JSON paths, others literal top-level keys; all are bound parameters.
        A key whose value is an operator map (``{"step": {"$gt": 3}}``) is matched by
        ``storage.jsonfilter`` instead (``$eq $ne $gt $gte $lt $lte $in $nin``; a dotted key a
        nested path), key segments and bounds bound parameters.
        Raises FilterError for a non-mapping filter, a non-string key, values no JSON
        column can hold, and an unknown operator (named).
        """
        check_filter(filter)
        plain, terms = split_filter(filter)
        clauses, params = where_terms(self.metadata_json, terms)
        for key, value in plain.items():
            expr, param = _extract(key)
            if value is None:
                clauses.append(f"{expr} IS NULL")
                params.append(param)
            elif isinstance(value, (dict, list, tuple)):
                clauses.append(f"{expr} = json(?)")
                params += [param, json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
            else:
                clauses.append(f"{expr} = ?")
                params += [param, value if isinstance(value, (str, int, float)) else str(value)]
        return " AND ".join(clauses) or "1 = 1", params

    def references_from(self, where: str) -> str:
        return (
            f"FROM threadline_checkpoints c, json_each({expanded_sql('c.checkpoint')}, '$.channel_versions') j "
            "LEFT JOIN threadline_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            f"AND b.channel = j.key AND b.version = CAST(j.value AS TEXT) {where}"
        )


SQLITE = SqliteDialect()
