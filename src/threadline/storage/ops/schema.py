"""Schema operations: ``SchemaState`` (what a database holds, read without writing),
``schema_state`` to read it, and ``setup``, which renames a legacy unprefixed layout,
creates the migrations table and applies every migration this release knows that is
not yet recorded.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from threadline.storage.dialect import Dialect
from threadline.storage.schema import LATEST_VERSION, MIGRATIONS, table
from threadline.storage.ops.base import Op, Q
from threadline.errors import SchemaError


@dataclass(frozen=True)
class SchemaState:
    """What a database holds, as ``schema_state`` reads it without writing anything.

    ``applied``: threadline migration versions recorded; ``legacy``: threadline tables of
    the unprefixed layout (renamed by ``setup``); ``official``: the tables of LangGraph's
    official saver for this backend (threads there can be adopted); ``tables``: tables found,
    at least those of ``looked_up`` that exist."""

    tables: frozenset[str]
    applied: frozenset[int]
    legacy: bool
    official: bool

    @property
    def current(self) -> bool:
        """Every migration of this release is applied: ``setup`` has nothing to do."""
        return not self.legacy and self.applied >= {v for v, _ in MIGRATIONS}

    @property
    def is_threadline(self) -> bool:
        return self.legacy or table("migrations") in self.tables

    def check_version(self, where: str = "the database") -> None:
        """SchemaError when a newer threadline release wrote the schema."""
        newest = max(self.applied, default=0)
        if newest > LATEST_VERSION:
            raise SchemaError(
                f"{where} was written by a newer threadline (schema version {newest}; this release knows up to "
                f"{LATEST_VERSION}); upgrade threadline (pip install -U threadline) to open it"
            )


_LEGACY = ("blobs", "migrations", "checkpoints")  # tables of the unprefixed layout that tell it
_ADD_COLUMN = re.compile(r"ALTER TABLE (threadline_\w+) ADD COLUMN (\w+) ")  # a migration's added column


def looked_up(d: Dialect) -> tuple[str, ...]:
    """The tables whose existence ``schema_state`` asks about."""
    return tuple(dict.fromkeys((table("migrations"), *_LEGACY, *d.official_tables)))  # once each


def tables_present(d: Dialect, names: tuple[str, ...]) -> Op[frozenset[str]]:
    """Which tables of the database or schema exist: at least those of ``names`` that do
    (``Dialect.tables_among``; a plain read)."""
    return frozenset(v for r in (yield Q(d.tables_among(names), read=True)) for v in r if v is not None)


def schema_state(d: Dialect) -> Op[SchemaState]:
    """Read which threadline, legacy and official tables exist and the applied migrations.

    Plain reads (``Q.read``): on Postgres they run without a transaction, saving the BEGIN
    and COMMIT round trips of every open (in ``setup``, they run in its transaction)."""
    tables = yield from tables_present(d, looked_up(d))
    applied: frozenset[int] = frozenset()
    if table("migrations") in tables:
        applied = frozenset(int(r[0]) for r in (yield Q(d.APPLIED_MIGRATIONS, read=True)))
    legacy = False
    if table("migrations") not in tables and set(_LEGACY) <= tables:
        legacy = "base_version" in {r[0] for r in (yield Q(d.columns_sql, ("blobs",), read=True))}
    official = False
    if not legacy and set(d.official_tables) <= tables:
        columns = {r[0] for r in (yield Q(d.columns_sql, ("checkpoints",), read=True))}
        official = {"type", "checkpoint", "metadata"} <= columns
    return SchemaState(tables, applied, legacy, official)


def setup(d: Dialect) -> Op[SchemaState]:
    """Bring the schema to this release: rename a legacy (unprefixed) layout, create the
    ``threadline_migrations`` table and apply every migration not yet recorded.

    Raises SchemaError (changing nothing) when a newer release wrote the schema."""
    if d.setup_lock:
        yield Q(*d.setup_lock)  # serialize concurrent setup() calls of many workers
    state = yield from schema_state(d)
    state.check_version()
    if state.legacy:
        for statement in d.legacy_renames():
            yield Q(statement)
    yield Q(d.create_migrations_table())
    done = {r[0] for r in (yield Q(d.APPLIED_MIGRATIONS))}
    for version, statements in d.migrations():
        if version in done:
            continue
        for statement in statements:
            added = _ADD_COLUMN.match(statement)
            if added and added[2] in {r[0] for r in (yield Q(d.columns_sql, (added[1],)))}:
                continue  # a migration applied again, its record lost: the column is there already
            yield Q(statement)
        yield Q(d.RECORD_MIGRATION, (version, time.time()))
    return (yield from schema_state(d))
