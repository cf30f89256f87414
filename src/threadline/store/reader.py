"""Looking at a Store without changing the database: ``open_store_reader(url)``,
``counts_op`` (store items and cache entries, for ``stats``), and namespaces as text
(``namespace``/``dotted``: labels joined with dots, as the CLI and the browser show them).

Both work on whatever the database holds: nothing is created or migrated, and a
database without the Store's tables is reported, not set up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadline.backends import entry_of
from threadline.backends.readonly import open_readonly
from threadline.errors import NotADatabaseError
from threadline.storage.ops import Op, Q
from threadline.storage.ops.schema import tables_present
from threadline.store.base import SyncStore
from threadline.backends.registry import masked
from threadline.store.official import unadopted_op
from threadline.storage.dialect.cache import CACHE, COUNT_ENTRIES
from threadline.storage.dialect.store import COUNT_ITEMS, STORE, VECTORS, StoreSql

NO_STORE = "no threadline store in this database"


def namespace(text: str, *, root: bool = False) -> tuple[str, ...]:
    """``users.123`` → ``("users", "123")``; ``""`` is the root only where ``root`` allows it.
    ValueError for an empty label."""
    if not text:
        if root:
            return ()
        raise ValueError("the namespace is empty: give its labels joined with dots, e.g. users.123")
    labels = tuple(text.split("."))
    if "" in labels:
        raise ValueError(f"namespace {text!r} has an empty label: write its labels joined with single dots, e.g. users.123")
    return labels


def dotted(ns: tuple[str, ...] | list[str]) -> str:
    return ".".join(ns)


@contextmanager
def open_store_reader(url: str) -> Iterator[SyncStore]:
    """A sync store on ``url`` opened read-only (SQLite ``mode=ro``, Postgres read-only
    sessions; see ``threadline.backends.readonly``), never set up.

    Its reads must pass ``refresh_ttl=False`` (restarting a TTL is a write). Raises
    NotADatabaseError for a missing or non-database file and when the database has no
    Store tables (``NO_STORE``), BackendError when a server cannot be reached."""
    with open_readonly(url) as (saver, _):
        cls = entry_of(url).get("store")
        tables = saver.peek(tables_present(saver.dialect, (STORE, VECTORS)))
        if STORE not in tables:
            where = entry_of(url).get("describe")(url)
            waiting = unadopted(cls(saver.conn)) if isinstance(getattr(cls, "sql", None), StoreSql) else None
            if waiting is not None:
                raise NotADatabaseError(
                    f"{where} holds LangGraph's official store ({plural(waiting, 'item')}) but no threadline store yet: "
                    f"threadline's store adopts those items when a program opens it, or copy them now with "
                    f"`threadline store import {masked(url)} --db {masked(url)}`"
                )
            raise NotADatabaseError(f"{NO_STORE} ({where})")
        store = cls(saver.conn)
        store.is_setup = True  # the tables exist; setup() would write
        store._has_vectors = VECTORS in tables
        yield store


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def unadopted(store: SyncStore) -> int | None:
    """How many items of LangGraph's official store in the store's database are not adopted yet
    (read only; ``store.official.unadopted_op``), None where there is no official store."""
    if not isinstance(getattr(store, "sql", None), StoreSql):
        return None  # Redis: no official store shares its keys
    return store._driver.run(unadopted_op(store.sql), write=False)


def counts_op(d: object) -> Op[dict[str, int]]:
    """Rows of the Store (``store_items``) and the Cache (``cache_entries``) whose tables
    exist, on a saver's dialect (only its ``tables_sql`` is used); ``{}`` when neither does."""
    tables = {r[0] for r in (yield Q(d.tables_sql))}  # type: ignore[attr-defined]
    counts: dict[str, int] = {}
    for name, table, count in (("store_items", STORE, COUNT_ITEMS), ("cache_entries", CACHE, COUNT_ENTRIES)):
        if table in tables:
            counts[name] = int((yield Q(count))[0][0])
    return counts
