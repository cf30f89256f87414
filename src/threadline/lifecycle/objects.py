"""Objects of offloaded values (docs/offload.md): which ones rows name, orphans, missing ones,
and the sweep that deletes orphans, crash-safe.

Rows are deleted in transactions (delete, prune, TTL, retention); the objects they named stay
until ``collect`` (run by the sweeper, ``threadline fsck --repair``, and after ``threadline
delete``/``prune``) finds them unnamed — but an erasure's, which ``lifecycle.erase`` deletes at
once, those ``Owners`` shows no other thread names. It lists the store *first*, then reads the names every
committed row holds, and deletes an object only when no row names it and it is older than
``Offload.grace_seconds`` (a put writes — or rewrites, renewing the age of — its objects before
its rows commit). So an object is deleted only after no committed row names it, and a put in
flight keeps its objects: a kill -9 anywhere leaves at worst orphans, which the next run clears.
When a reference cannot be read (a row damaged, or encrypted under a key not held) nothing is
deleted: that row may name any object.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from threadline import codec
from threadline.codec.objects import OBJ, parse_ref
from threadline.codec.seal import Row, open_sealed
from threadline.errors import ConfigError, CorruptRowError
from threadline.lifecycle.cold import cold_objects_op
from threadline.lifecycle.jobs import Job, run_job
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.dialect.objects import OFFLOADED_TYPE
from threadline.storage.ops import Op, Q


@dataclass
class ObjectReport:
    """One look at the object store. ``named``: object name → the rows naming it (their
    description); ``stored``: objects listed and their bytes; ``orphans``: objects no row
    names (``deleted`` of them were deleted, the rest younger than the grace period or kept
    because ``unreadable`` rows exist; ``removed``: those deleted); ``missing``: names rows hold whose object is absent."""

    named: dict[str, list[str]] = field(default_factory=dict)
    stored: int = 0
    stored_bytes: int = 0
    offloaded_rows: int = 0
    orphans: list[str] = field(default_factory=list)
    missing: dict[str, list[str]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    payload_bytes: int = 0  # the bytes of the payloads rows name, each object once (before its seal)

    @property
    def deleted(self) -> int:
        return len(self.removed)

    def to_json(self) -> dict[str, Any]:
        return {
            "stored": self.stored, "stored_bytes": self.stored_bytes, "offloaded_rows": self.offloaded_rows,
            "named": len(self.named), "orphans": len(self.orphans), "missing": {k: v[:5] for k, v in self.missing.items()},
            "unreadable": self.unreadable[:20], "deleted": self.deleted, "deleted_bytes": self.deleted_bytes,
            "payload_bytes": self.payload_bytes,
        }


def store_of(saver_or_codec: Any, d: Dialect) -> Any:
    """The object store of a saver's codec, or None when it offloads nothing; ConfigError on a
    backend that cannot offload (Redis)."""
    bc = getattr(saver_or_codec, "blob_codec", saver_or_codec)
    off = getattr(bc, "offload", None)
    store = off.objects if off is not None else None
    if store is not None and not getattr(d, "offloads", False):
        raise ConfigError(f"offload to an object store is not supported on {d.name} (SQLite and Postgres only; docs/offload.md)")
    return store


def references_op(d: Dialect, bc: codec.BlobCodec, thread_id: str | None = None) -> Op[tuple[list[tuple[str, int, Row]], list[tuple[Row, str]], int]]:
    """((object name, payload bytes, row naming it) …, (row, why) of the rows whose reference cannot
    be read, offloaded rows) over every committed blob and write row, or ``thread_id``'s (read-only)."""
    blobs, writes, params = ((d.OFFLOADED_BLOBS, d.OFFLOADED_WRITES, (OFFLOADED_TYPE,)) if thread_id is None
                             else (d.OFFLOADED_BLOBS_OF, d.OFFLOADED_WRITES_OF, (OFFLOADED_TYPE, thread_id)))
    found = [(R.blob_row_ref(*r[:5]), r[5], r[6]) for r in (yield Q(blobs, params, read=True))]
    found += [(R.write_row_ref(*r[:6]), r[6], r[7]) for r in (yield Q(writes, params, read=True))]
    refs, unreadable = [], []
    for row, tag, data in found:
        try:
            inner, ref = open_sealed(bc.keys, row, tag, data)
            if inner.endswith(OBJ):
                refs.append((*parse_ref(ref, row), row))
        except CorruptRowError as exc:  # EncryptionError included
            unreadable.append((row, str(exc)))
    return refs, unreadable, len(found)


@dataclass
class Owners:
    """Who names each object (``owners_op``): ``threads``: object name → the thread_ids whose rows
    or cold stub name it; ``unreadable``: thread_id → its offloaded rows whose reference cannot be
    read (damaged, or encrypted under a key not held: they may name any object)."""

    threads: dict[str, set[str]]
    unreadable: dict[str, list[str]]

    def blind(self, thread_ids: set[str]) -> list[str]:
        """The rows of threads other than ``thread_ids`` whose reference cannot be read: while there
        is one, no offloaded value's object can be proven unnamed (a cold archive is named by its stub alone)."""
        return [row for tid, rows in self.unreadable.items() if tid not in thread_ids for row in rows]


def owners_op(d: Dialect, bc: codec.BlobCodec) -> Op[Owners]:
    """``Owners`` over every committed row and cold stub (read-only)."""
    refs, unreadable, _ = yield from references_op(d, bc)
    threads: dict[str, set[str]] = defaultdict(set)
    for name, _, row in refs:
        threads[name].add(row.key[0])
    for tid, name in (yield from cold_objects_op(d)):
        threads[name].add(tid)
    bad: dict[str, list[str]] = defaultdict(list)
    for row, why in unreadable:
        bad[row.key[0]].append(f"{row}: {why}")
    return Owners(dict(threads), dict(bad))


def named_op(d: Dialect, bc: codec.BlobCodec) -> Op[tuple[dict[str, list[str]], list[str], int, int]]:
    """(object name → rows naming it, rows whose reference cannot be read, offloaded rows, bytes
    of the payloads named, each once) over every committed blob and write row (read-only)."""
    named: dict[str, list[str]] = defaultdict(list)
    refs, unreadable, count = yield from references_op(d, bc)
    for tid, name in (yield from cold_objects_op(d)):  # cold threads' archives (``lifecycle.cold``)
        named[name].append(f"cold thread {tid!r}")
    for name, _, row in refs:
        named[name].append(str(row))
    sizes = {name: size for name, size, _ in refs}
    return dict(named), [f"{row}: {why}" for row, why in unreadable], count, sum(sizes.values())


def collect_job(d: Dialect, bc: codec.BlobCodec, *, delete: bool = True, grace: float | None = None, now: float | None = None) -> Job[ObjectReport]:
    """List the store, read the names rows hold, and (``delete``) delete the orphans older than
    ``grace`` seconds (default ``Offload.grace_seconds``). A job (``lifecycle.jobs``)."""
    store = store_of(bc, d)
    report = ObjectReport()
    if store is None:
        return report
    listed = {name: (when, size) for name, when, size in store.list()}  # first: see the module docstring
    report.named, report.unreadable, report.offloaded_rows, report.payload_bytes = yield named_op(d, bc), False
    report.stored, report.stored_bytes = len(listed), sum(s for _, s in listed.values())
    report.orphans = sorted(n for n in listed if n not in report.named)
    report.missing = {n: rows for n, rows in report.named.items() if n not in listed}
    if not delete or report.unreadable:
        return report
    cutoff = (time.time() if now is None else now) - (bc.offload.grace_seconds if grace is None else grace)
    for name in report.orphans:
        when, size = listed[name]
        if when <= cutoff:
            store.delete(name)
            report.removed.append(name)
            report.deleted_bytes += size
    return report


def collect(saver: Any, *, delete: bool = True, grace: float | None = None) -> ObjectReport:
    """``collect_job`` on a sync saver: the orphan objects older than ``grace`` deleted (module
    docstring). An empty report when the saver offloads nothing."""
    return run_job(saver, collect_job(saver.dialect, saver.blob_codec, delete=delete, grace=grace))


def _cold_totals_op(d: Dialect) -> Op[tuple[int, int]]:
    row = (yield Q(d.COLD_TOTALS, read=True))[0]
    return int(row[0]), int(row[1])


def offload_summary(saver: Any, stats: Any) -> dict[str, Any]:
    """Where the values of the database's ``stats`` (``read.Stats``, of the whole database) live:
    the one summary ``threadline stats`` and the browser's statistics page show. {} when the saver
    offloads nothing; else ``store`` (its URL), ``in_row_bytes`` (the bytes of the blob and write
    rows: values kept in their rows, and the references of the others), ``payload_bytes`` (the
    offloaded values' bytes in the store, each object once), ``rows`` (rows naming an object),
    ``objects`` (objects named by rows or archives), ``stored_bytes`` (everything the store lists,
    orphans included), ``cold_threads`` and ``cold_bytes`` (threads moved whole to the store,
    ``lifecycle.cold``, and the bytes their rows held). Lists the store and reads every reference
    (``collect`` without deleting)."""
    store = store_of(saver, saver.dialect)
    if store is None:
        return {}
    found = collect(saver, delete=False)
    cold, cold_bytes = saver.run(_cold_totals_op(saver.dialect))
    return {"store": store.url, "in_row_bytes": stats.tables["blobs"]["bytes"] + stats.tables["writes"]["bytes"],
            "payload_bytes": found.payload_bytes, "rows": found.offloaded_rows, "objects": len(found.named),
            "stored_bytes": found.stored_bytes, "cold_threads": cold, "cold_bytes": cold_bytes}
