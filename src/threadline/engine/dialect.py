"""SQL text per backend. Nothing here executes; operations ask a Dialect for SQL.

Queries are written once with ``?`` placeholders and standard SQL that both SQLite
(3.35+) and Postgres accept (``ON CONFLICT``, ``RETURNING``, row values,
``IN (VALUES …)``); a Dialect only supplies what differs: placeholder style,
column types, JSON handling, the metadata filter and byte counts.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from threadline.errors import FilterError

# Numbered migrations. Each entry is (version, statements); {json}, {blob}, {real}
# and {int} are replaced by the dialect's column types. Never edit a shipped entry:
# add a new one. {text} is TEXT with byte-order collation, so ORDER BY and
# comparisons agree with Python's string order (LangGraph's writes_sort_key).
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS checkpoints (
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
            "CREATE INDEX IF NOT EXISTS checkpoints_run_id ON checkpoints (run_id)",
            "CREATE INDEX IF NOT EXISTS checkpoints_source_step ON checkpoints (source, step)",
            "CREATE INDEX IF NOT EXISTS checkpoints_created_at ON checkpoints (created_at)",
            """CREATE TABLE IF NOT EXISTS blobs (
                thread_id {text} NOT NULL,
                checkpoint_ns {text} NOT NULL DEFAULT '',
                channel {text} NOT NULL,
                version {text} NOT NULL,
                type {text} NOT NULL,
                blob {blob},
                base_version {text},
                PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
            )""",
            """CREATE TABLE IF NOT EXISTS writes (
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
            """CREATE TABLE IF NOT EXISTS threads (
                thread_id {text} NOT NULL PRIMARY KEY,
                created_at {real} NOT NULL,
                updated_at {real} NOT NULL,
                checkpoint_count {int} NOT NULL DEFAULT 0,
                bytes {int} NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX IF NOT EXISTS threads_updated_at ON threads (updated_at)",
        ],
    ),
]


def dumps_json(obj: Any) -> str:
    """Canonical JSON as stored: sorted keys, compact, UTF-8 kept.

    Raises ValueError for what a JSON column cannot hold on every backend: NaN or
    Infinity, and NUL characters (Postgres JSONB refuses them).
    """
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
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


def filter_json(key: Any, value: Any) -> str:
    """``{key: value}`` as canonical JSON, or FilterError naming the key.

    Also refuses integers beyond 64 bits, which no backend can bind or compare.
    """
    if not isinstance(key, str):
        raise FilterError(f"metadata filter keys must be strings, got {type(key).__name__} {key!r}")
    try:
        _check_storable({key: value})
        return dumps_json({key: value})
    except (TypeError, ValueError) as exc:
        raise FilterError(f"metadata filter value for {key!r} cannot be matched: {exc}") from exc


class Dialect:
    """SQLite dialect; Postgres overrides what differs."""

    name = "sqlite"
    types = {"text": "TEXT", "json": "TEXT", "blob": "BLOB", "real": "REAL", "int": "INTEGER"}
    # Largest number of bound parameters we put in one statement.
    max_params = 900

    def sql(self, text: str) -> str:
        return text

    def migrations(self) -> list[tuple[int, list[str]]]:
        extra = self.extra_migrations()
        return [(v, [s.format(**self.types) for s in stmts] + extra.get(v, [])) for v, stmts in MIGRATIONS]

    def extra_migrations(self) -> dict[int, list[str]]:
        return {}

    def json_param(self, obj: Any) -> Any:
        return dumps_json(obj)

    def load_json(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, (str, bytes)) else value

    def bytes_of(self, column: str, kind: str) -> str:
        """SQL for the stored size in bytes of a column (kind: 'json' or 'blob')."""
        return f"COALESCE(length(CAST({column} AS BLOB)), 0)"

    def metadata_filter(self, key: Any, value: Any) -> tuple[str, list[Any]]:
        """SQL condition (on table alias ``c``) matching ``metadata[key] == value``.

        The key and value are bound parameters; the key is matched by equality
        against ``json_each``'s key column, never spliced into a JSON path.
        """
        filter_json(key, value)
        if value is None:
            return "EXISTS (SELECT 1 FROM json_each(c.metadata) j WHERE j.key = ? AND j.type = 'null')", [key]
        if isinstance(value, bool):
            return "EXISTS (SELECT 1 FROM json_each(c.metadata) j WHERE j.key = ? AND j.type = ?)", [key, "true" if value else "false"]
        if isinstance(value, int):
            return "EXISTS (SELECT 1 FROM json_each(c.metadata) j WHERE j.key = ? AND j.type IN ('integer', 'real') AND j.value = ?)", [key, value]
        if isinstance(value, float):
            return "EXISTS (SELECT 1 FROM json_each(c.metadata) j WHERE j.key = ? AND j.type IN ('integer', 'real') AND j.value = ?)", [key, value]
        if isinstance(value, str):
            return "EXISTS (SELECT 1 FROM json_each(c.metadata) j WHERE j.key = ? AND j.type = 'text' AND j.value = ?)", [key, value]
        if isinstance(value, (dict, list, tuple)):
            text = dumps_json(value)
            return "EXISTS (SELECT 1 FROM json_each(c.metadata) j WHERE j.key = ? AND j.type IN ('object', 'array') AND j.value = json(?))", [key, text]
        raise FilterError(f"metadata filter value for {key!r} must be JSON-like, got {type(value).__name__}")


class PostgresDialect(Dialect):
    name = "postgres"
    types = {"text": 'TEXT COLLATE "C"', "json": "JSONB", "blob": "BYTEA", "real": "DOUBLE PRECISION", "int": "BIGINT"}
    max_params = 20000

    def sql(self, text: str) -> str:
        return _to_pyformat(text)

    def extra_migrations(self) -> dict[int, list[str]]:
        return {1: ["CREATE INDEX IF NOT EXISTS checkpoints_metadata ON checkpoints USING GIN (metadata jsonb_path_ops)"]}

    def bytes_of(self, column: str, kind: str) -> str:
        if kind == "json":
            return f"COALESCE(octet_length({column}::text), 0)"
        return f"COALESCE(octet_length({column}), 0)"

    def metadata_filter(self, key: Any, value: Any) -> tuple[str, list[Any]]:
        """Scalars: ``metadata @> {key: value}`` (served by the GIN index). Objects and
        arrays: ``metadata -> key = value``, since containment would also match supersets.
        Key and value are bound parameters."""
        doc = filter_json(key, value)
        if isinstance(value, (dict, list, tuple)):
            return "c.metadata -> CAST(? AS TEXT) = CAST(? AS JSONB)", [key, dumps_json(value)]
        return "c.metadata @> CAST(? AS JSONB)", [doc]


@lru_cache(maxsize=512)
def _to_pyformat(text: str) -> str:
    # Our SQL never contains '?' or '%' except as placeholders.
    return re.sub(r"\?", "%s", text.replace("%", "%%"))


SQLITE = Dialect()
POSTGRES = PostgresDialect()
