"""SQL text per backend. Nothing here executes; operations ask a Dialect for SQL.

Queries are written once with ``?`` placeholders and standard SQL that both SQLite
(3.35+) and Postgres accept (``ON CONFLICT``, ``RETURNING``, row values,
``IN (VALUES …)``); a Dialect only supplies what differs: placeholder style,
column types, JSON handling, the metadata filter, byte counts and schema
introspection.

Every table is named ``threadline_<name>`` (``table(name)``) on both backends, so
threadline's tables never collide with the official savers' (``checkpoints``,
``writes``, ``checkpoint_blobs``, …) or an application's (``migrations``), and a
database can hold both during a switch.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from threadline.errors import FilterError

PREFIX = "threadline_"
# The logical tables, each stored as PREFIX + name.
LOGICAL_TABLES = ("checkpoints", "blobs", "writes", "threads", "migrations", "adopted")


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
]

LATEST_VERSION = max(v for v, _ in MIGRATIONS)

# Databases written before the table prefix (threadline 0.1) used the bare names; setup()
# renames them in place, tables and indexes, before applying the migrations above.
LEGACY_RENAMES = {name: table(name) for name in LOGICAL_TABLES if name != "adopted"}
LEGACY_INDEXES = {
    "checkpoints_run_id": ("threadline_checkpoints_run_id", "threadline_checkpoints (run_id)"),
    "checkpoints_source_step": ("threadline_checkpoints_source_step", "threadline_checkpoints (source, step)"),
    "checkpoints_created_at": ("threadline_checkpoints_created_at", "threadline_checkpoints (created_at)"),
    "threads_updated_at": ("threadline_threads_updated_at", "threadline_threads (updated_at)"),
}


def dumps_json(obj: Any, *, sort_keys: bool = True) -> str:
    """JSON as stored: compact, UTF-8 kept, sorted keys unless ``sort_keys=False`` (metadata
    keeps its own key order, which the official SQLite saver's object filters compare).

    Raises ValueError for what a JSON column cannot hold on every backend: NaN or
    Infinity, and NUL characters (Postgres JSONB refuses them).
    """
    text = json.dumps(obj, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if "\\u0000" in text:
        raise ValueError("NUL character in a JSON value")
    return text


def _check_storable(obj: Any, path: str = "$") -> None:
    """ValueError naming the path of a NUL, NaN/Infinity or over-64-bit integer."""
    if isinstance(obj, str):
        if "\x00" in obj:
            raise ValueError(f"{path}: NUL character in {obj!r}")
    elif isinstance(obj, bool) or obj is None:
        pass
    elif isinstance(obj, int):
        if not -(2**63) <= obj < 2**63:
            raise ValueError(f"{path}: integer {obj} does not fit in 64 bits")
    elif isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise ValueError(f"{path}: {obj} is not valid JSON")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check_storable(k, path)
            _check_storable(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check_storable(v, f"{path}[{i}]")


def check_filter(filter: Any) -> None:
    """FilterError unless ``filter`` is a mapping of string keys to values a JSON column can
    hold on every backend (no NUL, NaN/Infinity or integers beyond 64 bits)."""
    from collections.abc import Mapping

    if not isinstance(filter, Mapping):
        raise FilterError(f"filter must be a mapping of metadata key to value, got {type(filter).__name__}")
    for key, value in filter.items():
        if not isinstance(key, str):
            raise FilterError(f"metadata filter keys must be strings, got {type(key).__name__} {key!r}")
        try:
            _check_storable({key: value})
        except ValueError as exc:
            raise FilterError(f"metadata filter value for {key!r} cannot be matched: {exc}") from exc


_PATH_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")  # the keys the official SqliteSaver accepts


def _extract(key: str) -> tuple[str, str]:
    """SQL for ``metadata``'s value at a filter key (SQLite) and its one parameter.

    A key of the official SqliteSaver's characters is a JSON path split at dots, read by
    ``json_extract`` as the official saver reads it (``"user.access-level"`` →
    ``$."user"."access-level"``); any other key (which the official saver refuses) names
    one top-level key, matched literally through ``json_each``. Either way the key is a
    bound parameter, never SQL text."""
    if _PATH_KEY.match(key):
        return "json_extract(c.metadata, ?)", "$" + "".join(f'."{part}"' for part in key.split("."))
    return "(SELECT j.value FROM json_each(c.metadata) j WHERE j.key = ?)", key


class Dialect:
    """SQLite dialect; Postgres overrides what differs."""

    name = "sqlite"
    types = {"text": "TEXT", "json": "TEXT", "blob": "BLOB", "real": "REAL", "int": "INTEGER"}
    # Largest number of bound parameters we put in one statement.
    max_params = 900
    # Statement run first in setup() to serialize concurrent setups (none: SQLite's write lock does).
    setup_lock: tuple[str, tuple] | None = None
    # Table names of the current database (SQLite) or schema (Postgres).
    tables_sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    # Column names of one table (parameter: the table name).
    columns_sql = "SELECT name FROM pragma_table_info(?)"
    # The official saver's tables (langgraph.checkpoint.sqlite.SqliteSaver) and how
    # threadline reads them (threadline.storage.adopt): checkpoints of a thread newer than a
    # checkpoint_id, and the writes of checkpoints from a checkpoint_id on.
    official_tables = ("checkpoints", "writes")
    official_checkpoints_sql = (
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_id > ? ORDER BY checkpoint_id"
    )
    official_writes_sql = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path FROM writes "
        "WHERE thread_id = ? AND checkpoint_id >= ?"
    )
    # Channel values stored apart from the checkpoint (the official PostgresSaver's blobs): none here.
    official_blobs_table: str | None = None
    # Whether a checkpoint of LangGraph < v4 gets its parent's TASKS writes as its TASKS
    # channel on read: the official PostgresSaver does it, the official SqliteSaver never.
    migrates_parent_sends = False
    # get_tuple of a named checkpoint returns the caller's config as given (official SqliteSaver).
    echoes_config = True
    # Columns a repeated special-channel write replaces (official SqliteSaver: INSERT OR REPLACE).
    replaced_write_columns: tuple[str, ...] = ("channel", "task_path", "type", "blob", "created_at")
    # A checkpoint put again takes the new parent (official SqliteSaver: INSERT OR REPLACE).
    reput_sets_parent = True
    # prune(keep_latest) refuses DeltaChannel threads (the official PostgresSaver; SqliteSaver has no prune).
    prune_refuses_delta_threads = False

    def sql(self, text: str) -> str:
        return text

    def migrations(self) -> list[tuple[int, list[str]]]:
        extra = self.extra_migrations()
        return [(v, [s.format(**self.types) for s in stmts] + extra.get(v, [])) for v, stmts in MIGRATIONS]

    def extra_migrations(self) -> dict[int, list[str]]:
        return {}

    def legacy_renames(self) -> list[str]:
        """Statements moving a database of the unprefixed layout to the prefixed names."""
        out = [f"ALTER TABLE {old} RENAME TO {new}" for old, new in LEGACY_RENAMES.items()]
        for old, (new, on) in LEGACY_INDEXES.items():
            out += [f"DROP INDEX IF EXISTS {old}", f"CREATE INDEX IF NOT EXISTS {new} ON {on}"]
        return out

    def json_param(self, obj: Any) -> Any:
        return dumps_json(obj)

    def load_json(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, (str, bytes)) else value

    def bytes_of(self, column: str, kind: str) -> str:
        """SQL for the stored size in bytes of a column (kind: 'json' or 'blob')."""
        return f"COALESCE(length(CAST({column} AS BLOB)), 0)"

    def metadata_filter(self, filter: Any) -> tuple[str, list[Any]]:
        """SQL condition (on table alias ``c``) for ``list(filter=…)``, as the official
        SqliteSaver matches it: per key, ``json_extract(metadata, path)`` compared with the
        value — ``None`` matches a missing key or a JSON null, a dotted key names a nested
        field, ``True``/``1`` and ``False``/``0`` match each other (SQLite has no boolean),
        an object or array matches the same JSON text (key order included).

        Unlike the official saver, any string key is accepted (``_extract``): keys of its
        characters are JSON paths, others literal top-level keys; all are bound parameters.
        Raises FilterError for a non-mapping filter, a non-string key, and values no JSON
        column can hold.
        """
        check_filter(filter)
        clauses, params = [], []
        for key, value in filter.items():
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


class PostgresDialect(Dialect):
    name = "postgres"
    types = {"text": 'TEXT COLLATE "C"', "json": "JSONB", "blob": "BYTEA", "real": "DOUBLE PRECISION", "int": "BIGINT"}
    max_params = 20000
    setup_lock = ("SELECT pg_advisory_xact_lock(?)", (0x7468726C,))
    tables_sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    columns_sql = (
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
    )
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

    def sql(self, text: str) -> str:
        return _to_pyformat(text)

    def extra_migrations(self) -> dict[int, list[str]]:
        return {1: ["CREATE INDEX IF NOT EXISTS threadline_checkpoints_metadata ON threadline_checkpoints USING GIN (metadata jsonb_path_ops)"]}

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


@lru_cache(maxsize=512)
def _to_pyformat(text: str) -> str:
    # Our SQL never contains '?' or '%' except as placeholders.
    return re.sub(r"\?", "%s", text.replace("%", "%%"))


SQLITE = Dialect()
POSTGRES = PostgresDialect()
