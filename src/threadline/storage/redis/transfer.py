"""The named statements of ``threadline.transfer`` on Redis: the names, parameters and rows of
``storage/dialect/transfer.py``, each a handler (``storage/redis/base.py``).

A thread's rows are those of the SQL tables, read from and written to its keys (``layout``):
``threads`` is its ``th`` hash, ``checkpoints`` its ``ck`` hash (and ``ids``), ``blobs`` its
``bl`` hash, ``writes`` its ``wr`` hash (and ``wix``, kept by the engine's writes script). So
backup, restore and bundles copy between Redis and the SQL backends column for column, values
as stored (never decoded). A thread's keys get its TTL again once written (``expire``): the one
it was written under where it came from (``ttl_minutes``, ``default_ttl``), none if it had none.
The archive statements (``VACUUM_INTO``, ``QUICK_CHECK`` …) run on archives, which are SQLite
files, never on Redis.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis import layout as L
from threadline.storage.redis.records import FIELDS as RECORD_FIELDS, record_rows
from threadline.storage.redis.lifecycle import NOTHING
from threadline.storage.redis.base import (
    Cmd, all_threads, ck_row, expire_thread, group, rows_of, statement, text, thread_blobs_of, thread_checkpoint_rows, thread_writes_of,
)

# The columns of each table, as the SQL schema names them; a Redis row has all of them.
COLUMNS = {
    "threads": ("thread_id", "created_at", "updated_at", "checkpoint_count", "bytes", "ttl_minutes", "accessed_at", "default_ttl"),
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata", "step", "source",
                    "run_id", "created_at", "checksum"),
    "blobs": ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob", "base_version"),
    "writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "task_path", "type", "blob", "created_at"),
    "thread_records": ("thread_id", "metadata", "archived", "created_at", "updated_at"),
    "leases": ("thread_id", "holder", "acquired_at", "expires_at", "token"),  # the guard's (never backed up: not a thread's data)
}
# the ``th`` fields of the threads table's columns after thread_id
TH_FIELDS = ("created", "updated", "count", "bytes", "ttl", "accessed", "dttl")
_TH_TYPES = (float, float, int, int, float, float, float)
_TABLE = "threadline_"


def columns(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """(table name) → its column names (none for a table Redis does not have)."""
    name = params[0]
    return [(c,) for c in COLUMNS.get(name[len(_TABLE):], ())] if name.startswith(_TABLE) else []
    yield  # a generator


def thread_ids(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """Every thread of the index whose keys are there (not expired), in order."""
    ids = yield from all_threads(d)
    found = (yield [("EXISTS", d.keys(t).th) for t in ids]) if ids else []
    return [(t,) for t, there in sorted(zip(ids, found)) if there]


def _full_rows(d: Any, table: str, tid: str) -> Generator:
    """Every row of ``table`` for the thread, all its ``COLUMNS``."""
    if table == "threads":
        row = (yield [("HMGET", d.keys(tid).th, *TH_FIELDS)])[0]
        if row[0] is None:
            return []
        return [(tid, *(None if v is None else kind(text(v)) for kind, v in zip(_TH_TYPES, row)))]
    if table == "checkpoints":
        return [(tid, ns, cid, parent, doc, meta, step, source, run_id, created, checksum)
                for ns, cid, parent, doc, meta, step, source, run_id, created, checksum in (yield from thread_checkpoint_rows(d, (tid,), False))]
    if table == "thread_records":
        found = yield from record_rows(d, [tid])
        return [(tid, *found[tid])] if found else []
    if table == "blobs":
        return (yield from thread_blobs_of(d, tid))
    return (yield from thread_writes_of(d, tid))


def thread_table_rows(d: Any, params: Sequence[Any], many: bool, table: str, wanted: Sequence[str]) -> Generator:
    at = [COLUMNS[table].index(c) for c in wanted]
    return [tuple(r[i] for i in at) for r in (yield from _full_rows(d, table, params[0]))]


def insert_table_rows(d: Any, params: Sequence[Any], many: bool, table: str, given: Sequence[str]) -> Generator:
    """Rows of ``given`` columns (the others: NULL) written to their threads' keys, then the threads' TTL set."""
    full = [dict(zip(given, r)) for r in rows_of(params, many)]
    rows = [tuple(r.get(c) for c in COLUMNS[table]) for r in full]
    if table == "writes":
        cmd = d.insert_writes(False)  # the engine's script: the writes and their index (wix)
        yield from cmd.handler(d, rows, True, *cmd.bound)
        return []
    cmds: list = []
    for r in rows:
        k = d.keys(r[0])
        if table == "thread_records":
            cmds.append(("HSET", k.rec, *[x for f, v in zip(RECORD_FIELDS, r[1:]) if v is not None for x in (f, v)]))
        elif table == "threads":
            cmds += [("HSET", k.th, *[x for f, v in zip(TH_FIELDS, r[1:]) if v is not None for x in (f, v)]), ("ZADD", d.index, r[2], r[0])]
        elif table == "checkpoints":
            f = L.field(r[1], r[2])
            cmds += [("HSET", k.ck, f, L.pack_checkpoint(r[3:])), ("ZADD", k.ids, 0, f)]
        else:
            cmds.append(("HSET", k.bl, L.field(*r[1:4]), L.pack_blob(r[4], r[5], r[6])))
    cmds += [expire_thread(d, t) for t in dict.fromkeys(r[0] for r in rows)]
    yield cmds
    return []


def export_checkpoints(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid = params[0]
    rows = sorted((yield from thread_checkpoint_rows(d, (tid,), False)), key=lambda r: (r[0], r[1]))
    return [(tid, ns, cid, parent, step, source, run_id, created, meta, doc, len(doc.encode()) + len(meta.encode()))
            for ns, cid, parent, doc, meta, step, source, run_id, created, _ in rows]


def export_writes(d: Any, params: Sequence[Any], many: bool, values: bool) -> Generator:
    rows = sorted((yield from thread_writes_of(d, params[0])), key=lambda w: (w[1], w[2], w[9], w[6], w[3], w[4]))
    return [(*w[:8], len(w[8] or b""), w[9], *((w[8],) if values else ())) for w in rows]


def export_blobs(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """From ``thread_blob_sizes`` (checkpoint_ns, channel, version, type, base_version, stored bytes)."""
    tid = params[0]
    cmd = d.thread_blob_sizes()
    found = yield from cmd.handler(d, params, False, *cmd.bound)
    return sorted((tid, ns, ch, v, type_, size, base) for ns, ch, v, type_, base, size in found)


def retime_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """RETIME_THREAD: created and updated from the thread's oldest and newest checkpoint."""
    tid = params[0]
    times = [float(r[8]) for r in (yield from thread_checkpoint_rows(d, (tid,), False))]
    if times and (yield [("EXISTS", d.keys(tid).th)])[0]:
        yield [("HSET", d.keys(tid).th, "created", min(times), "updated", max(times)), ("ZADD", d.index, max(times), tid)]
    return []


def checkpoints_by_keys(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """``checkpoints_by_keys`` (the import's verification): CHECKPOINT_COLUMNS of the stored ones of the keys."""
    keys = group(params, 3)
    found = yield [("HGET", d.keys(t).ck, L.field(ns, cid)) for t, ns, cid in keys]
    return [(t, ns, cid, *(r := ck_row(t, ns, cid, raw))[:3], r[7]) for (t, ns, cid), raw in zip(keys, found) if raw is not None]


EXPORT_CHECKPOINTS = statement(export_checkpoints)
EXPORT_BLOBS = statement(export_blobs)
THREAD_IDS = statement(thread_ids)
CHECKPOINTS_BY_KEYS = statement(checkpoints_by_keys)


class RedisTransferStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""

    rolls_back = False
    columns_sql = statement(columns)  # type: ignore[assignment]
    RETIME_THREAD = statement(retime_thread)
    DELETE_ADOPTED = NOTHING  # no official saver shares these keys: nothing was adopted

    def checkpoints_by_keys(self, count: int) -> Cmd:  # type: ignore[override]
        return CHECKPOINTS_BY_KEYS

    def thread_ids_in(self, tables: Sequence[str]) -> Cmd:  # type: ignore[override]
        return THREAD_IDS

    def thread_table_rows(self, table: str, columns: Sequence[str]) -> Cmd:  # type: ignore[override]
        return Cmd(thread_table_rows, (table, tuple(columns)), f"thread_table_rows({table})")

    def insert_table_rows(self, table: str, columns: Sequence[str]) -> Cmd:  # type: ignore[override]
        return Cmd(insert_table_rows, (table, tuple(columns)), f"insert_table_rows({table})")

    def export_checkpoints(self) -> Cmd:  # type: ignore[override]
        return EXPORT_CHECKPOINTS

    def export_writes(self, values: bool) -> Cmd:  # type: ignore[override]
        return Cmd(export_writes, (values,), "export_writes")

    def export_blobs(self) -> Cmd:  # type: ignore[override]
        return EXPORT_BLOBS
