"""The vocabulary every operation shares: ``Q`` (one statement), ``Op`` (a sans-IO
generator of them), the page size, and chunking of parameter lists (``chunks``, ``flat``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from itertools import chain
from typing import Any, TypeVar

T = TypeVar("T")


class Q:
    """One statement: SQL text with ``?`` placeholders and its parameters.

    With ``many=True`` ``params`` is a list of parameter tuples (executemany; a
    runner may send an ``INSERT … VALUES (…)`` as one multi-row statement).
    ``single=True`` says the statement is complete on its own (a statement is atomic):
    when it is the operation's first, a runner may run the operation without an explicit
    transaction, and any statement that follows then runs on its own as well (a ``put``
    on Postgres: its rare second statement keeps the data consistent by itself).
    ``read=True`` marks a plain read (no locks; it returns rows): where the dialect allows
    (``Dialect.reads_outside_transaction``), reads before an operation's first other
    statement run on their own, and the transaction starts with that statement.
    ``stores``: (table, bytes of values) pairs the statement stores, for metrics
    (``metrics.counted``): what ``put`` and ``put_writes`` write.
    ``count=True``: the runner returns ``[(n,)]``, n the rows the statement changed (the DB-API
    ``rowcount``, summed when it runs as several statements), instead of its rows.
    """

    # a plain class: built for every statement of every call, at half a dataclass's cost (issue 43)
    __slots__ = ("sql", "params", "many", "single", "read", "stores", "count")

    def __init__(
        self, sql: str, params: Sequence[Any] = (), many: bool = False, single: bool = False, read: bool = False,
        stores: tuple[tuple[str, int], ...] = (), count: bool = False,
    ) -> None:
        self.sql = sql
        self.params = params
        self.many = many
        self.single = single
        self.read = read
        self.stores = stores
        self.count = count

    def __repr__(self) -> str:
        return f"Q({self.sql!r}, {self.params!r}, many={self.many}, single={self.single}, read={self.read})"


Op = Generator[Q, list, T]

PAGE_SIZE = 100


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    for i in range(0, len(items), max(1, size)):
        yield items[i : i + size]


def flat(rows: Iterable[Sequence[Any]]) -> list[Any]:
    return list(chain.from_iterable(rows))
