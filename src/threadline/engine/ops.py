"""Every storage operation, written once as a sans-IO generator.

An operation yields ``Q`` (SQL with ``?`` placeholders and its parameters) and is
sent back the rows the statement returned (``[]`` for none). A runner
(``runner.drive`` / ``runner.adrive``) executes the queries on a sqlite3,
aiosqlite or psycopg connection inside one transaction per operation, so the
logic below is shared by every backend, sync and async.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import TASKS

from threadline import codec
from threadline.engine import rows as R
from threadline.engine.dialect import LATEST_VERSION, MIGRATIONS, Dialect, dumps_json, table
from threadline.errors import ConfigError, CorruptRowError, FilterError, SchemaError
from threadline.keys import Key, config_of, key_of, thread_id_of

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


# --- setup -----------------------------------------------------------------


@dataclass(frozen=True)
class SchemaState:
    """What a database holds, as ``schema_state`` reads it without writing anything.

    ``applied``: threadline migration versions recorded; ``legacy``: threadline tables of
    the unprefixed layout (renamed by ``setup``); ``official``: the tables of LangGraph's
    official saver for this backend (threads there can be adopted)."""

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


def schema_state(d: Dialect) -> Op[SchemaState]:
    """Read which threadline, legacy and official tables exist and the applied migrations."""
    tables = frozenset(r[0] for r in (yield Q(d.tables_sql)))
    applied: frozenset[int] = frozenset()
    if table("migrations") in tables:
        applied = frozenset(int(r[0]) for r in (yield Q(f"SELECT v FROM {table('migrations')}")))
    legacy = False
    if table("migrations") not in tables and {"blobs", "migrations", "checkpoints"} <= tables:
        legacy = "base_version" in {r[0] for r in (yield Q(d.columns_sql, ("blobs",)))}
    official = False
    if not legacy and set(d.official_tables) <= tables:
        columns = {r[0] for r in (yield Q(d.columns_sql, ("checkpoints",)))}
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
    yield Q(f"CREATE TABLE IF NOT EXISTS {table('migrations')} (v INTEGER PRIMARY KEY, applied_at {d.types['real']} NOT NULL)")
    done = {r[0] for r in (yield Q(f"SELECT v FROM {table('migrations')}"))}
    for version, statements in d.migrations():
        if version in done:
            continue
        for statement in statements:
            yield Q(statement)
        yield Q(f"INSERT INTO {table('migrations')} (v, applied_at) VALUES (?, ?)", (version, time.time()))
    return (yield from schema_state(d))


# --- reading ---------------------------------------------------------------


def fetch_blob_rows(d: Dialect, keys: Sequence[tuple[str, str, str, str]]) -> Op[dict[tuple[str, str, str], dict[str, tuple]]]:
    """The blob rows of ``keys`` (thread_id, checkpoint_ns, channel, version) and of every
    version their deltas are built on, in one query per chunk of keys.

    A recursive CTE follows ``blobs.base_version`` (the same SQL on SQLite and
    Postgres; ``UNION`` returns each row once however many keys share a chain).
    Each step looks the next base up by a correlated subquery, which both
    databases answer with one primary-key probe (a join there lets Postgres plan a
    scan of ``blobs`` per step).
    Returns (thread_id, checkpoint_ns, channel) → version → (type, blob, base_version),
    the input of ``codec.resolve``.
    """
    out: dict[tuple[str, str, str], dict[str, tuple]] = defaultdict(dict)
    if not keys:
        return out
    on = " AND ".join(f"t.{col} = k.column{i + 1}" for i, col in enumerate(BLOB_KEY))
    for part in chunks(list(keys), d.max_params // 4):
        found = yield Q(
            "WITH RECURSIVE chain(thread_id, checkpoint_ns, channel, version, base_version) AS ("
            f" SELECT t.thread_id, t.checkpoint_ns, t.channel, t.version, t.base_version FROM ({values_list(4, len(part))}) k"
            f" JOIN threadline_blobs t ON {on}"
            " UNION"
            " SELECT c.thread_id, c.checkpoint_ns, c.channel, c.base_version,"
            " (SELECT b.base_version FROM threadline_blobs b WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns"
            " AND b.channel = c.channel AND b.version = c.base_version)"
            " FROM chain c WHERE c.base_version IS NOT NULL"
            ") SELECT t.thread_id, t.checkpoint_ns, t.channel, t.version, t.type, t.blob, t.base_version FROM chain c"
            " JOIN threadline_blobs t ON t.thread_id = c.thread_id AND t.checkpoint_ns = c.checkpoint_ns"
            " AND t.channel = c.channel AND t.version = c.version",
            flat(part),
        )
        for b in found:
            out[(b[0], b[1], b[2])][b[3]] = (b[4], b[5], b[6])
    return out


def fetch_blobs(
    d: Dialect, keys: Sequence[tuple[str, str, str, str]], *, rows: Mapping | None = None
) -> Op[dict[tuple[str, str, str, str], codec.Resolved]]:
    """Stored values of blob ``keys`` (thread_id, checkpoint_ns, channel, version),
    reconstructed through their delta chains and decompressed: key → ``codec.Resolved``
    (decode it with ``codec.load``; its tag is ``codec.EMPTY`` for an empty channel).
    Keys with no row are absent. ``rows``: already fetched ``fetch_blob_rows`` output.

    This is how anything outside ``load_tuples`` must read ``blobs``: a row's bytes
    alone are not its value when its type is a delta (``codec.is_delta``).

    Raises:
        CorruptRowError: a delta whose base is missing or does not reproduce it.
    """
    if rows is None:
        rows = yield from fetch_blob_rows(d, keys)
    out: dict[tuple, codec.Resolved] = {}
    memos: dict[tuple, dict] = defaultdict(dict)
    for key in sorted(set(keys)):  # ascending versions reuse the memo along a chain
        group = rows.get(key[:3])
        if not group or key[3] not in group:
            continue
        out[key] = codec.resolve(group, key[3], f"blob ({key[0]!r}, {key[1]!r}, {key[2]!r})", memos[key[:3]])
    return out


def load_tuples(
    d: Dialect,
    serde: SerializerProtocol,
    ck_rows: Sequence[Sequence[Any]],
    bc: codec.BlobCodec | None = None,
    *,
    lazy: bool = False,
) -> Op[list[Any]]:
    """Fetch the blobs and writes of checkpoint rows (``R.CHECKPOINT_COLUMNS``) and build tuples.

    With a saver's ``bc``, values its cache holds are not read again (a blob version
    is immutable, and a cached one was checked against its row when written or read);
    and for a single row (``get_tuple``) the list/dict values read and the
    checkpoint's versions go into the cache, so the next ``put`` on this checkpoint
    can write deltas without reading them back.

    ``lazy=True`` returns, instead of tuples, functions that build them: a caller
    that yields tuples one by one (``list``) deserializes each only when it is
    needed, outside the transaction, and a consumer that drops them lets Python
    free them at once (deserializing a whole page first keeps every value alive
    and makes the garbage collector work through them all).
    """
    if not ck_rows:
        return []
    docs = []
    for row in ck_rows:
        where = f"checkpoint ({row[0]!r}, {row[1]!r}, {row[2]!r})"
        doc, meta = _json(d, row[4], where), _json(d, row[5], where)
        if not isinstance(doc, dict) or not isinstance(meta, dict):
            raise CorruptRowError(f"{where}: checkpoint or metadata is not a JSON object")
        docs.append((row, doc, meta))
    wanted = sorted({(r[0], r[1], ch, v) for r, doc, _ in docs for ch, v in R.blob_pairs(doc)})
    blobs: dict[tuple, codec.Resolved] = {}
    if bc is not None and bc.cache is not None:
        for k in wanted:
            entry = bc.cache.get(k)
            if entry is not None:
                blobs[k] = ("msgpack", None, entry.value)
        wanted = [k for k in wanted if k not in blobs]
    rows = yield from fetch_blob_rows(d, wanted)
    blobs.update((yield from fetch_blobs(d, wanted, rows=rows)))
    keys = sorted({(r[0], r[1], r[2]) for r in ck_rows})
    writes: dict[tuple, list] = defaultdict(list)
    for part in chunks(keys, d.max_params // 3):
        found = yield Q(
            join_keys("threadline_writes", BLOB_KEY[:2] + ("checkpoint_id",), len(part), WRITE_SELECT)
            + " ORDER BY t.task_path, t.task_id, t.idx",
            flat(part),
        )
        for w in found:
            writes[(w[0], w[1], w[2])].append(w)
    sends: dict[tuple, list] = defaultdict(list)
    migrate = d.migrates_parent_sends
    parents = sorted({(r[0], r[1], r[3]) for r, doc, _ in docs if migrate and R.needs_parent_sends(r[3], doc)})
    for part in chunks(parents, d.max_params // 3 - 1):
        found = yield Q(
            join_keys("threadline_writes", BLOB_KEY[:2] + ("checkpoint_id",), len(part), WRITE_SELECT)
            + " WHERE t.channel = ? ORDER BY t.task_path, t.task_id, t.idx",
            [*flat(part), TASKS],
        )
        for w in found:
            sends[(w[0], w[1], w[2])].append(w)

    def parts(row: Sequence[Any], doc: dict, meta: dict) -> tuple:
        parent_sends = sends.get((row[0], row[1], row[3]), ())
        return (serde, row, doc, meta, blobs, writes.get((row[0], row[1], row[2]), ()), parent_sends)

    if lazy:
        return [partial(R.to_tuple, *parts(row, doc, meta)) for row, doc, meta in docs]
    tuples = [R.to_tuple(*parts(row, doc, meta)) for row, doc, meta in docs]
    if bc is not None and bc.deltas and len(docs) == 1:
        _remember(bc, docs[0][0], docs[0][1], blobs, rows)
    return tuples


def _remember(bc: codec.BlobCodec, row: Sequence[Any], doc: dict, blobs: Mapping[tuple, codec.Resolved], rows: Mapping) -> None:
    """Cache what a get_tuple read: the checkpoint's versions and its list/dict values."""
    assert bc.cache is not None
    tid, ns = row[0], row[1]
    pairs = R.blob_pairs(doc)
    bc.cache.put_versions((tid, ns, row[2]), dict(pairs))
    for ch, v in pairs:
        if bc.cache.get((tid, ns, ch, v)) is not None:
            continue  # what a put cached is as good, and may carry item fingerprints
        resolved = blobs.get((tid, ns, ch, v))
        stored = rows.get((tid, ns, ch), {}).get(v)
        if resolved is None or stored is None or resolved[0] != "msgpack":
            continue
        entry = codec.entry_of(resolved, stored[0], len(stored[1]) if stored[1] is not None else 0)
        if entry is not None and entry.value.body_len * 2 >= bc.delta_min_bytes:
            bc.cache.put((tid, ns, ch, v), entry)


def get_tuple(d: Dialect, serde: SerializerProtocol, key: Key, bc: codec.BlobCodec | None = None) -> Op[CheckpointTuple | None]:
    """The checkpoint named by ``key``, or the latest of its (thread_id, checkpoint_ns) when it names none."""
    if key.checkpoint_id:
        found = yield Q(
            f"SELECT {R.CHECKPOINT_COLUMNS} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (key.thread_id, key.checkpoint_ns, key.checkpoint_id),
        )
    else:
        found = yield Q(
            f"SELECT {R.CHECKPOINT_COLUMNS} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (key.thread_id, key.checkpoint_ns),
        )
    if not found:
        return None
    return (yield from load_tuples(d, serde, found, bc))[0]


def list_where(
    d: Dialect, config: Any, filter: Mapping[str, Any] | None, before: Any
) -> tuple[str, list[Any]]:
    """WHERE clause and parameters for ``list(config, filter=, before=)``.

    ``config`` may be None (every thread). ``checkpoint_ns`` filters only when the
    config carries it; ``checkpoint_id`` selects one checkpoint; ``before`` keeps
    checkpoints with a smaller checkpoint_id; ``filter`` matches metadata as the official
    saver of the backend does (``Dialect.metadata_filter``; all bound parameters).
    """
    clauses: list[str] = []
    params: list[Any] = []
    if config is not None:
        key = key_of(config, require_thread=False)
        conf = config["configurable"]
        if key.thread_id is not None:
            clauses.append("c.thread_id = ?")
            params.append(key.thread_id)
        if conf.get("checkpoint_ns") is not None:
            clauses.append("c.checkpoint_ns = ?")
            params.append(key.checkpoint_ns)
        if key.checkpoint_id:
            clauses.append("c.checkpoint_id = ?")
            params.append(key.checkpoint_id)
    if filter:
        sql, p = d.metadata_filter(filter)
        clauses.append(sql)
        params.extend(p)
    if before is not None:
        before_id = key_of(before, require_thread=False).checkpoint_id
        if not before_id:
            raise ConfigError("'before' config has no checkpoint_id")
        clauses.append("c.checkpoint_id < ?")
        params.append(before_id)
    return (" AND ".join(clauses) or "1 = 1"), params


def list_page(
    d: Dialect,
    serde: SerializerProtocol,
    where: tuple[str, list[Any]],
    after: tuple | None,
    size: int,
    bc: codec.BlobCodec | None = None,
    *,
    lazy: bool = False,
) -> Op[tuple[list[Any], tuple | None]]:
    """One page of ``list`` (newest checkpoint_id first) and the cursor for the next page."""
    sql, params = where
    if after is not None:
        sql = f"({sql}) AND (c.checkpoint_id, c.thread_id, c.checkpoint_ns) < (?, ?, ?)"
        params = [*params, *after]
    found = yield Q(
        f"SELECT {R.CHECKPOINT_COLUMNS} FROM threadline_checkpoints c WHERE {sql} "
        "ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC LIMIT ?",
        [*params, size],
    )
    tuples = yield from load_tuples(d, serde, found, bc, lazy=lazy)
    last = found[-1] if len(found) == size else None
    return tuples, (last[2], last[0], last[1]) if last else None


# --- writing ---------------------------------------------------------------

_UPSERT_THREAD = (
    "INSERT INTO threadline_threads (thread_id, created_at, updated_at, checkpoint_count, bytes) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (thread_id) DO UPDATE SET updated_at = excluded.updated_at, "
    "checkpoint_count = threadline_threads.checkpoint_count + excluded.checkpoint_count, bytes = threadline_threads.bytes + excluded.bytes"
)


_INSERT_BLOBS = (
    "INSERT INTO threadline_blobs (thread_id, checkpoint_ns, channel, version, type, blob, base_version) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


def _insert_guarded(d: Dialect) -> str:
    """Insert-or-ignore of one blob row (the 7 columns, then the type and stored size its
    base row must have, NULL for a snapshot): a delta is inserted only while its base row
    still has that type and size, so a stale cache entry can never leave a delta on a
    base that changed."""
    return (
        "INSERT INTO threadline_blobs (thread_id, checkpoint_ns, channel, version, type, blob, base_version) "
        f"SELECT column1, column2, column3, column4, column5, CAST(column6 AS {d.types['blob']}), column7 "
        f"FROM ({values_list(9, 1)}) v "
        "WHERE column7 IS NULL OR EXISTS (SELECT 1 FROM threadline_blobs b WHERE b.thread_id = v.column1 AND b.checkpoint_ns = v.column2 "
        "AND b.channel = v.column3 AND b.version = v.column7 AND b.type = v.column8 "
        f"AND {d.bytes_of('b.blob', 'blob')} = CAST(v.column9 AS {d.types['int']})) "
        "ON CONFLICT DO NOTHING"
    )


def _count_stored(d: Dialect, n: int) -> str:
    """SQL counting which of ``n`` (channel, version, type, stored size) blob rows of one
    (thread_id, checkpoint_ns) are stored exactly so (parameters: thread_id, checkpoint_ns, then the rows)."""
    return (
        f"(SELECT COUNT(*) FROM ({values_list(4, n)}) k JOIN threadline_blobs b ON b.thread_id = ? AND b.checkpoint_ns = ? "
        f"AND b.channel = k.column1 AND b.version = k.column2 AND b.type = k.column3 "
        f"AND {d.bytes_of('b.blob', 'blob')} = CAST(k.column4 AS {d.types['int']}))"
    )


def _delta_bases(
    d: Dialect, bc: codec.BlobCodec, key: Key, candidates: Sequence[tuple[str, str]]
) -> Op[dict[str, tuple[str, codec.Entry]]]:
    """For the (channel, new version) that may be deltas: channel → (its version in the
    parent checkpoint, that value).

    From the cache; on a miss, read in this transaction (the parent's versions, then
    the base values through their chains)."""
    assert bc.cache is not None
    if not candidates or not key.checkpoint_id:
        return {}
    parent = (key.thread_id, key.checkpoint_ns, key.checkpoint_id)
    versions = bc.cache.versions(parent)
    if versions is None:
        found = yield Q(
            "SELECT checkpoint FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", parent
        )
        if not found:
            return {}
        doc = _json(d, found[0][0], f"checkpoint {parent!r}")
        versions = dict(R.blob_pairs(doc)) if isinstance(doc, dict) else {}
        bc.cache.put_versions(parent, versions)
    bases: dict[str, tuple[str, codec.Entry]] = {}
    missing: dict[str, str] = {}
    for channel, version in candidates:
        base_version = versions.get(channel)
        if base_version is None or base_version == version:
            continue
        entry = bc.cache.get((key.thread_id, key.checkpoint_ns, channel, base_version))
        if entry is not None:
            bases[channel] = (base_version, entry)
        else:
            missing[channel] = base_version
    if missing:
        wanted = [(key.thread_id, key.checkpoint_ns, ch, bv) for ch, bv in missing.items()]
        rows = yield from fetch_blob_rows(d, wanted)
        try:
            resolved = yield from fetch_blobs(d, wanted, rows=rows)
        except CorruptRowError:
            resolved = {}  # an unreadable base: the new value is stored as a snapshot
        for k, r in resolved.items():
            stored = rows[k[:3]][k[3]]
            entry = codec.entry_of(r, stored[0], len(stored[1]) if stored[1] is not None else 0)
            if entry is not None:
                bc.cache.put(k, entry)
                bases[k[2]] = (k[3], entry)
    return bases


def put(
    d: Dialect,
    serde: SerializerProtocol,
    config: Any,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: Mapping[str, Any],
    bc: codec.BlobCodec | None = None,
) -> Op[dict]:
    """Store a checkpoint: its changed channels' blobs, its row, and the thread index, in one transaction.

    With a saver's ``bc`` (``codec.BlobCodec``), a list/dict value that extends the
    channel's value in the parent checkpoint (``config``'s checkpoint_id) is stored
    as a delta on it (see ``codec``); every value at or above the size threshold is
    compressed. Without one (``codec.PLAIN``): compressed snapshots.
    """
    bc = bc or codec.PLAIN
    key = key_of(config)
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("id"), str):
        raise ConfigError("checkpoint must be a Checkpoint dict with a string 'id'")
    now = time.time()
    doc, meta = R.put_docs(serde, config, checkpoint, metadata)
    try:
        doc_json, meta_json = dumps_json(doc), dumps_json(meta, sort_keys=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"checkpoint {checkpoint['id']!r}: metadata or versions are not JSON-serializable ({exc})") from exc
    step, source, run_id = R.extracted_columns(meta)
    bases = (yield from _delta_bases(d, bc, key, R.delta_channels(checkpoint, new_versions))) if bc.deltas else {}
    values = R.serialize_values(serde, checkpoint, new_versions, bc, bases)
    blob_rows = R.blob_rows(key, values, bases, bc)
    if any(r.delta for r in blob_rows):
        yield Q(_insert_guarded(d), [r.params + r.guard for r in blob_rows], many=True)
    elif blob_rows:
        yield Q(_INSERT_BLOBS, [r.params for r in blob_rows], many=True)
    size = sum(len(r.params[5] or b"") for r in blob_rows)
    # The rows the cache will remember (deltas and list/dict snapshots) are checked in the
    # checkpoint INSERT's own RETURNING, so this costs no extra round trip.
    checked = [r for r in blob_rows if r.value is not None] if bc.cache is not None else []
    checked_params = [p for r in checked for p in (r.params[2], r.params[3], r.params[4], len(r.params[5] or b""))]
    count_sql = _count_stored(d, len(checked)) if checked else "0"
    row = (key.thread_id, key.checkpoint_ns, checkpoint["id"], key.checkpoint_id, doc_json, meta_json, step, source, run_id, now)
    inserted_ck = yield Q(
        "INSERT INTO threadline_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, "
        "step, source, run_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING RETURNING checkpoint_id, {count_sql}",
        [*row, *checked_params, key.thread_id, key.checkpoint_ns] if checked else row,
    )
    if not inserted_ck:
        parent_sql, parent = ("parent_checkpoint_id = ?, ", (key.checkpoint_id,)) if d.reput_sets_parent else ("", ())
        yield Q(
            f"UPDATE threadline_checkpoints SET {parent_sql}checkpoint = ?, metadata = ?, step = ?, source = ?, run_id = ? "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (*parent, doc_json, meta_json, step, source, run_id, key.thread_id, key.checkpoint_ns, checkpoint["id"]),
        )
        stored = (yield Q(f"SELECT {count_sql}", [*checked_params, key.thread_id, key.checkpoint_ns])) if checked else [(0,)]
    else:
        stored = [(inserted_ck[0][1],)]
    if checked and stored[0][0] != len(checked):
        # Rare: a delta's base row changed since it was cached, or a key was already stored
        # with other bytes. Find out which rows are not stored as written.
        found = yield Q(
            join_keys("threadline_blobs", BLOB_KEY, len(checked), f"t.channel, t.version, t.type, {d.bytes_of('t.blob', 'blob')}"),
            flat(r.params[:4] for r in checked),
        )
        have = {(f[0], f[1]): (f[2], f[3]) for f in found}
        retry = []
        for r, v in zip(blob_rows, values):
            k = (r.params[2], r.params[3])
            if r.value is None or have.get(k) == (r.params[4], len(r.params[5] or b"")):
                continue
            bc.cache.discard(r.params[:4])  # type: ignore[union-attr]
            r.value = None
            if r.delta and k not in have:  # the delta was refused: store the value whole
                retry.append(R.snapshot_row(v, key, bc))
        if retry:
            yield Q(_INSERT_BLOBS, retry, many=True)
    if bc.cache is not None:
        for r in blob_rows:
            if r.value is not None:
                bc.cache.put(r.params[:4], codec.Entry(r.value, r.params[4], len(r.params[5] or b"")))
                base = bases.get(r.params[2])
                if base is not None:
                    # superseded on this branch: a sibling of this checkpoint reads it back if it needs it
                    bc.cache.discard((key.thread_id, key.checkpoint_ns, r.params[2], base[0]))
    if bc.cache is not None:
        bc.cache.put_versions((key.thread_id, key.checkpoint_ns, checkpoint["id"]), dict(R.blob_pairs(doc)))
    yield Q(_UPSERT_THREAD, (key.thread_id, now, now, 1 if inserted_ck else 0, size))
    # the official savers hand back the caller's thread_id and checkpoint_ns as given (an int stays an int)
    given = config["configurable"]
    return config_of(given["thread_id"], given.get("checkpoint_ns") or key.checkpoint_ns, checkpoint["id"])


def put_writes(
    d: Dialect,
    serde: SerializerProtocol,
    config: Any,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    bc: codec.BlobCodec | None = None,
) -> Op[None]:
    """Store a task's pending writes against a checkpoint (LangGraph ``WRITES_IDX_MAP`` rules).

    Values at or above ``bc``'s size threshold are zstd-compressed (``<tag>+zstd``)."""
    key = key_of(config)
    if not key.checkpoint_id:
        raise ConfigError("put_writes needs config['configurable']['checkpoint_id']")
    if not isinstance(task_id, str):
        raise ConfigError(f"task_id must be a string, got {type(task_id).__name__}")
    now = time.time()
    replace, rows = R.write_rows(serde, key, writes, task_id, task_path or "", now, bc or codec.PLAIN)
    if not rows:
        return
    conflict = "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in d.replaced_write_columns) if replace else "DO NOTHING"
    if replace:  # the same special channel twice: the last write wins, as with one upsert after another
        rows = list({r[4]: r for r in rows}.values())
    yield Q(
        "INSERT INTO threadline_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob, created_at) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict}",
        rows,
        many=True,
        single=True,
    )


# --- deleting, copying, pruning --------------------------------------------


def thread_ids_of(values: Any, what: str = "thread_ids") -> list[str]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{what} must be a sequence of ids, not a single string")
    return [thread_id_of(v) for v in values]


def delete_thread(d: Dialect, thread_id: Any, bc: codec.BlobCodec | None = None) -> Op[None]:
    """Delete every checkpoint, blob and write of a thread, in every checkpoint_ns."""
    tid = thread_id_of(thread_id)
    _forget(bc, [tid])
    for name in ("writes", "blobs", "checkpoints", "threads"):
        yield Q(f"DELETE FROM {table(name)} WHERE thread_id = ?", (tid,))


def restat(d: Dialect, thread_ids: Iterable[str]) -> Op[None]:
    """Recompute the ``threads`` row (count, bytes) of threads after a bulk change; drop emptied threads.

    ``threads.bytes`` counts the thread's stored channel values (blob payloads), as
    ``put`` adds them: the same on every backend (Postgres renders JSONB at its own
    width, so checkpoint JSON is left out) and without a write to ``threads`` on
    every ``put_writes``.
    """
    for tid in sorted(set(thread_ids)):
        yield Q(
            "UPDATE threadline_threads SET "
            "checkpoint_count = (SELECT COUNT(*) FROM threadline_checkpoints WHERE thread_id = ?), "
            f"bytes = (SELECT COALESCE(SUM({d.bytes_of('blob', 'blob')}), 0) FROM threadline_blobs WHERE thread_id = ?) "
            "WHERE thread_id = ?",
            (tid, tid, tid),
        )
        yield Q("DELETE FROM threadline_threads WHERE thread_id = ? AND checkpoint_count = 0", (tid,))


def gc_blobs(d: Dialect, thread_id: str) -> Op[int]:
    """Delete a thread's blobs that no checkpoint references (directly or as a delta base). Returns rows deleted."""
    docs = yield Q("SELECT checkpoint_ns, checkpoint FROM threadline_checkpoints WHERE thread_id = ?", (thread_id,))
    live = {(ns, ch, v) for ns, doc in docs for ch, v in R.blob_pairs(_json(d, doc, f"checkpoint of thread {thread_id!r}"))}
    stored = yield Q("SELECT checkpoint_ns, channel, version, base_version FROM threadline_blobs WHERE thread_id = ?", (thread_id,))
    base = {(ns, ch, v): b for ns, ch, v, b in stored}
    todo = [k for k in live if k in base]
    while todo:  # a kept delta keeps the versions it is built on
        ns, ch, v = todo.pop()
        b = base.get((ns, ch, v))
        if b is not None and (ns, ch, b) not in live:
            live.add((ns, ch, b))
            todo.append((ns, ch, b))
    dead = [(thread_id, ns, ch, v) for ns, ch, v, _ in stored if (ns, ch, v) not in live]
    if dead:
        yield Q("DELETE FROM threadline_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?", dead, many=True)
    return len(dead)


def _forget(bc: codec.BlobCodec | None, thread_ids: Iterable[str]) -> None:
    if bc is not None and bc.cache is not None:
        bc.cache.forget_threads(thread_ids)


def delete_checkpoints(d: Dialect, keys: Sequence[tuple[str, str, str]], bc: codec.BlobCodec | None = None) -> Op[None]:
    """Delete checkpoints (thread_id, checkpoint_ns, checkpoint_id) with their writes; then GC and restat their threads.

    Never leaves a kept checkpoint unreadable: ``gc_blobs`` keeps every blob a kept
    checkpoint references and, transitively, the base versions of kept delta rows.
    """
    if not keys:
        return
    _forget(bc, {k[0] for k in keys})
    yield Q("DELETE FROM threadline_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", list(keys), many=True)
    yield Q("DELETE FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", list(keys), many=True)
    threads = sorted({k[0] for k in keys})
    for tid in threads:
        yield from gc_blobs(d, tid)
    yield from restat(d, threads)


def delete_for_runs(d: Dialect, run_ids: Any, bc: codec.BlobCodec | None = None) -> Op[None]:
    """Delete the checkpoints (and their writes) whose metadata ``run_id`` is one of ``run_ids``."""
    ids = thread_ids_of(run_ids, "run_ids")
    keys: list[tuple] = []
    for part in chunks(ids, d.max_params):
        keys += (yield Q(f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM threadline_checkpoints WHERE run_id IN ({placeholders(len(part))})", part))
    yield from delete_checkpoints(d, [tuple(k) for k in keys], bc)


def copy_thread(d: Dialect, source: Any, target: Any) -> Op[None]:
    """Copy every checkpoint, blob and write of ``source`` into ``target`` (existing rows of target are kept)."""
    src, dst = thread_id_of(source), thread_id_of(target)
    if src == dst:
        raise ConfigError(f"copy_thread: source and target are the same thread {src!r}")
    yield Q(
        "INSERT INTO threadline_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source, run_id, created_at) "
        "SELECT ?, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source, run_id, created_at "
        "FROM threadline_checkpoints WHERE thread_id = ? ON CONFLICT DO NOTHING",
        (dst, src),
    )
    yield Q(
        "INSERT INTO threadline_blobs (thread_id, checkpoint_ns, channel, version, type, blob, base_version) "
        "SELECT ?, checkpoint_ns, channel, version, type, blob, base_version FROM threadline_blobs WHERE thread_id = ? ON CONFLICT DO NOTHING",
        (dst, src),
    )
    yield Q(
        "INSERT INTO threadline_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob, created_at) "
        "SELECT ?, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob, created_at "
        "FROM threadline_writes WHERE thread_id = ? ON CONFLICT DO NOTHING",
        (dst, src),
    )
    now = time.time()
    yield Q(
        "INSERT INTO threadline_threads (thread_id, created_at, updated_at, checkpoint_count, bytes) "
        "SELECT ?, ?, ?, 0, 0 WHERE EXISTS (SELECT 1 FROM threadline_checkpoints WHERE thread_id = ?) ON CONFLICT (thread_id) DO NOTHING",
        (dst, now, now, dst),
    )
    yield from restat(d, [dst])


PRUNE_STRATEGIES = ("keep_latest", "delete")
# Metadata keys of a checkpoint written by a graph with a LangGraph DeltaChannel.
DELTA_KEYS = frozenset({"counters_since_delta_snapshot", "delta_writes_versioned"})


def prune(d: Dialect, thread_ids: Any, strategy: str, bc: codec.BlobCodec | None = None) -> Op[None]:
    """Prune threads. ``delete`` removes them; ``keep_latest`` keeps each checkpoint_ns's latest checkpoint.

    As the official PostgresSaver's ``prune``, ``keep_latest`` also keeps the parent of a
    LangGraph < v4 head that has pending sends (its TASKS writes), and deletes a subgraph
    call's namespace (``parent:task`` with a ``:``) with the root checkpoint the call
    started from, once that one is saved and not kept. A thread using a ``DeltaChannel``
    (metadata ``DELTA_KEYS``) is refused on Postgres with NotImplementedError, nothing
    pruned, as the official PostgresSaver refuses it; elsewhere it is pruned: for a channel
    the latest checkpoint rebuilds from history (its metadata
    ``counters_since_delta_snapshot``), every ancestor back to the nearest one that stores
    the channel's snapshot is kept, with its writes, so the kept state reconstructs exactly.
    A kept checkpoint whose parent is deleted becomes a root (parent_checkpoint_id NULL).
    """
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}; expected one of {PRUNE_STRATEGIES}")
    tids = thread_ids_of(thread_ids)
    if strategy == "delete":
        for tid in tids:
            yield from delete_thread(d, tid, bc)
        return
    doomed: list[tuple] = []
    orphaned: list[tuple] = []
    for tid in tids:
        found = yield Q(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM threadline_checkpoints WHERE thread_id = ?",
            (tid,),
        )
        if not found:
            continue
        nonempty = {
            (ns, ch, v)
            for ns, ch, v in (yield Q("SELECT checkpoint_ns, channel, version FROM threadline_blobs WHERE thread_id = ? AND type <> ?", (tid, codec.EMPTY)))
        }
        with_sends = {tuple(r) for r in (yield Q(
            "SELECT DISTINCT checkpoint_ns, checkpoint_id FROM threadline_writes WHERE thread_id = ? AND channel = ?", (tid, TASKS)
        ))}
        if d.prune_refuses_delta_threads and any(
            DELTA_KEYS & _json(d, r[4], f"checkpoint ({tid!r}, {r[0]!r}, {r[1]!r})").keys() for r in found
        ):
            # the whole batch is one transaction: nothing is pruned, as the official saver
            raise NotImplementedError(f"keep_latest can't prune threads that use a DeltaChannel: {tid}")
        by_id = {(r[0], r[1]): r for r in found}
        keep: set[tuple] = set()
        roots: dict[str, str | None] = {}
        for ns in sorted({r[0] for r in found}):
            head = max(r[1] for r in found if r[0] == ns)
            keep.add((ns, head))
            where = f"checkpoint ({tid!r}, {ns!r}, {head!r})"
            doc, meta = _json(d, by_id[(ns, head)][3], where), _json(d, by_id[(ns, head)][4], where)
            parent = by_id[(ns, head)][2]
            if R.needs_parent_sends(parent, doc) and (ns, parent) in with_sends:
                keep.add((ns, parent))
            roots[ns] = (meta.get("parents") or {}).get("") if isinstance(meta.get("parents"), dict) else None
            for ch in (meta.get("counters_since_delta_snapshot") or {}):
                cur = parent
                while cur and (ns, cur) in by_id:  # walk to the nearest stored snapshot
                    keep.add((ns, cur))
                    versions = _json(d, by_id[(ns, cur)][3], "checkpoint").get("channel_versions", {})
                    if ch in versions and (ns, ch, R.version_key(versions[ch])) in nonempty:
                        break
                    cur = by_id[(ns, cur)][2]
        # a subgraph call goes with the saved root checkpoint it started from
        calls = {ns for ns, root in roots.items() if ":" in ns and ("", root) in by_id and ("", root) not in keep}
        keep = {k for k in keep if k[0] not in calls}
        doomed += [(tid, ns, cid) for ns, cid in by_id if (ns, cid) not in keep]
        orphaned += [(tid, ns, cid) for ns, cid in keep if by_id[(ns, cid)][2] and (ns, by_id[(ns, cid)][2]) not in keep]
    if orphaned:
        yield Q("UPDATE threadline_checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", orphaned, many=True)
    yield from delete_checkpoints(d, doomed, bc)


# --- DeltaChannel history --------------------------------------------------


def delta_channel_history(
    d: Dialect, serde: SerializerProtocol, config: Any, channels: Sequence[str]
) -> Op[dict[str, DeltaChannelHistory]]:
    """Per channel: the writes on the parent chain of a checkpoint since the nearest stored value, and that value.

    Same result as ``BaseCheckpointSaver.get_delta_channel_history`` (the contract),
    in four queries instead of one ``get_tuple`` per ancestor: the ancestor chain
    by a recursive CTE, which ancestors store a value, the writes, the seeds.
    """
    channels = list(channels)
    result: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in channels}
    if not channels:
        return result
    key = key_of(config)
    cid = key.checkpoint_id
    if not cid:
        latest = yield Q(
            "SELECT checkpoint_id FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (key.thread_id, key.checkpoint_ns),
        )
        if not latest:
            return result
        cid = latest[0][0]
    chain = yield Q(
        "WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, checkpoint, depth) AS ("
        " SELECT checkpoint_id, parent_checkpoint_id, checkpoint, 0 FROM threadline_checkpoints"
        " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        " UNION ALL"
        " SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, chain.depth + 1 FROM threadline_checkpoints c"
        " JOIN chain ON c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = chain.parent_checkpoint_id"
        " WHERE chain.depth < ?"
        ") SELECT checkpoint_id, checkpoint FROM chain WHERE depth > 0 ORDER BY depth",
        (key.thread_id, key.checkpoint_ns, cid, key.thread_id, key.checkpoint_ns, MAX_CHAIN_DEPTH),
    )
    versions = [
        (row[0], _json(d, row[1], f"checkpoint ({key.thread_id!r}, {key.checkpoint_ns!r}, {row[0]!r})").get("channel_versions", {}))
        for row in chain
    ]
    pairs = sorted({(ch, R.version_key(v[ch])) for _, v in versions for ch in channels if ch in v})
    stored: set[tuple[str, str]] = set()
    for part in chunks(pairs, d.max_params // 4 - 1):
        found = yield Q(
            join_keys("threadline_blobs", BLOB_KEY, len(part), "t.channel, t.version") + " WHERE t.type <> ?",
            [*flat((key.thread_id, key.checkpoint_ns, ch, v) for ch, v in part), codec.EMPTY],
        )
        stored |= {(r[0], r[1]) for r in found}
    # For each channel: the ancestors (newest first) whose writes count, and its seed version.
    span: dict[str, int] = {}
    seed: dict[str, str] = {}
    for ch in channels:
        span[ch] = len(versions)
        for depth, (_, v) in enumerate(versions):
            if ch in v and (ch, R.version_key(v[ch])) in stored:
                span[ch], seed[ch] = depth + 1, R.version_key(v[ch])
                break
    needed = [versions[i][0] for i in range(max(span.values(), default=0))]
    position = {c: i for i, c in enumerate(needed)}
    writes: list = []
    for part in chunks(needed, d.max_params - len(channels) - 2):
        writes += (yield Q(
            "SELECT checkpoint_id, task_id, channel, type, blob, task_path, idx FROM threadline_writes "
            f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN ({placeholders(len(part))}) "
            f"AND channel IN ({placeholders(len(channels))})",
            [key.thread_id, key.checkpoint_ns, *part, *channels],
        ))
    # Oldest checkpoint first; within one checkpoint, LangGraph's writes_sort_key.
    writes.sort(key=lambda w: (-position[w[0]], w[5], w[1], w[6]))
    for w in writes:
        if position[w[0]] < span[w[2]]:
            value = codec.decode(serde, w[3], w[4], f"write ({key.thread_id!r}, {key.checkpoint_ns!r}, {w[0]!r}, {w[1]!r}, {w[6]})")
            result[w[2]]["writes"].append((w[1], w[2], value))
    if seed:
        found = yield from fetch_blobs(d, [(key.thread_id, key.checkpoint_ns, ch, v) for ch, v in seed.items()])
        for (_, _, ch, v), resolved in found.items():
            result[ch]["seed"] = codec.load(serde, resolved, f"blob ({key.thread_id!r}, {key.checkpoint_ns!r}, {ch!r}, {v!r})")
    return result


# --- versions --------------------------------------------------------------

next_version = R.next_version
