"""pytest plugin that runs an upstream LangGraph test suite against threadline's savers.

Loaded by ``compat/langgraph_suite.py`` with ``-p threadline_suite_plugin`` into a
pytest run over a ``tests/`` folder extracted from a PyPI sdist (``langgraph``,
``langgraph-checkpoint-sqlite`` or ``langgraph-checkpoint-postgres``). The
downloaded files are never edited; everything happens here, at run time:

* Store runs (``THREADLINE_SUITE=langgraph-store|sqlite-store|postgres-store``) replace
  the official stores (``langgraph.store.sqlite``/``.postgres``: ``SqliteStore``,
  ``AsyncSqliteStore``, ``PostgresStore``, ``AsyncPostgresStore``) and the cache
  (``langgraph.cache.sqlite.SqliteCache``) instead of the savers, and select the store
  test files, or the langgraph tests that take a Postgres store or the SQLite cache.
* Redis store runs (``THREADLINE_SUITE=redis-store|redis-sqlite-store``): the official run
  is the SQL stores the tests were written for (``redis-store``: the langgraph tests with
  the Postgres store variants and the ``cache=redis`` variant; ``redis-sqlite-store``: the
  SQLite store test files); the threadline run gives the same tests threadline's Redis
  store (``redis_store_shims``) and ``threadline.cache.RedisCache`` on
  ``THREADLINE_TEST_REDIS``, so a threadline-only failure is a test the official SQL store
  passes and the Redis store does not.
* Redis saver run (``THREADLINE_SUITE=langgraph-redis``): the langgraph tests with the SQLite
  checkpointer variants (``sqlite``, ``sqlite_aes``, ``sqlite_aio``). The official run is them
  as they are, on the official SQLite savers (the official Redis saver needs RediSearch, which
  plain Redis lacks); the threadline run rebinds the suite's factories of those variants
  (``_checkpointer_sqlite*`` of ``tests.conftest``) to ``redis_saver_shims``'s, which open
  threadline's ``RedisSaver`` / ``AsyncRedisSaver`` on ``THREADLINE_TEST_REDIS`` under a key
  prefix of each test's own. So a threadline-only failure is a test the official SQLite
  saver passes and threadline's Redis saver does not. Variants are reported as ``redis``,
  ``redis_aes``, ``redis_aio`` in both runs.
* In-memory saver run (``THREADLINE_SUITE=langgraph-memory``): the langgraph tests of the
  in-memory checkpointer variants (``memory``, ``memory_migrate_sends``) and every test that
  takes no checkpointer fixture (variant ``direct``: many build an ``InMemorySaver`` of their
  own; a result's ``built`` tells whether one was). The threadline run replaces
  ``langgraph.checkpoint.memory.InMemorySaver`` and ``MemorySaver`` by threadline's before the
  suite's modules import them (its ``MemorySaverAssertImmutable`` then subclasses threadline's).
* Substitution (``THREADLINE_SUITE_IMPL=threadline``): when this module is
  imported (before pytest imports any conftest or test module) the attributes
  ``langgraph.checkpoint.sqlite.SqliteSaver``,
  ``langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver``,
  ``langgraph.checkpoint.postgres.PostgresSaver`` and
  ``langgraph.checkpoint.postgres.aio.AsyncPostgresSaver`` are replaced by
  threadline's classes, so every ``from langgraph.checkpoint.sqlite import
  SqliteSaver`` in the suite (its conftest fixtures and its test modules) gets
  threadline's. With ``THREADLINE_SUITE_IMPL=official`` nothing is replaced: the
  baseline run.
* Postgres: the suites hard-code ``postgres://postgres:postgres@localhost:544x/``.
  ``pytest_configure`` (after the conftests are imported, before any test module
  is) points those module constants at the server of ``THREADLINE_TEST_POSTGRES``
  (default ``postgresql://postgres@127.0.0.1:5432/test``). The suites' own
  fixtures still CREATE and DROP a database per test. Suites that use one fixed
  database get a scratch database made here and dropped at the end.
* Selection (same in both runs, see ``_deselect_reason``): only tests that use a
  checkpoint saver that is substituted; the rest are deselected with a reason.
* Results: every selected test's outcome, its first failure line, the saver
  variant it ran with and whether it built a saver under test are written as
  JSON to ``THREADLINE_SUITE_RESULTS`` at the end of the session.
* A test phase that runs longer than ``THREADLINE_SUITE_TIMEOUT`` seconds
  (default 120) is interrupted with ``TimeoutError`` (SIGALRM), so one hung test
  cannot stall the run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

IMPL = os.environ.get("THREADLINE_SUITE_IMPL", "official")
SUITE = os.environ.get("THREADLINE_SUITE", "langgraph")
RESULTS = os.environ.get("THREADLINE_SUITE_RESULTS")
TIMEOUT = float(os.environ.get("THREADLINE_SUITE_TIMEOUT", "120"))
NO_POSTGRES = os.environ.get("THREADLINE_SUITE_NO_POSTGRES", "") == "1"
VARIANTS = {v for v in os.environ.get("THREADLINE_SUITE_VARIANTS", "").split(",") if v}
DSN = os.environ.get("THREADLINE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

assert IMPL in ("official", "threadline"), IMPL
assert SUITE in (
    "langgraph", "sqlite", "postgres", "langgraph-store", "sqlite-store", "postgres-store", "redis-store", "redis-sqlite-store",
    "langgraph-redis", "langgraph-memory",
), SUITE
STORE_SUITE = SUITE.endswith("-store")  # the store/cache runs: substitute stores and caches, not savers
REDIS_SUITE = SUITE.startswith("redis-")  # the SQL stores' tests, threadline's run on its Redis store
REDIS_SAVER_SUITE = SUITE == "langgraph-redis"  # the SQLite saver variants, threadline's run on its Redis savers
MEMORY_SUITE = SUITE == "langgraph-memory"  # the in-memory saver's tests, threadline's InMemorySaver substituted

# (module, attribute, threadline attribute): the four savers threadline replaces.
SAVERS = (
    ("langgraph.checkpoint.sqlite", "SqliteSaver", "SqliteSaver"),
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver", "AsyncSqliteSaver"),
    ("langgraph.checkpoint.postgres", "PostgresSaver", "PostgresSaver"),
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver", "AsyncPostgresSaver"),
)

# langgraph-memory: the official in-memory saver and its alias (one class), replaced by threadline's.
MEMORY_SAVERS = (
    ("langgraph.checkpoint.memory", "InMemorySaver", "InMemorySaver"),
    ("langgraph.checkpoint.memory", "MemorySaver", "MemorySaver"),
)

# (module, attribute, threadline attribute): the stores and the cache threadline replaces in the *-store runs.
STORES = (
    ("langgraph.store.sqlite", "SqliteStore", "SqliteStore"),
    ("langgraph.store.sqlite", "AsyncSqliteStore", "AsyncSqliteStore"),
    ("langgraph.store.sqlite.aio", "AsyncSqliteStore", "AsyncSqliteStore"),
    ("langgraph.store.postgres", "PostgresStore", "PostgresStore"),
    ("langgraph.store.postgres", "AsyncPostgresStore", "AsyncPostgresStore"),
    ("langgraph.store.postgres.aio", "AsyncPostgresStore", "AsyncPostgresStore"),
    ("langgraph.cache.sqlite", "SqliteCache", "SqliteCache"),
)

# The Redis store runs: (module, attribute, threadline's replacement as "module:attribute").
REDIS_STORES = {
    "redis-store": (
        ("langgraph.store.postgres", "PostgresStore", "threadline.store.redis:RedisStore"),
        ("langgraph.store.postgres", "AsyncPostgresStore", "threadline.store.redis:AsyncRedisStore"),
        ("langgraph.cache.redis", "RedisCache", "threadline.cache.redis:RedisCache"),
    ),
    "redis-sqlite-store": (
        ("langgraph.store.sqlite", "SqliteStore", "redis_store_shims:SqliteStore"),
        ("langgraph.store.sqlite", "AsyncSqliteStore", "redis_store_shims:AsyncSqliteStore"),
        ("langgraph.store.sqlite.aio", "AsyncSqliteStore", "redis_store_shims:AsyncSqliteStore"),
    ),
}

# langgraph-redis: the SQLite variants of the langgraph suite and the names they are reported under.
REDIS_SAVER_VARIANTS = {"sqlite": "redis", "sqlite_aes": "redis_aes", "sqlite_aio": "redis_aio"}
# the savers a langgraph-redis run counts: the official SQLite savers, or threadline's Redis savers
REDIS_SAVERS = {
    "official": (("langgraph.checkpoint.sqlite", "SqliteSaver"), ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver")),
    "threadline": (("threadline.backends.redis", "RedisSaver"), ("threadline.backends.redis", "AsyncRedisSaver")),
}

# Savers built during the current test (see _count_instances).
_built = 0


def _count_instances(cls: type) -> None:
    """Wrap ``cls.__init__`` to count instances, so the report can tell which tests built a saver under test."""
    init = cls.__init__
    if getattr(cls.__dict__.get("__init__"), "_suite_counted", False):
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        global _built
        _built += 1
        init(self, *args, **kwargs)

    __init__._suite_counted = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = init  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[misc]


def _substitute() -> dict[str, type]:
    """Replace the official saver classes by threadline's (threadline run); count instances either way."""
    import importlib

    classes: dict[str, type] = {}
    if REDIS_SAVER_SUITE:  # nothing replaced here: the checkpointer factories are rebound in pytest_configure
        for module_name, attr in REDIS_SAVERS[IMPL]:
            cls = getattr(importlib.import_module(module_name), attr)
            _count_instances(cls)
            classes[f"{module_name}.{attr}"] = cls
        return classes
    if REDIS_SUITE:
        for module_name, attr, replacement in REDIS_STORES[SUITE]:
            module = importlib.import_module(module_name)
            cls = getattr(module, attr)
            if IMPL == "threadline":
                where, _, name = replacement.partition(":")
                cls = getattr(importlib.import_module(where), name)
                setattr(module, attr, cls)
            _count_instances(cls)
            classes[f"{module_name}.{attr}"] = cls
        return classes
    threadline = importlib.import_module("threadline") if IMPL == "threadline" else None
    for module_name, attr, tl_attr in STORES if STORE_SUITE else MEMORY_SAVERS if MEMORY_SUITE else SAVERS:
        module = importlib.import_module(module_name)
        official = getattr(module, attr)
        cls = getattr(threadline, tl_attr) if threadline is not None else official
        _count_instances(cls)
        setattr(module, attr, cls)
        classes[f"{module_name}.{attr}"] = cls
    return classes


CLASSES = _substitute()


# --- Postgres ---------------------------------------------------------------


def _base_uri(dsn: str) -> str:
    """``scheme://user[:password]@host:port/`` of ``dsn``: the suites append a database name to it."""
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(dsn)
    user = quote(str(info.get("user") or "postgres"), safe="")
    password = info.get("password")
    auth = user + (":" + quote(str(password), safe="") if password else "")
    host = quote(str(info.get("host") or "127.0.0.1"), safe="")
    port = info.get("port") or "5432"
    return f"postgresql://{auth}@{host}:{port}/"


PG_BASE = _base_uri(DSN)
_scratch_db: str | None = None


def _admin_execute(sql: str) -> None:
    import psycopg

    with psycopg.Connection.connect(PG_BASE + "postgres", autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql)


def _point_suite_at_local_postgres() -> None:
    """Rebind the suites' hard-coded Postgres URIs (module constants) to THREADLINE_TEST_POSTGRES's server."""
    global _scratch_db
    if SUITE in ("langgraph", "langgraph-store", "redis-store", "langgraph-redis", "langgraph-memory"):
        for name in ("tests.conftest_checkpointer", "tests.conftest_store"):
            module = sys.modules.get(name)
            if module is not None:
                module.DEFAULT_POSTGRES_URI = PG_BASE
    elif SUITE in ("postgres", "postgres-store"):
        module = sys.modules.get("tests.conftest")
        if module is None:
            return
        module.DEFAULT_POSTGRES_URI = PG_BASE
        if not NO_POSTGRES:
            # Tests that use DEFAULT_URI share one database (the upstream default is
            # `postgres`); give them a scratch one of their own instead.
            _scratch_db = f"tlsuite_{uuid.uuid4().hex[:12]}"
            _admin_execute(f"CREATE DATABASE {_scratch_db}")
        module.DEFAULT_URI = PG_BASE + (_scratch_db or "postgres")


# --- selection ---------------------------------------------------------------

LANGGRAPH_FIXTURES = ("sync_checkpointer", "async_checkpointer")
MEMORY_PARAMS = ("memory", "memory_migrate_sends")
SQLITE_STORE_FILES = ("test_store.py", "test_async_store.py", "test_ttl.py")
POSTGRES_STORE_FILES = ("test_store.py", "test_async_store.py")


def _use_redis_store_fixtures() -> None:
    """redis-store, threadline run: the langgraph suite's Postgres store fixtures open threadline's
    Redis store instead (``tests.conftest`` imported them by name, so rebind them there)."""
    import redis_store_shims

    for name in ("tests.conftest", "tests.conftest_store"):
        module = sys.modules.get(name)
        if module is not None:
            module._store_postgres = redis_store_shims.store_redis
            module._store_postgres_aio = redis_store_shims.store_redis_aio


REDIS_STORE_VARIANTS = {"postgres": "store=redis", "postgres_aio": "store=redis_aio"}


def _use_redis_saver_factories() -> None:
    """langgraph-redis, threadline run: the suite's SQLite checkpointer factories open threadline's
    Redis savers instead (``tests.conftest`` imported them by name, so rebind them there too)."""
    import redis_saver_shims

    for name in ("tests.conftest", "tests.conftest_checkpointer"):
        module = sys.modules.get(name)
        if module is None:
            continue
        for factory, replacement in redis_saver_shims.FACTORIES.items():
            if not hasattr(module, factory):
                raise RuntimeError(f"{name} has no {factory}: the langgraph suite changed; update redis_saver_shims.FACTORIES")
            setattr(module, factory, replacement)


def _params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    return dict(callspec.params) if callspec is not None else {}


def _store_variant(params: dict[str, Any]) -> str | None:
    """The substituted store or cache a langgraph test runs with, if any."""
    for store in ("sync_store", "async_store"):
        if params.get(store) not in (None, "in_memory"):
            return str(params[store])
    return "cache=sqlite" if params.get("cache") == "sqlite" else None


def variant_of(item: pytest.Item) -> str:
    """The saver variant a test runs with (langgraph suite) or its test file (saver suites)."""
    params = _params(item)
    file = Path(str(item.fspath)).name
    if SUITE == "langgraph-store":
        return _store_variant(params) or "none"
    if SUITE == "redis-store":
        store = params.get("sync_store", params.get("async_store"))
        return REDIS_STORE_VARIANTS.get(str(store), "cache=redis" if params.get("cache") == "redis" else "none")
    if SUITE == "langgraph-memory":
        for fixture in LANGGRAPH_FIXTURES:
            if fixture in params:
                return str(params[fixture])
        return "direct"
    if SUITE == "langgraph-redis":
        for fixture in LANGGRAPH_FIXTURES:
            if fixture in params:
                return REDIS_SAVER_VARIANTS.get(str(params[fixture]), str(params[fixture]))
        return "none"
    if SUITE == "langgraph":
        for fixture in LANGGRAPH_FIXTURES:
            if fixture in params:
                return str(params[fixture])
        make = params.get("make_checkpointer")
        if make is not None:
            return getattr(make, "__name__", str(make)).removeprefix("_checkpointer_")
        if file == "test_prune_postgres.py":
            return "postgres"
        return "none"
    mode = params.get("saver_name", params.get("name"))
    return f"{file}[{mode}]" if isinstance(mode, str) else file


def _is_postgres_variant(variant: str) -> bool:
    return variant.startswith("postgres")


def _saver_run_reason(params: dict[str, Any], variant: str) -> str | None:
    """Why a run of one saver in the langgraph tests (langgraph-redis, langgraph-memory) leaves out
    a test of a variant it covers: another run's cache or store, or a variant not selected."""
    if params.get("cache") == "redis":
        return "cache=redis (LangGraph's RedisCache: the redis-store run's)"
    for store in ("sync_store", "async_store"):
        if store in params and params[store] != "in_memory":
            return "Postgres store variant (a store, not a checkpoint saver; in_memory store kept)"
    if VARIANTS and variant not in VARIANTS:
        return "saver variant not selected (--variants / --quick)"
    return None


def _deselect_reason(item: pytest.Item) -> str | None:
    params = _params(item)
    file = Path(str(item.fspath)).name
    if SUITE == "redis-store":
        variant = variant_of(item)
        if variant == "none":
            return "uses neither the Postgres store (sync or async, plain connection) nor cache=redis"
        if any(params.get(f, "memory") != "memory" for f in LANGGRAPH_FIXTURES):
            return "checkpointer variant other than the in-memory one (savers are the langgraph run's)"
        if NO_POSTGRES and variant.startswith("store="):
            return "Postgres store variant: the official baseline needs Postgres (--no-postgres)"
        return None
    if SUITE == "langgraph-redis":
        if not any(f in getattr(item, "fixturenames", ()) for f in LANGGRAPH_FIXTURES):
            return "uses no checkpointer fixture (runs the same with any saver)"
        variant = variant_of(item)
        if variant not in REDIS_SAVER_VARIANTS.values():
            return "checkpointer variant other than the SQLite ones (the langgraph run's; the Redis savers take their place)"
        return _saver_run_reason(params, variant)
    if SUITE == "langgraph-memory":
        variant = variant_of(item)
        if variant not in ("direct", *MEMORY_PARAMS):
            return "checkpointer variant other than the in-memory ones (the langgraph run's)"
        return _saver_run_reason(params, variant)
    if SUITE == "redis-sqlite-store":
        return None if file in SQLITE_STORE_FILES else "checkpoint saver tests (the saver runs cover them)"
    if SUITE == "langgraph-store":
        variant = _store_variant(params)
        if variant is None:
            return "uses no substituted store or cache (the langgraph run covers the rest)"
        if any(params.get(f, "memory") != "memory" for f in LANGGRAPH_FIXTURES):
            return "checkpointer variant other than the in-memory one (savers are the langgraph run's)"
        if NO_POSTGRES and _is_postgres_variant(variant):
            return "Postgres variant (--no-postgres)"
        return None
    if SUITE in ("sqlite-store", "postgres-store"):
        if file not in (SQLITE_STORE_FILES if SUITE == "sqlite-store" else POSTGRES_STORE_FILES):
            return "checkpoint saver tests (the saver runs cover them)"
        if NO_POSTGRES and SUITE == "postgres-store":
            return "Postgres suite (--no-postgres)"
        return None
    if SUITE == "langgraph":
        uses_fixture = any(f in getattr(item, "fixturenames", ()) for f in LANGGRAPH_FIXTURES)
        if not uses_fixture and file != "test_prune_postgres.py":
            return "uses no checkpointer fixture (runs the same with any saver)"
        variant = variant_of(item)
        if variant in MEMORY_PARAMS:
            return "in-memory checkpointer (not substituted)"
        if params.get("cache") == "redis":
            return "needs a Redis server (cache=redis)"
        for store in ("sync_store", "async_store"):
            if store in params and params[store] != "in_memory":
                return "Postgres store variant (a store, not a checkpoint saver; in_memory store kept)"
        if VARIANTS and variant not in VARIANTS:
            return "saver variant not selected (--variants / --quick)"
        if NO_POSTGRES and _is_postgres_variant(variant):
            return "Postgres variant (--no-postgres)"
        return None
    if SUITE == "sqlite":
        if file in SQLITE_STORE_FILES:
            return "store tests (no checkpoint saver)"
        return None
    # postgres
    if file in POSTGRES_STORE_FILES:
        return "store tests (no checkpoint saver)"
    if params.get("saver_name") == "shallow":
        return "ShallowPostgresSaver variant (no threadline counterpart, not substituted)"
    if NO_POSTGRES:
        return "Postgres suite (--no-postgres)"
    return None


# --- hooks ---------------------------------------------------------------------

_results: dict[str, dict[str, Any]] = {}
_deselected: dict[str, list[str]] = {}
_variants: dict[str, str] = {}
_started = time.time()


def pytest_configure(config: pytest.Config) -> None:
    _point_suite_at_local_postgres()
    if SUITE == "redis-store" and IMPL == "threadline":
        _use_redis_store_fixtures()
    if REDIS_SAVER_SUITE and IMPL == "threadline":
        _use_redis_saver_factories()


def pytest_unconfigure(config: pytest.Config) -> None:
    if REDIS_SUITE and IMPL == "threadline":
        import redis_store_shims

        redis_store_shims.drop_all()
    if REDIS_SAVER_SUITE and IMPL == "threadline":
        import redis_saver_shims

        redis_saver_shims.drop_all()
    if _scratch_db is not None:
        try:
            _admin_execute(f"DROP DATABASE IF EXISTS {_scratch_db} WITH (FORCE)")
        except Exception as exc:  # pragma: no cover - reported, not fatal
            print(f"threadline-suite: could not drop scratch database {_scratch_db}: {exc}", file=sys.stderr)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        reason = _deselect_reason(item)
        if reason is None:
            keep.append(item)
            _variants[item.nodeid] = variant_of(item)
        else:
            dropped.append(item)
            _deselected.setdefault(reason, []).append(item.nodeid)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


class _PhaseTimeout(TimeoutError):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _PhaseTimeout(f"threadline-suite: test phase ran longer than {TIMEOUT:g}s (interrupted)")


def _timed(phase: str):
    @pytest.hookimpl(wrapper=True)
    def hook(item: pytest.Item, *args: Any):
        global _built
        if phase == "setup":
            _built = 0
        use_alarm = TIMEOUT > 0 and hasattr(signal, "setitimer")
        if use_alarm:
            previous = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
        try:
            return (yield)
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)

    return hook


pytest_runtest_setup = _timed("setup")
pytest_runtest_call = _timed("call")
pytest_runtest_teardown = _timed("teardown")


def _first_line(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # skip: (path, lineno, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.strip().splitlines()[0]
    lines = [line for line in str(longrepr).strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    return (errors[0][1:].strip() if errors else lines[-1].strip()) if lines else ""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _results.setdefault(
        report.nodeid,
        {"outcome": "passed", "message": "", "when": "", "variant": _variants.get(report.nodeid, "?"), "built": 0, "seconds": 0.0},
    )
    entry["seconds"] = round(entry["seconds"] + report.duration, 3)
    if report.when == "call" or (report.when == "setup" and not report.passed):
        entry["built"] = _built
    if report.when == "teardown":
        entry["built"] = max(entry["built"], _built)
    xfail = hasattr(report, "wasxfail")
    if report.skipped:
        if entry["outcome"] == "passed":
            entry["outcome"] = "skipped"
            entry["message"] = ("xfail: " + str(report.wasxfail)) if xfail else _first_line(report)
            entry["when"] = report.when
    elif report.failed:
        if entry["outcome"] in ("passed", "skipped"):
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry["message"] = _first_line(report)
            entry["when"] = report.when


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not RESULTS:
        return
    payload = {
        "suite": SUITE,
        "impl": IMPL,
        "classes": {name: f"{cls.__module__}.{cls.__qualname__}" for name, cls in CLASSES.items()},
        "postgres": PG_BASE.split("@")[-1],
        "exitstatus": int(exitstatus),
        "seconds": round(time.time() - _started, 1),
        "tests": _results,
        "deselected": _deselected,
    }
    Path(RESULTS).write_text(json.dumps(payload, indent=1, sort_keys=True))
