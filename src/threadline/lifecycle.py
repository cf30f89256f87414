"""Lifecycle operations: rollback as a new branch, fork to a new thread, delete one
checkpoint, retention (prune), consistency checks (fsck) and recovery (rebuild).

Like ``threadline.history``, each operation is a sans-IO generator (``*_op``) that
a saver runs in ONE transaction (``saver.run(op, write=True)`` /
``await saver.arun(op, write=True)``), plus a sync wrapper taking a saver.
Nothing here deletes what a kept checkpoint needs:

* a checkpoint is read from its row + the blobs its ``channel_versions`` name
  (+ its pending writes); blobs are shared by reference across checkpoints and
  branches, so deleting checkpoints only deletes blobs no remaining checkpoint
  references (``ops.gc_blobs``, which also keeps delta bases);
* a LangGraph ``DeltaChannel`` value is rebuilt from the writes of a
  checkpoint's ancestors back to the nearest stored snapshot (metadata
  ``counters_since_delta_snapshot``); those ancestors are never deleted while a
  kept checkpoint needs them.

Errors: ``NotFoundError`` (unknown thread/checkpoint), ``UnsafeOperationError``
(refused: the operation would break or overwrite something kept),
``ConfigError`` (malformed ids or options), ``CorruptRowError`` (unreadable row).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.engine import ops
from threadline.engine import rows as R
from threadline.engine.dialect import Dialect
from threadline.engine.ops import Op, Q
from threadline.errors import ConfigError, CorruptRowError, NotFoundError, ThreadlineError, UnsafeOperationError
from threadline.history import (
    _cid,
    _doc,
    _json,
    _ns,
    all_thread_ids_op,
    bind_graph,
    checkpoint_row_op,
    diff_values,
    head_op,
    iso,
    jsonable,
)
from threadline.keys import config_of, thread_id_of

# --- shared helpers ------------------------------------------------------------------


def _new_checkpoint_id(after: str | None, step: int) -> str:
    """A LangGraph checkpoint id (uuid6, as ``create_checkpoint`` makes) sorting after ``after``."""
    for _ in range(1000):
        cid = str(uuid6(clock_seq=max(step, -1) + 1 if step is not None else None))
        if after is None or cid > after:
            return cid
        time.sleep(0.0005)
    raise ThreadlineError(f"cannot make a checkpoint id newer than {after!r}: is the clock behind the stored ids?")


def _now_iso(now: float) -> str:
    return _dt.datetime.fromtimestamp(now, _dt.timezone.utc).isoformat()


def _delta_channels(meta: Mapping[str, Any]) -> list[str]:
    counters = meta.get("counters_since_delta_snapshot") or {}
    return sorted(counters) if isinstance(counters, Mapping) else []


@dataclass
class _Thread:
    """Everything about one thread's checkpoints except values (for planning)."""

    thread_id: str
    rows: dict[tuple[str, str], tuple]  # (ns, cid) -> (parent, step, source, created_at, doc, meta, ck_bytes)
    nonempty: set[tuple[str, str, str]]  # (ns, channel, version) blobs holding a value
    blob_sizes: dict[tuple[str, str, str], tuple[int, str | None]]  # (ns, ch, v) -> (bytes, base_version)
    write_bytes: dict[tuple[str, str], int]  # (ns, cid) -> stored bytes of its writes
    write_counts: dict[tuple[str, str], int]
    orphan_write_keys: set[tuple[str, str]] = field(default_factory=set)

    def children(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = defaultdict(list)
        for (ns, cid), r in sorted(self.rows.items()):
            if r[0] and (ns, r[0]) in self.rows:
                out[(ns, r[0])].append(cid)
        return out

    def head(self, ns: str = "") -> str | None:
        ids = [cid for (n, cid) in self.rows if n == ns]
        return max(ids) if ids else None

    def anchor(self, ns: str) -> str | None:
        """The root checkpoint a subgraph namespace's run started from (metadata ``parents[""]``)."""
        for (n, cid), r in sorted(self.rows.items()):
            if n == ns:
                parents = r[5].get("parents") or {}
                if isinstance(parents, Mapping) and parents.get(""):
                    return parents[""]
        return None

    def delta_requirements(self, ns: str, cid: str) -> set[str]:
        """Ancestors whose writes rebuild ``cid``'s DeltaChannel values (back to the nearest stored snapshot)."""
        need: set[str] = set()
        meta = self.rows[(ns, cid)][5]
        for ch in _delta_channels(meta):
            cur = self.rows[(ns, cid)][0]
            while cur and (ns, cur) in self.rows:
                need.add(cur)
                versions = self.rows[(ns, cur)][4].get("channel_versions") or {}
                if ch in versions and (ns, ch, R.version_key(versions[ch])) in self.nonempty:
                    break
                cur = self.rows[(ns, cur)][0]
        return need

    def live_blobs(self, kept: Iterable[tuple[str, str]]) -> set[tuple[str, str, str]]:
        live = {(ns, ch, v) for key in kept for ns in [key[0]] for ch, v in R.blob_pairs(self.rows[key][4])}
        todo = [k for k in live if k in self.blob_sizes]
        while todo:
            ns, ch, v = todo.pop()
            base = self.blob_sizes.get((ns, ch, v), (0, None))[1]
            if base is not None and (ns, ch, base) not in live:
                live.add((ns, ch, base))
                todo.append((ns, ch, base))
        return live


def _load_thread_op(d: Dialect, tid: str) -> Op[_Thread]:
    size_ck = f"{d.bytes_of('checkpoint', 'json')} + {d.bytes_of('metadata', 'json')}"
    found = yield Q(
        f"SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, checkpoint, metadata, {size_ck} "
        "FROM threadline_checkpoints WHERE thread_id = ?",
        (tid,),
    )
    rows = {}
    for r in found:
        where = f"checkpoint ({tid!r}, {r[0]!r}, {r[1]!r})"
        meta = _json(d, r[7], where)
        rows[(r[0], r[1])] = (r[2], r[3], r[4], float(r[5]), _doc(d, r[6], where), meta if isinstance(meta, dict) else {}, int(r[8]))
    blobs = yield Q(
        f"SELECT checkpoint_ns, channel, version, type, base_version, {d.bytes_of('blob', 'blob')} FROM threadline_blobs WHERE thread_id = ?",
        (tid,),
    )
    nonempty = {(b[0], b[1], b[2]) for b in blobs if b[3] != codec.EMPTY}
    sizes = {(b[0], b[1], b[2]): (int(b[5]), b[4]) for b in blobs}
    writes = yield Q(
        f"SELECT checkpoint_ns, checkpoint_id, COUNT(*), COALESCE(SUM({d.bytes_of('blob', 'blob')}), 0) FROM threadline_writes "
        "WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id",
        (tid,),
    )
    wb = {(w[0], w[1]): int(w[3]) for w in writes}
    wc = {(w[0], w[1]): int(w[2]) for w in writes}
    orphans = {k for k in wb if k not in rows}
    return _Thread(tid, rows, nonempty, sizes, wb, wc, orphans)


# --- rollback and fork ---------------------------------------------------------------


@dataclass
class BranchResult:
    """A checkpoint made by ``rollback`` or ``fork``.

    ``config`` is the RunnableConfig of the new checkpoint (the new head of
    ``thread_id``); ``parent_checkpoint_id`` its parent; ``source_*`` the checkpoint
    whose state it carries; ``previous_head`` the head before; ``blobs_copied`` the
    blob rows copied (0 for a rollback: values are shared by reference).
    """

    op: str
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    source_thread_id: str
    source_checkpoint_id: str
    previous_head: str | None
    blobs_copied: int = 0

    @property
    def config(self) -> dict:
        return config_of(self.thread_id, self.checkpoint_ns, self.checkpoint_id)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["config"] = self.config
        return d


_RESERVED_META = ("source", "step", "parents", "writes", "threadline_op", "forked_from", "counters_since_delta_snapshot")


def _branch_metadata(op: str, meta: Mapping[str, Any], tid: str, ns: str, cid: str) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in _RESERVED_META}
    out.update(
        {
            "source": "fork",
            "step": meta.get("step", -1),
            "parents": meta.get("parents") or {},
            "threadline_op": op,
            "forked_from": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid},
        }
    )
    if "counters_since_delta_snapshot" in meta:
        out["counters_since_delta_snapshot"] = meta["counters_since_delta_snapshot"]
    return out


def rollback_op(
    d: Dialect, serde: SerializerProtocol, thread_id: Any, checkpoint_id: str, *, checkpoint_ns: str = "", now: float | None = None
) -> Op[BranchResult]:
    """Make ``checkpoint_id``'s state the thread's head again, as a new branch (seed 000 §③).

    Writes ONE checkpoint: a copy of the target's checkpoint (same
    ``channel_versions`` and ``versions_seen`` — every value shared by reference,
    no blob copied) with a new, newer checkpoint_id, parent = the target, metadata
    ``source="fork"``, the target's ``step``, ``threadline_op="rollback"`` and
    ``forked_from``. Nothing is deleted: the old branch stays in history. The
    target's pending writes are not carried, so resuming (``graph.invoke(None,
    {"configurable": {"thread_id": …}})``) re-runs the target's next tasks.

    DeltaChannel state (metadata ``counters_since_delta_snapshot``) is rebuilt
    from the writes of a checkpoint's parent chain, and the target's own writes
    belong to the old branch; for such a target the new checkpoint is made a
    sibling of the target (parent = the target's parent), as LangGraph's own
    ``update_state(..., as_node="__copy__")`` does.

    Raises NotFoundError when the thread or checkpoint does not exist.
    """
    tid = thread_id_of(thread_id)
    ns = _ns(checkpoint_ns)
    row = yield from checkpoint_row_op(d, tid, ns, _cid(checkpoint_id))
    head = yield from head_op(d, tid, ns)
    return (yield from _write_branch(d, serde, "rollback", row, tid, ns, head, now))


def _write_branch(
    d: Dialect, serde: SerializerProtocol, op: str, row: tuple, to_tid: str, ns: str, head: str | None, now: float | None
) -> Op[BranchResult]:
    src_tid, cid = row[0], row[2]
    where = f"checkpoint ({src_tid!r}, {ns!r}, {cid!r})"
    doc = _doc(d, row[4], where)
    meta = _json(d, row[5], where)
    meta = meta if isinstance(meta, dict) else {}
    now = time.time() if now is None else now
    step = meta.get("step", -1) if isinstance(meta.get("step", -1), int) else -1
    new_id = _new_checkpoint_id(head, step)
    checkpoint = {**doc, "id": new_id, "ts": _now_iso(now), "channel_values": {}}
    metadata = _branch_metadata(op, meta, src_tid, ns, cid)
    if op == "rollback":
        parent = row[3] if _delta_channels(meta) else cid
    else:
        parent = None
    config = {"configurable": {"thread_id": to_tid, "checkpoint_ns": ns, "checkpoint_id": parent or ""}}
    if parent is None:
        config["configurable"].pop("checkpoint_id")
    yield from ops.put(d, serde, config, checkpoint, metadata, {})
    return BranchResult(op, to_tid, ns, new_id, parent, src_tid, cid, head)


def rollback(saver: Any, thread_id: Any, checkpoint_id: str, **kwargs: Any) -> BranchResult:
    """Sync ``rollback_op`` (one transaction)."""
    return saver.run(rollback_op(saver.dialect, saver.serde, thread_id, checkpoint_id, **kwargs), write=True)


def fork_op(
    d: Dialect,
    serde: SerializerProtocol,
    thread_id: Any,
    checkpoint_id: str,
    to_thread: Any,
    *,
    checkpoint_ns: str = "",
    now: float | None = None,
) -> Op[BranchResult]:
    """Start a new thread ``to_thread`` from the state at ``checkpoint_id`` of ``thread_id``.

    The new thread gets the blobs the checkpoint references (copied as stored,
    with any delta bases, values never decoded) and ONE root checkpoint carrying
    that state (same ``channel_versions``/``versions_seen``, metadata
    ``source="fork"``, ``threadline_op="fork"``, ``forked_from``). Resuming the
    new thread runs the checkpoint's next tasks. The source thread is untouched.

    Raises UnsafeOperationError when ``to_thread`` already has checkpoints, or
    when the checkpoint holds DeltaChannel state (rebuilt from ancestors' writes,
    which a one-checkpoint thread does not have); NotFoundError for an unknown
    checkpoint.
    """
    tid = thread_id_of(thread_id)
    dst = thread_id_of(to_thread)
    ns = _ns(checkpoint_ns)
    if dst == tid:
        raise ConfigError(f"fork: target thread {dst!r} is the source thread; use rollback to branch within a thread")
    row = yield from checkpoint_row_op(d, tid, ns, _cid(checkpoint_id))
    exists = yield Q("SELECT 1 FROM threadline_checkpoints WHERE thread_id = ? LIMIT 1", (dst,))
    if exists:
        raise UnsafeOperationError(f"fork: thread {dst!r} already exists; pick a new thread id (or delete it first)")
    meta = _json(d, row[5], f"checkpoint ({tid!r}, {ns!r}, {checkpoint_id!r})")
    if isinstance(meta, dict) and _delta_channels(meta):
        raise UnsafeOperationError(
            f"fork: checkpoint {checkpoint_id!r} holds DeltaChannel state {_delta_channels(meta)} that is rebuilt from its "
            "ancestors' writes; fork is not supported for it (use rollback, or copy_thread for the whole thread)"
        )
    doc = _doc(d, row[4], "checkpoint")
    wanted = R.blob_pairs(doc)
    copied = 0
    while wanted:
        bases: set[tuple[str, str]] = set()
        for part in ops.chunks(wanted, d.max_params // 2 - 4):
            found = yield Q(
                "INSERT INTO threadline_blobs (thread_id, checkpoint_ns, channel, version, type, blob, base_version) "
                "SELECT ?, checkpoint_ns, channel, version, type, blob, base_version FROM threadline_blobs "
                f"WHERE thread_id = ? AND checkpoint_ns = ? AND (channel, version) IN ({ops.values_list(2, len(part))}) "
                "ON CONFLICT DO NOTHING RETURNING channel, base_version",
                [dst, tid, ns, *ops.flat(part)],
            )
            copied += len(found)
            bases |= {(r[0], r[1]) for r in found if r[1] is not None}
        wanted = sorted(bases)
    result = yield from _write_branch(d, serde, "fork", row, dst, ns, None, now)
    result.blobs_copied = copied
    yield from ops.restat(d, [dst])
    return result


def fork(saver: Any, thread_id: Any, checkpoint_id: str, to_thread: Any, **kwargs: Any) -> BranchResult:
    """Sync ``fork_op`` (one transaction)."""
    return saver.run(fork_op(saver.dialect, saver.serde, thread_id, checkpoint_id, to_thread, **kwargs), write=True)


# --- deleting ---------------------------------------------------------------------------

DELETE_MODES = ("refuse", "with_descendants", "reparent")


@dataclass
class DeletePlan:
    """What deleting checkpoints removes (or, with ``dry_run``, would remove).

    ``checkpoints``: (checkpoint_ns, checkpoint_id) removed, subgraph runs
    started from them included; ``reparented``: checkpoint_id → its new parent
    (None: becomes a root); ``writes``: pending writes removed; ``blobs``: blob
    rows no kept checkpoint references any more; ``bytes_freed``: stored bytes of
    all of those. ``executed`` is False for a dry run.
    """

    thread_id: str
    checkpoints: list[tuple[str, str]]
    reparented: dict[str, str | None]
    writes: int
    blobs: int
    bytes_freed: int
    executed: bool
    thread_deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoints": [{"checkpoint_ns": ns, "checkpoint_id": cid} for ns, cid in self.checkpoints],
            "reparented": self.reparented,
            "writes": self.writes,
            "blobs": self.blobs,
            "bytes_freed": self.bytes_freed,
            "executed": self.executed,
            "thread_deleted": self.thread_deleted,
        }


def _plan(t: _Thread, doomed: set[tuple[str, str]], reparent: dict[tuple[str, str], str | None]) -> DeletePlan:
    """Close ``doomed`` over subgraph runs, check kept checkpoints stay rebuildable, size it."""
    doomed = set(doomed)
    # subgraph namespaces whose anchor root checkpoint goes
    for ns in sorted({n for n, _ in t.rows if n}):
        top = ns.split("|", 1)[0]
        anchor = t.anchor(top)
        if anchor and ("", anchor) in doomed:
            doomed |= {(n, c) for (n, c) in t.rows if n == ns}
    kept = [k for k in t.rows if k not in doomed]
    for ns, cid in kept:
        need = t.delta_requirements(ns, cid)
        lost = sorted(c for c in need if (ns, c) in doomed)
        if lost:
            raise UnsafeOperationError(
                f"checkpoint {cid!r} (thread {t.thread_id!r}) rebuilds its DeltaChannel state from the writes of "
                f"{lost}; deleting them would break it"
            )
        if (ns, cid) in reparent:
            continue
    live = t.live_blobs(kept)
    dead_blobs = [k for k in t.blob_sizes if k not in live]
    writes = sum(t.write_counts.get(k, 0) for k in doomed)
    freed = (
        sum(t.rows[k][6] for k in doomed)
        + sum(t.write_bytes.get(k, 0) for k in doomed)
        + sum(t.blob_sizes[k][0] for k in dead_blobs)
    )
    return DeletePlan(
        t.thread_id,
        sorted(doomed),
        {cid: parent for (ns, cid), parent in reparent.items()},
        writes,
        len(dead_blobs),
        freed,
        executed=False,
        thread_deleted=not kept and bool(t.rows),
    )


def _execute_plan(d: Dialect, t: _Thread, plan: DeletePlan, reparent: Mapping[tuple[str, str], str | None]) -> Op[None]:
    if reparent:
        yield Q(
            "UPDATE threadline_checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            [(parent, t.thread_id, ns, cid) for (ns, cid), parent in reparent.items()],
            many=True,
        )
    if plan.thread_deleted:
        yield from ops.delete_thread(d, t.thread_id)
    else:
        yield from ops.delete_checkpoints(d, [(t.thread_id, ns, cid) for ns, cid in plan.checkpoints])
    plan.executed = True


def delete_checkpoint_op(
    d: Dialect,
    thread_id: Any,
    checkpoint_id: str,
    *,
    checkpoint_ns: str = "",
    mode: str = "refuse",
    dry_run: bool = False,
) -> Op[DeletePlan]:
    """Delete one checkpoint (with its pending writes and the subgraph runs started from it).

    ``mode`` says what happens to its children:

    * ``"refuse"`` (default): raise UnsafeOperationError when it has children;
    * ``"with_descendants"``: delete its whole subtree too;
    * ``"reparent"``: its children take its parent as their parent (they become
      roots if it had none); their state is unchanged — every checkpoint
      stores its full ``channel_versions``.

    Blobs only the deleted checkpoints referenced are garbage-collected. Raises
    UnsafeOperationError when a kept checkpoint rebuilds DeltaChannel state from
    a deleted one's writes. ``dry_run`` returns the plan without changing anything.
    """
    if mode not in DELETE_MODES:
        raise ConfigError(f"mode must be one of {DELETE_MODES}, got {mode!r}")
    tid = thread_id_of(thread_id)
    ns = _ns(checkpoint_ns)
    yield from checkpoint_row_op(d, tid, ns, _cid(checkpoint_id))
    t = yield from _load_thread_op(d, tid)
    children = t.children()
    kids = children.get((ns, checkpoint_id), [])
    doomed = {(ns, checkpoint_id)}
    reparent: dict[tuple[str, str], str | None] = {}
    if kids:
        if mode == "refuse":
            raise UnsafeOperationError(
                f"checkpoint {checkpoint_id!r} of thread {tid!r} has {len(kids)} child checkpoint(s) {kids}; "
                "pass mode='with_descendants' (CLI --with-descendants) to delete the subtree, or mode='reparent' "
                "(--reparent) to attach the children to its parent"
            )
        if mode == "with_descendants":
            todo = list(kids)
            while todo:
                c = todo.pop()
                doomed.add((ns, c))
                todo += children.get((ns, c), [])
        else:
            parent = t.rows[(ns, checkpoint_id)][0]
            reparent = {(ns, c): parent for c in kids}
    plan = _plan(t, doomed, reparent)
    if not dry_run:
        yield from _execute_plan(d, t, plan, reparent)
    return plan


def delete_checkpoint(saver: Any, thread_id: Any, checkpoint_id: str, **kwargs: Any) -> DeletePlan:
    """Sync ``delete_checkpoint_op`` (one transaction)."""
    return saver.run(delete_checkpoint_op(saver.dialect, thread_id, checkpoint_id, **kwargs), write=True)


# --- retention ------------------------------------------------------------------------


@dataclass
class RetentionPolicy:
    """Which checkpoints ``prune`` removes. A checkpoint goes when ANY given rule selects it.

    * ``keep_last``: per thread, root-namespace checkpoints beyond the newest N go;
    * ``older_than``: root-namespace checkpoints created more than this many
      seconds ago go;
    * ``idle_longer_than``: threads not updated for this many seconds go entirely.

    Always kept: each thread's head (unless the whole thread goes), the ancestors
    a kept checkpoint needs to rebuild DeltaChannel state, and the subgraph runs
    started from a kept root checkpoint (a subgraph run goes with its root
    checkpoint). A kept checkpoint whose parent goes becomes a root.
    """

    keep_last: int | None = None
    older_than: float | None = None
    idle_longer_than: float | None = None

    def __post_init__(self) -> None:
        if self.keep_last is not None and (not isinstance(self.keep_last, int) or self.keep_last < 1):
            raise ConfigError(f"keep_last must be a positive integer, got {self.keep_last!r}")
        for name in ("older_than", "idle_longer_than"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or v < 0):
                raise ConfigError(f"{name} must be a non-negative number of seconds, got {v!r}")
        if self.keep_last is None and self.older_than is None and self.idle_longer_than is None:
            raise ConfigError("a retention policy needs at least one of keep_last, older_than, idle_longer_than")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def prune_thread_op(
    d: Dialect, thread_id: Any, policy: RetentionPolicy, *, dry_run: bool = False, now: float | None = None
) -> Op[DeletePlan]:
    """Apply a retention policy to one thread (one transaction): plan, check, delete, GC, restat."""
    tid = thread_id_of(thread_id)
    now = time.time() if now is None else now
    t = yield from _load_thread_op(d, tid)
    if not t.rows:
        return DeletePlan(tid, [], {}, 0, 0, 0, executed=not dry_run)
    if policy.idle_longer_than is not None:
        updated = yield Q("SELECT updated_at FROM threadline_threads WHERE thread_id = ?", (tid,))
        last = float(updated[0][0]) if updated else max(r[3] for r in t.rows.values())
        if last <= now - policy.idle_longer_than:
            plan = _plan(t, set(t.rows), {})
            if not dry_run:
                yield from ops.delete_thread(d, tid)
                plan.executed = True
            return plan
    root = sorted((cid for ns, cid in t.rows if ns == ""), reverse=True)
    doomed: set[tuple[str, str]] = set()
    if policy.keep_last is not None:
        doomed |= {("", cid) for cid in root[policy.keep_last:]}
    if policy.older_than is not None:
        cutoff = now - policy.older_than
        doomed |= {("", cid) for cid in root if t.rows[("", cid)][3] < cutoff}
    if root:
        doomed.discard(("", root[0]))
    # keep what kept checkpoints need for DeltaChannel state
    changed = True
    while changed:
        changed = False
        for ns, cid in [k for k in t.rows if k not in doomed]:
            for need in t.delta_requirements(ns, cid):
                if (ns, need) in doomed:
                    doomed.discard((ns, need))
                    changed = True
    reparent = {
        (ns, cid): None
        for (ns, cid), r in t.rows.items()
        if (ns, cid) not in doomed and ns == "" and r[0] and (ns, r[0]) in doomed
    }
    if not doomed:
        return DeletePlan(tid, [], {}, 0, 0, 0, executed=not dry_run)
    plan = _plan(t, doomed, reparent)
    # subgraph checkpoints whose in-namespace parent goes become roots too
    gone = set(plan.checkpoints)
    for (ns, cid), r in t.rows.items():
        if ns and (ns, cid) not in gone and r[0] and (ns, r[0]) in gone:
            reparent[(ns, cid)] = None
            plan.reparented[cid] = None
    if not dry_run:
        yield from _execute_plan(d, t, plan, reparent)
    return plan


@dataclass
class PruneReport:
    """The result of ``prune`` over many threads: per-thread plans that removed something, and totals."""

    policy: RetentionPolicy
    dry_run: bool
    plans: list[DeletePlan]

    @property
    def checkpoints(self) -> int:
        return sum(len(p.checkpoints) for p in self.plans)

    @property
    def bytes_freed(self) -> int:
        return sum(p.bytes_freed for p in self.plans)

    @property
    def threads_deleted(self) -> list[str]:
        return [p.thread_id for p in self.plans if p.thread_deleted]

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy.to_json(),
            "dry_run": self.dry_run,
            "checkpoints": self.checkpoints,
            "writes": sum(p.writes for p in self.plans),
            "blobs": sum(p.blobs for p in self.plans),
            "bytes_freed": self.bytes_freed,
            "threads_deleted": self.threads_deleted,
            "threads": [p.to_json() for p in self.plans],
        }


def prune(
    saver: Any,
    policy: RetentionPolicy,
    *,
    thread_ids: Sequence[Any] | None = None,
    dry_run: bool = False,
    now: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> PruneReport:
    """Apply ``policy`` to ``thread_ids`` (default: every thread), one transaction per thread.

    ``progress(done, total, thread_id)`` is called after each thread. Returns a
    ``PruneReport`` (with ``dry_run``: what would go, nothing changed).
    """
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else saver.run(all_thread_ids_op(saver.dialect))
    now = time.time() if now is None else now
    plans = []
    for i, tid in enumerate(ids):
        plan = saver.run(prune_thread_op(saver.dialect, tid, policy, dry_run=dry_run, now=now), write=not dry_run)
        if plan.checkpoints:
            plans.append(plan)
        if progress:
            progress(i + 1, len(ids), tid)
    return PruneReport(policy, dry_run, plans)


# --- fsck ---------------------------------------------------------------------------------


@dataclass
class Finding:
    """One problem ``fsck`` found.

    ``kind``: ``dangling_blob`` (a checkpoint names a blob that is missing),
    ``dangling_base`` (a delta blob's base is missing), ``orphan_writes`` (writes of a
    checkpoint that does not exist), ``orphan_blobs`` (blobs no checkpoint
    references), ``broken_parent`` (parent_checkpoint_id names a missing
    checkpoint), ``parent_cycle``, ``unreadable_checkpoint``, ``unreadable_value``
    (a blob or write that does not decode; ``deep`` only), ``thread_index`` (the
    ``threads`` row is missing or its counts are stale). ``repairable`` says whether
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

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


REPAIRS = {
    "orphan_writes": "deleted (their checkpoint does not exist, nothing can read them)",
    "orphan_blobs": "garbage-collected (no checkpoint references them)",
    "broken_parent": "parent link cleared (the checkpoint becomes a root; its own state is complete)",
    "thread_index": "threads row recomputed from the tables",
}


def fsck_thread_op(d: Dialect, serde: SerializerProtocol, thread_id: str, *, repair: bool = False, deep: bool = False) -> Op[list[Finding]]:
    """Check one thread (one transaction); with ``repair`` fix what is safe (see ``REPAIRS``)."""
    tid = thread_id
    findings: list[Finding] = []
    # unreadable checkpoint rows first: everything else needs the docs
    raw = yield Q("SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM threadline_checkpoints WHERE thread_id = ?", (tid,))
    bad: set[tuple[str, str]] = set()
    for ns, cid, _, doc, meta in raw:
        try:
            _doc(d, doc, f"checkpoint ({tid!r}, {ns!r}, {cid!r})")
            m = _json(d, meta, f"metadata of checkpoint ({tid!r}, {ns!r}, {cid!r})")
            if not isinstance(m, dict):
                raise CorruptRowError(f"metadata of checkpoint ({tid!r}, {ns!r}, {cid!r}) is not a JSON object")
        except CorruptRowError as exc:
            bad.add((ns, cid))
            findings.append(Finding("unreadable_checkpoint", tid, ns, cid, str(exc), False))
    if bad:
        # plan around the unreadable rows: treat them as present but empty
        t = _Thread(tid, {}, set(), {}, {}, {})
        size_ck = f"{d.bytes_of('checkpoint', 'json')} + {d.bytes_of('metadata', 'json')}"
        found = yield Q(
            f"SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, checkpoint, metadata, {size_ck} "
            "FROM threadline_checkpoints WHERE thread_id = ?",
            (tid,),
        )
        for r in found:
            if (r[0], r[1]) in bad:
                t.rows[(r[0], r[1])] = (r[2], r[3], r[4], float(r[5]), {}, {}, int(r[8]))
            else:
                t.rows[(r[0], r[1])] = (r[2], r[3], r[4], float(r[5]), _doc(d, r[6], ""), _json(d, r[7], ""), int(r[8]))
        loaded = yield from _load_blobs_and_writes_op(d, tid)
        t.nonempty, t.blob_sizes, t.write_bytes, t.write_counts = loaded
        t.orphan_write_keys = {k for k in t.write_bytes if k not in t.rows}
    else:
        t = yield from _load_thread_op(d, tid)
    # dangling blob references
    for (ns, cid), r in sorted(t.rows.items()):
        missing = [(ch, v) for ch, v in R.blob_pairs(r[4]) if (ns, ch, v) not in t.blob_sizes]
        if missing:
            findings.append(
                Finding("dangling_blob", tid, ns, cid, f"missing blobs {missing[:5]}{' …' if len(missing) > 5 else ''}; "
                        "recover them from the parent's writes with `threadline rebuild --apply`", False, count=len(missing))
            )
    for (ns, ch, v), (_, base) in sorted(t.blob_sizes.items()):
        if base is not None and (ns, ch, base) not in t.blob_sizes:
            findings.append(Finding("dangling_base", tid, ns, None, f"blob ({ch!r}, {v!r}) is a delta on missing version {base!r}", False))
    # broken parents and cycles
    broken: list[tuple[str, str]] = []
    for (ns, cid), r in sorted(t.rows.items()):
        if r[0] and (ns, r[0]) not in t.rows:
            broken.append((ns, cid))
            findings.append(Finding("broken_parent", tid, ns, cid, f"parent {r[0]!r} does not exist", True))
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
    if not bad:
        live = t.live_blobs(t.rows)
        orphan_blobs = sorted(k for k in t.blob_sizes if k not in live)
        if orphan_blobs:
            findings.append(
                Finding("orphan_blobs", tid, None, None,
                        f"{len(orphan_blobs)} blob(s), {sum(t.blob_sizes[k][0] for k in orphan_blobs)} bytes, referenced by no checkpoint",
                        True, count=len(orphan_blobs))
            )
    # thread index
    idx = yield Q("SELECT checkpoint_count, bytes FROM threadline_threads WHERE thread_id = ?", (tid,))
    count = len(t.rows)
    if count and not idx:
        findings.append(Finding("thread_index", tid, None, None, "no threads row", True))
    elif idx and int(idx[0][0]) != count:
        findings.append(Finding("thread_index", tid, None, None, f"threads row counts {idx[0][0]} checkpoints, table has {count}", True))
    elif idx and not count:
        findings.append(Finding("thread_index", tid, None, None, "threads row for a thread without checkpoints", True))
    # deep: decode every value
    if deep:
        for ns, cid in sorted(k for k in t.rows if k not in bad):
            found = yield Q(
                f"SELECT {R.CHECKPOINT_COLUMNS} FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (tid, ns, cid),
            )
            try:
                yield from ops.load_tuples(d, serde, found)
            except CorruptRowError as exc:
                findings.append(Finding("unreadable_value", tid, ns, cid, str(exc), False))
    if repair:
        if orphan_writes:
            yield Q("DELETE FROM threadline_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    [(tid, ns, cid) for ns, cid in orphan_writes], many=True)
        if broken:
            yield Q("UPDATE threadline_checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    [(tid, ns, cid) for ns, cid in broken], many=True)
        if orphan_blobs:
            yield from ops.gc_blobs(d, tid)
        if any(f.kind == "thread_index" for f in findings) or orphan_writes or orphan_blobs:
            if count:
                now = time.time()
                created = min(r[3] for r in t.rows.values())
                updated = max(r[3] for r in t.rows.values())
                yield Q(
                    "INSERT INTO threadline_threads (thread_id, created_at, updated_at, checkpoint_count, bytes) VALUES (?, ?, ?, 0, 0) "
                    "ON CONFLICT (thread_id) DO NOTHING",
                    (tid, created, max(updated, min(now, updated))),
                )
                yield from ops.restat(d, [tid])
            else:
                yield Q("DELETE FROM threadline_threads WHERE thread_id = ?", (tid,))
                yield Q("DELETE FROM threadline_blobs WHERE thread_id = ?", (tid,))
                yield Q("DELETE FROM threadline_writes WHERE thread_id = ?", (tid,))
        for f in findings:
            if f.repairable:
                f.repaired = True
    return findings


def _load_blobs_and_writes_op(d: Dialect, tid: str) -> Op[tuple]:
    blobs = yield Q(
        f"SELECT checkpoint_ns, channel, version, type, base_version, {d.bytes_of('blob', 'blob')} FROM threadline_blobs WHERE thread_id = ?",
        (tid,),
    )
    writes = yield Q(
        f"SELECT checkpoint_ns, checkpoint_id, COUNT(*), COALESCE(SUM({d.bytes_of('blob', 'blob')}), 0) FROM threadline_writes "
        "WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id",
        (tid,),
    )
    return (
        {(b[0], b[1], b[2]) for b in blobs if b[3] != codec.EMPTY},
        {(b[0], b[1], b[2]): (int(b[5]), b[4]) for b in blobs},
        {(w[0], w[1]): int(w[3]) for w in writes},
        {(w[0], w[1]): int(w[2]) for w in writes},
    )


def every_thread_id_op(d: Dialect) -> Op[list[str]]:
    """Every thread_id found in any table (fsck also looks at rows whose thread has no checkpoint)."""
    found = yield Q(
        "SELECT thread_id FROM threadline_checkpoints UNION SELECT thread_id FROM threadline_blobs UNION SELECT thread_id FROM threadline_writes "
        "UNION SELECT thread_id FROM threadline_threads"
    )
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
        return not [f for f in self.findings if not f.repaired]

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
    for i, tid in enumerate(ids):
        findings += saver.run(fsck_thread_op(saver.dialect, saver.serde, tid, repair=repair, deep=deep), write=repair)
        if progress:
            progress(i + 1, len(ids), tid)
    return FsckReport(len(ids), findings, repair, deep)


# --- rebuild (recovery from writes) ----------------------------------------------------------


@dataclass
class RebuildResult:
    """Channel values of a checkpoint recomputed from its parent's state and the parent's writes.

    ``values``: every channel the recomputation produced (decoded).
    ``matches``: channels whose stored value equals the recomputed one;
    ``differs``: channel → ``diff_values`` entry for those that differ;
    ``missing``: channels the checkpoint names whose blob is missing (dangling);
    ``restored``: channels whose missing blob ``apply`` wrote back.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str
    values: dict[str, Any]
    matches: list[str]
    differs: dict[str, Any]
    missing: list[str]
    restored: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_ns": self.checkpoint_ns,
            "checkpoint_id": self.checkpoint_id,
            "parent_checkpoint_id": self.parent_checkpoint_id,
            "values": jsonable(self.values),
            "matches": self.matches,
            "differs": self.differs,
            "missing": self.missing,
            "restored": self.restored,
        }


def recompute_values(graph: Any, saver: Any, parent_tuple: Any) -> dict[str, Any]:
    """Apply a checkpoint's pending writes to its state with the graph's channels (pure LangGraph logic).

    Mirrors the Pregel loop's ``after_tick``: the parent's channels are restored
    (``channels_from_checkpoint``), its next tasks planned (``prepare_next_tasks``),
    each task given its stored writes, and ``apply_writes`` run with the graph's
    reducers. Returns every channel's value after the step.
    """
    from langgraph._internal._typing import MISSING  # type: ignore[attr-defined]
    from langgraph.pregel._algo import PregelTaskWrites, apply_writes, prepare_next_tasks
    from langgraph.pregel._checkpoint import channels_from_checkpoint, copy_checkpoint

    g = bind_graph(graph, saver)
    checkpoint = copy_checkpoint(parent_tuple.checkpoint)
    channels, managed = channels_from_checkpoint(g.channels, checkpoint, saver=saver, config=parent_tuple.config)
    step = (parent_tuple.metadata or {}).get("step", -1) + 1
    writes = parent_tuple.pending_writes or []
    null_writes = [(c, v) for t, c, v in writes if t == "00000000-0000-0000-0000-000000000000"]
    if null_writes:
        apply_writes(checkpoint, channels, [PregelTaskWrites((), "__input__", null_writes, [])], None, g.trigger_to_nodes)
    tasks = prepare_next_tasks(
        checkpoint, writes, g.nodes, channels, managed, parent_tuple.config, step, step + 2, for_execution=True,
        store=None, checkpointer=saver, manager=None,
    )
    by_task: dict[str, list] = defaultdict(list)
    for t, c, v in writes:
        by_task[t].append((c, v))
    ran = []
    for task in tasks.values():
        if task.id in by_task:
            task.writes.extend(by_task[task.id])
            ran.append(task)
    apply_writes(checkpoint, channels, ran, saver.get_next_version, g.trigger_to_nodes)
    out = {}
    for name, ch in channels.items():
        if name not in checkpoint["channel_versions"]:
            continue  # as create_checkpoint: a never-written channel has no value
        value = ch.checkpoint()
        if value is not MISSING:
            out[name] = value
    return out


def rebuild(
    saver: Any, graph: Any, thread_id: Any, checkpoint_id: str, *, checkpoint_ns: str = "", apply: bool = False
) -> RebuildResult:
    """Recompute a checkpoint's channel values from its parent's state + the parent's writes (seed 000 "故障恢复").

    The writes stored against the parent are the tasks' outputs that produced
    this checkpoint; folding them into the parent's channels with the compiled
    graph's reducers gives this checkpoint's values. Compared with what is stored:
    ``matches`` / ``differs`` / ``missing`` (dangling blob references). With
    ``apply``, each MISSING blob is written back under the version the
    checkpoint names (insert-or-ignore: an existing blob is never overwritten).

    Raises NotFoundError for an unknown checkpoint, UnsafeOperationError when it
    has no parent (a root has no writes to rebuild from) or its source is not
    ``"loop"`` (input/update/fork checkpoints are not made from the parent's writes).
    """
    tid = thread_id_of(thread_id)
    ns = _ns(checkpoint_ns)
    row = saver.run(checkpoint_row_op(saver.dialect, tid, ns, _cid(checkpoint_id)))
    if not row[3]:
        raise UnsafeOperationError(f"checkpoint {checkpoint_id!r} is a root: there are no parent writes to rebuild it from")
    if row[7] != "loop":
        raise UnsafeOperationError(
            f"checkpoint {checkpoint_id!r} has source {row[7]!r}: only 'loop' checkpoints are made from their parent's "
            "writes ('input' holds the run's input, 'update'/'fork' an external change)"
        )
    parent = saver.get_tuple(config_of(tid, ns, row[3]))
    if parent is None:
        raise UnsafeOperationError(f"parent {row[3]!r} of checkpoint {checkpoint_id!r} does not exist (broken parent link)")
    recomputed = recompute_values(graph, saver, parent)
    doc = _doc(saver.dialect, row[4], f"checkpoint {checkpoint_id!r}")
    versions = doc.get("channel_versions") or {}
    present = saver.run(_present_blobs_op(tid, ns, versions))
    missing = sorted(ch for ch in versions if ch not in present)
    stored_rows = [row[:6]]
    from threadline.history import load_channels_op

    stored = saver.run(load_channels_op(saver.dialect, saver.serde, stored_rows, [ch for ch in versions if ch in present]))[0]
    matches, differs = [], {}
    for ch in sorted(versions):
        if ch in missing:
            continue
        a = stored.get(ch)
        b = recomputed.get(ch)
        if ch not in stored and ch not in recomputed:
            matches.append(ch)
            continue
        d = diff_values({ch: a} if ch in stored else {}, {ch: b} if ch in recomputed else {})
        if d:
            differs[ch] = d[ch]
        else:
            matches.append(ch)
    result = RebuildResult(tid, ns, row[2], row[3], recomputed, matches, differs, missing)
    if apply and missing:
        rows = []
        for ch in missing:
            if ch in recomputed:
                tag, data = codec.encode(saver.serde, recomputed[ch])
            else:
                tag, data = codec.EMPTY, None
            rows.append((tid, ns, ch, R.version_key(versions[ch]), tag, data, None))
        saver.run(_insert_blobs_op(saver.dialect, tid, rows), write=True)
        result.restored = missing
    return result


def _present_blobs_op(tid: str, ns: str, versions: Mapping[str, Any]) -> Op[set[str]]:
    pairs = sorted((ch, R.version_key(v)) for ch, v in versions.items())
    present: set[str] = set()
    for part in ops.chunks(pairs, 200):
        found = yield Q(
            f"SELECT channel FROM threadline_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND (channel, version) IN ({ops.values_list(2, len(part))})",
            [tid, ns, *ops.flat(part)],
        )
        present |= {r[0] for r in found}
    return present


def _insert_blobs_op(d: Dialect, tid: str, rows: list[tuple]) -> Op[None]:
    yield Q(
        "INSERT INTO threadline_blobs (thread_id, checkpoint_ns, channel, version, type, blob, base_version) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        rows,
        many=True,
    )
    yield from ops.restat(d, [tid])


__all__ = [
    "BranchResult",
    "DELETE_MODES",
    "DeletePlan",
    "Finding",
    "FsckReport",
    "PruneReport",
    "REPAIRS",
    "RebuildResult",
    "RetentionPolicy",
    "delete_checkpoint",
    "delete_checkpoint_op",
    "every_thread_id_op",
    "fork",
    "fork_op",
    "fsck",
    "fsck_thread_op",
    "prune",
    "prune_thread_op",
    "recompute_values",
    "rebuild",
    "rollback",
    "rollback_op",
]
