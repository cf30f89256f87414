"""What a dialect is: the named statements (``statements.Statements``) plus the hooks a
backend fills in, and the JSON format every backend stores.

A Dialect only supplies what differs between backends: placeholder style, column
types, how a JSON column reads back, the metadata filter of ``list``, byte counts,
JSON functions over ``channel_versions``, schema introspection, the official saver's
tables, and the official saver's behaviours threadline matches on that backend.
Nothing here executes; operations ask a Dialect for SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from threadline import limits
from threadline.codec.jsontext import dumps_json, expand_doc, loads
from threadline.storage.jsonfilter import Term, filter_terms, is_operators, terms_predicate
from threadline.errors import CorruptRowError, FilterError, FilterTooLargeError
from threadline.storage.dialect.adoption import AdoptionStatements
from threadline.storage.dialect.blobs import BlobStatements
from threadline.storage.dialect.heads import HeadStatements
from threadline.storage.dialect.leases import LeaseStatements
from threadline.storage.dialect.lifecycle import LifecycleStatements
from threadline.storage.dialect.objects import ObjectStatements
from threadline.storage.dialect.reads import ReadsStatements
from threadline.storage.dialect.records import RecordsStatements
from threadline.storage.dialect.statements import Statements
from threadline.storage.dialect.tags import TagStatements
from threadline.storage.dialect.transfer import TransferStatements
from threadline.storage.dialect.writes import WriteStatements
from threadline.storage.dialect.web import WebStatements
from threadline.storage.schema import MIGRATIONS





def _check_storable(obj: Any, path: str = "$") -> None:
    """ValueError naming the path of a NUL, NaN/Infinity or over-64-bit integer."""
    if isinstance(obj, str):
        if "\x00" in obj:
            raise ValueError(f"{path}: NUL character in {obj!r}")
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{path}: unpaired surrogate character in {obj!r} (not UTF-8)") from None
    elif isinstance(obj, bool) or obj is None:
        pass
    elif isinstance(obj, int):
        if not -(2**63) <= obj < 2**63:
            raise ValueError(f"{path}: integer {obj} does not fit in 64 bits")
    elif isinstance(obj, float):
        if obj != obj or obj in (float("inf"), float("-inf")):
            raise ValueError(f"{path}: {obj} is not valid JSON")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check_storable(k, path)
            _check_storable(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check_storable(v, f"{path}[{i}]")


def check_filter(filter: Any) -> None:
    """FilterError unless ``filter`` is a mapping of string keys to values a JSON column can
    hold on every backend (no NUL, unpaired surrogates, NaN/Infinity or integers beyond 64
    bits); FilterTooLargeError beyond ``threadline.limits`` ``max_filter_keys`` / ``max_filter_bytes`` /
    ``max_json_depth``."""
    if not isinstance(filter, Mapping):
        raise FilterError(f"filter must be a mapping of metadata key to value, got {type(filter).__name__}")
    top = limits.current()
    if len(filter) > top.max_filter_keys:
        raise FilterTooLargeError(f"metadata filter has {len(filter)} keys, more than max_filter_keys={top.max_filter_keys} (threadline.limits)")
    limits.check_filter_json(dict(filter), "metadata filter")
    for key, value in filter.items():
        if not isinstance(key, str):
            raise FilterError(f"metadata filter keys must be strings, got {type(key).__name__} {key!r}")
        try:
            _check_storable({key: value})
        except ValueError as exc:
            raise FilterError(f"metadata filter value for {key!r} cannot be matched: {exc}") from exc


def split_filter(filter: Mapping[str, Any]) -> tuple[dict[str, Any], list[Term]]:
    """A ``list(filter=…)`` filter as its plain part (``{key: value}``, matched as the backend's
    official saver matches it) and the terms of its operator keys (``{key: {"$op": bound}}``,
    ``storage.jsonfilter``: ``$eq $ne $gt $gte $lt $lte $in $nin``, a dotted key a nested path).
    FilterError names an unknown operator."""
    plain = {k: v for k, v in filter.items() if not is_operators(v)}
    ops = {k: v for k, v in filter.items() if is_operators(v)}
    return plain, filter_terms(ops)


def metadata_matcher(filter: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """``list(filter=…)`` on decoded metadata: the official RedisSaver's equality per plain key,
    ``storage.jsonfilter``'s operators per operator key. FilterError names an unknown operator."""
    plain, terms = split_filter(filter)
    ops = terms_predicate(terms)
    return lambda meta: all(meta.get(k) == v for k, v in plain.items()) and ops(meta)


class Dialect(
    Statements, BlobStatements, WriteStatements, AdoptionStatements, RecordsStatements, ReadsStatements, LifecycleStatements,
    LeaseStatements, TransferStatements, WebStatements, TagStatements, ObjectStatements, HeadStatements,
):
    """One backend's SQL. Subclasses set the attributes and implement the methods that
    raise NotImplementedError here (see ``sqlite.SqliteDialect``, ``postgres.PostgresDialect``)."""

    name: str
    # Column types substituted into the migrations: text (byte-order collation), json, blob, real, int.
    types: dict[str, str]
    # Largest number of bound parameters we put in one statement.
    max_params: int
    # Statement run first in setup() to serialize concurrent setups (None: the database's write lock does).
    setup_lock: tuple[str, tuple] | None = None
    # () → table names of the current database or schema.
    tables_sql: str
    # (table name) → its column names.
    columns_sql: str
    # The official saver's tables (threadline.storage.adopt reads them, with OFFICIAL_CHECKPOINTS)
    # and its writes: (thread_id, checkpoint_id) → checkpoint_ns, checkpoint_id, task_id, idx,
    # channel, type, blob, task_path of the writes of checkpoints from checkpoint_id on.
    official_tables: tuple[str, ...]
    official_writes_sql: str
    # Channel values the official saver stores apart from the checkpoint (its blobs table), or None.
    official_blobs_table: str | None = None
    # Whether a checkpoint of LangGraph < v4 gets its parent's TASKS writes as its TASKS
    # channel on read (the official PostgresSaver does it, the official SqliteSaver never).
    migrates_parent_sends: bool
    # get_tuple of a named checkpoint returns the caller's config as given.
    echoes_config: bool
    # Columns a repeated special-channel write replaces.
    replaced_write_columns: tuple[str, ...]
    # A checkpoint put again takes the new parent.
    reput_sets_parent: bool
    # prune(keep_latest) refuses DeltaChannel threads.
    prune_refuses_delta_threads: bool
    # Plain reads (``Q.read``) before an operation's first write may run outside its
    # transaction: true where a transaction gives them nothing (Postgres at READ COMMITTED,
    # where every statement takes its own snapshot anyway) and costs round trips.
    reads_outside_transaction: bool = False
    # Operating a database (``threadline.lifecycle.sweeper`` and ``vacuum``):
    # appended to a SELECT to lock the rows it reads until the transaction ends ("" where a
    # write transaction already holds the database's one write lock);
    lock_rows: str = ""
    # whether checkpoints and writes can be partitioned by month (``lifecycle.partition``);
    partitions: bool = False
    # run first in a read transaction that must see one snapshot across statements (None: it does);
    snapshot_sql: str | None = None
    # run first when claiming a job's lease: one row, true when this transaction may claim it (None: none);
    claim_lock: tuple[str, tuple] | None = None
    # () → the database's file ("" for an in-memory one), when its size is a file's; else None;
    file_sql: str | None = None
    # () → bytes on disk of threadline's tables with their indexes and TOAST, when not a file's;
    tables_bytes_sql: str | None = None
    # () → free pages inside the file, and the statement that gives one back (None: no such pages);
    free_pages_sql: str | None = None
    release_page_sql: str | None = None
    # run outside a transaction after deleting (cheap), and after deleting many rows (a table pass);
    after_delete_sql: tuple[str, ...] = ()
    after_large_delete_sql: tuple[str, ...] = ()
    # run on demand, outside a transaction: rewrite the tables compactly (locks them meanwhile).
    rebuild_sql: tuple[str, ...] = ()

    def tables_among(self, names: tuple[str, ...]) -> str:
        """() → rows naming tables of the current database or schema, at least those of
        ``names`` that exist (any number of names a row, NULL for none); by default ``tables_sql``."""
        return self.tables_sql

    def sql(self, text: str) -> str:
        """``text`` (``?`` placeholders) in the driver's parameter style."""
        return text

    def put_statement(self, blobs: int, fenced: bool = False) -> str | None:
        """A whole ``put`` as one statement (see ``PostgresDialect.put_statement``; ``fenced``:
        under a thread guard lease), or None: the backend runs ``put`` as several statements in
        one transaction."""
        return None

    def get_statement(self, latest: bool, held: bool = False) -> str | None:
        """A whole ``get_tuple`` as one statement (see ``PostgresDialect.get_statement``), or None:
        the backend reads the checkpoint, its blobs and its writes with one statement each.
        ``held`` (a backend with ``head_rows``): the reader holds a head's entries (``heads.get_with_head``)."""
        return None

    @staticmethod
    def record_prefilter(terms: Sequence[Term]) -> tuple[list[str], list[Any]]:
        """Conditions on the joined record (alias ``r``) implied by ``terms`` that an index of
        this backend serves (none here; Postgres: containment through GIN)."""
        return [], []

    def migrations(self) -> list[tuple[int, list[str]]]:
        """``schema.MIGRATIONS`` with this dialect's column types, plus its own statements."""
        extra = self.extra_migrations()
        return [(v, [s.format(**self.types) for s in stmts] + extra.get(v, [])) for v, stmts in MIGRATIONS]

    def extra_migrations(self) -> dict[int, list[str]]:
        """Backend-only statements (indexes) added to a migration version."""
        return {}

    def legacy_renames(self) -> list[str]:
        """Statements moving a database of the unprefixed layout to the prefixed names."""
        raise NotImplementedError

    def load_json(self, value: Any, where: object) -> Any:
        """A JSON column's value as read back by the driver, decoded (a document stored compacted,
        ``compacts_docs``, expanded first); CorruptRowError naming ``where`` (its ``str``) when it is not JSON."""
        try:
            if isinstance(value, str):
                return loads(expand_doc(value))
            return json.loads(value) if isinstance(value, bytes) else value
        except (ValueError, RecursionError) as exc:
            raise CorruptRowError(f"{where}: stored JSON is unreadable ({exc})") from exc

    def load_object(self, value: Any, where: object) -> dict:
        """``load_json`` of a column that must hold a JSON object (a checkpoint)."""
        doc = self.load_json(value, where)
        if not isinstance(doc, dict):
            raise CorruptRowError(f"{where}: not a JSON object")
        return doc

    def bytes_of(self, column: str, kind: str) -> str:
        """SQL for the stored size in bytes of a column (kind: 'json' or 'blob')."""
        raise NotImplementedError

    def thread_glob(self, pattern: str) -> tuple[str, str]:
        """SQL condition on ``thread_id`` and its one parameter for a glob (``*`` any run, ``?``
        one character; a pattern without a wildcard matches as a prefix), case-sensitive."""
        raise NotImplementedError

    def floor_div(self, expr: str) -> str:
        """SQL for ``floor(expr / ?)`` as an integer, for a positive ``expr`` (one parameter)."""
        raise NotImplementedError

    def json_field(self, column: str, key: str) -> str:
        """SQL for the JSON value at top-level ``key`` (a literal identifier, never user input) of
        a JSON ``column``, as the driver returns JSON (read back with ``load_json``)."""
        raise NotImplementedError

    def metadata_filter(self, filter: Any) -> tuple[str, list[Any]]:
        """SQL condition on table alias ``c`` and its parameters for ``list(filter=…)``, matching
        metadata as this backend's official saver does. FilterError for an unusable filter."""
        raise NotImplementedError

    def references_from(self, where: str) -> str:
        """``FROM`` … ``where``: one row per channel reference of the checkpoints ``c`` (one per
        ``channel_versions`` entry) with the blob it names as ``b`` (NULL columns when missing);
        ``where`` is a clause on ``threadline_checkpoints c`` such as ``WHERE c.thread_id IN (…)``
        or empty."""
        raise NotImplementedError

    def channel_references(self, where: str) -> str:
        """(the parameters of ``where``) → the number of channel references the checkpoints
        make and the stored bytes of the blobs they name, counted once per reference."""
        return f"SELECT COUNT(*), COALESCE(SUM({self.bytes_of('b.blob', 'blob')}), 0) {self.references_from(where)}"

    def state_bytes(self, where: str) -> str:
        """(the parameters of ``where``) → per checkpoint, the stored bytes of the blobs its
        ``channel_versions`` name (``s``): what loading its state reads."""
        return (
            f"SELECT COALESCE(SUM({self.bytes_of('b.blob', 'blob')}), 0) AS s {self.references_from(where)} "
            "GROUP BY c.thread_id, c.checkpoint_ns, c.checkpoint_id"
        )
