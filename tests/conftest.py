"""Shared fixtures: a fresh database per test for every backend.

* ``backend`` — parametrized over ``sqlite``, ``sqlite-async``, ``postgres``,
  ``postgres-async``: a ``tests.backends.Backend`` on a fresh database (a SQLite
  file in ``tmp_path``, or a fresh Postgres schema). ``backend.open()`` gives a
  NEW saver instance on that database each time (restart tests).
* ``sync_backend`` (sqlite, postgres), ``async_backend`` (sqlite-async,
  postgres-async), ``sqlite_backend_fx`` (sqlite, sqlite-async) — narrower
  parametrizations; ``fresh_backend(kind)`` — a factory of more fresh databases.
* ``saver`` — an open saver from ``backend.open()`` (async fixture; async savers
  need the test to be ``async def``).

Postgres params are skipped when ``threadline.backends.postgres`` cannot be imported or
the server is unreachable, unless ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from backends import (  # noqa: E402
    ALL_KINDS,
    POSTGRES_KINDS,
    SQLITE_KINDS,
    Backend,
    PgSchemas,
    in_ci,
    postgres_backend,
    postgres_unavailable,
    sqlite_backend,
)

_SCHEMAS: PgSchemas | None = None


def pg_schemas() -> PgSchemas:
    global _SCHEMAS
    if _SCHEMAS is None:
        _SCHEMAS = PgSchemas()
    return _SCHEMAS


def pytest_sessionfinish(session, exitstatus):
    if _SCHEMAS is not None:
        _SCHEMAS.drop_all()


def require_postgres() -> None:
    """Skip (or, with CI=true, fail) when the Postgres savers cannot run."""
    reason = postgres_unavailable()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true and Postgres tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def make_backend(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Backend:
    if kind in SQLITE_KINDS:
        return sqlite_backend(kind, tmp_path)
    assert kind in POSTGRES_KINDS
    require_postgres()
    schemas = pg_schemas()
    schema = schemas.create()
    request.addfinalizer(lambda: schemas.drop(schema))
    return postgres_backend(kind, schema)


@pytest.fixture(params=ALL_KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


@pytest.fixture(params=("sqlite", "postgres"))
def sync_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


@pytest.fixture(params=("sqlite-async", "postgres-async"))
def async_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


@pytest.fixture(params=SQLITE_KINDS)
def sqlite_backend_fx(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


@pytest.fixture
def fresh_backend(tmp_path: Path, request: pytest.FixtureRequest):
    """A factory: ``fresh_backend(kind)`` → another fresh database of that kind (for conformance factories)."""
    counter = iter(range(1_000_000))

    def make(kind: str) -> Backend:
        d = tmp_path / f"db{next(counter)}"
        d.mkdir()
        return make_backend(kind, d, request)

    return make


@pytest.fixture
async def saver(backend: Backend):
    """An open saver on ``backend`` (closed after the test)."""
    if backend.is_async:
        async with backend.open() as s:
            yield s
    else:
        with backend.open() as s:
            yield s
