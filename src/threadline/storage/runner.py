"""Drive a sans-IO operation (see ``ops``) with a sync or async ``execute``.

``execute(q)`` runs one ``Q`` on the backend's cursor and returns its rows; the
driver sends them back into the operation and returns the operation's result.
Transactions are the backend shell's (one per operation); ``statements`` and
``needs_transaction`` are the rules every shell applies.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from threadline.storage.ops import Op, Q, chunks, flat

T = TypeVar("T")

_VALUES_ROW = re.compile(r"\bVALUES\s*(\((?:\s*\?\s*,)*\s*\?\s*\))")


class Statement(NamedTuple):
    sql: str
    params: Sequence[Any]
    many: bool


def statements(q: Q, max_params: int) -> list[Statement]:
    """The statements that execute ``q``.

    A many-row ``INSERT … VALUES (?, …)`` becomes one multi-row statement per chunk
    of at most ``max_params`` parameters: one round trip and one statement instead
    of one per row. Other many-row statements stay executemany.
    """
    if not q.many:
        return [Statement(q.sql, q.params, False)]
    if not q.params:
        return []
    m = _VALUES_ROW.search(q.sql)
    if m is None:
        return [Statement(q.sql, q.params, True)]
    row, width = m.group(1), m.group(1).count("?")
    return [
        Statement(q.sql[: m.start(1)] + ",".join([row] * len(part)) + q.sql[m.end(1) :], flat(part), False)
        for part in chunks(q.params, max(1, max_params // width))
    ]


def needs_transaction(q: Q, stmts: list[Statement]) -> bool:
    """Whether the first statement of an operation must open a transaction: not when
    the operation promised it is its only statement (``Q.single``) and it is one."""
    return not (q.single and len(stmts) == 1 and not stmts[0].many)


def drive(op: Op[T], execute: Callable[[Q], list]) -> T:
    try:
        q = next(op)
        while True:
            q = op.send(execute(q))
    except StopIteration as stop:
        return stop.value


async def adrive(op: Op[T], execute: Callable[[Q], Awaitable[list]]) -> T:
    try:
        q = next(op)
        while True:
            q = op.send(await execute(q))
    except StopIteration as stop:
        return stop.value
