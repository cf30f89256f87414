"""Consistency checks (fsck) and their safe repairs.

``fsck_thread_op`` checks one thread: unreadable checkpoint rows (malformed JSON
or ``channel_versions``, a checksum that does not match), dangling blob references
and delta bases, broken parent links and cycles, orphan writes and orphan blobs, a
stale ``threads`` index row and (``deep``) every value: each blob (through its delta
chain) and write is opened against its seal and decoded, with the inspection policy
(nothing stored is constructed); each problem is a ``Finding``. With ``repair`` it fixes the safe ones
(``REPAIRS``) and never the rest. ``fsck`` runs it over every thread id found in
any table (``every_thread_id_op``), one transaction each, into a ``FsckReport``.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.storage import heads as H
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.dialect.statements import CHECKPOINT_KEY
from threadline.storage.ops import Op, Q
from threadline.errors import CorruptRowError
from threadline.keys import thread_id_of
from threadline.lifecycle import objects
from threadline.lifecycle.thread import _load_thread_op
from threadline.read.forks import Step, concurrent_forks, line_of
from threadline.read.records import thread_record_op
from threadline.read.tags import thread_tags_op
from threadline.read.threads import records_table_op



@dataclass
class Finding:
    """One problem ``fsck`` found.

    ``kind``: ``dangling_blob`` (a checkpoint names a blob that is missing),
    ``dangling_base`` (a delta blob's base is missing), ``dangling_ref`` (a delta blob
    that references pending writes — each message stored once — names writes that are
    missing, or cannot itself be read), ``orphan_writes`` (writes of a
    checkpoint that does not exist), ``orphan_blobs`` (blobs no checkpoint
    references), ``broken_parent`` (parent_checkpoint_id names a missing
    checkpoint), ``parent_cycle``, ``unreadable_checkpoint``, ``unreadable_value``
    (a blob or write that does not decode; ``deep`` only), ``thread_index`` (the
    ``threads`` row is missing or its counts are stale), ``concurrent_fork`` (a fork made
    by two overlapping runs, ``read.forks``: a notice, see ``NOTICES``), ``dangling_tag`` (a
    tag names a checkpoint that does not exist: deleted by LangGraph's own ``prune`` or
    ``delete_for_runs``, which do not know tags), ``orphan_object`` (an offloaded
    value's object no row names; repaired once older than ``Offload.grace_seconds``) and
    ``missing_object`` (rows name an object the store lacks), ``unreadable_record`` (the thread's
    record, ``read.records``, does not hold a JSON object: the listings show the thread as
    damaged) and ``unreadable_row`` (a row of the thread cannot be read at all, so its other
    checks could not run: on Redis, a value without threadline's framing; on SQLite, text that
    is not UTF-8), ``orphan_head``, ``unreadable_head`` and (``deep``) ``stale_head`` (a head row,
    ``storage.heads``, of a checkpoint not stored, that does not open, or whose values differ from
    the checkpoint's blobs: reads then take the blobs). ``repairable`` says whether
    ``repair`` fixes it safely; ``repaired`` whether it did.
    """

    kind: str
    thread_id: str
    checkpoint_ns: str | None
    checkpoint_id: str | None
    detail: str
    repairable: bool
    repaired: bool = False
    count: int = 1

    @property
    def notice(self) -> bool:
        """Whether this finding is a notice (``NOTICES``): the data is sound and the check passes."""
        return self.kind in NOTICES

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "notice": self.notice}


# Findings about what happened to a thread, not damage to its rows: reported, never repaired,
# and they do not fail the check (``FsckReport.ok``).
NOTICES = {
    "concurrent_fork": "two runs overlapped on the thread and forked it; serialize runs with threadline.guard",
}

REPAIRS = {
    "orphan_writes": "deleted (their checkpoint does not exist), once the items a stored delta reads from them are copied into it",
    "orphan_blobs": "garbage-collected (no checkpoint references them)",
    "broken_parent": "parent link cleared (the checkpoint becomes a root; its own state is complete)",
    "thread_index": "threads row recomputed from the tables",
    "dangling_tag": "tag removed (its checkpoint does not exist)",
    "orphan_head": "the thread's head rows deleted (derived data: the next put writes them again)",
    "unreadable_head": "the thread's head rows deleted (derived data: the next put writes them again)",
    "stale_head": "the thread's head rows deleted (derived data: the next put writes them again)",
}


def fsck_thread_op(
    d: Dialect, serde: SerializerProtocol, thread_id: str, *, repair: bool = False, deep: bool = False, bc: codec.BlobCodec | None = None
) -> Op[list[Finding]]:
    """Check one thread (one transaction); with ``repair`` fix what is safe (see ``REPAIRS``).
    ``bc``: the saver's codec (its keys check checksums and seals)."""
    tid = thread_id
    bc = bc or codec.PLAIN
    findings: list[Finding] = []
    # unreadable checkpoint rows first: everything else needs the docs
    raw = yield Q(d.THREAD_CHECKPOINTS, (tid,))
    bad: set[tuple[str, str]] = set()
    for ns, cid, parent, doc, meta, checksum in raw:
        try:
            parsed = d.load_object(doc, f"checkpoint ({tid!r}, {ns!r}, {cid!r})")
            m = d.load_json(meta, f"metadata of checkpoint ({tid!r}, {ns!r}, {cid!r})")
            if not isinstance(m, dict):
                raise CorruptRowError(f"metadata of checkpoint ({tid!r}, {ns!r}, {cid!r}) is not a JSON object")
            R.blob_pairs(parsed)
            R.absent_channels(parsed)
            bc.check_checkpoint(checksum, (tid, ns, cid), parent, parsed, m)
        except CorruptRowError as exc:
            bad.add((ns, cid))
            findings.append(Finding("unreadable_checkpoint", tid, ns, cid, str(exc), False))
    # plan around unreadable rows: they count as present but empty
    t = yield from _load_thread_op(d, tid, unreadable=bad)
    # dangling blob references
    for (ns, cid), r in sorted(t.rows.items()):
        absent = R.absent_channels(r[4])
        missing = [(ch, v) for ch, v in R.blob_pairs(r[4]) if (ns, ch, v) not in t.blob_sizes and ch not in absent]
        if missing:
            findings.append(
                Finding("dangling_blob", tid, ns, cid, f"missing blobs {missing[:5]}{' …' if len(missing) > 5 else ''}; "
                        "recover them from the parent's writes with `threadline rebuild --apply`", False, count=len(missing))
            )
    for (ns, ch, v), (_, base) in sorted(t.blob_sizes.items()):
        if base is not None and (ns, ch, base) not in t.blob_sizes:
            findings.append(Finding("dangling_base", tid, ns, None, f"blob ({ch!r}, {v!r}) is a delta on missing version {base!r}", False))
    # what the checkpoints need (only known when every checkpoint is readable)
    live = None if bad else t.live_blobs(t.rows)
    findings += yield from _dangling_refs(d, tid, bc, live)
    # broken parents and cycles
    broken: list[tuple[str, str]] = []
    for (ns, cid), r in sorted(t.rows.items()):
        if r[0] and (ns, r[0]) not in t.rows:
            if (ns, cid) not in bad:  # an unreadable row is never re-sealed
                broken.append((ns, cid))
            findings.append(Finding("broken_parent", tid, ns, cid, f"parent {r[0]!r} does not exist", (ns, cid) not in bad))
    for (ns, cid) in sorted(t.rows):
        seen, cur = set(), cid
        while cur and (ns, cur) in t.rows:
            if cur in seen:
                findings.append(Finding("parent_cycle", tid, ns, cid, "the parent chain loops back on itself", False))
                break
            seen.add(cur)
            cur = t.rows[(ns, cur)][0]
    # orphan writes
    orphan_writes = sorted(t.orphan_write_keys)
    for ns, cid in orphan_writes:
        findings.append(
            Finding("orphan_writes", tid, ns, cid, f"{t.write_counts[(ns, cid)]} write(s) of a checkpoint that does not exist", True,
                    count=t.write_counts[(ns, cid)])
        )
    # orphan blobs (only meaningful when every checkpoint is readable)
    orphan_blobs: list = []
    if live is not None:
        orphan_blobs = sorted(k for k in t.blob_sizes if k not in live)
        if orphan_blobs:
            findings.append(
                Finding("orphan_blobs", tid, None, None,
                        f"{len(orphan_blobs)} blob(s), {sum(t.blob_sizes[k][0] for k in orphan_blobs)} bytes, referenced by no checkpoint",
                        True, count=len(orphan_blobs))
            )
    # thread index
    idx = [r[2:] for r in (yield Q(d.THREAD, (tid,)))]
    count = len(t.rows)
    if count and not idx:
        findings.append(Finding("thread_index", tid, None, None, "no threads row", True))
    elif idx and int(idx[0][0]) != count:
        findings.append(Finding("thread_index", tid, None, None, f"threads row counts {idx[0][0]} checkpoints, table has {count}", True))
    elif idx and not count:
        findings.append(Finding("thread_index", tid, None, None, "threads row for a thread without checkpoints", True))
    dangling_tags = [tg for tg in (yield from thread_tags_op(d, tid)) if (tg.checkpoint_ns, tg.checkpoint_id) not in t.rows]
    for tg in dangling_tags:
        findings.append(Finding("dangling_tag", tid, tg.checkpoint_ns, tg.checkpoint_id,
                                f"tag {tg.name!r} names a checkpoint that does not exist", True))
    findings += yield from _mistyped_values(d, tid)
    findings += yield from _unreadable_record(d, tid)
    checksums = {(ns, cid): checksum for ns, cid, _, _, _, checksum in raw}
    heads = (yield from _head_findings(d, serde, tid, bc, t.rows, checksums, bad, deep)) if d.head_rows else []
    findings += heads
    findings += _concurrent_forks(t)
    # deep: decode every value
    if deep:
        for ns, cid in sorted(k for k in t.rows if k not in bad):
            found = yield Q(d.CHECKPOINT, (tid, ns, cid))
            try:
                yield from ops.load_tuples(d, serde, found, bc)
            except CorruptRowError as exc:
                findings.append(Finding("unreadable_value", tid, ns, cid, str(exc), False))
    if repair:
        needed = live if live is not None else set(t.blob_sizes)
        orphan_writes = yield from _free_orphan_writes(d, tid, orphan_writes, needed, bc, findings)
        if orphan_writes:
            yield from ops.delete_keys(d, "threadline_writes", CHECKPOINT_KEY, [(tid, ns, cid) for ns, cid in orphan_writes], d.DELETE_WRITES)
        if broken:
            yield from ops.set_parents(d, tid, t.reparenting({k: None for k in broken}), bc)
        if orphan_blobs:
            yield from ops.gc_blobs(d, tid)
        for tg in dangling_tags:
            yield Q(d.DELETE_TAG, (tid, tg.name))
        if heads:
            yield Q(d.DELETE_HEADS, (tid,))
        if any(f.kind == "thread_index" for f in findings) or orphan_writes or orphan_blobs:
            if count:
                now = time.time()
                created = min(r[3] for r in t.rows.values())
                updated = max(r[3] for r in t.rows.values())
                yield Q(d.ENSURE_THREAD, (tid, created, max(updated, min(now, updated))))
                yield from ops.restat(d, [tid])
            else:
                yield from ops.delete_thread(d, tid)  # it has no checkpoint: its other rows go
        for f in findings:
            if f.repairable:
                f.repaired = True
    return findings


def _head_findings(
    d: Dialect, serde: SerializerProtocol, tid: str, bc: codec.BlobCodec, rows: Mapping, checksums: Mapping, bad: set, deep: bool
) -> Op[list[Finding]]:
    """Head rows (``storage.heads``) that do not open, that name a checkpoint not stored, or (``deep``)
    whose values differ from the checkpoint's blobs. Repair deletes the thread's heads: derived
    data, which the next put writes again; reads meanwhile take the blobs."""
    out = []
    plain = dataclasses.replace(bc, cache=None)  # the blobs as stored, not what a saver cached
    for ns, cid, tag, data in (yield Q(d.THREAD_HEADS, (tid,))):
        if (ns, cid) not in rows:
            out.append(Finding("orphan_head", tid, ns, cid, "head row of a checkpoint that does not exist", True))
        elif (ns, cid) in bad:
            continue  # its checkpoint is reported unreadable: its versions are not known
        elif H.unpack(bc, (tid, ns, cid), tag, data, dict(R.blob_pairs(rows[(ns, cid)][4])), checksums.get((ns, cid))) is None:
            out.append(Finding(
                "unreadable_head", tid, ns, cid,
                "head row does not open (damaged, sealed under a key not in the keyring, or written with another checkpoint row)", True,
            ))
        elif deep:
            found = yield Q(d.CHECKPOINT, (tid, ns, cid))
            try:
                record = (yield from ops.load_tuples(d, serde, found, plain))[0].checkpoint["channel_values"]
                head = (yield from ops.load_tuples(d, serde, found, plain, head=(tag, data)))[0].checkpoint["channel_values"]
            except CorruptRowError:
                continue  # reported as unreadable_value
            if head != record:
                out.append(Finding("stale_head", tid, ns, cid, "head row's values differ from the checkpoint's blobs", True))
    return out


def _concurrent_forks(t: Any) -> list[Finding]:
    """Forks of the thread made by two overlapping runs (``read.forks``), as notices."""
    forks = concurrent_forks(Step(ns, cid, r[0], r[2], r[3], r[5].get("run_id")) for (ns, cid), r in t.rows.items())
    if not forks:
        return []
    parents = {cid: r[0] for (ns, cid), r in t.rows.items() if ns == ""}
    head_path = line_of(parents, max(parents, default=None))
    return [Finding("concurrent_fork", t.thread_id, f.checkpoint_ns, f.checkpoint_id, f.describe(head_path if not f.checkpoint_ns else ()), False)
            for f in forks]


def _free_orphan_writes(
    d: Dialect, tid: str, orphans: list[tuple[str, str]], live: set, bc: codec.BlobCodec, findings: list[Finding]
) -> Op[list[tuple[str, str]]]:
    """The orphan writes (checkpoint_ns, checkpoint_id) that may go: a write a stored delta
    reads its items from (``codec.refs``) is no orphan until they are copied into it, as
    deleting checkpoints does (``ops.copy_referenced_items``, on the ``live`` blobs: all of
    them when unknown). When a delta that may read them cannot be read or rewritten, every
    orphan write is kept, its finding not repairable."""
    if not orphans:
        return orphans
    try:
        yield from ops.copy_referenced_items(d, tid, set(orphans), live, bc)
    except CorruptRowError as exc:
        for f in findings:
            if f.kind == "orphan_writes":
                f.repairable = False
                f.detail += f"; kept: a stored delta may read its items from them and cannot be read now ({exc})"
        return []
    return orphans


def _mistyped_values(d: Dialect, tid: str) -> Op[list[Finding]]:
    """Value rows whose value column holds something other than bytes (SQLite stores whatever
    is written there: text written outside threadline, not UTF-8 text included): unreadable,
    each named by its key; where the database enforces the type there are none."""
    findings = []
    if d.MISTYPED_BLOBS is not None:
        for ns, ch, v, kind in (yield Q(d.MISTYPED_BLOBS, (tid,))):
            findings.append(Finding("unreadable_value", tid, ns, None,
                                    f"blob ({ch!r}, {v!r}) holds {kind}, not stored bytes: it was changed outside threadline; "
                                    "`threadline restore` brings the thread back from a backup", False))
    if d.MISTYPED_WRITES is not None:
        for ns, cid, task, idx, kind in (yield Q(d.MISTYPED_WRITES, (tid,))):
            findings.append(Finding("unreadable_value", tid, ns, cid,
                                    f"pending write ({task!r}, {idx}) holds {kind}, not stored bytes: it was changed outside "
                                    "threadline; `threadline restore` brings the thread back from a backup", False))
    return findings


def _unreadable_record(d: Dialect, tid: str) -> Op[list[Finding]]:
    """The thread's record (``read.records``) when it cannot be read, as the listings read it."""
    if not (yield from records_table_op(d)):
        return []
    try:
        yield from thread_record_op(d, tid)
    except CorruptRowError as exc:
        return [Finding("unreadable_record", tid, None, None, f"{exc}; `threadline restore` brings the thread back from a backup", False)]
    return []


def _dangling_refs(d: Dialect, tid: str, bc: codec.BlobCodec, live: set | None) -> Op[list[Finding]]:
    """Delta rows referencing pending writes (``codec.refs``) whose writes are missing: reading
    such a value fails, and the items cannot be recovered from the thread (only a backup has
    them). Only the rows a checkpoint needs (``live``; all when unknown): an orphan goes anyway."""
    refs = [r for r in (yield Q(d.THREAD_BLOBS_LIKE, (tid, codec.DELTA_REF + "%"))) if live is None or (r[1], r[2], r[3]) in live]
    if not refs:
        return []
    writes = {tuple(w) for w in (yield Q(d.THREAD_WRITE_KEYS, (tid,)))}
    findings = []
    for row in refs:
        ns, ch, v = row[1], row[2], row[3]
        try:
            _, _, cid, named = ops.open_ref(bc, row)
        except CorruptRowError as exc:
            findings.append(Finding("dangling_ref", tid, ns, None, f"{exc}; `threadline restore` brings the thread back from a backup", False))
            continue
        missing = [(task, idx) for task, idx in named if (ns, cid, task, idx) not in writes]
        if missing:
            findings.append(Finding(
                "dangling_ref", tid, ns, cid,
                f"blob ({ch!r}, {v!r}) is built from pending writes {missing[:5]} of this checkpoint, which are missing; "
                "`threadline restore` brings the thread back from a backup", False))
    return findings


def every_thread_id_op(d: Dialect) -> Op[list[str]]:
    """Every thread_id found in any table (fsck also looks at rows whose thread has no checkpoint)."""
    found = yield Q(d.EVERY_THREAD_ID)
    return sorted({r[0] for r in found})


@dataclass
class FsckReport:
    """``fsck`` over many threads: findings, and whether repairs were made."""

    threads_checked: int
    findings: list[Finding]
    repair: bool
    deep: bool

    @property
    def ok(self) -> bool:
        """No finding is left unrepaired (notices, ``NOTICES``, aside)."""
        return not [f for f in self.findings if not f.repaired and not f.notice]

    def to_json(self) -> dict[str, Any]:
        by_kind: dict[str, int] = defaultdict(int)
        for f in self.findings:
            by_kind[f.kind] += f.count
        return {
            "ok": self.ok,
            "threads_checked": self.threads_checked,
            "repair": self.repair,
            "deep": self.deep,
            "by_kind": dict(by_kind),
            "findings": [f.to_json() for f in self.findings],
        }


def fsck(
    saver: Any,
    *,
    thread_ids: Sequence[Any] | None = None,
    repair: bool = False,
    deep: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> FsckReport:
    """Check every thread (or ``thread_ids``), one transaction per thread; ``repair`` fixes the safe findings.

    Safe repairs (``REPAIRS``): orphan writes deleted, orphan blobs
    garbage-collected, broken parent links cleared, the ``threads`` index
    recomputed. Never repaired (reported only): dangling blob references (use
    ``rebuild``), unreadable rows, cycles. ``deep`` also decodes every value.
    """
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else saver.run(every_thread_id_op(saver.dialect))
    findings: list[Finding] = []
    from threadline.codec.serde import inspecting  # LangGraph's serializer: loaded when fsck decodes

    serde = inspecting(saver.serde)
    for i, tid in enumerate(ids):
        try:
            findings += saver.run(fsck_thread_op(saver.dialect, serde, tid, repair=repair, deep=deep, bc=saver.blob_codec), write=repair)
        except CorruptRowError as exc:  # the thread's transaction is rolled back; the other threads are checked
            findings.append(Finding("unreadable_row", tid, None, None, f"{exc}; its other checks could not run; "
                                    "`threadline restore` brings the thread back from a backup", False))
        if progress:
            progress(i + 1, len(ids), tid)
    if objects.store_of(saver, saver.dialect) is not None:
        findings += _object_findings(saver, repair)
    return FsckReport(len(ids), findings, repair, deep)


def _object_findings(saver: Any, repair: bool) -> list[Finding]:
    """The object store's orphans (deleted with ``repair``, past the grace period) and the
    objects rows name that it lacks (``lifecycle.objects``)."""
    report = objects.collect(saver, delete=repair)
    store = saver.blob_codec.offload.objects.url
    out = [Finding("missing_object", "", None, None, f"{store}: object {name} is missing; rows naming it: {rows[:3]}; "
                   "`threadline restore` brings their threads back from a backup", False) for name, rows in report.missing.items()]
    out += [Finding("unreadable_value", "", None, None, f"offload reference unreadable, orphans kept: {u}", False) for u in report.unreadable]
    out += [Finding("orphan_object", "", None, None, f"{store}: object {name} is named by no row", not report.unreadable, repaired=name in report.removed)
            for name in report.orphans]
    return out
