"""Shared fixtures, all on the one test-database stack in ``tests/backends.py``.

* ``backend`` — parametrized over ``sqlite``, ``sqlite-async``, ``postgres``,
  ``postgres-async``: a ``Backend`` on a fresh database (a SQLite file in
  ``tmp_path``, or a fresh Postgres schema). ``backend.open()`` gives a NEW saver
  instance on that database each time (restart tests).
* ``sync_backend`` (sqlite, postgres), ``async_backend`` (sqlite-async,
  postgres-async), ``sqlite_backend_fx`` (sqlite, sqlite-async) — narrower
  parametrizations; ``fresh_backend(kind)`` — a factory of more fresh databases.
* ``saver`` — an open saver from ``backend.open()`` (async fixture; async savers
  need the test to be ``async def``).
* ``db`` — (``Backend``, facts): a sync backend (sqlite, postgres) on which the graph
  of ``lifecycle_graphs`` has run (``populate``: branches, subgraphs, pending writes,
  an interrupt); facts are what ``populate`` returned.
* ``pg_url`` — the URL of a fresh Postgres schema, for tests that open savers of
  their own on it (the official ones).
* ``redis_target`` (plain Redis), ``redis_cluster_target`` (the session's local 3-master
  cluster), ``any_redis_target`` (both): a ``RedisTarget`` — URL plus a key prefix of
  this test's own, its keys deleted after the test; ``redis_cluster`` — the session's
  ``LocalCluster`` (``.url``). See ``tests/redis_support.py``.

Postgres and Redis params are skipped when the server is unreachable, unless
``CI=true``, where that is a failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# Helper modules' asserts report their values as a test's do.
pytest.register_assert_rewrite("backends", "bad_input_access", "cli_support", "langgraph_scenarios", "redis_support", "side_by_side_run", "web_helpers")

from hypothesis import settings  # noqa: E402

from backends import (  # noqa: E402
    ALL_KINDS,
    REDIS_KINDS,
    SQLITE_KINDS,
    SYNC_KINDS,
    Backend,
    drop_session_schemas,
    fresh_postgres_url,
    in_ci,
    make_backend,
)
from redis_support import RedisTarget, cluster_target, plain_target, start_cluster  # noqa: E402

# Property tests explore new random cases on every local run; CI replays a fixed
# sequence, so a landing's result does not depend on the draw.
settings.register_profile("ci", derandomize=True)
if in_ci():
    settings.load_profile("ci")


def pytest_sessionfinish(session, exitstatus):
    drop_session_schemas()


@pytest.fixture(params=ALL_KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


@pytest.fixture(params=ALL_KINDS + REDIS_KINDS)
def graph_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Every backend, Redis (plain and the local cluster) included, for tests that read through the savers only."""
    return make_backend(request.param, tmp_path, request)


@pytest.fixture(params=SYNC_KINDS)
def sync_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


@pytest.fixture
def format1_puts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Puts as a release before inline channels wrote them: every channel a put gives a version gets
    a blob row (an empty channel an ``empty`` row), the rows databases of those releases hold. Storage
    format 2 keeps a channel holding None or empty in its checkpoint's document instead."""
    from threadline.storage import inline

    monkeypatch.setattr(inline, "plan", lambda doc, values, new_versions, scalars=True: None)


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


@pytest.fixture
def db(sync_backend: Backend) -> tuple[Backend, dict]:
    """(backend, facts): ``lifecycle_graphs.populate`` has run on a fresh sync backend."""
    from lifecycle_graphs import populate

    with sync_backend.open() as saver:
        facts = populate(saver)
    return sync_backend, facts


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    """The URL of a fresh Postgres schema (dropped after the test)."""
    return fresh_postgres_url(request)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The session's local Redis Cluster (3 masters on free loopback ports), or why there is none."""
    cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    if not isinstance(cluster, str):
        cluster.stop()


@pytest.fixture
def redis_target(request: pytest.FixtureRequest) -> RedisTarget:
    """Plain Redis (``THREADLINE_TEST_REDIS``) and a key prefix of this test's own."""
    return plain_target(request)


@pytest.fixture
def redis_cluster_target(request: pytest.FixtureRequest, redis_cluster) -> RedisTarget:
    """The local cluster and a key prefix of this test's own."""
    return cluster_target(redis_cluster, request)


@pytest.fixture(params=("redis", "cluster"))
def any_redis_target(request: pytest.FixtureRequest) -> RedisTarget:
    """Plain Redis, then the local cluster, each with a key prefix of this test's own."""
    if request.param == "redis":
        return plain_target(request)
    return cluster_target(request.getfixturevalue("redis_cluster"), request)
