"""The official stores' items: adopted in place, or imported from another database.

LangGraph's official ``SqliteStore`` and ``PostgresStore`` keep their items in a table named
``store`` (prefix, key, value, created_at, updated_at, and since their later migrations
expires_at, ttl_minutes). threadline's stores keep theirs in ``threadline_store``, so a
program switching its import would find none of the memories the official store wrote.

* **Adoption** (as the savers adopt the official checkpoint tables): a threadline store opened
  on a database that also holds the official table copies, when it is set up (``setup()``,
  explicit or on the first operation), every item of that table it has not adopted yet —
  with its namespace, key, value, created and updated times and TTL — into its own table,
  in one transaction, and records each in ``threadline_store_adopted``. Each later open
  catches up on items the official store has written or changed since, unless threadline
  wrote (or deleted) that item after adopting it: the official rows never override an item
  threadline wrote. The official table is only ever read. ``adopt=False`` turns it off.
* **Import** (``import_langgraph_store``): the items of an official store's database,
  opened read-only, copied into a threadline store on any SQL database.

With an ``index``, adopted and imported items are embedded by the store's own embedder
(the official store's vectors are not copied), as a put would embed them.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import PutOp

from threadline.errors import AdoptionError, ConfigError, NotADatabaseError, ThreadlineError
from threadline.storage.ops import Op, Q, chunks, flat
from threadline.store import ops as O
from threadline.store import values as V
from threadline.store.index import Index
from threadline.storage.dialect.store import OFFICIAL, OFFICIAL_COLUMNS, StoreSql


@dataclass
class OfficialItem:
    """One row of the official ``store`` table, read: times in epoch seconds, ``stamp`` the row's
    ``updated_at`` as stored (what adoption records and compares)."""

    prefix: str
    key: str
    value: dict[str, Any]
    created_at: float
    updated_at: float
    expires_at: float | None
    ttl_minutes: float | None
    stamp: Any

    @property
    def namespace(self) -> tuple[str, ...]:
        return V.ns_tuple(self.prefix)


def official_columns_op(d: StoreSql) -> Op[frozenset[str] | None]:
    """The columns of the official stores' ``store`` table, or None when the database has no such table."""
    columns = frozenset(r[0] for r in (yield Q(d.columns_sql, (OFFICIAL,))))
    return columns if set(OFFICIAL_COLUMNS) <= columns else None


def _where(prefix: Any, key: Any) -> str:
    return f"the official store's item {V.ns_tuple(str(prefix))!r}/{key!r}"


def _epoch(raw: Any, where: str, column: str) -> float | None:
    """A time of the official table as epoch seconds: a datetime (Postgres), or text as SQLite's
    CURRENT_TIMESTAMP and Python's datetime adapter write it (UTC when it names no zone)."""
    if raw is None:
        return None
    if isinstance(raw, _dt.datetime):
        stamp = raw
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    else:
        try:
            stamp = _dt.datetime.fromisoformat(raw.decode() if isinstance(raw, bytes) else str(raw))
        except ValueError:
            raise AdoptionError(f"{where}: its {column} {raw!r} is not a time") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=_dt.timezone.utc)
    return stamp.timestamp()


def _item(row: Sequence[Any]) -> OfficialItem:
    prefix, key, raw, created, updated, expires, ttl = row
    where = _where(prefix, key)
    if not isinstance(raw, (str, bytes, memoryview)):  # Postgres: JSONB, decoded
        value = raw
    else:
        try:
            value = json.loads(bytes(raw) if isinstance(raw, (bytes, memoryview)) else raw)
        except (TypeError, ValueError) as exc:
            raise AdoptionError(f"{where}: its value is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise AdoptionError(f"{where}: its value is a {type(value).__name__}, not a JSON object")
    made = _epoch(created, where, "created_at")
    changed = _epoch(updated, where, "updated_at")
    now = time.time()
    return OfficialItem(
        str(prefix), str(key), value, made if made is not None else now, changed if changed is not None else (made or now),
        _epoch(expires, where, "expires_at"), None if ttl is None else float(ttl), updated,
    )


def official_items_op(d: StoreSql, columns: frozenset[str], *, pending: bool) -> Op[list[OfficialItem]]:
    """The official table's items (``pending``: only those to adopt, see the module docstring).
    Raises AdoptionError naming an item whose value is not a JSON object or whose times cannot be read."""
    return [_item(r) for r in (yield Q(d.official_items(columns, pending=pending)))]


def plan_items(items: Sequence[OfficialItem], index: Index | None, fix: str) -> O.Plan:
    """The items checked as puts (``store.ops.plan``: namespace, key, value, TTL, the texts to
    embed). Raises AdoptionError naming the first item threadline cannot store and ``fix``."""
    ops = []
    for it in items:
        op = PutOp(it.namespace, it.key, it.value, index=None, ttl=it.ttl_minutes)
        try:
            O.plan([op], None)
        except (ValueError, ThreadlineError) as exc:
            raise AdoptionError(f"{_where(it.prefix, it.key)} cannot be stored by threadline ({exc}); {fix}") from None
        ops.append(op)
    return O.plan(ops, index)


def store_items_op(
    d: StoreSql,
    items: Sequence[OfficialItem],
    p: O.Plan,
    vec: O.Vectors,
    has_vectors: bool,
    *,
    adopt: frozenset[str] | None = None,
    replace: bool = False,
) -> Op[tuple[int, int]]:
    """Store ``items`` (checked and embedded: ``plan_items``, ``vec``) with their own times and TTL,
    in the caller's one transaction; returns (items stored, items kept because threadline
    already holds them).

    ``adopt``: the official table's columns; only the items still to adopt, as read now, are
    stored (another process may have adopted them, or threadline written them, meanwhile),
    and each is recorded in ``threadline_store_adopted``. Otherwise (an import) an item
    threadline already holds is kept unless ``replace``."""
    wanted = {(it.prefix, it.key): it for it in items}
    skipped = 0
    if adopt is not None:
        now_pending = {(r[0], r[1]): r[4] for r in (yield Q(d.official_items(adopt, pending=True)))}
        wanted = {k: it for k, it in wanted.items() if k in now_pending and now_pending[k] == it.stamp}
    elif not replace:
        present: set[tuple[str, str]] = set()
        for part in chunks(sorted(wanted), max(1, d.max_params // 2)):
            present |= {(r[0], r[1]) for r in (yield Q(d.items_present(len(part)), flat(part)))}
        skipped = len(present)
        wanted = {k: it for k, it in wanted.items() if k not in present}
    if not wanted:
        return 0, skipped
    rows = [
        (it.prefix, it.key, p.puts[k][1], it.created_at, it.updated_at, it.expires_at, it.ttl_minutes)
        for k, it in sorted(wanted.items())
    ]
    yield Q(d.PUT_ITEM, rows, many=True)
    if has_vectors:  # an item's vectors are replaced whole, as by a put
        yield Q(d.DELETE_VECTORS, sorted(wanted), many=True)
    embedded = [(prefix, key, name, d.vector_param(v)) for (prefix, key, name, _), v in zip(p.put_texts, vec.puts) if (prefix, key) in wanted]
    if embedded:
        yield Q(d.INSERT_VECTOR, embedded, many=True)
    if adopt is not None:
        now = time.time()
        yield Q(d.MARK_ADOPTED, [(it.prefix, it.key, it.stamp, now) for _, it in sorted(wanted.items())], many=True)
    return len(wanted), skipped


ADOPT_FIX = "open the store with adopt=False to serve threadline's items only, or fix or delete that row of the official table"


@dataclass
class StoreImport:
    """What ``import_langgraph_store`` did: items copied, items kept (already in the target), namespaces."""

    source: str
    items: int
    kept: int
    namespaces: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "items": self.items, "kept": self.kept, "namespaces": self.namespaces}


def read_official_items(url: str, *, check_only: bool = False) -> list[OfficialItem]:
    """Every item of the official store's table of the database at ``url``, opened read-only
    (never changed); none with ``check_only`` (the source is only checked). ConfigError when it
    is no database, or holds no such table; BackendError when a server cannot be reached."""
    from threadline.backends import entry_of
    from threadline.backends.readonly import open_readonly

    try:
        with open_readonly(url) as (saver, _state):
            reader = entry_of(url).get("store")(saver.conn)
            if not isinstance(reader.sql, StoreSql) or not hasattr(reader, "_driver"):
                raise ConfigError(f"import source {url!r}: LangGraph's official stores keep their items in SQLite or Postgres")
            columns = reader._driver.run(official_columns_op(reader.sql), write=False)
            if columns is None:
                raise ConfigError(
                    f"import source {url!r} holds no store of LangGraph's official SqliteStore or PostgresStore (no table "
                    f"{OFFICIAL!r} with the columns {', '.join(OFFICIAL_COLUMNS)})"
                )
            if check_only:
                return []
            return reader._driver.run(official_items_op(reader.sql, columns, pending=False), write=False)
    except NotADatabaseError as exc:
        raise ConfigError(f"import source: {exc}") from None


def unadopted_op(d: StoreSql) -> Op[int | None]:
    """How many items of the official store's table are not adopted yet (read only); None when
    the database has no such table."""
    columns = yield from official_columns_op(d)
    if columns is None:
        return None
    tables = frozenset(r[0] for r in (yield Q(d.tables_sql)))
    return int((yield Q(d.official_pending_count(tables)))[0][0])


def import_langgraph_store(
    source: str, store: Any, *, replace: bool = False, progress: Callable[[int, int, str], None] | None = None
) -> StoreImport:
    """Copy every item of an official ``langgraph.store.sqlite.SqliteStore`` /
    ``langgraph.store.postgres.PostgresStore`` database into ``store`` (a threadline SQLite or
    Postgres store), in one transaction: namespace, key, value, created and updated times, TTL.

    ``source``: a file path / ``sqlite:///path`` or a ``postgresql://`` URL; opened read-only
    and never changed (it may be the store's own database: the official table beside
    threadline's). An item ``store`` already holds is kept unless ``replace``. With the
    store's ``index``, the copied items are embedded by its embedder.

    Raises ConfigError when ``source`` holds no official store (or ``store`` is not a SQL
    store), AdoptionError naming an item threadline cannot store (nothing is stored).
    """
    sql = getattr(store, "sql", None)
    if not isinstance(sql, StoreSql) or not hasattr(store, "_driver"):
        raise ConfigError(f"import into a threadline SqliteStore or PostgresStore, got {type(store).__name__}")
    items = read_official_items(source)
    if progress:
        progress(len(items), len(items), "read")
    p = plan_items(items, store._index, "fix or delete that row of the source, then import again")
    if not store.is_setup:
        store.setup()
    vec = store._embed(p)
    stored, kept = store._driver.run(store_items_op(sql, items, p, vec, store._has_vectors, replace=replace), write=True)
    return StoreImport(source, stored, kept, sorted({".".join(it.namespace) for it in items}))


async def aimport_langgraph_store(source: str, store: Any, *, replace: bool = False) -> StoreImport:
    """``import_langgraph_store`` into an async store (``AsyncSqliteStore`` / ``AsyncPostgresStore``)."""
    import asyncio

    sql = getattr(store, "sql", None)
    if not isinstance(sql, StoreSql) or not hasattr(store, "_driver"):
        raise ConfigError(f"import into a threadline AsyncSqliteStore or AsyncPostgresStore, got {type(store).__name__}")
    items = await asyncio.to_thread(read_official_items, source)
    p = plan_items(items, store._index, "fix or delete that row of the source, then import again")
    if not store.is_setup:
        await store.setup()
    vec = await store._aembed(p)
    stored, kept = await store._driver.run(store_items_op(sql, items, p, vec, store._has_vectors, replace=replace), write=True)
    return StoreImport(source, stored, kept, sorted({".".join(it.namespace) for it in items}))


__all__ = [
    "OfficialItem",
    "StoreImport",
    "aimport_langgraph_store",
    "import_langgraph_store",
    "official_columns_op",
    "official_items_op",
    "plan_items",
    "read_official_items",
    "store_items_op",
    "unadopted_op",
]
