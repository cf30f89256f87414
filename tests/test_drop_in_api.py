"""threadline's saver classes are drop-in replacements for LangGraph's official ones:
their API, by introspection.

Each official class (``langgraph.checkpoint.sqlite.SqliteSaver``,
``...sqlite.aio.AsyncSqliteSaver``, ``...postgres.PostgresSaver``,
``...postgres.aio.AsyncPostgresSaver``, ``langgraph.checkpoint.memory.InMemorySaver``
and its alias ``MemorySaver``) is compared with threadline's class of
the same name. Every public callable of the official class (its own, inherited
ones such as ``aget`` / ``with_allowlist``, classmethods such as
``from_conn_string``, and ``__init__``) must exist on threadline's class; every
parameter of the official signature must exist in threadline's with a kind that
accepts the same calls, at the same position when it can be passed
positionally, with a default when (and the same default as) the official has
one. threadline may add parameters, as long as they are optional. The nature
of each callable must match: ``async def``, async generator,
``@contextmanager`` / ``@asynccontextmanager``.

The official idioms, each on a real database, are in ``test_drop_in_idioms.py``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

# --- the classes --------------------------------------------------------------


def _official(name: str) -> type:
    if name in ("InMemorySaver", "MemorySaver"):
        from langgraph.checkpoint import memory

        return getattr(memory, name)
    if name == "SqliteSaver":
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver
    if name == "AsyncSqliteSaver":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        return AsyncSqliteSaver
    if name == "PostgresSaver":
        from langgraph.checkpoint.postgres import PostgresSaver

        return PostgresSaver
    if name == "AsyncPostgresSaver":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        return AsyncPostgresSaver
    # langgraph-checkpoint-redis (it needs RedisJSON and RediSearch to run; introspected only)
    from langgraph.checkpoint import redis

    return {
        "RedisSaver": redis.RedisSaver,
        "AsyncRedisSaver": redis.AsyncRedisSaver,
        "ShallowRedisSaver": redis.ShallowRedisSaver,
        "AsyncShallowRedisSaver": redis.AsyncShallowRedisSaver,
    }[name]


def _threadline(name: str) -> type:
    import threadline

    return getattr(threadline, name)


CLASS_NAMES = (
    "SqliteSaver", "AsyncSqliteSaver", "PostgresSaver", "AsyncPostgresSaver",
    "RedisSaver", "AsyncRedisSaver", "ShallowRedisSaver", "AsyncShallowRedisSaver",
    "InMemorySaver", "MemorySaver",
)

# Public, NON-callable class attributes of the official savers that are internals
# of the official storage layout, not API: the SQL text and migration list the
# official Postgres savers (BasePostgresSaver) keep as class attributes. threadline
# has its own schema, so it need not carry them. Anything public and callable is
# never excluded; any other non-callable public attribute (``serde``,
# ``config_specs``) must exist on threadline's class too.
# ``test_exclusions_are_only_sql_text`` keeps this set honest.
OFFICIAL_SQL_INTERNALS = frozenset(
    {
        "MIGRATIONS",  # list of CREATE TABLE / ALTER / CREATE INDEX statements
        "SELECT_SQL",
        "SELECT_PENDING_SENDS_SQL",
        "UPSERT_CHECKPOINT_BLOBS_SQL",
        "UPSERT_CHECKPOINTS_SQL",
        "UPSERT_CHECKPOINT_WRITES_SQL",
        "INSERT_CHECKPOINT_WRITES_SQL",
    }
)


# The official Redis savers' internals of their own layout: the RediSearch index schemas
# (dicts) and the default sizes of the shallow saver's client-side key caches (ints).
OFFICIAL_REDIS_INTERNALS = frozenset({"checkpoints_schema", "writes_schema", "DEFAULT_KEY_CACHE_MAX_SIZE", "DEFAULT_CHANNEL_CACHE_MAX_SIZE"})


def _public_names(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_")) + ["__init__"]


def _public_callables(cls: type) -> list[str]:
    return [n for n in _public_names(cls) if callable(getattr(cls, n))]


def _nature(fn: Any) -> str:
    """How a caller must use ``fn``: 'coroutine', 'async generator', 'contextmanager',
    'asynccontextmanager' or 'plain'."""
    fn = getattr(fn, "__func__", fn)
    if inspect.iscoroutinefunction(fn):
        return "coroutine"
    if inspect.isasyncgenfunction(fn):
        return "async generator"
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_filename == contextlib.__file__:
        inner = inspect.unwrap(fn)
        if inspect.isasyncgenfunction(inner):
            return "asynccontextmanager"
        if inspect.isgeneratorfunction(inner):
            return "contextmanager"
    return "plain"


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _signature_problems(official: Callable, mine: Callable) -> list[str]:
    """Ways a call valid against ``official``'s signature could fail against ``mine``'s."""
    so, sm = inspect.signature(official), inspect.signature(mine)
    problems: list[str] = []
    mine_params = sm.parameters
    mine_kinds = {p.kind for p in mine_params.values()}
    off_positional = [p.name for p in so.parameters.values() if p.kind in _POSITIONAL]
    mine_positional = [p.name for p in mine_params.values() if p.kind in _POSITIONAL]
    for p in so.parameters.values():
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            if p.kind not in mine_kinds:
                problems.append(f"official takes {'*' if p.kind is inspect.Parameter.VAR_POSITIONAL else '**'}{p.name}; threadline does not")
            continue
        q = mine_params.get(p.name)
        if q is None:
            problems.append(f"parameter {p.name!r} ({p.kind.description}) is missing")
            continue
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and q.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            problems.append(f"parameter {p.name!r} is positional-or-keyword in the official signature, {q.kind.description} in threadline's")
        elif p.kind is inspect.Parameter.KEYWORD_ONLY and q.kind not in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            problems.append(f"parameter {p.name!r} is keyword-only in the official signature, {q.kind.description} in threadline's")
        elif p.kind is inspect.Parameter.POSITIONAL_ONLY and q.kind not in _POSITIONAL:
            problems.append(f"parameter {p.name!r} is positional-only in the official signature, {q.kind.description} in threadline's")
        if p.kind in _POSITIONAL and q.kind in _POSITIONAL:
            i = off_positional.index(p.name)
            if i >= len(mine_positional) or mine_positional[i] != p.name:
                problems.append(
                    f"parameter {p.name!r} is positional #{i} in the official signature {off_positional}, "
                    f"threadline's positional parameters are {mine_positional}"
                )
        if p.default is not inspect.Parameter.empty:
            if q.default is inspect.Parameter.empty:
                problems.append(f"parameter {p.name!r} has a default ({p.default!r}) in the official signature, none in threadline's")
            elif not (q.default is p.default or q.default == p.default):
                problems.append(f"parameter {p.name!r} defaults to {p.default!r} officially, to {q.default!r} in threadline")
        # A default threadline adds where the official has none is harmless: every
        # official call passes the argument anyway.
    for q in mine_params.values():
        if q.name in so.parameters or q.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if q.default is inspect.Parameter.empty:
            problems.append(f"threadline adds a REQUIRED parameter {q.name!r}; extra parameters must be optional")
    return problems


# --- introspection ------------------------------------------------------------


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_exclusions_are_only_sql_text(name: str) -> None:
    """The exclusion set names only non-callable SQL text / migration lists of the official class."""
    official = _official(name)
    for attr in OFFICIAL_SQL_INTERNALS:
        if not hasattr(official, attr):
            continue
        value = getattr(official, attr)
        assert not callable(value), f"{attr} is callable: it must not be excluded"
        items = value if isinstance(value, list) else [value]
        assert all(isinstance(v, str) for v in items), f"{attr} is not SQL text: {value!r}"


@pytest.mark.parametrize("name", [n for n in CLASS_NAMES if "Redis" in n])
def test_redis_exclusions_are_index_schemas_and_cache_sizes(name: str) -> None:
    official = _official(name)
    for attr in OFFICIAL_REDIS_INTERNALS:
        raw = inspect.getattr_static(official, attr, None)
        if raw is None:
            continue
        assert isinstance(raw, property) if attr.endswith("_schema") else isinstance(raw, int), (attr, raw)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_is_a_checkpoint_saver(name: str) -> None:
    assert issubclass(_official(name), BaseCheckpointSaver)
    assert issubclass(_threadline(name), BaseCheckpointSaver), f"threadline.{name} is not a BaseCheckpointSaver"


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_every_official_public_callable_exists(name: str) -> None:
    official, mine = _official(name), _threadline(name)
    missing = [n for n in _public_callables(official) if not callable(getattr(mine, n, None))]
    assert not missing, f"threadline.{name} lacks official public callables: {missing}"


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_every_official_public_attribute_exists(name: str) -> None:
    """Non-callable public class attributes (``serde``, the ``config_specs`` property), minus SQL internals."""
    official, mine = _official(name), _threadline(name)
    internals = OFFICIAL_SQL_INTERNALS | OFFICIAL_REDIS_INTERNALS
    names = [n for n in _public_names(official) if not callable(getattr(official, n)) and n not in internals]
    missing = [n for n in names if not hasattr(mine, n)]
    assert not missing, f"threadline.{name} lacks official public attributes: {missing}"
    for n in names:
        if hasattr(mine, n):
            off_kind = type(inspect.getattr_static(official, n))
            mine_kind = type(inspect.getattr_static(mine, n))
            if off_kind is property:
                assert mine_kind is property, f"{name}.{n} is a property officially, a {mine_kind.__name__} in threadline"


def _callable_cases() -> list[tuple[str, str]]:
    return [(name, meth) for name in CLASS_NAMES for meth in _public_callables(_official(name))]


@pytest.mark.parametrize(("name", "meth"), _callable_cases(), ids=[f"{c}.{m}" for c, m in _callable_cases()])
def test_signature_accepts_every_official_call(name: str, meth: str) -> None:
    official, mine = _official(name), _threadline(name)
    if not callable(getattr(mine, meth, None)):
        pytest.fail(f"threadline.{name}.{meth} is missing")
    problems = _signature_problems(getattr(official, meth), getattr(mine, meth))
    assert not problems, (
        f"threadline.{name}.{meth}{inspect.signature(getattr(mine, meth))} vs official "
        f"{meth}{inspect.signature(getattr(official, meth))}:\n  " + "\n  ".join(problems)
    )


@pytest.mark.parametrize(("name", "meth"), _callable_cases(), ids=[f"{c}.{m}" for c, m in _callable_cases()])
def test_callable_nature_matches(name: str, meth: str) -> None:
    """``async def`` stays ``async def`` (``await cp.setup()``), async generators stay async generators
    (``async for``), context managers stay (async) context managers."""
    official, mine = _official(name), _threadline(name)
    if not callable(getattr(mine, meth, None)):
        pytest.fail(f"threadline.{name}.{meth} is missing")
    want, got = _nature(getattr(official, meth)), _nature(getattr(mine, meth))
    assert got == want, f"official {name}.{meth} is {want}; threadline's is {got}"


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_static_and_class_methods_stay_so(name: str) -> None:
    official, mine = _official(name), _threadline(name)
    for n in _public_callables(official):
        raw = inspect.getattr_static(official, n)
        if isinstance(raw, (classmethod, staticmethod)) and hasattr(mine, n):
            assert isinstance(inspect.getattr_static(mine, n), type(raw)), f"{name}.{n} is a {type(raw).__name__} officially"


def test_memory_alias_and_context_manager_bases() -> None:
    """``MemorySaver`` is ``InMemorySaver`` in both modules, and threadline's is a (async) context
    manager as the official one is (``with InMemorySaver() as saver``)."""
    from contextlib import AbstractAsyncContextManager, AbstractContextManager

    from langgraph.checkpoint import memory

    import threadline

    assert memory.MemorySaver is memory.InMemorySaver and threadline.MemorySaver is threadline.InMemorySaver
    for base in (AbstractContextManager, AbstractAsyncContextManager):
        assert issubclass(memory.InMemorySaver, base) and issubclass(threadline.InMemorySaver, base)
