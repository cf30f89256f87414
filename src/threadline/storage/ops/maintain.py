"""Maintenance operations: deleting threads, checkpoints (a kept delta that references
their pending writes first gets the items copied in: ``copy_referenced_items``) and the
checkpoints of runs, recomputing a thread's index row (``restat``), collecting unreferenced blobs while
keeping every delta base a kept blob needs (``gc_blobs``), copying a thread, and
``prune`` with its ``keep_latest`` / ``delete`` strategies. What a kept checkpoint
needs is ``storage.liveness``'s rule.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.checkpoint.serde.types import TASKS

from threadline import codec
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.liveness import Lineage, live_blobs, refs_to_copy
from threadline.storage.dialect.statements import BLOB_KEY, CHECKPOINT_KEY
from threadline.storage.ops.base import Op, Q, chunks
from threadline.storage.ops.read import splice_refs
from threadline.errors import ConfigError
from threadline.keys import thread_id_of


def thread_ids_of(values: Any, what: str = "thread_ids") -> list[str]:
    if isinstance(values, (str, bytes)):
        # the official savers' wording (``prune``)
        raise TypeError(f"{what} must be a sequence of thread IDs, not a {type(values).__name__}")
    return [thread_id_of(v) for v in values]


def delete_thread(d: Dialect, thread_id: Any, bc: codec.BlobCodec | None = None, *, tags: bool = True) -> Op[None]:
    """Delete every checkpoint, blob and write of a thread, in every checkpoint_ns, with its tags
    and pin (unless not ``tags``: the cold tier keeps them while the thread is in its archive)."""
    tid = thread_id_of(thread_id)
    _forget(bc, [tid])
    for statement in (*d.DELETE_THREAD, *(d.DELETE_THREAD_TAGS if tags else ())):
        yield Q(statement, (tid,))


def restat(d: Dialect, thread_ids: Iterable[str]) -> Op[None]:
    """Recompute the ``threads`` row (count, bytes) of threads after a bulk change; drop emptied threads.

    ``threads.bytes`` counts the thread's stored channel values (blob payloads), as
    ``put`` adds them: the same on every backend (Postgres renders JSONB at its own
    width, so checkpoint JSON is left out) and without a write to ``threads`` on
    every ``put_writes``.
    """
    for tid in sorted(set(thread_ids)):
        yield Q(d.restat_thread(), (tid, tid, tid))
        yield Q(d.DROP_EMPTY_THREAD, (tid,))


def delete_keys(d: Dialect, table: str, key: Sequence[str], keys: Sequence[tuple], one: str) -> Op[None]:
    """Delete the rows of ``table`` whose ``key`` columns match one of ``keys``: a statement per
    chunk of keys where the dialect has one (``Dialect.delete_by_keys``), else ``one`` (that
    statement for one key) per key."""
    sql = d.delete_by_keys(table, key)
    if sql is None:
        yield Q(one, list(keys), many=True)
        return
    for part in chunks(keys, DELETE_CHUNK):
        yield Q(sql, [list(column) for column in zip(*part)])


DELETE_CHUNK = 5000  # keys per statement: bounds the work (and the lock time) of one statement


def _live(d: Dialect, thread_id: str) -> Op[tuple[set[tuple[str, str, str]], list]]:
    """The blobs ``thread_id``'s checkpoints need (``liveness.live_blobs``: referenced directly or
    as a delta base), and its stored blob rows (checkpoint_ns, channel, version, base_version)."""
    docs = yield Q(d.THREAD_DOCS, (thread_id,))
    stored = yield Q(d.THREAD_BLOB_BASES, (thread_id,))
    live = live_blobs(
        ((ns, ch, v) for ns, doc in docs for ch, v in R.blob_pairs(d.load_object(doc, f"checkpoint of thread {thread_id!r}"))),
        {(ns, ch, v): b for ns, ch, v, b in stored},
    )
    return live, stored


def gc_blobs(d: Dialect, thread_id: str, found: tuple[set, list] | None = None) -> Op[int]:
    """Delete a thread's blobs that no checkpoint needs (``_live``, or ``found``: what it returned
    since the thread's checkpoints last changed). Returns rows deleted."""
    live, stored = found if found is not None else (yield from _live(d, thread_id))
    dead = [(thread_id, ns, ch, v) for ns, ch, v, _ in stored if (ns, ch, v) not in live]
    if dead:
        yield from delete_keys(d, "threadline_blobs", BLOB_KEY, dead, d.DELETE_BLOB)
    return len(dead)


def open_ref(bc: codec.BlobCodec, row: Sequence) -> tuple[str, bytes | None, str, list[tuple[str, int]]]:
    """A ``DELTA_REF`` blob row (``BLOB_COLUMNS``), its seal checked: its opened type and bytes,
    the checkpoint_id and the (task_id, idx) of the pending writes it references.
    CorruptRowError (EncryptionError) when it cannot be read."""
    tag, data = bc.open(R.blob_row_ref(*row[:4], row[6]), row[4], row[5])
    where = f"blob ({row[0]!r}, {row[1]!r}, {row[2]!r}, {row[3]!r})"
    return tag, data, *codec.ref_in(tag, data, where)[1:]


def copy_referenced_items(d: Dialect, tid: str, gone: set[tuple[str, str]], live: set, bc: codec.BlobCodec) -> Op[None]:
    """Once the checkpoints ``gone`` (checkpoint_ns, checkpoint_id) of thread ``tid`` are deleted and
    before their writes are, rewrite every delta the remaining checkpoints need (``live``, from
    ``_live``) that references those writes (``codec.refs``, ``liveness.refs_to_copy``) as the
    ``delta-list`` row it stands for: same key, base and value, its items copied in, compressed
    and sealed. CorruptRowError (EncryptionError) when such a delta cannot be read: the
    transaction, and so the deletion, is then rolled back."""
    found = yield Q(d.THREAD_BLOBS_LIKE, (tid, codec.DELTA_REF + "%"))
    opened: dict[tuple[str, str, str], dict[str, tuple]] = {}
    refs: dict[tuple[str, str, str], str] = {}
    for b in found:
        if (b[1], b[2], b[3]) not in live:
            continue  # garbage: gc_blobs deletes it
        tag, data, refs[(b[1], b[2], b[3])], _ = open_ref(bc, b)
        opened.setdefault((tid, b[1], b[2]), {})[b[3]] = (tag, data, b[6])
    copy = set(refs_to_copy(live, refs, gone))
    todo = {g: {v: row for v, row in group.items() if (*g[1:], v) in copy} for g, group in opened.items()}
    todo = {g: group for g, group in todo.items() if group}
    if not todo:
        return
    yield from splice_refs(d, todo, bc)
    rows = [
        (*bc.store(R.blob_row_ref(*g, v, base), tag, data), *g, v)
        for g, group in todo.items()
        for v, (tag, data, base) in group.items()
    ]
    yield Q(d.SET_BLOB_VALUE, rows, many=True)


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
    doomed: dict[str, set[tuple[str, str]]] = {}
    for tid, ns, cid in keys:
        doomed.setdefault(tid, set()).add((ns, cid))
    yield from delete_keys(d, "threadline_checkpoints", CHECKPOINT_KEY, keys, d.DELETE_CHECKPOINT)
    found = {}
    for tid, gone in sorted(doomed.items()):  # what the kept checkpoints (those left) need
        found[tid] = yield from _live(d, tid)
        yield from copy_referenced_items(d, tid, gone, found[tid][0], bc or codec.PLAIN)
    yield from delete_keys(d, "threadline_writes", CHECKPOINT_KEY, keys, d.DELETE_WRITES)
    for tid in sorted(doomed):
        yield from gc_blobs(d, tid, found[tid])
        if d.head_rows:  # a deleted checkpoint's values go with it (the next put writes a new head)
            yield Q(d.DELETE_HEADS, (tid,))
    yield from restat(d, sorted(doomed))


def set_parents(d: Dialect, tid: str, changes: Iterable[tuple], bc: codec.BlobCodec | None = None) -> Op[None]:
    """Give checkpoints of ``tid`` a new parent: ``changes`` are (checkpoint_ns, checkpoint_id,
    new parent or None, then the row as stored: parent, checkpoint, metadata (parsed), checksum).
    Each row is checked against its checksum first (a damaged row is never re-sealed as if
    it were sound: CorruptRowError) and gets the checksum of its new parent."""
    bc = bc or codec.PLAIN
    params = []
    for ns, cid, new_parent, parent, doc, meta, checksum in changes:
        bc.check_checkpoint(checksum, (tid, ns, cid), parent, doc, meta)
        params.append((new_parent, bc.checkpoint_checksum((tid, ns, cid), new_parent, doc, meta), tid, ns, cid))
    if params:
        yield Q(d.SET_PARENT, params, many=True)


def _parsed(d: Dialect, tid: str, row: Sequence[Any]) -> tuple:
    """A ``THREAD_CHECKPOINTS`` row with its checkpoint and metadata parsed: (ns, cid, parent, doc, meta, checksum)."""
    where = f"checkpoint ({tid!r}, {row[0]!r}, {row[1]!r})"
    return (row[0], row[1], row[2], d.load_object(row[3], where), d.load_json(row[4], where), row[5])


def delete_for_runs(d: Dialect, run_ids: Any, bc: codec.BlobCodec | None = None) -> Op[None]:
    """Delete the checkpoints (and their writes) whose metadata ``run_id`` is one of ``run_ids``.

    A kept checkpoint whose parent goes is re-parented onto its nearest kept ancestor (a
    root when there is none), so no parent link points at a deleted checkpoint."""
    ids = thread_ids_of(run_ids, "run_ids")
    keys: list[tuple] = []
    for part in chunks(ids, d.max_params):
        keys += (yield Q(d.checkpoints_of_runs(len(part)), part))
    doomed = {tuple(k) for k in keys}
    for tid in sorted({k[0] for k in doomed}):
        rows = {(r[0], r[1]): _parsed(d, tid, r) for r in (yield Q(d.THREAD_CHECKPOINTS, (tid,)))}
        changes = []
        for (ns, cid), row in sorted(rows.items()):
            if (tid, ns, cid) in doomed or not row[2] or (tid, ns, row[2]) not in doomed:
                continue
            up, seen = row[2], set()
            while up and (tid, ns, up) in doomed and up not in seen and (ns, up) in rows:
                seen.add(up)
                up = rows[(ns, up)][2]
            new = up if up and (ns, up) in rows and (tid, ns, up) not in doomed else None
            changes.append((ns, cid, new, *row[2:]))
        yield from set_parents(d, tid, changes, bc)
    yield from delete_checkpoints(d, sorted(doomed), bc)


def copy_thread(d: Dialect, source: Any, target: Any, bc: codec.BlobCodec | None = None) -> Op[None]:
    """Copy every checkpoint, blob and write of ``source`` into ``target`` (existing rows of target are kept).

    Every row is checked against its seal and sealed again to its new row: a value is
    bound to its thread (``codec.seal``), so rows are never copied as they are.
    Raises CorruptRowError for a source row that does not match its seal."""
    bc = bc or codec.PLAIN
    src, dst = thread_id_of(source), thread_id_of(target)
    if src == dst:
        raise ConfigError(f"copy_thread: source and target are the same thread {src!r}")
    cks = []
    for r in (yield Q(d.THREAD_CHECKPOINT_ROWS, (src,))):
        where = f"checkpoint ({src!r}, {r[1]!r}, {r[2]!r})"
        doc, meta = d.load_object(r[4], where), d.load_json(r[5], where)
        R.check_row(r[:10], doc, meta, bc)
        doc = R.resealed_sends(doc, (src, r[1], r[2]), (dst, r[1], r[2]), bc)
        checksum = bc.checkpoint_checksum((dst, r[1], r[2]), r[3], doc, meta)
        cks.append((dst, r[1], r[2], r[3], dumps_json(doc), dumps_json(meta, sort_keys=False), r[6], r[7], r[10], r[8], checksum))
    if cks:
        yield Q(d.INSERT_CHECKPOINT_ROW, cks, many=True)
    blobs = [(dst, *reseal_blob(bc, src, dst, b)) for b in (yield Q(d.THREAD_BLOBS, (src,)))]
    if blobs:
        yield Q(d.INSERT_BLOB, blobs, many=True)
    writes = []
    for w in (yield Q(d.THREAD_WRITES, (src,))):
        tag, data = bc.reseal(R.write_row_ref(src, *w[1:6]), R.write_row_ref(dst, *w[1:6]), w[7], w[8])
        writes.append((dst, *w[1:7], tag, data, w[9]))
    if writes:
        yield Q(d.insert_writes(False), writes, many=True)
    now = time.time()
    yield Q(d.ENSURE_COPIED_THREAD, (dst, now, now, dst))
    yield from restat(d, [dst])


def reseal_blob(bc: codec.BlobCodec, src: str, dst: str, b: Sequence[Any]) -> tuple:
    """A blob row (``BLOB_COLUMNS``) of thread ``src`` sealed for thread ``dst``: its columns after thread_id."""
    tag, data = bc.reseal(R.blob_row_ref(src, *b[1:4], b[6]), R.blob_row_ref(dst, *b[1:4], b[6]), b[4], b[5])
    return (*b[1:4], tag, data, b[6])


PRUNE_STRATEGIES = ("keep_latest", "delete")
# Metadata keys of a checkpoint written by a graph with a LangGraph DeltaChannel: its update
# counters (the channels by name), and LangGraph.js's mark of such a graph's threads (no names).
COUNTERS = "counters_since_delta_snapshot"
VERSIONED = "delta_writes_versioned"
DELTA_KEYS = frozenset({COUNTERS, VERSIONED})
# The official PostgresSaver's refusal, word for word: every refused thread_id, sorted, joined by ", ".
DELTA_REFUSAL = "keep_latest can't prune threads that use a DeltaChannel: {}"


def delta_snapshots(d: Dialect, thread_id: str, bc: codec.BlobCodec | None = None) -> Op[set[tuple[str, str, str]]]:
    """The (checkpoint_ns, channel, version) of a thread's blobs that hold a LangGraph
    ``_DeltaSnapshot`` (a DeltaChannel's stored snapshot, ``codec.holds_delta_snapshot``): the
    evidence of a DeltaChannel a thread carries without metadata markers (written by ``put``
    directly, or imported). Every row read is checked against its seal with ``bc``'s keys."""
    bc = bc or codec.PLAIN
    found: set[tuple[str, str, str]] = set()
    for r in (yield Q(d.THREAD_BLOBS_LIKE, (thread_id, "msgpack%"))):
        row = R.blob_row_ref(r[0], r[1], r[2], r[3], r[6])
        if codec.holds_delta_snapshot(*bc.open(row, r[4], r[5]), row):
            found.add((r[1], r[2], r[3]))
    return found


def prune(
    d: Dialect, thread_ids: Any, strategy: str, bc: codec.BlobCodec | None = None, keep_last: int = 1, *, snapshots: bool = True
) -> Op[None]:
    """Prune threads. ``delete`` removes them; ``keep_latest`` keeps each checkpoint_ns's latest
    checkpoint (its ``keep_last`` newest: the official RedisSaver's ``prune(keep_last=)``).

    As the official PostgresSaver's ``prune``, ``keep_latest`` also keeps the parent of a
    LangGraph < v4 head that has pending sends (its TASKS writes), and deletes a subgraph
    call's namespace (``parent:task`` with a ``:``) with the root checkpoint the call
    started from, once that one is saved and not kept.

    A thread using a ``DeltaChannel`` — metadata ``DELTA_KEYS`` on any checkpoint, or a blob
    holding a ``_DeltaSnapshot`` (``delta_snapshots``) — is refused on Postgres with
    NotImplementedError naming every such thread of the batch (``DELTA_REFUSAL``), nothing
    pruned, exactly when and as the official PostgresSaver refuses it. Elsewhere (the official
    SqliteSaver has no prune) it is pruned keeping what the latest checkpoint rebuilds from:
    for each DeltaChannel (named by its metadata ``counters_since_delta_snapshot``, or storing
    a ``_DeltaSnapshot``; every channel of a thread marked ``delta_writes_versioned``), every
    ancestor back to the nearest one that stores the channel's value, with its writes, so
    ``get_delta_channel_history`` reads the same before and after. ``snapshots=False`` leaves
    out the stored-snapshot evidence there (a shallow saver's prune after each put, which must
    not read every value of the thread; LangGraph's own DeltaChannel graphs write the metadata).
    A kept checkpoint whose parent is deleted becomes a root (parent_checkpoint_id NULL).

    Raises TypeError for a single string, ValueError for an unknown strategy (the official
    wording), ConfigError for a bad ``keep_last``.
    """
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"Unknown prune strategy: {strategy!r} (expected one of {', '.join(PRUNE_STRATEGIES)})")
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ConfigError(f"keep_last must be a positive integer, got {keep_last!r}")
    tids = thread_ids_of(thread_ids)
    if strategy == "delete":
        for tid in tids:
            yield from delete_thread(d, tid, bc)
        return
    doomed: list[tuple] = []
    orphaned: dict[str, list[tuple]] = {}
    refused: list[str] = []
    for tid in dict.fromkeys(tids):
        found = yield Q(d.THREAD_CHECKPOINTS, (tid,))
        if not found:
            continue
        metas = {(r[0], r[1]): d.load_json(r[4], f"checkpoint ({tid!r}, {r[0]!r}, {r[1]!r})") for r in found}
        marked = {ns for (ns, _), meta in metas.items() if DELTA_KEYS & meta.keys()}
        if d.prune_refuses_delta_threads:
            if marked or (yield from delta_snapshots(d, tid, bc)):
                refused.append(tid)  # every thread is checked: the message names them all
            if refused:
                continue
        nonempty = {tuple(r) for r in (yield Q(d.THREAD_BLOBS_NOT_OF_TYPE, (tid, codec.EMPTY)))}
        with_sends = {tuple(r) for r in (yield Q(d.CHECKPOINTS_WRITING, (tid, TASKS)))}
        versioned = {ns for (ns, _), meta in metas.items() if VERSIONED in meta}
        kept = _keep_latest(d, tid, found, nonempty, with_sends, keep_last, None, versioned)
        if snapshots and not d.prune_refuses_delta_threads and len(kept) < len(found):
            # something goes: keep what a channel storing a _DeltaSnapshot rebuilds from, too
            channels: dict[str, set[str]] = {}
            for ns, ch, _ in (yield from delta_snapshots(d, tid, bc)):
                channels.setdefault(ns, set()).add(ch)
            if channels:
                kept = _keep_latest(d, tid, found, nonempty, with_sends, keep_last, channels, versioned)
        doomed += [(tid, r[0], r[1]) for r in found if (r[0], r[1]) not in kept]
        orphaned[tid] = [
            (r[0], r[1], None, *_parsed(d, tid, r)[2:]) for r in found if (r[0], r[1]) in kept and r[2] and (r[0], r[2]) not in kept
        ]
    if refused:
        # the whole batch is one transaction and nothing is written yet: nothing is pruned, as the official saver
        raise NotImplementedError(DELTA_REFUSAL.format(", ".join(sorted(refused))))
    for tid, rows in orphaned.items():
        yield from set_parents(d, tid, rows, bc)
    yield from delete_checkpoints(d, doomed, bc)


def _keep_latest(
    d: Dialect,
    tid: str,
    found: list,
    nonempty: set,
    with_sends: set,
    last: int = 1,
    channels: dict[str, set[str]] | None = None,
    versioned: set[str] | frozenset[str] = frozenset(),
) -> set[tuple[str, str]]:
    """The (checkpoint_ns, checkpoint_id) ``prune(keep_latest)`` keeps of one thread's
    checkpoint rows (``THREAD_CHECKPOINTS``), given its blobs holding a value and the
    checkpoints with TASKS writes: each namespace's ``last`` newest, with what they need.
    ``channels``: per namespace, the DeltaChannels known from their stored snapshots;
    ``versioned``: the namespaces marked ``delta_writes_versioned``, where every channel may be one."""
    by_id = {(r[0], r[1]): r for r in found}
    docs: dict[tuple[str, str], Any] = {}

    def versions(key: tuple[str, str]) -> Any:
        if key not in docs:
            docs[key] = d.load_json(by_id[key][3], f"checkpoint ({tid!r}, {key[0]!r}, {key[1]!r})")
        return R.all_versions(docs[key])

    lineage = Lineage({k: r[2] for k, r in by_id.items()}, versions, nonempty)
    keep: set[tuple[str, str]] = set()
    roots: dict[str, str | None] = {}
    for ns in sorted({r[0] for r in found}):
        newest = sorted((r[1] for r in found if r[0] == ns), reverse=True)[:last]
        for head in newest:
            keep.add((ns, head))
            where = f"checkpoint ({tid!r}, {ns!r}, {head!r})"
            doc, meta = d.load_json(by_id[(ns, head)][3], where), d.load_json(by_id[(ns, head)][4], where)
            parent = by_id[(ns, head)][2]
            if R.needs_parent_sends(parent, doc) and (ns, parent) in with_sends:
                keep.add((ns, parent))
            if head == newest[0]:
                roots[ns] = (meta.get("parents") or {}).get("") if isinstance(meta.get("parents"), dict) else None
            # the ancestors the checkpoint rebuilds its DeltaChannel values from, with their writes
            delta = set((channels or {}).get(ns, ())) | (set(R.all_versions(doc)) if ns in versioned else set())
            keep |= {(ns, cid) for cid in lineage.needs(ns, parent, meta, delta)}
    # a subgraph call goes with the saved root checkpoint it started from
    calls = {ns for ns, root in roots.items() if ":" in ns and ("", root) in by_id and ("", root) not in keep}
    return {k for k in keep if k[0] not in calls}
