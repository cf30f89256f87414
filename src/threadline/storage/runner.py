"""Drive a sans-IO operation (see ``ops``) on one sync or async DB-API cursor.

This is the one statement-execution loop of every backend: ``drive(op, cur, d, begin)``
turns each ``Q`` the operation yields into ``statements`` (in the dialect's
placeholder style), runs them on ``cur`` and sends the rows back (of every statement, in
order, when a many-row INSERT is split into several); ``adrive`` is the
same on an async cursor (psycopg async; aiosqlite runs ``drive`` in its own thread).
A backend shell only opens the connection and the transaction: before the first statement the driver calls
``begin(needed)``, ``needed`` saying whether the operation needs an explicit
transaction (``needs_transaction``); the shell commits or rolls back afterwards. On a
dialect whose reads need no transaction (``Dialect.reads_outside_transaction``),
``begin(False)`` comes first for leading reads (``Q.read``) and ``begin`` again with
the operation's first other statement, so ``begin`` opens at most one transaction.
``flush``, when given, is called after each statement whose rows are read or counted
(``Q.count``; psycopg's ``Pipeline.sync``: in pipeline mode the next statement may depend on
these rows, and a rowcount is known only once its results came back).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from threadline.storage.ops import Op, Q, chunks, flat

if TYPE_CHECKING:
    from threadline.storage.dialect import Dialect

T = TypeVar("T")

_VALUES_ROW = re.compile(r"\bVALUES\s*(\((?:\s*\?\s*,)*\s*\?\s*\))")


class Statement(NamedTuple):
    sql: str
    params: Sequence[Any]
    many: bool


def statements(q: Q, max_params: int) -> list[Statement]:
    """The statements that execute ``q`` (SQL still with ``?`` placeholders).

    A many-row ``INSERT … VALUES (?, …)`` becomes one multi-row statement per chunk
    of at most ``max_params`` parameters: one round trip and one statement instead
    of one per row. Other many-row statements stay executemany; an empty many-row
    ``Q`` is no statement at all.
    """
    if not q.many:
        return [Statement(q.sql, q.params, False)]
    if not q.params:
        return []
    rows = _rows_per_statement(q.sql, max_params)
    if rows is None:
        return [Statement(q.sql, q.params, True)]
    return [Statement(_multi_row(q.sql, len(part)), flat(part), False) for part in chunks(q.params, rows)]


@lru_cache(maxsize=256)
def _rows_per_statement(sql: str, max_params: int) -> int | None:
    """How many rows of ``sql``'s ``VALUES (?, …)`` one statement takes, or None (no such row)."""
    m = _VALUES_ROW.search(sql)
    return None if m is None else max(1, max_params // m.group(1).count("?"))


@lru_cache(maxsize=1024)
def _multi_row(sql: str, rows: int) -> str:
    """``sql`` with its ``VALUES (?, …)`` row repeated ``rows`` times (the statements of a put
    take a few shapes, each built once)."""
    m = _VALUES_ROW.search(sql)
    assert m is not None
    return sql[: m.start(1)] + ",".join([m.group(1)] * rows) + sql[m.end(1) :]


def needs_transaction(q: Q, stmts: list[Statement] | None = None) -> bool:
    """Whether the first statement of an operation must open a transaction: not when
    it is complete on its own (``Q.single``) and one statement (``stmts``: its statements;
    None: ``q`` is one statement as written)."""
    return not (q.single and (stmts is None or (len(stmts) == 1 and not stmts[0].many)))


# dialect class → whether its ``sql`` leaves the ``?`` placeholders as written
_QMARK: dict[type, bool] = {}


class _Plan:
    """The statements of each ``Q`` in the dialect's SQL, and the one ``begin`` call."""

    def __init__(self, d: Dialect) -> None:
        self.d = d
        self.begun = False
        # the dialect's placeholder style, None when it is the ``?`` the statements are written in
        qmark = _QMARK.get(type(d))
        if qmark is None:
            qmark = _QMARK[type(d)] = d.sql("?") == "?"
        self.translate = None if qmark else d.sql

    def start(self, q: Q, stmts: list[Statement] | None = None) -> bool | None:
        """``needed`` for ``begin`` before ``q`` (``stmts``: its statements; None: ``q`` as written),
        or None once it was called. A read the dialect runs outside a transaction asks
        ``begin(False)`` and leaves the transaction to the operation's first other statement."""
        if self.begun:
            return None
        if q.read and self.d.reads_outside_transaction:
            return False
        self.begun = True
        return needs_transaction(q, stmts)

    def of(self, q: Q) -> tuple[bool | None, list[Statement]]:
        """(``needed`` for ``begin``, as ``start``; the statements in the dialect's SQL)."""
        stmts = statements(q, self.d.max_params)
        needed = self.start(q, stmts)
        sql = self.translate
        return needed, stmts if sql is None else [Statement(sql(s.sql), s.params, s.many) for s in stmts]


def drive(
    op: Op[T], cur: Any, d: Dialect, begin: Callable[[bool], object], flush: Callable[[], object] | None = None
) -> T:
    """Run ``op`` on the sync cursor ``cur`` and return its result (see the module docstring)."""
    plan = _Plan(d)

    def execute(q: Q) -> list:
        if not q.many and plan.translate is None:
            # most statements: one, in ``?`` style
            if not plan.begun and (needed := plan.start(q)) is not None:
                begin(needed)
            cur.execute(q.sql, q.params)
            if flush is not None:
                flush()
            if q.count:
                return [(cur.rowcount,)]
            return cur.fetchall() if q.read or cur.description else []
        needed, stmts = plan.of(q)
        if needed is not None:
            begin(needed)
        rows: list = []
        changed = 0
        for s in stmts:
            if s.many:
                cur.executemany(s.sql, s.params)
                if q.count and flush is not None:
                    flush()  # in a pipeline, the rowcount is known once its results came back
            else:
                cur.execute(s.sql, s.params)
                if flush is not None:
                    flush()
                # a read returns rows: no ``description`` (psycopg builds a Column per column at each ask)
                rows += cur.fetchall() if q.read or cur.description else []
            changed += cur.rowcount if q.count else 0
        return [(changed,)] if q.count else rows

    try:
        q = next(op)
        while True:
            q = op.send(execute(q))
    except StopIteration as stop:
        return stop.value


async def adrive(
    op: Op[T],
    cur: Any,
    d: Dialect,
    begin: Callable[[bool], Awaitable[object]],
    flush: Callable[[], Awaitable[object]] | None = None,
) -> T:
    """``drive`` on an async cursor; ``begin`` and ``flush`` are coroutine functions."""
    plan = _Plan(d)

    async def execute(q: Q) -> list:
        needed, stmts = plan.of(q)
        if needed is not None:
            await begin(needed)
        rows: list = []
        changed = 0
        for s in stmts:
            if s.many:
                await cur.executemany(s.sql, s.params)
                if q.count and flush is not None:
                    await flush()
            else:
                await cur.execute(s.sql, s.params)
                if flush is not None:
                    await flush()
                rows += list(await cur.fetchall()) if q.read or cur.description else []
            changed += cur.rowcount if q.count else 0
        return [(changed,)] if q.count else rows

    try:
        q = next(op)
        while True:
            q = op.send(await execute(q))
    except StopIteration as stop:
        return stop.value
