"""Databases for the Store and Cache tests: a fresh one per test on each backend.

``StoreDb`` names one backend kind on one fresh database (a SQLite file, or a Postgres
schema selected through ``search_path``) and opens threadline's store on it — or the
official store of the same kind on a twin database, for side-by-side tests.
``pgvector_dsn`` is a Postgres with pgvector: the ``pgserver`` package's server, started
once per session on a Unix socket (the system Postgres may lack the extension).

Postgres kinds skip when the server is unreachable, and fail instead under CI=true.
"""

from __future__ import annotations

import importlib
import secrets
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import threadline
from backends import PgSchemas, in_ci, pg_dsn, postgres_unavailable, with_search_path

KINDS = ("sqlite", "sqlite-async", "postgres", "postgres-async")
SCHEMAS = PgSchemas()


async def call(s: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``s.name(...)`` on a sync store, ``await s.aname(...)`` on an async one."""
    if hasattr(s, "_aqueue"):
        return await getattr(s, "a" + name)(*args, **kwargs)
    return getattr(s, name)(*args, **kwargs)


def require(reason: str | None) -> None:
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true and this Postgres test cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class StoreDb:
    kind: str
    url: str  # SQLite file path, or a Postgres DSN with search_path set
    twin: str  # a second, separate database of the same kind (the official store's)

    @property
    def is_async(self) -> bool:
        return self.kind.endswith("-async")

    @property
    def is_postgres(self) -> bool:
        return self.kind.startswith("postgres")

    def store_class(self, official: bool = False) -> type:
        name = ("Async" if self.is_async else "") + ("PostgresStore" if self.is_postgres else "SqliteStore")
        if not official:
            return getattr(threadline, name)
        return getattr(importlib.import_module("langgraph.store." + ("postgres" if self.is_postgres else "sqlite")), name)

    def open(self, official: bool = False, **kwargs: Any):
        """``from_conn_string`` of threadline's store (or the official one, on the twin database)."""
        return self.store_class(official).from_conn_string(self.twin if official else self.url, **kwargs)

    @contextmanager
    def raw(self):
        """A plain connection to threadline's database, behind the store's back."""
        if self.is_postgres:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                yield conn
        else:
            conn = sqlite3.connect(self.url, isolation_level=None)
            try:
                yield conn
            finally:
                conn.close()

    def sql(self, text: str, params: tuple | list = ()) -> list[tuple]:
        """Run one statement (``?`` placeholders) on threadline's database; return its rows."""
        with self.raw() as conn:
            if self.is_postgres:
                text = text.replace("%", "%%").replace("?", "%s")
            cur = conn.execute(text, params)
            return list(cur.fetchall()) if cur.description else []


def make_db(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreDb:
    if not kind.startswith("postgres"):
        return StoreDb(kind, str(tmp_path / "threadline.db"), str(tmp_path / "official.db"))
    require(postgres_unavailable())
    ours, theirs = SCHEMAS.create(), SCHEMAS.create()
    request.addfinalizer(lambda: (SCHEMAS.drop(ours), SCHEMAS.drop(theirs)))
    return StoreDb(kind, with_search_path(pg_dsn(), ours), with_search_path(pg_dsn(), theirs))


@pytest.fixture(params=KINDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> StoreDb:
    return make_db(request.param, tmp_path, request)


@pytest.fixture(params=("sqlite", "postgres"))
def sync_db(request: pytest.FixtureRequest, tmp_path: Path) -> StoreDb:
    return make_db(request.param, tmp_path, request)


@pytest.fixture
async def store(db: StoreDb):
    """Threadline's store of ``db``'s kind, set up."""
    if db.is_async:
        async with db.open() as s:
            await s.setup()
            yield s
    else:
        with db.open() as s:
            s.setup()
            yield s


# --- a Postgres with pgvector ---------------------------------------------------------


@pytest.fixture(scope="session")
def pgvector_server(tmp_path_factory: pytest.TempPathFactory):
    """DSN of a session-wide Postgres with the vector extension in ``public``, or a skip
    (a failure under CI=true) saying why there is none."""
    try:
        import pgserver
    except ImportError as exc:
        require(f"no Postgres with pgvector: the pgserver package is not installed ({exc})")
    try:
        server = pgserver.get_server(tmp_path_factory.mktemp("pgvector"), cleanup_mode="stop")
        server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    except Exception as exc:  # any reason the bundled server cannot start is reported
        require(f"no Postgres with pgvector: pgserver did not start ({type(exc).__name__}: {exc})")
    yield server.get_uri()
    server.cleanup()


@pytest.fixture
def pgvector_dsn(pgvector_server: str) -> str:
    """A fresh schema on the pgvector server, with ``public`` (where the extension lives) on the search_path."""
    import psycopg

    schema = f"{SCHEMAS.prefix}_vec_{secrets.token_hex(3)}"
    with psycopg.connect(pgvector_server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    yield with_search_path(pgvector_server, f"{schema},public")
    with psycopg.connect(pgvector_server, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
