"""Test backends: one object per database the savers can run on.

A ``Backend`` names one saver class on one fresh database (a SQLite file or a
Postgres schema) and can:

* ``open()`` — a context manager (async for the async savers) giving a NEW saver
  instance on the same database, so restart tests can close one saver and read
  with another;
* ``sql(text, params)`` — run raw SQL on the database behind the saver's back
  (``?`` placeholders on both backends), for corrupting rows and comparing
  table contents;
* ``snapshot()`` — every row of every threadline table, sorted, for "nothing
  else changed" assertions.

Postgres: the DSN comes from ``THREADLINE_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``). Each test session owns the
schema prefix ``tl_test_<pid>_<random>``; each database is one schema under it
(``<prefix>_<n>``), selected through the conninfo option
``options=-csearch_path=<schema>``, and dropped when the test ends and, as a
sweep, at session end.
"""

from __future__ import annotations

import os
import re
import secrets
import sqlite3
import threading
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

# threadline's tables by logical name; stored as threadline_<name>
TABLES = ("checkpoints", "blobs", "writes", "threads", "migrations", "adopted")

SQLITE_KINDS = ("sqlite", "sqlite-async")
POSTGRES_KINDS = ("postgres", "postgres-async")
ALL_KINDS = SQLITE_KINDS + POSTGRES_KINDS

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def pg_dsn() -> str:
    return os.environ.get("THREADLINE_TEST_POSTGRES") or DEFAULT_PG_DSN


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def with_search_path(dsn: str, schema: str) -> str:
    """The DSN with ``options=-csearch_path=<schema>`` appended (URL or key=value form)."""
    if re.match(r"^postgres(ql)?://", dsn):
        sep = "&" if "?" in dsn else "?"
        return f"{dsn}{sep}options={quote(f'-csearch_path={schema}', safe='')}"
    return f"{dsn} options=-csearch_path={schema}"


# --- Postgres availability (checked once per session) -------------------------

_pg_lock = threading.Lock()
_pg_state: dict[str, Any] = {}


def postgres_unavailable() -> str | None:
    """None when Postgres tests can run; otherwise the reason (import or connection failure)."""
    with _pg_lock:
        if "reason" not in _pg_state:
            _pg_state["reason"] = _probe_postgres()
        return _pg_state["reason"]


def _probe_postgres() -> str | None:
    try:
        import threadline.backends.postgres as pgmod  # noqa: F401

        pgmod.PostgresSaver, pgmod.AsyncPostgresSaver  # noqa: B018
    except Exception as exc:  # ImportError, AttributeError, or a half-written module
        return f"threadline.backends.postgres not importable yet ({type(exc).__name__}: {exc})"
    try:
        import psycopg

        with psycopg.connect(pg_dsn(), connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"Postgres at {pg_dsn()} unreachable ({type(exc).__name__}: {exc})"
    return None


class PgSchemas:
    """Schemas of this test session: ``tl_test_<pid>_<random>_<n>``."""

    def __init__(self) -> None:
        self.prefix = f"tl_test_{os.getpid()}_{secrets.token_hex(3)}"
        self._n = 0
        self._lock = threading.Lock()

    def create(self) -> str:
        import psycopg

        with self._lock:
            self._n += 1
            name = f"{self.prefix}_{self._n}"
        with psycopg.connect(pg_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return name

    def drop(self, name: str) -> None:
        import psycopg

        with psycopg.connect(pg_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def drop_all(self) -> None:
        """Session-end sweep: drop every schema with this session's prefix."""
        import psycopg

        try:
            with psycopg.connect(pg_dsn(), autocommit=True, connect_timeout=3) as conn:
                names = [
                    r[0]
                    for r in conn.execute(
                        "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (self.prefix + "\\_%",)
                    ).fetchall()
                ]
                for name in names:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        except Exception:
            pass


# --- backends -----------------------------------------------------------------


def _norm(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    return value


@dataclass
class Backend:
    """One saver class on one fresh database. See the module docstring."""

    kind: str  # "sqlite" | "sqlite-async" | "postgres" | "postgres-async"
    target: str  # SQLite file path, or the Postgres DSN with search_path set
    schema: str | None = None

    @property
    def is_async(self) -> bool:
        return self.kind.endswith("-async")

    @property
    def is_postgres(self) -> bool:
        return self.kind.startswith("postgres")

    @property
    def saver_class(self) -> type:
        if self.kind == "sqlite":
            from threadline import SqliteSaver

            return SqliteSaver
        if self.kind == "sqlite-async":
            from threadline import AsyncSqliteSaver

            return AsyncSqliteSaver
        from threadline.backends import postgres

        return postgres.AsyncPostgresSaver if self.is_async else postgres.PostgresSaver

    def open(self) -> AbstractContextManager[Any] | AbstractAsyncContextManager[Any]:
        """A NEW saver on this database: ``with`` for sync kinds, ``async with`` for async kinds."""
        return self.saver_class.from_conn_string(self.target)

    def open_sync_twin(self) -> AbstractContextManager[Any]:
        """A sync saver (SqliteSaver / PostgresSaver) on this same database."""
        if self.is_postgres:
            from threadline.backends.postgres import PostgresSaver

            return PostgresSaver.from_conn_string(self.target)
        from threadline import SqliteSaver

        return SqliteSaver.from_conn_string(self.target)

    # raw SQL, behind the saver's back

    @contextmanager
    def _raw(self):
        if self.is_postgres:
            import psycopg

            with psycopg.connect(self.target, autocommit=True) as conn:
                yield conn
        else:
            conn = sqlite3.connect(self.target, isolation_level=None)
            try:
                conn.execute("PRAGMA busy_timeout=30000")
                yield conn
            finally:
                conn.close()

    def sql(self, text: str, params: tuple | list = ()) -> list[tuple]:
        """Run one statement (``?`` placeholders) in its own transaction; return its rows."""
        with self._raw() as conn:
            if self.is_postgres:
                text = text.replace("%", "%%").replace("?", "%s")
            cur = conn.execute(text, params)
            rows = cur.fetchall() if cur.description else []
            return [tuple(_norm(v) for v in r) for r in rows]

    def snapshot(self) -> dict[str, list[tuple]]:
        """Every row of every threadline table, in a stable order."""
        out = {}
        for table in TABLES:
            rows = self.sql(f"SELECT * FROM threadline_{table}")
            out[table] = sorted(rows, key=repr)
        return out

    def counts(self) -> dict[str, int]:
        return {t: self.sql(f"SELECT COUNT(*) FROM threadline_{t}")[0][0] for t in TABLES}


def sqlite_backend(kind: str, directory: Path) -> Backend:
    return Backend(kind=kind, target=str(directory / "threadline.db"))


def postgres_backend(kind: str, schema: str) -> Backend:
    return Backend(kind=kind, target=with_search_path(pg_dsn(), schema), schema=schema)


__all__ = [
    "ALL_KINDS",
    "Backend",
    "PgSchemas",
    "POSTGRES_KINDS",
    "SQLITE_KINDS",
    "TABLES",
    "in_ci",
    "pg_dsn",
    "postgres_backend",
    "postgres_unavailable",
    "sqlite_backend",
    "with_search_path",
]
