"""``setup`` for the Store and the Cache: numbered migrations per component, recorded in
``threadline_store_migrations`` (component, v), applied in one transaction.

Components: ``store`` and ``vectors`` (the Store; ``vectors`` only with an ``index``
config) and ``cache``. A database written by a newer release (a component at a
version this one does not know) raises SchemaError and is left unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from threadline.errors import BackendError, SchemaError
from threadline.storage.ops import Op, Q
from threadline.store.index import Index
from threadline.storage.dialect.cache import CACHE_MIGRATIONS
from threadline.storage.dialect.store import STORE_MIGRATIONS, VECTORS, StoreSql

Migrations = list[tuple[int, list[str]]]

NO_PGVECTOR = (
    "semantic search on Postgres needs the pgvector extension ('vector'), which this server does not have; "
    "install pgvector on the server (Debian/Ubuntu: the postgresql-<version>-pgvector package) and call setup() "
    "again, or open the store without index= to use it without semantic search"
)


def apply(d: StoreSql, components: Sequence[tuple[str, Migrations]]) -> Op[frozenset[str]]:
    """Apply every migration of ``components`` not yet recorded; returns the tables present."""
    yield Q(d.create_migrations_table())
    done = {(r[0], int(r[1])) for r in (yield Q(d.APPLIED_MIGRATIONS))}
    for component, migrations in components:
        newest = max((v for c, v in done if c == component), default=0)
        if newest > max(v for v, _ in migrations):
            raise SchemaError(
                f"the database's {component} tables were written by a newer threadline (version {newest}); "
                "upgrade threadline (pip install -U threadline) to open them"
            )
    for component, migrations in components:
        for v, statements in migrations:
            if (component, v) in done:
                continue
            for statement in statements:
                yield Q(statement)
            yield Q(d.RECORD_MIGRATION, (component, v, time.time()))
    return frozenset(r[0] for r in (yield Q(d.tables_sql)))


def setup_store(d: StoreSql, index: Index | None) -> Op[bool]:
    """Bring the Store's tables to this release; returns whether the vectors table exists.

    Raises BackendError (changing nothing) when ``index`` is set on a Postgres server
    without pgvector, ValueError when stored vectors disagree with ``index``'s dims or
    vector type, SchemaError for tables of a newer release."""
    if d.setup_lock:
        yield Q(*d.setup_lock)
    components: list[tuple[str, Migrations]] = [("store", d.migrations(STORE_MIGRATIONS))]
    if index is not None:
        if d.vector_extension_sql:
            available, installed = (yield Q(d.vector_extension_sql))[0]
            if not installed:
                if not available:
                    raise BackendError(NO_PGVECTOR)
                yield Q(d.CREATE_VECTOR_EXTENSION)
        components.append(("vectors", d.vector_migrations(index.dims, index.vector_type)))
    tables = yield from apply(d, components)
    if index is not None:
        for dims, kind in (yield Q(d.dims_sql)):
            if int(dims) != index.dims or (kind is not None and kind != index.vector_type):
                raise ValueError(
                    f"{VECTORS} holds embeddings of type {kind or 'float32'} with {dims} dimensions but index asks for "
                    f"{index.vector_type} with {index.dims}; use the embedding model, dims and vector_type the items were stored with"
                )
    return VECTORS in tables


def setup_cache(d: StoreSql) -> Op[frozenset[str]]:
    """Bring the Cache's table to this release."""
    if d.setup_lock:
        yield Q(*d.setup_lock)
    return (yield from apply(d, [("cache", d.migrations(CACHE_MIGRATIONS))]))
