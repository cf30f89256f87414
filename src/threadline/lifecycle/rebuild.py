"""Recovery from writes: a checkpoint's channel values recomputed from its parent's state and writes.

``recompute_values`` folds the parent's pending writes into the parent's
channels with the compiled graph's reducers (as the Pregel loop's
``after_tick``); ``rebuild`` compares the result with what is stored
(``RebuildResult``: matches, differs, missing blobs) and with ``apply`` writes
back the missing blobs (insert-or-ignore, never overwriting).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from threadline import codec
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.errors import UnsafeOperationError
from threadline.read import NULL_TASK_ID, bind_graph, checkpoint_row_op, diff_values, jsonable, load_channels_op
from threadline.keys import checkpoint_id_of, checkpoint_ns_of, config_of, thread_id_of



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
    null_writes = [(c, v) for t, c, v in writes if t == NULL_TASK_ID]
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
    ns = checkpoint_ns_of(checkpoint_ns)
    row = saver.run(checkpoint_row_op(saver.dialect, tid, ns, checkpoint_id_of(checkpoint_id)))
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
    doc = saver.dialect.load_object(row[4], f"checkpoint {checkpoint_id!r}")
    versions = doc.get("channel_versions") or {}
    present = saver.run(_present_blobs_op(saver.dialect, tid, ns, versions))
    missing = sorted(ch for ch in versions if ch not in present)
    stored = saver.run(load_channels_op(saver.dialect, saver.serde, [row], [ch for ch in versions if ch in present], saver.blob_codec))[0]
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
            version = R.version_key(versions[ch])
            if ch in recomputed:
                tag, data = saver.blob_codec.store(R.blob_row_ref(tid, ns, ch, version), *codec.encode(saver.serde, recomputed[ch]))
            else:
                tag, data = codec.EMPTY, None
            rows.append((tid, ns, ch, version, tag, data, None))
        saver.run(_insert_blobs_op(saver.dialect, tid, rows), write=True)
        result.restored = missing
    return result


def _present_blobs_op(d: Dialect, tid: str, ns: str, versions: Mapping[str, Any]) -> Op[set[str]]:
    keys = sorted((tid, ns, ch, R.version_key(v)) for ch, v in versions.items())
    present: set[str] = set()
    for part in ops.chunks(keys, d.max_params // 4):
        present |= {r[0] for r in (yield Q(d.blob_sizes_by_keys(len(part)), ops.flat(part)))}
    return present


def _insert_blobs_op(d: Dialect, tid: str, rows: list[tuple]) -> Op[None]:
    yield Q(d.INSERT_BLOB, rows, many=True)
    yield from ops.restat(d, [tid])
