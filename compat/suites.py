"""The suites ``langgraph_suite.py`` runs (``SUITES``), the langgraph suite's saver variants,
and its one console ``log``: shared by the runner and ``suite_report.py``."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Suite:
    name: str  # langgraph | sqlite | postgres | ... (SUITES below)
    dist: str  # PyPI distribution whose sdist ships tests/
    options: tuple[str, ...]  # extra pytest options
    needs: tuple[str, ...] = ()  # importable modules the suite needs (test dependencies)
    redis: bool = False  # its threadline run needs the Redis server of THREADLINE_TEST_REDIS


# libs/langgraph runs its tests with anyio's plugin only: pytest-asyncio stays out of it.
ANYIO_ONLY = ("-p", "no:asyncio", "--snapshot-warn-unused")
# the checkpoint packages' tests are pytest-asyncio tests in auto mode
ASYNCIO_AUTO = ("-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function")

SUITES = {
    "langgraph": Suite(
        "langgraph",
        "langgraph",
        ANYIO_ONLY,
        needs=("pytest_mock", "syrupy", "redis", "Crypto"),
    ),
    "sqlite": Suite(
        "sqlite",
        "langgraph-checkpoint-sqlite",
        ASYNCIO_AUTO,
    ),
    "postgres": Suite(
        "postgres",
        "langgraph-checkpoint-postgres",
        ASYNCIO_AUTO,
    ),
    # The Store and Cache: the same sdists, their store tests, with threadline's stores and cache.
    "langgraph-store": Suite(
        "langgraph-store",
        "langgraph",
        ANYIO_ONLY,
        needs=("pytest_mock", "syrupy", "redis", "Crypto"),
    ),
    "sqlite-store": Suite(
        "sqlite-store",
        "langgraph-checkpoint-sqlite",
        ASYNCIO_AUTO,
    ),
    "postgres-store": Suite(
        "postgres-store",
        "langgraph-checkpoint-postgres",
        ASYNCIO_AUTO,
    ),
    # The Redis store: the tests above with threadline's Redis store (and RedisCache) in the
    # threadline run, the official SQL stores they were written for in the official run.
    "redis-store": Suite(
        "redis-store",
        "langgraph",
        ANYIO_ONLY,
        needs=("pytest_mock", "syrupy", "redis", "Crypto"),
        redis=True,
    ),
    "redis-sqlite-store": Suite(
        "redis-sqlite-store",
        "langgraph-checkpoint-sqlite",
        ASYNCIO_AUTO,
        redis=True,
    ),
    # The Redis savers: the langgraph tests' SQLite checkpointer variants, with threadline's
    # RedisSaver / AsyncRedisSaver in the threadline run, the official SQLite savers in the
    # official run (the official Redis saver needs RediSearch, which plain Redis lacks).
    "langgraph-redis": Suite(
        "langgraph-redis",
        "langgraph",
        ANYIO_ONLY,
        needs=("pytest_mock", "syrupy", "redis", "Crypto"),
        redis=True,
    ),
    # The in-memory saver: the langgraph tests of the in-memory checkpointer variants and the
    # tests that build an InMemorySaver themselves, with threadline's InMemorySaver in the
    # threadline run (langgraph.checkpoint.memory.InMemorySaver / MemorySaver replaced).
    "langgraph-memory": Suite(
        "langgraph-memory",
        "langgraph",
        ANYIO_ONLY,
        needs=("pytest_mock", "syrupy", "redis", "Crypto"),
    ),
}

# Row order and labels of the langgraph suite's saver variants (fixture params).
LANGGRAPH_VARIANTS = {
    "sqlite": "SQLite sync",
    "sqlite_aes": "SQLite sync, encrypted serde",
    "sqlite_aio": "SQLite async",
    "postgres": "Postgres sync",
    "postgres_pipe": "Postgres sync, pipeline",
    "postgres_pool": "Postgres sync, pool",
    "postgres_aio": "Postgres async",
    "postgres_aio_pipe": "Postgres async, pipeline",
    "postgres_aio_pool": "Postgres async, pool",
}


# The langgraph-redis suite's variants: the SQLite variant each takes the place of in the
# threadline run (the official run is that SQLite variant).
REDIS_SAVER_VARIANTS = {
    "redis": "Redis sync (official: SQLite sync)",
    "redis_aes": "Redis sync, encrypted serde (official: SQLite)",
    "redis_aio": "Redis async (official: SQLite async)",
}

# The langgraph-memory suite's variants: the in-memory checkpointer fixtures, and the tests that
# make an InMemorySaver (or none) of their own.
MEMORY_SAVER_VARIANTS = {
    "memory": "in-memory (fixture)",
    "memory_migrate_sends": "in-memory, pending-sends migration (fixture)",
    "direct": "tests building their own InMemorySaver, or none",
}

# The variants each suite with saver variants knows (--variants picks among them), and their labels.
SUITE_VARIANTS = {"langgraph": LANGGRAPH_VARIANTS, "langgraph-redis": REDIS_SAVER_VARIANTS, "langgraph-memory": MEMORY_SAVER_VARIANTS}
ALL_VARIANTS = {**LANGGRAPH_VARIANTS, **REDIS_SAVER_VARIANTS, **MEMORY_SAVER_VARIANTS}

QUICK_VARIANTS = ("sqlite", "sqlite_aio", "postgres", "postgres_aio", "redis", "redis_aio")


_print_lock = threading.Lock()


def log(msg: str) -> None:
    with _print_lock:
        print(msg, flush=True)
