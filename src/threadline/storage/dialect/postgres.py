"""The Postgres dialect: ``%s`` placeholders, JSONB with its GIN index and ``@>`` filter,
byte counts, introspection of the current schema, and the official ``PostgresSaver``'s
tables and behaviours."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from threadline.codec.refs import PLAIN_REF_TYPE, REF_JSON_AT
from threadline.errors import FilterError
from threadline.storage.dialect.base import Dialect, check_filter, dumps_json, split_filter
from threadline.storage.jsonfilter import PostgresJson, Term, where_terms
from threadline.storage.dialect.statements import THREAD_DEFAULT_TTL, THREAD_UPDATED_AT
from threadline.storage.rows import BLOB_COLUMNS, CHECKPOINT_ROW
from threadline.storage.schema import LEGACY_INDEXES, LEGACY_RENAMES


@lru_cache(maxsize=512)
def _to_pyformat(text: str) -> str:
    # Our SQL never contains '?' or '%' except as placeholders. A text array (``?::text[]``) is
    # sent in binary: psycopg's text format quotes each element in Python (5× slower for 5,000 keys).
    if "?" not in text and "%" not in text:
        return text  # (the catalog reads of an open: a first open compiles no pattern)
    return re.sub(r"\?(::text\[\])?", lambda m: "%b" + m[1] if m[1] else "%s", text.replace("%", "%%"))


@lru_cache(maxsize=256)
def _put_statement(blobs: int, fence: str | None = None) -> str:
    # Data-modifying CTEs all see the snapshot from before the statement, so a checked row
    # is stored as written when this statement inserted it (``b``) or it was already there.
    # Rows already stored are probed by primary key in scalar subqueries: an EXISTS there may be
    # planned as a hashed subplan, and a plan cached while the table was small then reads
    # the whole of threadline_blobs on every put until the table is analyzed again.
    parts = [
        "r(thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source, run_id, created_at, "
        "checksum, expected, bytes, parent_required, default_ttl) AS (VALUES (CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), "
        "CAST(? AS TEXT), CAST(? AS JSONB), CAST(? AS JSONB), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT), "
        "CAST(? AS DOUBLE PRECISION), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BOOLEAN), "
        "CAST(? AS DOUBLE PRECISION)))",
    ]
    # under a thread guard lease (``fence``: ``check_fence``, its parameters last): nothing is written
    # unless the lease holds, and its row stays locked until this statement commits
    held = "EXISTS (SELECT 1 FROM l) AND " if fence else ""
    stored = "0"
    if blobs:
        first = (
            "(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BYTEA), "
            "CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BOOLEAN))"
        )
        rows = ", ".join([first] + ["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * (blobs - 1))
        parts.append(f"v(thread_id, checkpoint_ns, channel, version, type, blob, base_version, base_type, base_size, checked) AS (VALUES {rows})")
        if fence:
            parts.append(f"l AS ({fence})")
        parts.append(
            f"b AS (INSERT INTO threadline_blobs ({BLOB_COLUMNS}) "
            "SELECT thread_id, checkpoint_ns, channel, version, type, blob, base_version FROM v "
            f"WHERE {held}{'(' if fence else ''}base_version IS NULL OR (SELECT o.type = v.base_type "
            "AND COALESCE(octet_length(o.blob), 0) = v.base_size "
            "FROM threadline_blobs o WHERE o.thread_id = v.thread_id AND o.checkpoint_ns = v.checkpoint_ns "
            f"AND o.channel = v.channel AND o.version = v.base_version){')' if fence else ''} "
            "ON CONFLICT DO NOTHING RETURNING channel, version)"
        )
        stored = (
            "(SELECT COUNT(*) FROM v WHERE v.checked AND (EXISTS (SELECT 1 FROM b WHERE b.channel = v.channel AND b.version = v.version) "
            "OR (SELECT o.type = v.type AND COALESCE(octet_length(o.blob), 0) = COALESCE(octet_length(v.blob), 0) "
            "FROM threadline_blobs o WHERE o.thread_id = v.thread_id AND o.checkpoint_ns = v.checkpoint_ns "
            "AND o.channel = v.channel AND o.version = v.version)))"
        )
    elif fence:
        parts.append(f"l AS ({fence})")
    parts += [
        f"n(stored) AS (SELECT {stored})",
        "e AS (SELECT 1 FROM threadline_checkpoints x JOIN r ON x.thread_id = r.thread_id AND x.checkpoint_ns = r.checkpoint_ns "
        "AND x.checkpoint_id = r.checkpoint_id)",
        # the parent checkpoint as stored before this statement (another process may have deleted it)
        "p AS (SELECT 1 FROM threadline_checkpoints x JOIN r ON x.thread_id = r.thread_id AND x.checkpoint_ns = r.checkpoint_ns "
        "AND x.checkpoint_id = r.parent_checkpoint_id)",
        "c AS (INSERT INTO threadline_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, "
        "metadata, step, source, run_id, created_at, checksum) SELECT r.thread_id, r.checkpoint_ns, r.checkpoint_id, "
        "r.parent_checkpoint_id, r.checkpoint, r.metadata, r.step, r.source, r.run_id, r.created_at, r.checksum FROM r, n "
        f"WHERE {held}n.stored = r.expected AND (NOT r.parent_required OR EXISTS (SELECT 1 FROM p) OR EXISTS (SELECT 1 FROM e)) "
        "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = excluded.checkpoint, "
        "metadata = excluded.metadata, step = excluded.step, source = excluded.source, run_id = excluded.run_id, "
        # the row keeps its parent: the new checksum holds only when that parent is the one given
        # (else ``put`` seals the row again with the kept parent; until then it loads unchecked)
        "checksum = CASE WHEN threadline_checkpoints.parent_checkpoint_id IS NOT DISTINCT FROM excluded.parent_checkpoint_id "
        "THEN excluded.checksum END RETURNING 1)",
        "t AS (INSERT INTO threadline_threads (thread_id, created_at, updated_at, checkpoint_count, bytes, default_ttl) "
        "SELECT r.thread_id, r.created_at, r.created_at, (SELECT COUNT(*) FROM c) - (SELECT COUNT(*) FROM e), r.bytes, r.default_ttl "
        f"FROM r WHERE EXISTS (SELECT 1 FROM c) ON CONFLICT (thread_id) DO UPDATE SET {THREAD_UPDATED_AT}, {THREAD_DEFAULT_TTL}, "
        "checkpoint_count = threadline_threads.checkpoint_count + excluded.checkpoint_count, "
        "bytes = threadline_threads.bytes + excluded.bytes)",
    ]
    flag = ", (SELECT COUNT(*) FROM l)" if fence else ""
    return "WITH " + ", ".join(parts) + f" SELECT n.stored, (SELECT COUNT(*) FROM c), (SELECT COUNT(*) FROM e), (SELECT COUNT(*) FROM p){flag} FROM n"


def _probe(table: str, on: str, alias: str = "t") -> str:
    # A LATERAL subquery behind OFFSET 0 is not merged into the outer query, so Postgres reads
    # it per outer row, by the key's index; a join may be planned as a hash join over a scan of
    # the table, and a plan cached while the table was small then scans it on every run.
    return f"CROSS JOIN LATERAL (SELECT * FROM {table} {alias} WHERE {on} OFFSET 0) {alias}"


# An uncompressed, checksummed ``delta-ref`` row (``codec.refs``): its JSON, ``["<checkpoint_id>",
# [[task_id, idx], …]]``, starts after the seal's head and checksum and the delta header (1-based).
_REF_TYPE = PLAIN_REF_TYPE
_REF_JSON = REF_JSON_AT + 1  # 1-based


@lru_cache(maxsize=4)
def _get_statement(latest: bool) -> str:
    # ck: the checkpoint row; k: the (channel, version) pairs its channel_versions name, but the
    # skipped ones; chain: their blob rows and every version their deltas are built on (as
    # ``Statements.blob_chains``); cb: those rows; then the rows of ck and cb, the checkpoint's
    # writes, and the writes of the checkpoint each ``delta-ref`` row of cb names on its channel.
    # That checkpoint_id is read from the row's bytes unchecked, only to fetch the writes in this
    # round trip: the reader checks the row's seal and parses it, and reads what is missing after.
    which = "ORDER BY checkpoint_id DESC LIMIT 1" if latest else "AND checkpoint_id = ?"
    blob_key = "b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = c.channel"
    cid_at = f"position(CAST('\"' AS BYTEA) IN substring(cb.blob FROM {_REF_JSON + 2}))"
    return (
        f"WITH RECURSIVE ck AS (SELECT {CHECKPOINT_ROW} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? {which}), "
        "k AS (SELECT j.key AS channel, j.value AS version FROM ck CROSS JOIN LATERAL jsonb_each_text(CASE WHEN "
        "jsonb_typeof(ck.checkpoint->'channel_versions') = 'object' THEN ck.checkpoint->'channel_versions' END) j "
        "WHERE (j.key, j.value) NOT IN (SELECT * FROM unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[])))), "
        "chain(thread_id, checkpoint_ns, channel, version, base_version) AS ("
        "SELECT t.thread_id, t.checkpoint_ns, t.channel, t.version, t.base_version FROM ck CROSS JOIN k "
        f"{_probe('threadline_blobs', 't.thread_id = ck.thread_id AND t.checkpoint_ns = ck.checkpoint_ns AND t.channel = k.channel AND t.version = k.version')} "
        "UNION SELECT c.thread_id, c.checkpoint_ns, c.channel, c.base_version, "
        f"(SELECT b.base_version FROM threadline_blobs b WHERE {blob_key} AND b.version = c.base_version) "
        "FROM chain c WHERE c.base_version IS NOT NULL), "
        f"cb AS (SELECT b.* FROM chain c {_probe('threadline_blobs', blob_key + ' AND b.version = c.version', 'b')}), "
        "r AS (SELECT DISTINCT cb.thread_id, cb.checkpoint_ns, cb.channel, "
        f"encode(substring(cb.blob FROM {_REF_JSON + 2} FOR greatest({cid_at} - 1, 0)), 'escape') AS checkpoint_id FROM cb "
        f"WHERE cb.type = '{_REF_TYPE}' AND substring(cb.blob FROM {_REF_JSON} FOR 2) = CAST('[\"' AS BYTEA)) "
        "SELECT * FROM ("
        "SELECT 0 AS kind, thread_id AS c1, checkpoint_ns AS c2, checkpoint_id AS c3, parent_checkpoint_id AS c4, source AS c5, "
        "checksum AS c6, CAST(NULL AS TEXT) AS c7, step AS n, created_at AS r, checkpoint AS j1, metadata AS j2, "
        "CAST(NULL AS BYTEA) AS b FROM ck "
        "UNION ALL SELECT 1, thread_id, checkpoint_ns, channel, version, type, base_version, NULL, NULL, NULL, NULL, NULL, blob FROM cb "
        "UNION ALL SELECT 2, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.task_path, w.type, w.idx, "
        f"NULL, NULL, NULL, w.blob FROM ck {_probe('threadline_writes', 'w.thread_id = ck.thread_id AND w.checkpoint_ns = ck.checkpoint_ns AND w.checkpoint_id = ck.checkpoint_id', 'w')} "
        "UNION ALL SELECT 3, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.task_path, w.type, w.idx, "
        f"NULL, NULL, NULL, w.blob FROM r {_probe('threadline_writes', 'w.thread_id = r.thread_id AND w.checkpoint_ns = r.checkpoint_ns AND w.checkpoint_id = r.checkpoint_id', 'w')} "
        "WHERE w.channel = r.channel"
        ') u ORDER BY kind, c6 COLLATE "C", c4 COLLATE "C", n'
    )


# Table storage that keeps bloat down (docs/operations.md): autovacuum at 5 % dead rows
# instead of 20 % on the append-mostly tables; the threads index is updated by every put, so
# its pages keep 30 % free for HOT updates and it is vacuumed at 2 %.
STORAGE_SETTINGS = [
    *(
        f"ALTER TABLE threadline_{t} SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02)"
        for t in ("checkpoints", "blobs", "writes")
    ),
    "ALTER TABLE threadline_threads SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02)",
]


# The tables (and views) of the current schema, and one table's columns in their order, from the
# catalog: information_schema's views cost 2–7 ms a query (10 ms the first on a new connection),
# these 0.5–2 — and setup, listings and the guard ask on every open.
_RELATION = "c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = current_schema()) AND c.relkind IN ('r', 'p', 'v', 'f')"
TABLES_SQL = f"SELECT c.relname FROM pg_catalog.pg_class c WHERE {_RELATION}"
COLUMNS_SQL = (
    "SELECT a.attname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    f"WHERE {_RELATION} AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)


@lru_cache(maxsize=4)
def _tables_among(names: tuple[str, ...]) -> str:
    # One row of name look-ups (``to_regclass``, any kind of relation): a query of pg_class is
    # planned, and a new connection's first plan of it costs 0.5–1 ms more (the catalog's indexes
    # and statistics loaded), on every open.
    return "SELECT " + ", ".join(
        f"CASE WHEN to_regclass(quote_ident(current_schema()) || '.' || quote_ident('{n}')) IS NOT NULL THEN '{n}' END" for n in names
    )


class PostgresDialect(Dialect):
    name = "postgres"
    types = {"text": 'TEXT COLLATE "C"', "json": "JSONB", "blob": "BYTEA", "real": "DOUBLE PRECISION", "int": "BIGINT", "clustered": ""}
    max_params = 20000
    now_sql = "EXTRACT(EPOCH FROM statement_timestamp())::float8"
    setup_lock = ("SELECT pg_advisory_xact_lock(?)", (0x7468726C,))
    tables_sql = TABLES_SQL
    columns_sql = COLUMNS_SQL
    # langgraph.checkpoint.postgres.PostgresSaver
    official_tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
    collate_official = ' COLLATE "C"'  # its text has the database's collation, threadline's is "C"
    official_writes_sql = (
        "SELECT checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path FROM checkpoint_writes "
        "WHERE thread_id = ? AND checkpoint_id >= ?"
    )
    official_blobs_table = "checkpoint_blobs"
    migrates_parent_sends = True
    echoes_config = False
    replaced_write_columns = ("channel", "type", "blob", "created_at")  # the official upsert keeps task_path
    reput_sets_parent = False  # the official upsert replaces only checkpoint and metadata
    prune_refuses_delta_threads = True
    reads_outside_transaction = True  # BEGIN and COMMIT are two round trips; READ COMMITTED reads gain nothing
    lock_rows = " FOR UPDATE"
    lock_shared = " FOR SHARE"
    fences_in_statement = True
    partitions = True
    snapshot_sql = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
    # transaction-scoped, so it works behind PgBouncer's transaction pooling
    claim_lock = ("SELECT pg_try_advisory_xact_lock(?)", (0x74686C73,))
    tables_bytes_sql = (
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'threadline\\_%'"
    )
    after_large_delete_sql = tuple(f"VACUUM (ANALYZE) threadline_{t}" for t in ("checkpoints", "blobs", "writes", "threads"))
    rebuild_sql = tuple(f"VACUUM (FULL, ANALYZE) threadline_{t}" for t in ("checkpoints", "blobs", "writes", "threads"))

    def sql(self, text: str) -> str:
        return _to_pyformat(text)

    def tables_among(self, names: tuple[str, ...]) -> str:
        return _tables_among(names)

    def put_statement(self, blobs: int, fenced: bool = False) -> str:
        """A whole ``put`` in one statement (one round trip, atomic without a transaction):
        ``blobs`` guarded blob rows, the checkpoint row (an upsert: a checkpoint put again
        takes the new checkpoint, metadata, step, source and run_id, as the official upsert)
        and the thread index row — the checkpoint and thread rows only when the expected
        number of checked blob rows are stored as written. (thread_id, checkpoint_ns,
        checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source, run_id,
        created_at, checksum, expected, bytes added to the thread, whether a new row needs its
        parent stored (not written when another process deleted it), the default TTL in minutes
        to record on the thread (NULL keeps the thread's: ``threadline.ttl``), then ``blobs`` × (the
        INSERT_BLOB parameters, the type and stored size the base row must have, NULL for a
        snapshot, and whether the row is checked)) → how many checked rows are stored, whether
        the checkpoint row was written (1 or 0), whether it existed before (1 or 0), whether
        the parent is stored (1 or 0). ``fenced``: a put under a thread guard lease, with
        ``check_fence``'s parameters last, and a fifth column: whether the lease held (1 or 0;
        nothing is written when it did not)."""
        return _put_statement(blobs, self.check_fence() if fenced else None)

    def get_statement(self, latest: bool, held: bool = False) -> str:  # no heads: ``held`` is never set
        """A whole ``get_tuple`` in one statement: the checkpoint row, the blob rows its
        ``channel_versions`` name with their delta chains, its pending writes, and the writes
        the chains' ``delta-ref`` rows reference (those of an uncompressed, checksummed one).
        (thread_id, checkpoint_ns[, checkpoint_id unless ``latest``], the channels and the
        versions, two text arrays, of blobs not to return: cached ones) → rows of 13 columns,
        the first telling the kind: 0, the checkpoint (``rows.CHECKPOINT_ROW`` as thread_id,
        checkpoint_ns, checkpoint_id, parent_checkpoint_id, source, checksum, NULL, step,
        created_at, checkpoint, metadata, NULL); 1, a blob (thread_id, checkpoint_ns, channel,
        version, type, base_version, NULL × 5, blob); 2, a write (thread_id, checkpoint_ns,
        checkpoint_id, task_id, channel, task_path, type, idx, NULL × 3, blob), the writes in
        ``writes_sort_key`` order (task_path, task_id, idx); 3, a write a ``delta-ref`` row may
        reference (as 2: every write of the checkpoint it names, on its channel). No rows: no
        such checkpoint."""
        return _get_statement(latest)

    def probe(self, table: str, on: str) -> str:
        return _probe(table, on)

    def delete_by_keys(self, table: str, key: Sequence[str]) -> str:
        # arrays, not a VALUES list: the same short text for any number of keys (prepared once)
        arrays = ", ".join("?::text[]" for _ in key)
        on = " AND ".join(f"t.{col} = k.c{i}" for i, col in enumerate(key))
        return f"DELETE FROM {table} t USING unnest({arrays}) AS k({', '.join(f'c{i}' for i in range(len(key)))}) WHERE {on}"

    def extra_migrations(self) -> dict[int, list[str]]:
        return {
            1: ["CREATE INDEX IF NOT EXISTS threadline_checkpoints_metadata ON threadline_checkpoints USING GIN (metadata jsonb_path_ops)"],
            3: STORAGE_SETTINGS,
            # the threads search by record metadata (``record_prefilter``): containment through GIN
            7: ["CREATE INDEX IF NOT EXISTS threadline_thread_records_metadata ON threadline_thread_records USING GIN (metadata jsonb_path_ops)"],
            # the rebuilt stub table's key named after the table again (as migration 12 named it)
            13: ["ALTER INDEX IF EXISTS threadline_cold_v13_pkey RENAME TO threadline_cold_pkey"],
        }

    @staticmethod
    def record_prefilter(terms: Sequence[Term]) -> tuple[list[str], list[Any]]:
        """A containment condition the records' GIN index serves, implied by the equality terms
        of scalar values (for those, JSONB containment at a path is equality there), ANDed with
        the exact terms: the index narrows, the terms decide."""
        doc: dict[str, Any] = {}
        for t in terms:
            if t.kind != "eq" or t.value is None or isinstance(t.value, (dict, list)):
                continue
            here = doc
            for name in t.path[:-1]:
                nxt = here.setdefault(name, {})
                if not isinstance(nxt, dict):
                    break
                here = nxt
            else:
                if t.path[-1] not in here:
                    here[t.path[-1]] = t.value
        return (["r.metadata @> CAST(? AS JSONB)"], [dumps_json(doc)]) if doc else ([], [])

    def legacy_renames(self) -> list[str]:
        indexes = {old: new for old, (new, _) in LEGACY_INDEXES.items()}
        indexes["checkpoints_metadata"] = "threadline_checkpoints_metadata"
        indexes.update({f"{old}_pkey": f"{new}_pkey" for old, new in LEGACY_RENAMES.items()})
        return [f"ALTER TABLE {old} RENAME TO {new}" for old, new in LEGACY_RENAMES.items()] + [
            f"ALTER INDEX IF EXISTS {old} RENAME TO {new}" for old, new in indexes.items()
        ]

    def bytes_of(self, column: str, kind: str) -> str:
        if kind == "json":
            return f"COALESCE(octet_length({column}::text), 0)"
        return f"COALESCE(octet_length({column}), 0)"

    def thread_glob(self, pattern: str) -> tuple[str, str]:
        if "*" not in pattern and "?" not in pattern:
            pattern += "*"
        like = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%").replace("?", "_")
        return "thread_id LIKE ? ESCAPE '\\'", like

    def floor_div(self, expr: str) -> str:
        return f"CAST(FLOOR({expr} / ?) AS BIGINT)"  # a cast alone rounds

    def json_field(self, column: str, key: str) -> str:
        return f"{column}->'{key}'"

    metadata_json = PostgresJson("c.metadata")  # operator filters on a checkpoint's metadata

    @staticmethod
    def record_json(joined: bool) -> PostgresJson:
        """Filters on a thread record's metadata (alias ``r``, joined; ``{}`` without a record or the records table)."""
        return PostgresJson("COALESCE(r.metadata, CAST('{}' AS JSONB))" if joined else "CAST('{}' AS JSONB)")

    def metadata_filter(self, filter: Any) -> tuple[str, list[Any]]:
        """``metadata @> filter`` (served by the GIN index), as the official PostgresSaver
        matches it: JSON containment, so a key must be present (``None`` matches only a
        stored null), an object or array matches any value containing it, and a dotted key
        is a top-level key. The filter is one bound JSONB parameter. A key whose value is an
        operator map is matched by ``storage.jsonfilter`` as on SQLite (a dotted key a nested
        path there). Raises FilterError as the SQLite dialect does."""
        check_filter(filter)
        plain, terms = split_filter(filter)
        clauses, params = where_terms(self.metadata_json, terms)
        if plain:
            try:
                params = [dumps_json(plain), *params]
            except TypeError as exc:
                raise FilterError(f"metadata filter values must be JSON-like: {exc}") from exc
            clauses.insert(0, "c.metadata @> CAST(? AS JSONB)")
        return " AND ".join(clauses) or "1 = 1", params

    def references_from(self, where: str) -> str:
        return (
            "FROM threadline_checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint->'channel_versions') j "
            "LEFT JOIN threadline_blobs b ON b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns "
            f"AND b.channel = j.key AND b.version = j.value {where}"
        )


POSTGRES = PostgresDialect()
