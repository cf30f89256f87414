"""Every storage operation, written once as a sans-IO generator.

An operation yields ``Q`` (SQL with ``?`` placeholders and its parameters) and is
sent back the rows the statement returned (``[]`` for none). A runner
(``runner.drive`` / ``runner.adrive``) executes the queries on a sqlite3,
aiosqlite or psycopg connection inside one transaction per operation, so the
logic below is shared by every backend, sync and async.
"""

from threadline.storage.ops.base import (
    BLOB_KEY,
    MAX_CHAIN_DEPTH,
    PAGE_SIZE,
    WRITE_SELECT,
    Op,
    Q,
    T,
    _json,
    chunks,
    flat,
    join_keys,
    next_version,
    placeholders,
    values_list,
)
from threadline.storage.ops.delta_history import delta_channel_history
from threadline.storage.ops.maintain import (
    DELTA_KEYS,
    PRUNE_STRATEGIES,
    _forget,
    copy_thread,
    delete_checkpoints,
    delete_for_runs,
    delete_thread,
    gc_blobs,
    prune,
    restat,
    thread_ids_of,
)
from threadline.storage.ops.read import (
    _remember,
    fetch_blob_rows,
    fetch_blobs,
    get_tuple,
    list_page,
    list_where,
    load_tuples,
)
from threadline.storage.ops.schema import SchemaState, schema_state, setup
from threadline.storage.ops.write import (
    _INSERT_BLOBS,
    _UPSERT_THREAD,
    _count_stored,
    _delta_bases,
    _insert_guarded,
    put,
    put_writes,
)
from threadline.keys import key_of

__all__ = [
    "BLOB_KEY",
    "DELTA_KEYS",
    "MAX_CHAIN_DEPTH",
    "PAGE_SIZE",
    "PRUNE_STRATEGIES",
    "WRITE_SELECT",
    "_INSERT_BLOBS",
    "_UPSERT_THREAD",
    "Op",
    "Q",
    "SchemaState",
    "T",
    "_count_stored",
    "_delta_bases",
    "_forget",
    "_insert_guarded",
    "_json",
    "_remember",
    "chunks",
    "copy_thread",
    "delete_checkpoints",
    "delete_for_runs",
    "delete_thread",
    "delta_channel_history",
    "fetch_blob_rows",
    "fetch_blobs",
    "flat",
    "gc_blobs",
    "get_tuple",
    "join_keys",
    "key_of",
    "list_page",
    "list_where",
    "load_tuples",
    "next_version",
    "placeholders",
    "prune",
    "put",
    "put_writes",
    "restat",
    "schema_state",
    "setup",
    "thread_ids_of",
    "values_list",
]
