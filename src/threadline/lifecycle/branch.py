"""Rollback and fork: a checkpoint's state made the head again, in the same thread or a new one.

``rollback`` writes one new checkpoint in the same thread that shares the
target's values by reference (a new branch; nothing deleted); ``fork`` copies the
blobs a checkpoint references (with their delta bases) into a new thread and
writes one root checkpoint there. Both return a ``BranchResult`` and write their
checkpoint through ``_write_branch`` (a new, newer uuid6 checkpoint id and
metadata ``source="fork"``, ``threadline_op``, ``forked_from``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.liveness import delta_channels
from threadline.storage.ops import Op, Q
from threadline.errors import ConfigError, ThreadlineError, UnsafeOperationError
from threadline.read import checkpoint_row_op, head_op, iso
from threadline.keys import checkpoint_id_of, checkpoint_ns_of, config_of, thread_id_of

# --- rollback and fork ---------------------------------------------------------------


def _new_checkpoint_id(after: str | None, step: int) -> str:
    """A LangGraph checkpoint id (uuid6, as ``create_checkpoint`` makes) sorting after ``after``."""
    from langgraph.checkpoint.base.id import uuid6  # LangGraph's base loads LangChain: not with the module

    for _ in range(1000):
        cid = str(uuid6(clock_seq=max(step, -1) + 1 if step is not None else None))
        if after is None or cid > after:
            return cid
        time.sleep(0.0005)
    raise ThreadlineError(f"cannot make a checkpoint id newer than {after!r}: is the clock behind the stored ids?")


@dataclass
class BranchResult:
    """A checkpoint made by ``rollback`` or ``fork``.

    ``config`` is the RunnableConfig of the new checkpoint (the new head of
    ``thread_id``); ``parent_checkpoint_id`` its parent; ``source_*`` the checkpoint
    whose state it carries; ``previous_head`` the head before; ``blobs_copied`` the
    blob rows copied (0 for a rollback: values are shared by reference). ``written`` is
    False for a rollback to the head itself, which writes nothing (``checkpoint_id`` is
    then the head).
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
    written: bool = True

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
    d: Dialect,
    serde: SerializerProtocol,
    thread_id: Any,
    checkpoint_id: str,
    *,
    checkpoint_ns: str = "",
    now: float | None = None,
    bc: codec.BlobCodec | None = None,
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

    A rollback to the head itself would change nothing (the head already carries that
    state): nothing is written and the result says so (``written=False``).

    Raises NotFoundError when the thread or checkpoint does not exist; CorruptRowError when
    the target does not match its checksum. ``bc``: the saver's codec (its keys).
    """
    tid = thread_id_of(thread_id)
    ns = checkpoint_ns_of(checkpoint_ns)
    row = yield from checkpoint_row_op(d, tid, ns, checkpoint_id_of(checkpoint_id))
    head = yield from head_op(d, tid, ns)
    if row[2] == head:
        return BranchResult("rollback", tid, ns, head, row[3], tid, head, head, written=False)
    return (yield from _write_branch(d, serde, "rollback", row, tid, ns, head, now, bc or codec.PLAIN))


def _write_branch(
    d: Dialect, serde: SerializerProtocol, op: str, row: tuple, to_tid: str, ns: str, head: str | None, now: float | None,
    bc: codec.BlobCodec,
) -> Op[BranchResult]:
    src_tid, cid = row[0], row[2]
    where = f"checkpoint ({src_tid!r}, {ns!r}, {cid!r})"
    doc = d.load_object(row[4], where)
    meta = d.load_json(row[5], where)
    R.check_row(row, doc, meta, bc)
    meta = meta if isinstance(meta, dict) else {}
    now = time.time() if now is None else now
    step = meta.get("step", -1) if isinstance(meta.get("step", -1), int) else -1
    new_id = _new_checkpoint_id(head, step)
    checkpoint = {**R.resealed_sends(doc, (src_tid, ns, cid), (to_tid, ns, new_id), bc), "id": new_id, "ts": iso(now), "channel_values": {}}
    metadata = _branch_metadata(op, meta, src_tid, ns, cid)
    if op == "rollback":
        parent = row[3] if delta_channels(meta) else cid
    else:
        parent = None
    config = {"configurable": {"thread_id": to_tid, "checkpoint_ns": ns, "checkpoint_id": parent or ""}}
    if parent is None:
        config["configurable"].pop("checkpoint_id")
    yield from ops.put(d, serde, config, checkpoint, metadata, {}, bc, absent=sorted(R.absent_channels(doc)), from_doc=True)
    return BranchResult(op, to_tid, ns, new_id, parent, src_tid, cid, head)


def rollback(saver: Any, thread_id: Any, checkpoint_id: str, **kwargs: Any) -> BranchResult:
    """Sync ``rollback_op`` (one transaction)."""
    return saver.run(rollback_op(saver.dialect, saver.serde, thread_id, checkpoint_id, bc=saver.blob_codec, **kwargs), write=True)


def fork_op(
    d: Dialect,
    serde: SerializerProtocol,
    thread_id: Any,
    checkpoint_id: str,
    to_thread: Any,
    *,
    checkpoint_ns: str = "",
    now: float | None = None,
    bc: codec.BlobCodec | None = None,
) -> Op[BranchResult]:
    """Start a new thread ``to_thread`` from the state at ``checkpoint_id`` of ``thread_id``.

    The new thread gets the blobs the checkpoint references (with any delta bases, each
    checked and sealed again to the new thread, values never decoded) and ONE root checkpoint carrying
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
    ns = checkpoint_ns_of(checkpoint_ns)
    if dst == tid:
        raise ConfigError(f"fork: target thread {dst!r} is the source thread; use rollback to branch within a thread")
    row = yield from checkpoint_row_op(d, tid, ns, checkpoint_id_of(checkpoint_id))
    exists = yield Q(d.HAS_CHECKPOINTS, (dst,))
    if exists:
        raise UnsafeOperationError(f"fork: thread {dst!r} already exists; pick a new thread id (or delete it first)")
    meta = d.load_json(row[5], f"checkpoint ({tid!r}, {ns!r}, {checkpoint_id!r})")
    if isinstance(meta, dict) and delta_channels(meta):
        raise UnsafeOperationError(
            f"fork: checkpoint {checkpoint_id!r} holds DeltaChannel state {delta_channels(meta)} that is rebuilt from its "
            "ancestors' writes; fork is not supported for it (use rollback, or copy_thread for the whole thread)"
        )
    bc = bc or codec.PLAIN
    doc = d.load_object(row[4], "checkpoint")
    found = yield from ops.fetch_blob_rows(d, [(tid, ns, ch, v) for ch, v in R.blob_pairs(doc)])
    # the ancestors' writes stay behind: a delta that references them gets its items copied in
    opened = {key: ops.open_blob_rows(group, key, bc) for key, group in found.items()}
    spliced = set((yield from ops.splice_refs(d, opened, bc)))
    copied = []
    for key, group in opened.items():
        for v, (tag, data, base) in group.items():
            if (*key, v) in spliced:
                tag, data = bc.pack(tag, data)
            tag, data = bc.seal(R.blob_row_ref(dst, *key[1:], v, base), tag, data)
            copied.append((dst, *key[1:], v, tag, data, base))
    if copied:
        yield Q(d.INSERT_BLOB, copied, many=True)
    result = yield from _write_branch(d, serde, "fork", row, dst, ns, None, now, bc)
    result.blobs_copied = len(copied)
    yield from ops.restat(d, [dst])
    return result


def fork(saver: Any, thread_id: Any, checkpoint_id: str, to_thread: Any, **kwargs: Any) -> BranchResult:
    """Sync ``fork_op`` (one transaction)."""
    return saver.run(fork_op(saver.dialect, saver.serde, thread_id, checkpoint_id, to_thread, bc=saver.blob_codec, **kwargs), write=True)
