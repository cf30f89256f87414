"""Named SQL and numbered migrations of the Store and Cache, per backend (the Cache's
statements are ``cache.CacheStatements``, mixed in).

Nothing here executes: ``store/ops.py``, ``store/official.py``, ``store/schema.py`` and
``cache/ops.py`` ask for the statements by name, as ``storage/ops`` asks a ``Dialect``.
Statements are written once with ``?`` placeholders in SQL that SQLite (3.35+) and
Postgres both accept, each comment giving the parameters, then (→) the columns returned;
``StoreSql`` (SQLite) and ``PostgresStoreSql`` supply only what differs: column types,
placeholder style, JSON access for metadata filters, namespace pattern matching, vector
scores and row locks.

Tables (beside the saver's ``threadline_*`` tables, so one database holds all three):

* ``threadline_store``: one row per item, keyed by (prefix, key); ``prefix`` is the
  namespace joined with ``"."``. Times are seconds since the epoch (REAL / DOUBLE).
* ``threadline_store_vectors``: one row per embedded field of an item (only with an
  ``index`` config): a float32 BLOB on SQLite (sqlite-vec), ``vector(dims)`` or
  ``halfvec(dims)`` on Postgres (pgvector).
* ``threadline_cache``: one row per cache entry, keyed by (ns, key).
* ``threadline_store_migrations``: (component, v) of every migration applied, for the
  components ``store``, ``vectors`` and ``cache``. Never edit a shipped migration:
  add one with the next number.
* ``threadline_store_adopted``: one row per item adopted from the official store's ``store``
  table of the same database (``threadline.store.official``): its (prefix, key), the official
  row's ``updated_at`` as stored there, and when it was adopted.

The official stores' table (``store``: prefix, key, value, created_at, updated_at, and since
their later migrations expires_at, ttl_minutes) is only ever read, by the statements below
named ``official_*``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from threadline.storage.dialect.cache import CacheStatements
from threadline.storage.dialect.postgres import COLUMNS_SQL, TABLES_SQL
from threadline.storage.dialect.statements import placeholders
from threadline.storage.jsonfilter import PostgresJson, SqliteJson, filter_terms, where_terms
from threadline.storage.vecmath import pack

STORE = "threadline_store"
VECTORS = "threadline_store_vectors"
MIGRATIONS = "threadline_store_migrations"
ADOPTED = "threadline_store_adopted"
OFFICIAL = "store"  # the official SqliteStore's and PostgresStore's table
OFFICIAL_COLUMNS = ("prefix", "key", "value", "created_at", "updated_at")  # what every version of it has
ITEM = "s.key, s.value, s.created_at, s.updated_at, s.ttl_minutes"
SEARCH = "s.prefix, s.key, s.value, s.created_at, s.updated_at, s.ttl_minutes"
# the condition on alias ``s`` that leaves out expired items: (now)
LIVE = " AND (s.expires_at IS NULL OR s.expires_at > ?)"
# the condition on alias ``s`` of a namespace and every namespace under it, a range on the
# primary key ('/' follows '.'): (``namespace_range``'s parameters)
NAMESPACE_RANGE = "(s.prefix = ? OR (s.prefix >= ? AND s.prefix < ?))"
# () → how many items the Store holds; the same SQL on every backend (``store.reader.counts_op``
# runs it on a saver's dialect)
COUNT_ITEMS = f"SELECT COUNT(*) FROM {STORE}"

# {text} is byte-order TEXT, so ORDER BY and the namespace range agree with Python's order.
STORE_MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            f"""CREATE TABLE IF NOT EXISTS {STORE} (
                prefix {{text}} NOT NULL,
                key {{text}} NOT NULL,
                value {{json}} NOT NULL,
                created_at {{real}} NOT NULL,
                updated_at {{real}} NOT NULL,
                expires_at {{real}},
                ttl_minutes {{real}},
                PRIMARY KEY (prefix, key)
            )""",
            f"CREATE INDEX IF NOT EXISTS {STORE}_updated_at ON {STORE} (updated_at)",
            f"CREATE INDEX IF NOT EXISTS {STORE}_expires_at ON {STORE} (expires_at) WHERE expires_at IS NOT NULL",
        ],
    ),
    (
        2,
        [
            # {stamp} holds the official row's updated_at as that table stores it (compared, never parsed)
            f"""CREATE TABLE IF NOT EXISTS {ADOPTED} (
                prefix {{text}} NOT NULL,
                key {{text}} NOT NULL,
                official_updated_at {{stamp}},
                adopted_at {{real}} NOT NULL,
                PRIMARY KEY (prefix, key)
            )""",
        ],
    ),
]

DISTANCES = ("cosine", "l2", "inner_product")
VECTOR_TYPES = ("vector", "halfvec")


def namespace_range(text: str) -> list[str]:
    """``NAMESPACE_RANGE``'s parameters for a namespace (its labels joined with dots)."""
    return [text, text + ".", text + "/"]


class StoreSql(CacheStatements):
    """SQLite: JSON1 functions for filters, sqlite-vec functions for scores."""

    name = "sqlite"
    # stamp: no type (SQLite keeps each value as given), as the official table's TIMESTAMP text
    types = {"text": "TEXT", "json": "TEXT", "blob": "BLOB", "real": "REAL", "int": "INTEGER", "stamp": ""}
    max_params = 900
    setup_lock: tuple[str, tuple] | None = None  # SQLite's write lock serializes setup
    tables_sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    ns_match = "threadline_ns_match(s.prefix, ?) = 1"  # a function each connection registers
    json_filter: SqliteJson = SqliteJson("s.value")  # filter conditions on an item's value

    # (table name) → the name of every column of that table (empty when there is no such table)
    columns_sql = "SELECT name FROM pragma_table_info(?)"
    # how a text of the official table compares with threadline's byte-order text
    collate_official = ""

    def sql(self, text: str) -> str:
        return text

    # --- items (``store/ops.py``) ---------------------------------------------------------

    def get_items(self, count: int, live: bool) -> str:
        """(prefix, ``count`` keys[, now when ``live``]) → key, value, created_at, updated_at,
        ttl_minutes of the items of those keys in that namespace (with ``live``, not expired)"""
        return f"SELECT {ITEM} FROM {STORE} s WHERE s.prefix = ? AND s.key IN ({placeholders(count)}){LIVE if live else ''}"

    def search_where(self, filter: dict[str, Any] | None, namespace: str | None) -> tuple[str, list[Any]]:
        """``search``'s condition on alias ``s`` and its parameters: under ``namespace`` (its labels
        joined with dots; None: any) and matching ``filter`` (``jsonfilter.filter_terms``)."""
        conditions, params = where_filter(self, filter)
        if namespace is not None:
            conditions.insert(0, NAMESPACE_RANGE)
            params = namespace_range(namespace) + params
        return " AND ".join(conditions) or "TRUE", params

    def search(self, where: str, live: bool, score: str | None = None) -> str:
        """One ``search`` page: (the parameters of ``score``, of ``where``[, now when ``live``], limit,
        offset) → prefix, key, value, created_at, updated_at, ttl_minutes, score. Without ``score``
        (NULL) the newest updated first; with it (``score``: SQL on ``v.embedding``) the items with
        vectors, each by the best score of its fields, highest first."""
        live_sql = LIVE if live else ""
        if score is None:
            return f"SELECT {SEARCH}, NULL FROM {STORE} s WHERE {where}{live_sql} ORDER BY s.updated_at DESC, s.prefix, s.key LIMIT ? OFFSET ?"
        return (
            f"SELECT {SEARCH}, MAX({score}) AS score FROM {STORE} s "
            f"JOIN {VECTORS} v ON v.prefix = s.prefix AND v.key = s.key WHERE {where}{live_sql} "
            "GROUP BY s.prefix, s.key ORDER BY score DESC NULLS LAST, s.prefix, s.key LIMIT ? OFFSET ?"
        )

    def namespaces_where(self, terms: list[tuple[str, str]]) -> tuple[str, list[Any]]:
        """``list_namespaces``' condition on alias ``s`` and its parameters: every term holds, a
        ``("range", namespace)`` the namespace (labels joined with dots) and those under it, a
        ``("match", regex)`` the namespaces the regex matches (``ns_match``)."""
        conditions: list[str] = []
        params: list[Any] = []
        for kind, arg in terms:
            if kind == "range":
                conditions.append(NAMESPACE_RANGE)
                params += namespace_range(arg)
            else:
                conditions.append(self.ns_match)
                params.append(arg)
        return " AND ".join(conditions) or "TRUE", params

    def list_namespaces(self, where: str, live: bool, paged: bool) -> str:
        """(the parameters of ``where``[, now when ``live``][, limit, offset when ``paged``]) → prefix:
        the namespaces holding items, in byte order"""
        sql = f"SELECT DISTINCT s.prefix FROM {STORE} s WHERE {where}{LIVE if live else ''} ORDER BY s.prefix"
        return sql + " LIMIT ? OFFSET ?" if paged else sql

    # (prefix, key), many: an item deleted
    DELETE_ITEM = f"DELETE FROM {STORE} WHERE prefix = ? AND key = ?"
    # (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes), many: a put; an item of that key
    # keeps its created_at
    UPSERT_ITEM = (
        f"INSERT INTO {STORE} (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, "
        "updated_at = excluded.updated_at, expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes"
    )
    # (prefix, key), many: an item's vectors, every field
    DELETE_VECTORS = f"DELETE FROM {VECTORS} WHERE prefix = ? AND key = ?"
    # (prefix, key, field_name, embedding as ``vector_param``), many
    INSERT_VECTOR = f"INSERT INTO {VECTORS} (prefix, key, field_name, embedding) VALUES (?, ?, ?, ?)"

    def refresh_ttl(self, live: bool) -> str:
        """(now, prefix, key[, now when ``live``]), many: an item's TTL restarted (``expires_at = now +
        ttl_minutes``); with ``live`` an item already expired is left to the sweep"""
        guard = " AND (expires_at IS NULL OR expires_at > ?)" if live else ""
        return f"UPDATE {STORE} SET expires_at = ? + ttl_minutes * 60 WHERE prefix = ? AND key = ? AND ttl_minutes IS NOT NULL{guard}"

    # (now, limit) → prefix, key of the items expired before now, soonest expired first (SQLite: the
    # sweep's write transaction already holds the database's one write lock)
    EXPIRED_ITEMS = f"SELECT s.prefix, s.key FROM {STORE} s WHERE s.expires_at < ? ORDER BY s.expires_at LIMIT ?"

    # --- the official store's table (``threadline.store.official``) ------------------------

    def official_items(self, columns: frozenset[str], *, pending: bool) -> str:
        """() → prefix, key, value, created_at, updated_at, expires_at, ttl_minutes of the official
        table's items (NULL for a column its older versions lack), by prefix and key; with
        ``pending`` only those to adopt: never adopted nor written by threadline, or changed in the
        official table since they were adopted and not written by threadline since."""
        extra = ", ".join(f"o.{c}" if c in columns else "NULL" for c in ("expires_at", "ttl_minutes"))
        select = f"SELECT o.prefix, o.key, o.value, o.created_at, o.updated_at, {extra} FROM {OFFICIAL} o"
        if not pending:
            return f"{select} ORDER BY o.prefix, o.key"
        c = self.collate_official
        return (
            f"{select} LEFT JOIN {ADOPTED} a ON a.prefix = o.prefix{c} AND a.key = o.key{c} "
            f"LEFT JOIN {STORE} t ON t.prefix = o.prefix{c} AND t.key = o.key{c} "
            "WHERE (a.prefix IS NULL AND t.prefix IS NULL) OR (a.prefix IS NOT NULL AND a.official_updated_at <> o.updated_at "
            "AND (t.prefix IS NULL OR t.updated_at <= a.adopted_at)) ORDER BY o.prefix, o.key"
        )

    def official_pending_count(self, tables: frozenset[str]) -> str:
        """() → how many items of the official table are to adopt (``official_items(pending=True)``),
        given which of threadline's store tables exist (``tables``: none of them, every item)"""
        c = self.collate_official
        if STORE not in tables:
            return f"SELECT COUNT(*) FROM {OFFICIAL}"
        if ADOPTED not in tables:  # a store of the release before adoption: what it does not hold
            return f"SELECT COUNT(*) FROM {OFFICIAL} o LEFT JOIN {STORE} t ON t.prefix = o.prefix{c} AND t.key = o.key{c} WHERE t.prefix IS NULL"
        return (
            f"SELECT COUNT(*) FROM {OFFICIAL} o LEFT JOIN {ADOPTED} a ON a.prefix = o.prefix{c} AND a.key = o.key{c} "
            f"LEFT JOIN {STORE} t ON t.prefix = o.prefix{c} AND t.key = o.key{c} "
            "WHERE (a.prefix IS NULL AND t.prefix IS NULL) OR (a.prefix IS NOT NULL AND a.official_updated_at <> o.updated_at "
            "AND (t.prefix IS NULL OR t.updated_at <= a.adopted_at))"
        )

    # (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes), many: an item stored whole,
    # replacing the item of that key
    PUT_ITEM = (
        f"INSERT INTO {STORE} (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at, "
        "updated_at = excluded.updated_at, expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes"
    )
    # (prefix, key, official_updated_at, adopted_at), many
    MARK_ADOPTED = (
        f"INSERT INTO {ADOPTED} (prefix, key, official_updated_at, adopted_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (prefix, key) DO UPDATE SET official_updated_at = excluded.official_updated_at, adopted_at = excluded.adopted_at"
    )

    def items_present(self, count: int) -> str:
        """(``count`` (prefix, key) pairs, flattened) → prefix, key of those threadline's table holds"""
        pairs = " OR ".join(["(prefix = ? AND key = ?)"] * count)
        return f"SELECT prefix, key FROM {STORE} WHERE {pairs}"

    # --- migrations (``store/schema.py``) ----------------------------------------------------

    def create_migrations_table(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS} (component {self.types['text']} NOT NULL, v {self.types['int']} NOT NULL, "
            f"applied_at {self.types['real']} NOT NULL, PRIMARY KEY (component, v))"
        )

    # () → component, v of every migration applied
    APPLIED_MIGRATIONS = f"SELECT component, v FROM {MIGRATIONS}"
    # (component, v, applied_at)
    RECORD_MIGRATION = f"INSERT INTO {MIGRATIONS} (component, v, applied_at) VALUES (?, ?, ?)"

    def migrations(self, migrations: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
        return [(v, [s.format(**self.types) for s in stmts]) for v, stmts in migrations]

    @property
    def store_statements(self) -> list[str]:
        """The Store's migration statements in order (the official stores' ``MIGRATIONS``)."""
        return [statement for _, stmts in self.migrations(STORE_MIGRATIONS) for statement in stmts]

    def vector_migrations(self, dims: int, vector_type: str) -> list[tuple[int, list[str]]]:
        return self.migrations(
            [
                (
                    1,
                    [
                        f"""CREATE TABLE IF NOT EXISTS {VECTORS} (
                            prefix {{text}} NOT NULL,
                            key {{text}} NOT NULL,
                            field_name {{text}} NOT NULL,
                            embedding {{blob}} NOT NULL,
                            PRIMARY KEY (prefix, key, field_name)
                        )""",
                    ],
                )
            ]
        )

    # (dims, vector type or NULL) of the stored vectors; no row when there are none
    dims_sql = f"SELECT length(embedding) / 4, NULL FROM {VECTORS} LIMIT 1"
    # (extension available, extension installed); None: nothing to install
    vector_extension_sql: str | None = None
    # () installs the vector extension (where ``vector_extension_sql`` is set)
    CREATE_VECTOR_EXTENSION: str | None = None

    def vector_param(self, vector: list[float]) -> Any:
        return pack(vector)

    def score(self, distance: str, query: list[float], vector_type: str) -> tuple[str, list[Any]]:
        """SQL for the similarity of ``v.embedding`` to ``query`` (higher is closer) and its
        parameters: cosine similarity, negated L2 distance, or the inner product (from L2
        distances: a·b = (|a|² + |b|² − |a−b|²) / 2, as sqlite-vec has no dot product)."""
        q = self.vector_param(query)
        if distance == "cosine":
            return "1.0 - vec_distance_cosine(v.embedding, ?)", [q]
        if distance == "l2":
            return "-vec_distance_L2(v.embedding, ?)", [q]
        zero = self.vector_param([0.0] * len(query))
        norm2 = sum(x * x for x in query)
        sql = (
            "(vec_distance_L2(v.embedding, ?) * vec_distance_L2(v.embedding, ?) + ? "
            "- vec_distance_L2(v.embedding, ?) * vec_distance_L2(v.embedding, ?)) / 2.0"
        )
        return sql, [zero, zero, norm2, q, q]

class PostgresStoreSql(StoreSql):
    """Postgres: JSONB path operators for filters, pgvector operators for scores."""

    name = "postgres"
    types = {"text": 'TEXT COLLATE "C"', "json": "JSONB", "blob": "BYTEA", "real": "DOUBLE PRECISION", "int": "BIGINT",
             "stamp": "TIMESTAMP WITH TIME ZONE"}
    columns_sql = COLUMNS_SQL
    collate_official = ' COLLATE "C"'  # the official table's text has the database's collation
    max_params = 20000
    setup_lock = ("SELECT pg_advisory_xact_lock(?)", (0x746C7374,))  # one setup at a time across workers
    # concurrent sweepers take disjoint rows, never wait
    EXPIRED_ITEMS = StoreSql.EXPIRED_ITEMS + " FOR UPDATE SKIP LOCKED"
    tables_sql = TABLES_SQL
    ns_match = "s.prefix ~ ?"
    json_filter = PostgresJson("s.value")
    dims_sql = (
        "SELECT a.atttypmod, format_type(a.atttypid, NULL) FROM pg_attribute a "
        f"WHERE a.attrelid = to_regclass('{VECTORS}') AND a.attname = 'embedding'"
    )
    vector_extension_sql = (
        "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector'), "
        "EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')"
    )
    CREATE_VECTOR_EXTENSION = "CREATE EXTENSION IF NOT EXISTS vector"

    def sql(self, text: str) -> str:
        return _to_pyformat(text)

    def vector_migrations(self, dims: int, vector_type: str) -> list[tuple[int, list[str]]]:
        if vector_type not in VECTOR_TYPES or not isinstance(dims, int):  # DDL text: allowlisted only
            raise ValueError(f"vector_type must be one of {VECTOR_TYPES} and dims an integer")
        return self.migrations(
            [
                (
                    1,
                    [
                        f"""CREATE TABLE IF NOT EXISTS {VECTORS} (
                            prefix {{text}} NOT NULL,
                            key {{text}} NOT NULL,
                            field_name {{text}} NOT NULL,
                            embedding {vector_type}({dims}) NOT NULL,
                            PRIMARY KEY (prefix, key, field_name)
                        )""",
                    ],
                )
            ]
        )

    def vector_param(self, vector: list[float]) -> Any:
        return "[" + ",".join(repr(float(x)) for x in vector) + "]"

    def score(self, distance: str, query: list[float], vector_type: str) -> tuple[str, list[Any]]:
        """Cosine similarity, negated L2 distance or inner product, as the official PostgresStore scores."""
        operator = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}[distance]
        cast = f"CAST(? AS {vector_type})"
        if distance == "cosine":
            return f"1 - (v.embedding {operator} {cast})", [self.vector_param(query)]
        return f"-(v.embedding {operator} {cast})", [self.vector_param(query)]

@lru_cache(maxsize=256)
def _to_pyformat(text: str) -> str:
    # Store SQL never contains '?' or '%' except as placeholders.
    return re.sub(r"\?", "%s", text.replace("%", "%%"))


SQLITE = StoreSql()
POSTGRES = PostgresStoreSql()


def where_filter(d: StoreSql, filter: dict[str, Any] | None) -> tuple[list[str], list[Any]]:
    """SQL conditions (on alias ``s``) and parameters for a ``search`` filter (``jsonfilter.filter_terms``)."""
    return where_terms(d.json_filter, filter_terms(filter))
