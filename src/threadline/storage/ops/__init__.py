"""Every storage operation, written once as a sans-IO generator.

An operation yields ``Q`` (SQL with ``?`` placeholders and its parameters, the SQL
named by the ``Dialect``) and is sent back the rows the statement returned (``[]``
for none). A runner (``runner.drive`` / ``runner.adrive``) executes the queries on
a sqlite3, aiosqlite or psycopg connection inside one transaction per operation,
so the logic below is shared by every backend, sync and async.
"""

from threadline.storage.ops.base import PAGE_SIZE, Op, Q, T, chunks, flat
from threadline.lazy import lazy_names

# Every operation loads on first use (issue 44: the import no slower than the official saver's).
# A saver loads the put and get paths and the schema's when it is constructed
# (``EngineSaver.__init__``), so its first put or get pays no import; whole-thread maintenance
# and the delta history load when first called.
_MAINTAIN = (
    "DELTA_KEYS", "PRUNE_STRATEGIES", "copy_referenced_items", "copy_thread", "delete_checkpoints", "delete_for_runs",
    "delete_keys", "delete_thread", "gc_blobs", "open_ref", "prune", "reseal_blob", "restat", "set_parents", "thread_ids_of",
)
_READ = ("fetch_blob_rows", "fetch_blobs", "get_tuple", "list_page", "list_where", "load_tuples", "open_blob_rows", "splice_refs")
__getattr__ = lazy_names(globals(), {
    **dict.fromkeys(_READ, "threadline.storage.ops.read"),
    **dict.fromkeys(("SchemaState", "schema_state", "setup"), "threadline.storage.ops.schema"),
    **dict.fromkeys(("put", "put_writes"), "threadline.storage.ops.write"),
    **dict.fromkeys(_MAINTAIN, "threadline.storage.ops.maintain"),
    "delta_channel_history": "threadline.storage.ops.delta_history",
})

__all__ = [
    "DELTA_KEYS",
    "PAGE_SIZE",
    "PRUNE_STRATEGIES",
    "Op",
    "Q",
    "SchemaState",
    "T",
    "chunks",
    "copy_referenced_items",
    "copy_thread",
    "delete_checkpoints",
    "delete_for_runs",
    "delete_keys",
    "delete_thread",
    "delta_channel_history",
    "fetch_blob_rows",
    "fetch_blobs",
    "flat",
    "gc_blobs",
    "get_tuple",
    "list_page",
    "list_where",
    "load_tuples",
    "open_blob_rows",
    "open_ref",
    "prune",
    "put",
    "put_writes",
    "reseal_blob",
    "splice_refs",
    "restat",
    "schema_state",
    "set_parents",
    "setup",
    "thread_ids_of",
]
