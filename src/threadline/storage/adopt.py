"""Adopting threads of LangGraph's official savers: read their tables, store them as threadline's.

A threadline saver opened on a database that also holds the official saver's tables
(``checkpoints``/``writes`` of ``SqliteSaver``; ``checkpoints``/``checkpoint_blobs``/
``checkpoint_writes`` of ``PostgresSaver``) serves those threads too. When a read
names a thread (``get_tuple``, ``list`` with a thread_id, ``delete_thread``,
``copy_thread``, ``prune``; ``list(None, …)`` names every thread ``unadopted_op``
finds), ``pending`` asks — one indexed query — whether the
official tables have a checkpoint of it newer than what threadline adopted, and
threadline has written none of its own since (``progress_op``: the official rows carry
no seal, so they never override a thread threadline wrote); if so,
``adopt_thread`` imports the newer checkpoints with their values and pending writes
(the writes of the last adopted checkpoint again, insert-or-ignore), in one
transaction, verifies every imported checkpoint against the official rows, and moves
the thread's marker in ``threadline_adopted``. The official rows are never changed.

Adopted checkpoints keep the time they were written (``written_at``: their ``ts``, else their
uuid6 id's), and so does the thread's index row. ``adopt_records_op`` stores a thread's records
on any database: the read-only view of a thread not adopted yet
(``threadline.transfer.official.thread_view``) runs it on a private in-memory one.

The same reading serves ``threadline import`` (``threadline.transfer.official.import_langgraph``).
Every stored value is copied through ``codec.serde.transfer_serde``: nothing named by
a stored row is constructed (never the official saver's serializer), and each value is
written back byte for byte, to be decoded later by the graph under the saver's policy.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.types import TASKS
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.errors import AdoptionError, CorruptRowError
from threadline.keys import config_of, key_of, thread_id_of
from threadline.lazy import LazyModule

serdes = LazyModule("threadline.codec.serde")  # LangGraph's serializer loads when a thread is adopted


@dataclass
class Record:
    """One official checkpoint as the official saver would return it (before LangGraph's
    v4 pending-sends migration), with its pending writes as (task_id, idx, channel, task_path, value)."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    writes: list[tuple[str, int, str, str, Any]] = field(default_factory=list)


def progress_op(d: Dialect, thread_id: str) -> Op[tuple[str | None, str | None] | None]:
    """(newest official checkpoint_id of the thread, checkpoint_id threadline adopted up to), or None
    when there is nothing to adopt: no official checkpoint newer than the marker, or a thread
    threadline wrote itself — one it holds checkpoints of newer than what it adopted. The official
    rows carry no seal, so they never override (or extend) a thread threadline's own rows hold."""
    latest, adopted, own = (yield Q(d.OFFICIAL_PROGRESS, (thread_id, thread_id, thread_id)))[0]
    if latest is None or (adopted is not None and latest <= adopted):
        return None
    if own is not None and (adopted is None or own > adopted):
        return None
    return latest, adopted


def view_progress_op(d: Dialect, thread_id: str, threadline: bool) -> Op[tuple[str | None, str | None] | None]:
    """``progress_op`` on a database that may hold no threadline tables (``threadline`` False: an
    official saver's database, every official checkpoint still to adopt). Read-only."""
    if threadline:
        return (yield from progress_op(d, thread_id))
    latest = (yield Q(d.OFFICIAL_LATEST, (thread_id,)))[0][0]
    return None if latest is None else (latest, None)


def pending(d: Dialect, thread_id: Any) -> Op[bool]:
    """Whether the official tables hold checkpoints of ``thread_id`` to adopt (read-only, ``progress_op``)."""
    return (yield from progress_op(d, thread_id_of(thread_id))) is not None


def official_thread_ids_op(d: Dialect) -> Op[list[str]]:
    return [r[0] for r in (yield Q(d.OFFICIAL_THREAD_IDS))]


def read_thread_op(d: Dialect, serde: SerializerProtocol, thread_id: str, after: str = "") -> Op[list[Record]]:
    """The official checkpoints of a thread with checkpoint_id > ``after`` (oldest first), with
    their channel values and the pending writes of checkpoints from ``after`` on.

    Raises CorruptRowError for a row that cannot be decoded (pickle included)."""
    rows = yield Q(d.OFFICIAL_CHECKPOINTS, (thread_id, after))
    records: list[Record] = []
    for ns, cid, parent, tag, ck, meta in rows:
        where = f"official checkpoint ({thread_id!r}, {ns!r}, {cid!r})"
        if isinstance(ck, dict):  # PostgresSaver: JSON without the values kept in blobs
            checkpoint = dict(ck)
        else:
            checkpoint = codec.decode(serde, tag, bytes(ck), where)
        metadata = meta if isinstance(meta, dict) else _load_metadata(meta, where)
        if not isinstance(checkpoint, dict) or not isinstance(metadata, dict):
            raise CorruptRowError(f"{where}: checkpoint or metadata is not a mapping")
        records.append(Record(ns, cid, parent, checkpoint, metadata))
    if d.official_blobs_table:
        yield from _attach_blobs(d, serde, thread_id, records)
    by_id = {(r.checkpoint_ns, r.checkpoint_id): r for r in records}
    extra: dict[tuple[str, str], Record] = {}
    for ns, cid, task_id, idx, channel, tag, blob, task_path in (yield Q(d.official_writes_sql, (thread_id, after))):
        where = f"official write ({thread_id!r}, {ns!r}, {cid!r}, {task_id!r}, {idx})"
        value = codec.decode(serde, tag, None if blob is None else bytes(blob), where)
        target = by_id.get((ns, cid))
        if target is None:  # writes of the last adopted checkpoint, added since
            target = extra.setdefault((ns, cid), Record(ns, cid, None, {}, {}))
        target.writes.append((task_id, int(idx), channel, task_path or "", value))
    if d.migrates_parent_sends:
        _migrate_parent_sends(records, by_id)
    return records + list(extra.values())


def _migrate_parent_sends(records: list[Record], by_id: dict[tuple[str, str], Record]) -> None:
    """Give LangGraph < v4 checkpoints their parent's TASKS writes as the TASKS channel, as
    the official PostgresSaver returns them, so the stored thread reads back the same on
    every backend."""
    for r in records:
        parent = by_id.get((r.checkpoint_ns, r.parent_checkpoint_id or ""))
        if parent is None or not R.needs_parent_sends(r.parent_checkpoint_id, r.checkpoint):
            continue
        sends = [w[4] for w in sorted(parent.writes, key=lambda w: (w[3], w[0], w[1])) if w[2] == TASKS]
        if sends:
            versions = r.checkpoint.setdefault("channel_versions", {})
            r.checkpoint["channel_values"] = {**r.checkpoint.get("channel_values", {}), TASKS: sends}
            versions[TASKS] = max(versions.values()) if versions else R.next_version(None)


def _load_metadata(raw: Any, where: str) -> Any:
    if raw is None:
        return {}
    try:
        return json.loads(bytes(raw) if not isinstance(raw, str) else raw)
    except ValueError as exc:
        raise CorruptRowError(f"{where}: metadata is not JSON ({exc})") from exc


def _attach_blobs(d: Dialect, serde: SerializerProtocol, thread_id: str, records: list[Record]) -> Op[None]:
    """PostgresSaver keeps non-primitive channel values in its blobs table, by (channel, version)."""
    keys = sorted({(r.checkpoint_ns, ch, str(v)) for r in records for ch, v in (r.checkpoint.get("channel_versions") or {}).items()})
    values: dict[tuple[str, str, str], Any] = {}
    for part in ops.chunks(keys, d.max_params // 3 - 1):
        found = yield Q(d.official_blobs(len(part)), [*ops.flat(part), thread_id])
        for ns, ch, v, tag, blob in found:
            if tag != codec.EMPTY:
                where = f"official blob ({thread_id!r}, {ns!r}, {ch!r}, {v!r})"
                values[(ns, ch, v)] = codec.decode(serde, tag, None if blob is None else bytes(blob), where)
    for r in records:
        inline = dict(r.checkpoint.get("channel_values") or {})
        for ch, v in (r.checkpoint.get("channel_versions") or {}).items():
            if (r.checkpoint_ns, ch, str(v)) in values:
                inline[ch] = values[(r.checkpoint_ns, ch, str(v))]
        r.checkpoint["channel_values"] = inline


def written_at(record: Record, default: float) -> float:
    """When the official saver wrote a checkpoint (epoch seconds): its ``ts``, else the time its
    uuid6 id holds (``rows.id_time``), else ``default``."""
    try:
        return _dt.datetime.fromisoformat(str(record.checkpoint.get("ts"))).timestamp()
    except (TypeError, ValueError):
        found = R.id_time(record.checkpoint_id)
        return default if found is None else found


def store_op(
    d: Dialect, serde: SerializerProtocol, thread_id: str, records: Sequence[Record], bc: codec.BlobCodec | None = None
) -> Op[tuple[int, int]]:
    """Store official records (oldest first) as threadline checkpoints and writes: each value
    once per (channel, version), as a delta where it extends its parent's. Returns
    (checkpoints, writes) stored. Writes keep their task_id, idx and task_path."""
    stored = {tuple(r[:3]) for r in (yield Q(d.THREAD_BLOB_BASES, (thread_id,)))}
    now = time.time()
    n_ck = n_w = 0
    for rec in records:
        created = written_at(rec, now)
        if rec.checkpoint:
            versions = rec.checkpoint.get("channel_versions") or {}
            new_versions = {ch: v for ch, v in versions.items() if (rec.checkpoint_ns, ch, R.version_key(v)) not in stored}
            stored |= {(rec.checkpoint_ns, ch, R.version_key(v)) for ch, v in new_versions.items()}
            conf = {"thread_id": thread_id, "checkpoint_ns": rec.checkpoint_ns}
            if rec.parent_checkpoint_id:
                conf["checkpoint_id"] = rec.parent_checkpoint_id
            yield from ops.put(d, serde, {"configurable": conf}, rec.checkpoint, rec.metadata, new_versions, bc, absent=())  # every version it names is stored by now
            yield Q(d.SET_CREATED_AT, (created, thread_id, rec.checkpoint_ns, rec.checkpoint_id))
            n_ck += 1
        key = key_of(config_of(thread_id, rec.checkpoint_ns, rec.checkpoint_id))
        rows = [R.write_row(serde, key, channel, value, task_id, idx, task_path, created, bc or codec.PLAIN)
                for task_id, idx, channel, task_path, value in rec.writes]
        if rows:
            yield Q(d.insert_writes(replace=False), rows, many=True)
            n_w += len(rows)
    return n_ck, n_w


def verify_op(
    d: Dialect, serde: SerializerProtocol, thread_id: str, records: Sequence[Record], bc: codec.BlobCodec | None = None
) -> Op[list[str]]:
    """Differences between the official records and what threadline now returns for them:
    parent, checkpoint (values, versions, versions_seen, …), metadata and pending writes,
    as the official saver returns them (LangGraph < v4 pending sends included). Empty: identical."""
    wanted = [r for r in records if r.checkpoint]
    if not wanted:
        return []
    found = []
    for part in ops.chunks([(thread_id, r.checkpoint_ns, r.checkpoint_id) for r in wanted], d.max_params // 3):
        found += yield Q(d.checkpoints_by_keys(len(part)), ops.flat(part))
    got = {(t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"]): t
           for t in (yield from ops.load_tuples(d, serde, found, bc))}
    out = []
    for r in wanted:
        t = got.get((r.checkpoint_ns, r.checkpoint_id))
        name = f"checkpoint ({r.checkpoint_ns!r}, {r.checkpoint_id!r})"
        if t is None:
            out.append(f"{name} was not stored")
            continue
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        writes = sorted(((w[0], w[2], w[4]) for w in r.writes), key=lambda w: (w[0], w[1], repr(w[2])))
        got_writes = sorted(t.pending_writes or [], key=lambda w: (w[0], w[1], repr(w[2])))
        for what, a, b in (("parent", r.parent_checkpoint_id, parent), ("checkpoint", r.checkpoint, t.checkpoint),
                           ("metadata", r.metadata, t.metadata), ("pending writes", writes, got_writes)):
            if a != b:
                out.append(f"{name}: {what} differs")
    return out


def adopt_thread(d: Dialect, thread_id: Any, bc: codec.BlobCodec | None = None) -> Op[int]:
    """Import the thread's official checkpoints newer than its marker, verify them and move
    the marker, in the caller's one transaction. Returns the checkpoints adopted. Values are
    copied through ``transfer_serde`` (nothing stored is constructed).

    Raises AdoptionError (nothing stored: the transaction rolls back) when a stored
    checkpoint does not read back as the official one; CorruptRowError for an official
    row that cannot be decoded."""
    tid = thread_id_of(thread_id)
    progress = yield from progress_op(d, tid)
    if progress is None:
        return 0  # another worker adopted it first, or threadline wrote to it since
    latest, adopted = progress
    records = yield from read_thread_op(d, serdes.transfer_serde(), tid, adopted or "")
    return (yield from adopt_records_op(d, tid, records, latest, bc))


def adopt_records_op(d: Dialect, thread_id: str, records: Sequence[Record], latest: str, bc: codec.BlobCodec | None = None) -> Op[int]:
    """Store a thread's official ``records`` (``read_thread_op``) as adoption stores them, verify
    them and move the thread's marker to ``latest``, in the caller's one transaction: the tail of
    ``adopt_thread``, also run on another database than the official rows' (a read-only view of
    a thread not adopted yet). Returns the checkpoints stored. AdoptionError as ``adopt_thread``."""
    serde = serdes.transfer_serde()
    n, _ = yield from store_op(d, serde, thread_id, records, bc)
    problems = yield from verify_op(d, serde, thread_id, records, bc)
    if problems:
        raise AdoptionError(
            f"thread {thread_id!r} could not be adopted from the official saver's tables: {'; '.join(problems[:3])}. "
            "Nothing was stored and the official rows are unchanged; open the saver with adopt=False to serve "
            "threadline's tables only"
        )
    yield Q(d.MARK_ADOPTED, (thread_id, latest, time.time()))
    if n:  # the thread was written when its checkpoints were, not when threadline first read it
        yield Q(d.RETIME_THREAD, (thread_id, thread_id, thread_id))
    return n


def unadopted_op(d: Dialect) -> Op[list[str]]:
    """The thread_ids with official checkpoints to adopt (``progress_op``), by thread_id. Read-only."""
    return [r[0] for r in (yield Q(*d.unadopted_threads(True)))]


__all__ = [
    "Record",
    "adopt_records_op",
    "adopt_thread",
    "official_thread_ids_op",
    "pending",
    "read_thread_op",
    "store_op",
    "unadopted_op",
    "verify_op",
    "view_progress_op",
    "written_at",
]
