"""The vocabulary every operation shares: ``Q`` (one statement), ``Op`` (a sans-IO
generator of them), the page size, blob key and chain-depth constants, and the small
SQL helpers (chunking parameter lists, ``VALUES`` lists, key joins, placeholders)
plus ``_json``, which reads a stored JSON column or raises CorruptRowError.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.errors import CorruptRowError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Q:
    """One statement: SQL text with ``?`` placeholders and its parameters.

    With ``many=True`` ``params`` is a list of parameter tuples (executemany; a
    runner may send an ``INSERT … VALUES (…)`` as one multi-row statement).
    ``single=True`` promises it is the operation's only statement, so a runner
    may run it without an explicit transaction (a statement is atomic).
    """

    sql: str
    params: Sequence[Any] = ()
    many: bool = False
    single: bool = False


Op = Generator[Q, list, T]

PAGE_SIZE = 100
BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
WRITE_SELECT = ", ".join(f"t.{c.strip()}" for c in R.WRITE_COLUMNS.split(","))
MAX_CHAIN_DEPTH = 1_000_000  # guards the recursive parent walk against a corrupted cycle


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    for i in range(0, len(items), max(1, size)):
        yield items[i : i + size]


def values_list(width: int, count: int) -> str:
    row = "(" + ",".join("?" * width) + ")"
    return "VALUES " + ",".join([row] * count)


def join_keys(table: str, columns: Sequence[str], count: int, select: str) -> str:
    """``SELECT select FROM (VALUES …) k JOIN table t ON t.col = k.columnN …``.

    Looking rows up by a list of keys as a join on a VALUES list lets SQLite and
    Postgres probe the primary key per key; ``(a, b) IN (VALUES …)`` scans the table.
    """
    on = " AND ".join(f"t.{col} = k.column{i + 1}" for i, col in enumerate(columns))
    return f"SELECT {select} FROM ({values_list(len(columns), count)}) k JOIN {table} t ON {on}"


def flat(rows: Iterable[Sequence[Any]]) -> list[Any]:
    return [v for row in rows for v in row]


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def _json(d: Dialect, value: Any, where: str) -> Any:
    try:
        return d.load_json(value)
    except ValueError as exc:
        raise CorruptRowError(f"{where}: stored JSON is unreadable ({exc})") from exc



# --- versions --------------------------------------------------------------

next_version = R.next_version
