"""Deleting checkpoints: one checkpoint (refuse / with its descendants / reparenting its children).

``_plan`` closes a set of doomed checkpoints over the subgraph runs started from
them, refuses when a kept checkpoint rebuilds DeltaChannel state from a doomed
one's writes, and sizes what goes (checkpoints, writes, blobs no kept
checkpoint references) as a ``DeletePlan``; ``_execute_plan`` reparents and
deletes. Retention (``prune``) plans and executes through the same two steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from threadline import codec
from threadline.storage import ops
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op
from threadline.errors import ConfigError, UnsafeOperationError
from threadline.read import checkpoint_row_op
from threadline.keys import checkpoint_id_of, checkpoint_ns_of, thread_id_of
from threadline.lifecycle.tags import drop_tags_op, protection_op
from threadline.lifecycle.thread import _load_thread_op, _Thread

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


def _execute_plan(
    d: Dialect, t: _Thread, plan: DeletePlan, reparent: Mapping[tuple[str, str], str | None], bc: codec.BlobCodec | None = None
) -> Op[None]:
    if reparent:
        yield from ops.set_parents(d, t.thread_id, t.reparenting(reparent), bc)
    if plan.thread_deleted:
        yield from ops.delete_thread(d, t.thread_id)
    else:
        yield from ops.delete_checkpoints(d, [(t.thread_id, ns, cid) for ns, cid in plan.checkpoints], bc)
    plan.executed = True


def delete_checkpoint_op(
    d: Dialect,
    thread_id: Any,
    checkpoint_id: str,
    *,
    checkpoint_ns: str = "",
    mode: str = "refuse",
    dry_run: bool = False,
    bc: codec.BlobCodec | None = None,
    force: bool = False,
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
    a deleted one's writes, and, unless ``force``, when the thread is pinned or a deleted
    checkpoint is tagged (``lifecycle.tags``; forced, their tags go too). ``dry_run`` returns
    the plan without changing anything.
    ``bc``: the saver's codec (its keys check and re-seal the re-parented rows).
    """
    if mode not in DELETE_MODES:
        raise ConfigError(f"mode must be one of {DELETE_MODES}, got {mode!r}")
    tid = thread_id_of(thread_id)
    ns = checkpoint_ns_of(checkpoint_ns)
    yield from checkpoint_row_op(d, tid, ns, checkpoint_id_of(checkpoint_id))
    t = yield from _load_thread_op(d, tid)
    children = t.children()
    kids = children.get((ns, checkpoint_id), [])
    doomed = {(ns, checkpoint_id)}
    reparent: dict[tuple[str, str], str | None] = {}
    if kids:
        if mode == "refuse":
            raise UnsafeOperationError(
                f"checkpoint {checkpoint_id!r} of thread {tid!r} has {len(kids)} child checkpoint(s) {kids}; "
                "pass mode='with_descendants' to delete the subtree, or mode='reparent' to attach the children to its parent",
                flags={"mode='with_descendants'": "--with-descendants", "mode='reparent'": "--reparent"},
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
    kept = yield from protection_op(d, tid)
    if not force:
        _refuse_protected(tid, kept, plan.checkpoints)
    if not dry_run:
        yield from drop_tags_op(d, tid, [k for k in plan.checkpoints if k in kept.tags])
        yield from _execute_plan(d, t, plan, reparent, bc)
    return plan


def _refuse_protected(tid: str, kept: Any, checkpoints: list[tuple[str, str]]) -> None:
    if kept.pinned is not None:
        raise UnsafeOperationError(f"thread {tid!r} is pinned; unpin it or pass force=True to delete from it",
                                   flags={"force=True": "--force"})
    tagged = [f"{cid} ({', '.join(kept.tags[(ns, cid)])})" for ns, cid in checkpoints if (ns, cid) in kept.tags]
    if tagged:
        raise UnsafeOperationError(f"checkpoint(s) {', '.join(tagged)} of thread {tid!r} are tagged; untag them or pass "
                                   "force=True to delete them with their tags", flags={"force=True": "--force"})


def delete_checkpoint(saver: Any, thread_id: Any, checkpoint_id: str, **kwargs: Any) -> DeletePlan:
    """Sync ``delete_checkpoint_op`` (one transaction)."""
    return saver.run(delete_checkpoint_op(saver.dialect, thread_id, checkpoint_id, bc=saver.blob_codec, **kwargs), write=True)
