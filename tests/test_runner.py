"""``storage.runner`` directly: the SQL rewriting of ``statements`` and the sync/async drivers.

``statements`` rewrites a many-row ``INSERT … VALUES (?, …)`` into multi-row statements
with a regular expression; these tests pin what it rewrites, how it chunks by the
dialect's parameter limit, what it leaves to executemany, and (on real SQLite and
Postgres, sync and async cursors) that the rewritten statements store exactly the rows.
"""

from __future__ import annotations

import copy
import sqlite3
from contextlib import AsyncExitStack

import aiosqlite
import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import Backend
from threadline.storage.dialect import POSTGRES, SQLITE
from threadline.storage.ops import Q
from threadline.storage.runner import Statement, adrive, drive, needs_transaction, statements

INSERT = "INSERT INTO t (a, b, c) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"


def rows(n: int) -> list[tuple]:
    return [(i, f"b{i}", i * 10) for i in range(n)]


# --- statements ---------------------------------------------------------------


def test_a_single_statement_passes_through_unchanged() -> None:
    q = Q("INSERT INTO t (a) VALUES (?)", (1,))
    assert statements(q, 900) == [Statement("INSERT INTO t (a) VALUES (?)", (1,), False)]


def test_many_row_values_become_multi_row_statements_chunked_by_max_params() -> None:
    got = statements(Q(INSERT, rows(5), many=True), max_params=7)  # 7 // 3 → 2 rows a statement
    assert [s.sql for s in got] == [
        "INSERT INTO t (a, b, c) VALUES (?, ?, ?),(?, ?, ?) ON CONFLICT DO NOTHING",
        "INSERT INTO t (a, b, c) VALUES (?, ?, ?),(?, ?, ?) ON CONFLICT DO NOTHING",
        "INSERT INTO t (a, b, c) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
    ]
    assert [list(s.params) for s in got] == [
        [0, "b0", 0, 1, "b1", 10],
        [2, "b2", 20, 3, "b3", 30],
        [4, "b4", 40],
    ]
    assert not any(s.many for s in got)


def test_rows_that_fill_the_limit_exactly_are_one_statement() -> None:
    (only,) = statements(Q(INSERT, rows(4), many=True), max_params=12)
    assert only.sql.count("(?, ?, ?)") == 4 and len(only.params) == 12 and not only.many


def test_a_limit_below_the_row_width_still_sends_one_row_a_statement() -> None:
    got = statements(Q(INSERT, rows(3), many=True), max_params=2)
    assert len(got) == 3 and all(s.sql == INSERT and len(s.params) == 3 for s in got)


def test_many_row_statements_without_a_placeholder_values_row_stay_executemany() -> None:
    update = Q("UPDATE t SET b = ? WHERE a = ?", [("x", 1), ("y", 2)], many=True)
    assert statements(update, 900) == [Statement(update.sql, update.params, True)]
    # a VALUES row holding a literal is not repeated: its rows go through executemany
    literal = Q("INSERT INTO t (a, b, c) VALUES (?, ?, 0)", [(1, "x"), (2, "y")], many=True)
    assert statements(literal, 900) == [Statement(literal.sql, literal.params, True)]


def test_an_empty_many_row_statement_is_no_statement() -> None:
    assert statements(Q(INSERT, [], many=True), 900) == []


def test_needs_transaction_only_spares_a_promised_single_statement() -> None:
    single = Q("DELETE FROM t WHERE a = ?", (1,), single=True)
    assert not needs_transaction(single, statements(single, 900))
    assert needs_transaction(Q(single.sql, (1,)), statements(Q(single.sql, (1,)), 900))
    chunked = Q(INSERT, rows(3), many=True, single=True)
    assert needs_transaction(chunked, statements(chunked, 3))  # three statements
    many = Q("UPDATE t SET b = ? WHERE a = ?", [("x", 1)], many=True, single=True)
    assert needs_transaction(many, statements(many, 900))  # executemany
    empty = Q(INSERT, [], many=True, single=True)
    assert needs_transaction(empty, statements(empty, 900))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 40), max_params=st.integers(1, 20))
def test_the_rewritten_statements_store_exactly_the_rows(n: int, max_params: int) -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c INTEGER)")
        for s in statements(Q(INSERT, rows(n), many=True), max_params):
            (conn.executemany if s.many else conn.execute)(s.sql, s.params)
        assert conn.execute("SELECT a, b, c FROM t ORDER BY a").fetchall() == rows(n)
    finally:
        conn.close()


# --- drive / adrive on real cursors ----------------------------------------------


def table_op(n: int):
    """Create, fill (multi-row), update (executemany) and read a table; return its rows."""
    yield Q("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c INTEGER)")
    yield Q(INSERT, rows(n), many=True)
    yield Q("UPDATE t SET b = ? WHERE a = ?", [("x", 0), ("y", 1)], many=True)
    got = yield Q("SELECT a, b, c FROM t ORDER BY a")
    return [tuple(r) for r in got]


def expected(n: int) -> list[tuple]:
    return [(0, "x", 0), (1, "y", 10)] + rows(n)[2:]


class Calls:
    """What the driver asked of the shell: ``begin(needed)`` calls and the number of flushes."""

    def __init__(self) -> None:
        self.begin: list[bool] = []
        self.flushes = 0


def small(d):
    """The dialect with a parameter limit of 6 (2 rows of 3 a statement)."""
    d = copy.copy(d)
    d.max_params = 6
    return d


def run_sync(backend: Backend, op, calls: Calls):
    if backend.is_postgres:
        with psycopg.connect(backend.url, autocommit=True) as conn, conn.pipeline() as pipe:

            def flush() -> None:
                calls.flushes += 1
                pipe.sync()

            return drive(op, conn.cursor(), small(POSTGRES), calls.begin.append, flush)
    conn = sqlite3.connect(backend.url, isolation_level=None)
    try:

        def count() -> None:
            calls.flushes += 1

        return drive(op, conn.cursor(), small(SQLITE), calls.begin.append, count)
    finally:
        conn.close()


async def run_async(backend: Backend, op, calls: Calls):
    async def begin(needed: bool) -> None:
        calls.begin.append(needed)

    async with AsyncExitStack() as stack:
        if backend.is_postgres:
            conn = await stack.enter_async_context(await psycopg.AsyncConnection.connect(backend.url, autocommit=True))
            pipe = await stack.enter_async_context(conn.pipeline())
            cur, d = conn.cursor(), POSTGRES

            async def flush() -> None:
                calls.flushes += 1
                await pipe.sync()

        else:
            conn = await stack.enter_async_context(aiosqlite.connect(backend.url, isolation_level=None))
            cur, d = await conn.cursor(), SQLITE

            async def flush() -> None:
                calls.flushes += 1

        return await adrive(op, cur, small(d), begin, flush)


async def run(backend: Backend, op, calls: Calls):
    return await run_async(backend, op, calls) if backend.is_async else run_sync(backend, op, calls)


async def test_drivers_run_every_statement_and_send_back_the_rows(backend: Backend) -> None:
    calls = Calls()
    assert await run(backend, table_op(5), calls) == expected(5)
    assert calls.begin == [True]  # asked once, before the first statement
    # flushed after each statement whose rows are read: CREATE, 3 multi-row INSERTs, SELECT
    # (not after the executemany UPDATE)
    assert calls.flushes == 5
    assert backend.sql("SELECT COUNT(*) FROM t") == [(5,)]  # committed: the statements ran in autocommit


def counted_op():
    """Rows changed, as ``Q(count=True)`` reports them: a multi-row insert split into several
    statements (some rows already there), then an executemany update."""
    yield Q("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c INTEGER)")
    yield Q(INSERT, rows(3), many=True)
    added = yield Q(INSERT, rows(7), many=True, count=True)  # rows 3–6 are new: 4 statements of 2 rows at most
    updated = yield Q("UPDATE t SET b = ? WHERE a = ?", [("x", 0), ("y", 1), ("z", 99)], many=True, count=True)
    return added, updated


async def test_drivers_count_the_rows_a_statement_changed(backend: Backend) -> None:
    assert await run(backend, counted_op(), Calls()) == ([(4,)], [(2,)])
    assert backend.sql("SELECT COUNT(*) FROM t") == [(7,)]


async def test_drivers_spare_the_transaction_of_a_single_statement(backend: Backend) -> None:
    def one():
        got = yield Q("SELECT 1 + 1", single=True)
        return got[0][0]

    def none():
        return "no statement"
        yield  # a generator that yields nothing

    calls = Calls()
    assert await run(backend, one(), calls) == 2
    assert calls.begin == [False]
    calls = Calls()
    assert await run(backend, none(), calls) == "no statement"
    assert calls.begin == [] and calls.flushes == 0


def test_leading_reads_ask_no_transaction_and_the_first_write_opens_it() -> None:
    """``Dialect.reads_outside_transaction``: each read before the operation's first other statement
    asks ``begin(False)``, that statement ``begin(True)``, none after it — on the direct path of a
    single statement in ``?`` style as on the path that builds statements (a dialect rewriting its SQL)."""

    class Rewritten(type(SQLITE)):  # type: ignore[misc]
        def sql(self, text: str) -> str:
            return text + " "

    def op():
        yield Q("SELECT 1", read=True)
        yield Q("SELECT 2", read=True)
        yield Q("CREATE TABLE t (a INTEGER)")
        yield Q("INSERT INTO t (a) VALUES (?)", [(1,), (2,)], many=True)
        return (yield Q("SELECT COUNT(*) FROM t", read=True))[0][0]

    for cls in (type(SQLITE), Rewritten):
        d = copy.copy(SQLITE)
        d.__class__ = cls
        d.reads_outside_transaction = True
        began: list[bool] = []
        conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            assert drive(op(), conn.cursor(), d, began.append) == 2
        finally:
            conn.close()
        assert began == [False, False, True], cls
