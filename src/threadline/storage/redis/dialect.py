"""The storage engine's named statements on Redis: the same names, parameters and result
rows as the SQL dialects' (``storage.dialect.statements``), each a handler over the keys
of ``layout`` instead of SQL text. The operations of ``storage.ops`` run unchanged on
them: one storage logic for every backend.

A handler is a generator: it yields a batch of commands — ``("HGET", key, field)`` or a
``Call`` of a script of ``scripts`` — which the runner (``storage.redis.runner``) sends in
one pipeline (one round trip), and is sent the replies; it returns the result rows.
``Cmd`` binds a handler to the arguments a statement method was called with. The handlers
stand one module a concern (``checkpoints``, ``blobs``, ``writes``, ``threads``, ``putget``,
and the rooms' ``reads``, ``lifecycle`` …); this module binds them to the names.

Atomicity: ``put`` and ``put_writes`` are one script each (all of a thread's keys share a
slot), deleting a thread is one ``DEL``; the maintenance operations (prune, copy, delete
checkpoints) are a sequence of such steps, ordered so that a crash between them leaves
every stored checkpoint readable (rows are written after the values they name, and
deleted before them).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from typing import Any

from threadline.errors import FilterError
from threadline.storage.dialect.base import Dialect, check_filter, split_filter
from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Cmd, statement
from threadline.storage.redis.blobs import (
    blob_chains, blob_sizes_by_keys, blobs_with_value, delete_blob, insert_blobs, set_blob_value, thread_blob_bases, thread_blob_sizes,
    thread_blobs, thread_blobs_like, thread_blobs_not_of_type,
)
from threadline.storage.redis.checkpoints import (
    ancestors, checkpoint, checkpoint_column, checkpoints_of_runs, delete_checkpoint, has_checkpoints, insert_checkpoint_rows,
    latest_checkpoint, latest_checkpoint_id, list_checkpoints, set_checkpoint_doc, set_checksum, set_created_at, set_metadata,
    set_parent, thread_checkpoint_full_rows, thread_checkpoints, thread_docs,
)
from threadline.storage.redis.leases import RedisLeaseStatements
from threadline.storage.redis.lifecycle import RedisLifecycleStatements
from threadline.storage.redis.putget import get_checkpoint, put_checkpoint
from threadline.storage.redis.reads import RedisReadsStatements
from threadline.storage.redis.records import RedisRecordsStatements
from threadline.storage.redis.tags import RedisTagStatements
from threadline.storage.redis.threads import (
    delete_thread, drop_empty_thread, ensure_thread, restat_thread, set_thread_ttl, thread_row, touch_read,
)
from threadline.storage.redis.transfer import RedisTransferStatements
from threadline.storage.redis.web import RedisWebStatements
from threadline.storage.redis.writes import (
    channel_writes, checkpoints_writing, delete_writes, insert_writes, thread_write_keys, thread_write_sizes, thread_writes,
    writes_by_keys, writes_by_write_keys,
)
from threadline.storage.schema import MIGRATIONS

# --- schema ---------------------------------------------------------------------------------


def tables(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [("threadline_migrations",)] if (yield [("EXISTS", d.migrations_key)])[0] else []


def applied_migrations(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return [(int(v),) for v in (yield [("HKEYS", d.migrations_key)])[0]]


def record_migration(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    yield [("HSET", d.migrations_key, params[0], params[1])]
    return []


def nothing(d: RedisDialect, params: Sequence[Any], many: bool) -> Generator:
    return []
    yield  # a generator


class RedisDialect(
    RedisRecordsStatements, RedisReadsStatements, RedisLifecycleStatements, RedisLeaseStatements, RedisTransferStatements,
    RedisWebStatements, RedisTagStatements, Dialect,
):
    """The named statements on Redis under a key ``prefix``."""

    offloads = False  # no object sweep statements (storage/dialect/objects.py): offload is SQL only

    name = "redis"
    types: dict[str, str] = {}
    max_params = 1 << 20
    setup_lock = None
    official_tables = ("\x00none",)  # no official saver shares these keys: nothing to adopt
    migrates_parent_sends = False
    echoes_config = False
    replaced_write_columns = ()
    reput_sets_parent = True  # the official RedisSaver writes a checkpoint put again whole
    prune_refuses_delta_threads = False
    single_node = False  # set by the saver once its client is known not to be a cluster's
    keeps_json_text = True  # a checkpoint row keeps its JSON texts as written (``codec.seal``'s ``x3:``)

    def __init__(self, prefix: str = "threadline") -> None:
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "{}\x00"):
            raise ValueError(f"key prefix must be a non-empty string without braces or NUL, got {prefix!r}")
        self.prefix = prefix
        self.index = f"{prefix}:threads"
        self.migrations_key = f"{prefix}:migrations"

    def keys(self, thread_id: str) -> L.ThreadKeys:
        return L.thread_keys(self.prefix, thread_id)

    # statements with parameters in their name (the SQL dialects' methods)
    def put_statement(self, blobs: int, fenced: bool = False) -> Cmd:
        return Cmd(put_checkpoint, (blobs, fenced) if fenced else (blobs,), "put")

    def get_statement(self, latest: bool, held: bool = False) -> Cmd:  # type: ignore[override]  # no heads: ``held`` is never set
        return GET_LATEST if latest else GET_CHECKPOINT

    def insert_writes(self, replace: bool, live: bool = False, fenced: int = 0, returning: bool = True) -> Cmd:  # type: ignore[override]
        return Cmd(insert_writes, (replace, live, fenced, returning), "insert_writes")

    def writes_by_keys(self, count: int, channel: bool = False) -> Cmd:
        return Cmd(writes_by_keys, (channel,), "writes_by_keys")

    def channel_writes(self, checkpoints: int, channels: int) -> Cmd:
        return Cmd(channel_writes, (checkpoints,), "channel_writes")

    def list_where(self, selection: Any) -> tuple[Any, list[Any]]:
        if selection.filter:
            check_filter(selection.filter)
            split_filter(selection.filter)  # FilterError for an unknown operator before anything runs
            try:
                json.dumps(dict(selection.filter))
            except (TypeError, ValueError) as exc:
                raise FilterError(f"metadata filter cannot be matched: {exc}") from exc
        return selection, []

    def list_checkpoints(self, where: Any, after: bool) -> Cmd:
        return Cmd(list_checkpoints, (where, after), "list_checkpoints")

    def migrations(self) -> list[tuple[int, list[str]]]:
        return [(v, []) for v, _ in MIGRATIONS]

    def create_migrations_table(self) -> Cmd:  # type: ignore[override]
        return NOTHING

    def delete_by_keys(self, table: str, key: Sequence[str]) -> None:
        return None

    def blob_chains(self, count: int) -> Cmd:  # type: ignore[override]
        return BLOB_CHAINS

    def blob_sizes_by_keys(self, count: int) -> Cmd:  # type: ignore[override]
        return BLOB_SIZES

    def blobs_with_value(self, count: int) -> Cmd:  # type: ignore[override]
        return BLOBS_WITH_VALUE

    def writes_by_write_keys(self, count: int) -> Cmd:  # type: ignore[override]
        return WRITES_BY_WRITE_KEYS

    def checkpoints_of_runs(self, count: int) -> Cmd:  # type: ignore[override]
        return CHECKPOINTS_OF_RUNS

    def restat_thread(self) -> Cmd:  # type: ignore[override]
        return RESTAT_THREAD

    def thread_blob_sizes(self) -> Cmd:  # type: ignore[override]
        return THREAD_BLOB_SIZES

    def thread_write_sizes(self) -> Cmd:  # type: ignore[override]
        return THREAD_WRITE_SIZES


NOTHING = statement(nothing)
GET_LATEST = Cmd(get_checkpoint, (True,), "get_latest")
GET_CHECKPOINT = Cmd(get_checkpoint, (False,), "get_checkpoint")
BLOB_CHAINS = statement(blob_chains)
BLOB_SIZES = statement(blob_sizes_by_keys)
BLOBS_WITH_VALUE = statement(blobs_with_value)
WRITES_BY_WRITE_KEYS = statement(writes_by_write_keys)
CHECKPOINTS_OF_RUNS = statement(checkpoints_of_runs)
RESTAT_THREAD = statement(restat_thread)
THREAD_BLOB_SIZES = statement(thread_blob_sizes)
THREAD_WRITE_SIZES = statement(thread_write_sizes)

# the named statements that are attributes on the SQL dialects
for _name, _fn in {
    "tables_sql": tables,
    "APPLIED_MIGRATIONS": applied_migrations,
    "RECORD_MIGRATION": record_migration,
    "CHECKPOINT": checkpoint,
    "LATEST_CHECKPOINT": latest_checkpoint,
    "LATEST_CHECKPOINT_ID": latest_checkpoint_id,
    "CHECKPOINT_DOC": checkpoint_column(4),
    "CHECKPOINT_PARENT": checkpoint_column(3),
    "THREAD_DOCS": thread_docs,
    "THREAD_CHECKPOINTS": thread_checkpoints,
    "THREAD_CHECKPOINT_ROWS": thread_checkpoint_full_rows,
    "HAS_CHECKPOINTS": has_checkpoints,
    "ANCESTORS": ancestors,
    "SET_PARENT": set_parent,
    "SET_CHECKSUM": set_checksum,
    "SET_CHECKPOINT_DOC": set_checkpoint_doc,
    "SET_CREATED_AT": set_created_at,
    "SET_METADATA": set_metadata,
    "DELETE_CHECKPOINT": delete_checkpoint,
    "INSERT_CHECKPOINT_ROW": insert_checkpoint_rows,
    "INSERT_BLOB": insert_blobs,
    "THREAD_BLOBS": thread_blobs,
    "THREAD_BLOB_BASES": thread_blob_bases,
    "THREAD_BLOBS_LIKE": thread_blobs_like,
    "THREAD_BLOBS_NOT_OF_TYPE": thread_blobs_not_of_type,
    "SET_BLOB_VALUE": set_blob_value,
    "DELETE_BLOB": delete_blob,
    "DELETE_WRITES": delete_writes,
    "THREAD_WRITES": thread_writes,
    "THREAD_WRITE_KEYS": thread_write_keys,
    "CHECKPOINTS_WRITING": checkpoints_writing,
    "THREAD": thread_row,
    "DROP_EMPTY_THREAD": drop_empty_thread,
    "SET_THREAD_TTL": set_thread_ttl,
    "TOUCH_READ": touch_read,
}.items():
    setattr(RedisDialect, _name, statement(_fn))
RedisDialect.DELETE_THREAD = (statement(delete_thread),)  # type: ignore[assignment]
RedisDialect.ENSURE_THREAD = Cmd(ensure_thread, (False,), "ENSURE_THREAD")  # type: ignore[assignment]
RedisDialect.ENSURE_COPIED_THREAD = Cmd(ensure_thread, (True,), "ENSURE_COPIED_THREAD")  # type: ignore[assignment]
