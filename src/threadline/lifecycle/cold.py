"""The cold tier (docs/offload.md, "Cold threads"): threads idle longer than an age moved whole
to the object store as one compressed, sealed archive, their rows replaced by a stub
(``threadline_cold``), and brought back on the first read or write.

* ``tier(saver, idle_seconds, dry_run=)`` — for each thread whose last put and last read are
  older than ``idle_seconds``: its rows are read (offloaded values inlined, ``lifecycle.inline``),
  packed (msgpack of every table's rows), compressed (zstd) and sealed to the thread
  (``Row("cold", (thread_id,))``: a checksum, or AES-256-GCM with the saver's keys), written to
  ``cold/<thread hash>-<payload hash>``; then, in one transaction that checks the thread did not
  change meanwhile, its rows are deleted and its stub inserted. A crash before that commit
  leaves an object no stub names, which the object sweep deletes (``lifecycle.objects``).
* ``warm_op`` — the restore, run by the saver on a ``get_tuple`` that found nothing, a
  ``list`` of one thread, a ``put`` whose parent it has not cached: the stub is deleted
  (``DELETE … RETURNING``: of concurrent first reads one transaction gets it, the others wait
  for its commit and then read the restored rows), the archive fetched, checked and its rows
  inserted and read back, in that one transaction; the archive object is left to the sweep.
  A missing or damaged archive is a ``CorruptRowError`` and the stub stays.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ormsgpack

from threadline import codec
from threadline.codec.objects import PREFIX
from threadline.codec.seal import GCM, MAGIC, SUM, Row, open_sealed, seal
from threadline.errors import ConfigError, CorruptRowError
from threadline.keys import thread_id_of
from threadline.lifecycle.inline import inliner, offloaded
from threadline.lifecycle.jobs import Job, run_job
from threadline.lifecycle.thread_rows import Rows, columns_op, store_thread_op, thread_rows_op
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.storage.schema import table

COLD = PREFIX + "cold/"
_TAG = "cold-archive"


def _store(bc: codec.BlobCodec, d: Dialect) -> Any:
    if not d.offloads:  # first: the environment's store is left out on such a backend (``open_saver``)
        raise ConfigError(f"the cold tier is not supported on {d.name} (SQLite and Postgres only)")
    store = bc.offload.objects if bc.offload is not None else None
    if store is None:
        raise ConfigError("the cold tier needs an object store: Offload(store=…) or THREADLINE_OFFLOAD (docs/offload.md)")
    return store


def pack(bc: codec.BlobCodec, thread_id: str, rows: Rows) -> tuple[str, bytes]:
    """(object name, sealed archive bytes) of a thread's rows."""
    raw = ormsgpack.packb({"v": 1, "thread_id": thread_id, "rows": {t: [c, [list(r) for r in data]] for t, (c, data) in rows.items()}})
    tag, payload = codec.compress(_TAG, raw, min_bytes=0)
    sealed = seal(bc.keys, Row("cold", (thread_id,)), tag, payload)[1]
    who = hashlib.blake2b(thread_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    zst = ".zst" if tag.endswith(codec.tags.ZSTD) else ""  # the seal covers the tag: the name says it
    return f"{COLD}{who}-{hashlib.blake2b(sealed, digest_size=16).hexdigest()}{zst}", sealed


def unpack(bc: codec.BlobCodec, thread_id: str, name: str, data: bytes, where: str) -> Rows:
    """A thread's rows from its sealed archive ``name``; CorruptRowError when it is not that thread's."""
    tag = _TAG + (codec.tags.ZSTD if name.endswith(".zst") else "") + (GCM if len(data) > 1 and data[0] == MAGIC and data[1] == 2 else SUM)
    try:
        inner, payload = open_sealed(bc.keys, Row("cold", (thread_id,)), tag, data)
    except CorruptRowError as exc:
        raise CorruptRowError(f"{where}: {exc}") from None
    _, raw = codec.decompress(inner, payload, where)
    try:
        found = ormsgpack.unpackb(raw)
        assert found["v"] == 1 and found["thread_id"] == thread_id
        return {t: (list(c), [tuple(r) for r in data]) for t, (c, data) in found["rows"].items()}
    except Exception as exc:
        raise CorruptRowError(f"{where}: not a cold archive of this thread ({type(exc).__name__})") from None


@dataclass
class TierReport:
    """``tier``: the threads moved (or, ``dry_run``, that would move), their checkpoints, the bytes
    their rows held and the archives' bytes; ``skipped``: threads that changed while being moved."""

    dry_run: bool
    threads: list[str] = field(default_factory=list)
    checkpoints: int = 0
    row_bytes: int = 0
    archive_bytes: int = 0
    skipped: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # ``threadline tier --restore``

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "restored": self.restored, "threads": len(self.threads), "thread_ids": self.threads[:50], "checkpoints": self.checkpoints,
                "row_bytes": self.row_bytes, "archive_bytes": self.archive_bytes, "skipped": self.skipped}


def _idle_op(d: Dialect, before: float, limit: int) -> Op[list[tuple[str, int, int]]]:
    return [(r[0], int(r[1]), int(r[2])) for r in (yield Q(d.IDLE_THREADS, (before, before, limit), read=True))]


def _size(rows: Rows) -> int:
    return sum(len(v) for _, data in rows.values() for r in data for v in r if isinstance(v, (bytes, str)))


def _freeze_op(d: Dialect, bc: codec.BlobCodec, tid: str, columns: dict, raw: Rows, name: str, size: int, count: int) -> Op[bool]:
    """In one transaction: unless the thread's rows changed since ``raw`` was read, delete them and
    insert its stub naming ``name``. Whether it was moved."""
    lock = d.lock_thread()
    if lock:
        yield Q(lock, (tid,))
    now = yield from thread_rows_op(d, tid, columns)
    if now != raw:
        return False
    from threadline.storage import ops

    yield from ops.delete_thread(d, tid, bc, tags=False)  # its tags and pin stay: they are not in the archive
    yield Q(d.DELETE_ADOPTED, (tid,))
    names, found = raw.get("threads", ((), ()))
    row = dict(zip(names, found[0])) if found else {}
    now = time.time()
    yield Q(d.INSERT_COLD, (tid, name, count, size, now, row.get("created_at", now), row.get("updated_at", now),
                            row.get("accessed_at"), row.get("ttl_minutes"), row.get("default_ttl")))
    return True


def tier_job(d: Dialect, bc: codec.BlobCodec, idle_seconds: float, *, dry_run: bool = False, limit: int = 1000,
             progress: Callable[[int, int, str], None] | None = None) -> Job[TierReport]:
    """``tier`` as a job (``lifecycle.jobs``): the sweeper runs it when ``Offload.cold_after`` is set."""
    store = _store(bc, d)
    report = TierReport(dry_run)
    idle = yield _idle_op(d, time.time() - idle_seconds, limit), False
    columns = yield columns_op(d), False
    inline = inliner(bc)
    for i, (tid, count, _) in enumerate(idle):
        raw = yield thread_rows_op(d, tid, columns), False
        rows = (yield inline(d, tid, raw), False) if inline is not None else raw
        name, sealed = pack(bc, tid, rows)
        size = _size(raw)
        if not dry_run:
            store.put(name, sealed)
            if not (yield _freeze_op(d, bc, tid, columns, raw, name, size, count), True):
                report.skipped.append(tid)
                continue
        report.threads.append(tid)
        report.checkpoints += count
        report.row_bytes += size
        report.archive_bytes += len(sealed)
        if progress:
            progress(i + 1, len(idle), tid)
    return report


def tier(saver: Any, idle_seconds: float, *, dry_run: bool = False, limit: int = 1000,
         progress: Callable[[int, int, str], None] | None = None) -> TierReport:
    """Move the threads idle longer than ``idle_seconds`` (at most ``limit``, least recently
    updated first) to the object store (module docstring); ``dry_run``: only report what would
    move and its bytes. ConfigError without an object store or on Redis; BackendError when the
    store cannot be written (threads already moved stay moved)."""
    return run_job(saver, tier_job(saver.dialect, saver.blob_codec, idle_seconds, dry_run=dry_run, limit=limit, progress=progress))


def warm_op(d: Dialect, bc: codec.BlobCodec, thread_id: Any) -> Op[bool]:
    """Restore ``thread_id`` when it is cold (module docstring). True when a read should look
    again: it was cold (restored by this transaction or, meanwhile, by another) or has
    checkpoints now (restored since the caller's read missed); False after one read otherwise."""
    tid = thread_id_of(thread_id)
    cold, stored = (yield Q(d.COLD_STATE, (tid, tid), read=True))[0]
    if not cold:
        return bool(stored)
    taken = yield Q(d.TAKE_COLD, (tid,))
    if not taken:
        return True  # another transaction restored it first
    rows = offloaded(bc, fetch(bc, _store(bc, d), tid, taken[0][0]))  # large values offloaded again, as a put
    columns = yield from columns_op(d)
    yield from store_thread_op(d, tid, rows, columns, replace=True, bc=bc, tags=False)
    yield Q(d.TOUCH_READ, (time.time(), tid))  # restored: read now (``IDLE_THREADS`` skips it)
    return True


def warm(saver: Any, thread_id: Any) -> bool:
    """Restore ``thread_id`` now if it is cold (``warm_op`` on a sync saver); whether it was or
    has checkpoints."""
    _store(saver.blob_codec, saver.dialect)
    return saver.run(warm_op(saver.dialect, saver.blob_codec, thread_id), write=True)


def fetch(bc: codec.BlobCodec, store: Any, thread_id: str, name: str) -> Rows:
    """The rows of the cold thread ``thread_id`` from its archive ``name`` in ``store``, checked;
    CorruptRowError when the archive is missing or damaged."""
    data = store.get(name)
    where = f"cold thread {thread_id!r} (archive {name} in {store.url})"
    if data is None:
        raise CorruptRowError(f"{where}: the archive is missing")
    return unpack(bc, thread_id, name, data, where)


def cold_archives_op(d: Dialect, thread_ids: Any) -> Op[dict[str, str]]:
    """thread_id → its archive object, for those of ``thread_ids`` that are cold (read-only; {} on a
    backend without a cold tier or a database opened read-only before it, schema migration 12)."""
    ids = list(dict.fromkeys(thread_id_of(t) for t in thread_ids))
    if not ids or not (yield from _has_cold(d)):
        return {}
    found = {}
    for tid in ids:
        rows = yield Q(d.COLD_OBJECT, (tid,), read=True)
        if rows:
            found[tid] = rows[0][0]
    return found


def cold_rows(saver: Any, archives: dict[str, str]) -> Any:
    """(thread_id, its rows) of each cold thread of ``archives`` (``cold_archives_op``), read from its
    archive, nothing written (``transfer.official.thread_view``, bundles); ConfigError naming
    ``threadline tier --restore`` when ``saver`` has no object store to read them from."""
    store = saver.blob_codec.offload.objects if saver.blob_codec.offload is not None else None
    if store is None and archives:
        tid = next(iter(archives))
        raise ConfigError(f"thread {tid!r} is cold (moved whole to an object store): reading it needs that store "
                          f"(THREADLINE_OFFLOAD, docs/offload.md), or bring it back first: threadline tier --restore {tid}")
    for tid, name in archives.items():
        yield tid, fetch(saver.blob_codec, store, tid, name)


def _has_cold(d: Dialect) -> Op[bool]:
    """Whether the database can hold cold threads: a backend with a cold tier, past schema migration 12
    (a database opened read-only may be older)."""
    return getattr(d, "offloads", False) and bool((yield Q(d.columns_sql, (table("cold"),))))


def cold_objects_op(d: Dialect) -> Op[list[tuple[str, str]]]:
    """(thread_id, archive object) of every cold thread (read-only; [] without a cold tier, ``_has_cold``)."""
    if not (yield from _has_cold(d)):
        return []
    return [(r[0], r[1]) for r in (yield Q(d.COLD_OBJECTS, read=True))]


__all__ = ["TierReport", "cold_archives_op", "cold_objects_op", "cold_rows", "fetch", "tier", "warm", "warm_op"]
