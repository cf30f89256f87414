"""The one test-database stack: every test database is a ``Backend``.

A ``Backend`` names one saver class on one fresh database (a SQLite file or a
Postgres schema) and can:

* ``open(**kw)`` — a context manager (async for the async savers) giving a NEW saver
  instance on the same database, so restart tests can close one saver and read
  with another; ``open(is_async=…)`` opens the other twin on the same database;
* ``sql(text, params)`` — run raw SQL on the database behind the saver's back
  (``?`` placeholders on both backends, converted by the Postgres dialect), for
  corrupting rows and comparing table contents;
* ``snapshot()`` / ``counts()`` — every row / the row count of every threadline
  table, for "nothing else changed" assertions.

``make_backend(kind, directory, request)`` makes one; the fixtures in ``conftest``
are built on it, and ``fresh_postgres_url(request)`` / ``pg_schemas().fresh()`` give
more Postgres schemas for tests that open savers of their own (the official ones).

Postgres: the DSN comes from ``THREADLINE_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``). Each test session owns the
schema prefix ``tl_test_<pid>_<random>``; each database is one schema under it
(``<prefix>_<n>``), selected through the conninfo option
``options=-csearch_path=<schema>``, and dropped when the test ends and, as a
sweep, at session end (``conftest``). Postgres tests are skipped when the server is
unreachable, unless ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import os
import re
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from threadline.backends import entry_of
from threadline.storage.dialect import POSTGRES

# threadline's tables by logical name; stored as threadline_<name>
TABLES = ("checkpoints", "blobs", "writes", "threads", "migrations", "adopted")

SQLITE_KINDS = ("sqlite", "sqlite-async")
POSTGRES_KINDS = ("postgres", "postgres-async")
ALL_KINDS = SQLITE_KINDS + POSTGRES_KINDS
# Redis: plain Redis 7 and the session's local cluster (no SQL: tests reading rows behind the
# saver's back run on ALL_KINDS only)
REDIS_KINDS = ("redis", "redis-async", "redis-cluster", "redis-cluster-async")
SYNC_KINDS = ("sqlite", "postgres")

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
    """None when Postgres tests can run; otherwise the reason (the server is unreachable)."""
    with _pg_lock:
        if "reason" not in _pg_state:
            _pg_state["reason"] = _probe_postgres()
        return _pg_state["reason"]


def _probe_postgres() -> str | None:
    try:
        import psycopg

        with psycopg.connect(pg_dsn(), connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"Postgres at {pg_dsn()} unreachable ({type(exc).__name__}: {exc})"
    return None


def require_postgres() -> None:
    """Skip (or, with CI=true, fail) the running test when Postgres cannot be used."""
    reason = postgres_unavailable()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true and Postgres tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


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

    @contextmanager
    def fresh(self) -> Iterator[str]:
        """The URL of a new schema, dropped on exit (for a database per hypothesis example)."""
        name = self.create()
        try:
            yield with_search_path(pg_dsn(), name)
        finally:
            self.drop(name)

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


_schemas: PgSchemas | None = None


def pg_schemas() -> PgSchemas:
    """This session's schemas (created on first use)."""
    global _schemas
    if _schemas is None:
        _schemas = PgSchemas()
    return _schemas


def drop_session_schemas() -> None:
    if _schemas is not None:
        _schemas.drop_all()


def fresh_postgres_url(request: pytest.FixtureRequest) -> str:
    """The URL of a new Postgres schema, dropped when the test ends; skips (fails under
    CI=true) without Postgres."""
    require_postgres()
    schemas = pg_schemas()
    name = schemas.create()
    request.addfinalizer(lambda: schemas.drop(name))
    return with_search_path(pg_dsn(), name)


# --- backends -----------------------------------------------------------------


# a statement that changes value rows (``Backend.sql``)
_DAMAGE = re.compile(r"\s*(UPDATE|DELETE\s+FROM|INSERT\s+(OR\s+\w+\s+)?INTO)\s+threadline_(blobs|writes)\b", re.IGNORECASE)


def _norm(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    return value


@dataclass
class Backend:
    """One saver class on one fresh database. See the module docstring."""

    kind: str  # "sqlite" | "sqlite-async" | "postgres" | "postgres-async" | one of REDIS_KINDS
    url: str  # SQLite file path, the Postgres DSN with search_path set, or a Redis URL with ?prefix=

    @property
    def is_async(self) -> bool:
        return self.kind.endswith("-async")

    @property
    def is_postgres(self) -> bool:
        return self.kind in POSTGRES_KINDS

    def saver_class(self, is_async: bool | None = None) -> type:
        """The saver class of this kind (or of its sync / async twin), from the backend registry."""
        use_async = self.is_async if is_async is None else is_async
        return entry_of(self.url).get("async_saver" if use_async else "saver")

    def open(self, *, is_async: bool | None = None, **kw: Any) -> AbstractContextManager[Any] | AbstractAsyncContextManager[Any]:
        """A NEW saver on this database: ``with`` for sync kinds, ``async with`` for async kinds.
        ``is_async`` picks the twin class instead; ``kw`` go to ``from_conn_string``."""
        return self.saver_class(is_async).from_conn_string(self.url, **kw)

    def stored(self, thread_id: str) -> dict[str, list]:
        """A thread's stored rows as the engine's named statements read them, on any backend:
        ``checkpoints`` (checkpoint_ns, checkpoint_id) and the ``writes``' channels, sorted."""
        from threadline.storage.ops import Q

        def op(d: Any) -> Any:
            cks = yield Q(d.THREAD_CHECKPOINT_ROWS, (thread_id,))
            writes = yield Q(d.THREAD_WRITES, (thread_id,))
            return {"checkpoints": sorted((r[1], r[2]) for r in cks), "writes": sorted(w[5] for w in writes)}

        with self.saver_class(False).from_conn_string(self.url) as saver:
            return saver.run(op(saver.dialect))

    # raw SQL, behind the saver's back

    @contextmanager
    def _raw(self) -> Iterator[Any]:
        if self.is_postgres:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                yield conn
        else:
            conn = sqlite3.connect(self.url, isolation_level=None)
            try:
                conn.execute("PRAGMA busy_timeout=30000")
                yield conn
            finally:
                conn.close()

    def sql(self, text: str, params: tuple | list = ()) -> list[tuple]:
        """Run one statement (``?`` placeholders) in its own transaction; return its rows.

        A statement that changes value rows (``threadline_blobs``, ``threadline_writes``: how these
        tests damage the record) drops the head rows too, right after: the latest
        checkpoint would otherwise be read from its head (``storage.heads``, derived data) and
        never touch the damaged rows; ``test_format2`` tests what the head does on its own."""
        with self._raw() as conn:
            cur = conn.execute(POSTGRES.sql(text) if self.is_postgres else text, params)
            rows = cur.fetchall() if cur.description else []
            if _DAMAGE.match(text) and self._has_heads(conn):
                conn.execute("DELETE FROM threadline_heads")
            return [tuple(_norm(v) for v in r) for r in rows]

    def _has_heads(self, conn: Any) -> bool:
        found = conn.execute(
            "SELECT 1 FROM pg_catalog.pg_tables WHERE tablename = 'threadline_heads' AND schemaname = current_schema()" if self.is_postgres
            else "SELECT 1 FROM sqlite_master WHERE name = 'threadline_heads'"
        ).fetchall()
        return bool(found)

    def snapshot(self) -> dict[str, list[tuple]]:
        """Every row of every threadline table, in a stable order."""
        return {t: sorted(self.sql(f"SELECT * FROM threadline_{t}"), key=repr) for t in TABLES}

    def counts(self) -> dict[str, int]:
        return {t: self.sql(f"SELECT COUNT(*) FROM threadline_{t}")[0][0] for t in TABLES}


def make_backend(kind: str, directory: Path, request: pytest.FixtureRequest) -> Backend:
    """A ``Backend`` of ``kind`` on a fresh database: ``directory/threadline.db``, or a new
    Postgres schema dropped when the test ends."""
    if kind in SQLITE_KINDS:
        return Backend(kind=kind, url=str(directory / "threadline.db"))
    if kind in REDIS_KINDS:
        from redis_support import cluster_target, plain_target

        target = cluster_target(request.getfixturevalue("redis_cluster"), request) if "cluster" in kind else plain_target(request)
        return Backend(kind=kind, url=f"{target.url}{'&' if '?' in target.url else '?'}prefix={target.prefix}")
    assert kind in POSTGRES_KINDS, kind
    return Backend(kind=kind, url=fresh_postgres_url(request))
