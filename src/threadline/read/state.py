"""The state of a thread at a checkpoint: ``StateView`` and ``PendingWriteView``,
``next_nodes`` (the nodes a checkpoint triggers, from its stored channels alone),
``stored_state_op`` (the view derived from storage) and ``state_at``, which can
instead let LangGraph's own ``get_state`` compute values, next and interrupts with
the compiled graph's reducers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.storage import ops
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.read.common import (
    ERROR,
    INTERRUPT,
    NULL_TASK_ID,
    RESUME,
    SPECIAL_WRITE_CHANNELS,
    TASKS,
    bind_graph,
    checkpoint_row_op,
    head_op,
    is_internal_channel,
    iso,
    jsonable,
    node_of_task_path,
)
from threadline.read.tasks import node_of_write, push_nodes_op
from threadline.keys import checkpoint_ns_of, thread_id_of
from threadline.lazy import LazyModule

if TYPE_CHECKING:
    from langgraph.checkpoint.base import CheckpointTuple

serdes = LazyModule("threadline.codec.serde")  # LangGraph's serializer loads when a value is shown


@dataclass
class PendingWriteView:
    """A pending write: the task that made it (task_id, node from its task_path or, for a Send task, ``tasks.push_node``), channel, value, idx."""

    task_id: str
    node: str | None
    channel: str
    idx: int
    task_path: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "node": self.node,
            "channel": self.channel,
            "idx": self.idx,
            "task_path": self.task_path,
            "value": jsonable(self.value),
        }


@dataclass
class StateView:
    """The state of a thread at a checkpoint, like LangGraph's ``StateSnapshot``.

    ``values``: the state channels (bookkeeping channels are in ``internal``).
    ``next``: nodes that run next. ``pending_writes``: the writes stored against
    the checkpoint. ``interrupts``: ``{"id", "value", "node"}`` of interrupts
    raised in this step and still waiting for their answer; ``answered``: those
    answered (a ``__resume__`` write stored beside them), each with its ``answer``.
    ``pending_applied``: whether the finished tasks' pending writes are folded
    into ``values`` — LangGraph does so only when reading the latest state
    (no checkpoint_id given; seed 003), and threadline can only do it with the
    compiled graph's reducers (``graph=``). ``computed_by``: ``"graph"`` when
    LangGraph's ``get_state`` produced ``values``/``next``/``interrupts``,
    ``"stored"`` when they were derived from the stored checkpoint alone.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    is_head: bool
    created_at: float | None
    ts: str | None
    step: int | None
    source: str | None
    metadata: dict[str, Any]
    values: dict[str, Any]
    internal: dict[str, Any]
    next: list[str]
    pending_writes: list[PendingWriteView]
    interrupts: list[dict[str, Any]]
    pending_applied: bool
    computed_by: str
    channel_versions: dict[str, Any]
    answered: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoint_ns": self.checkpoint_ns,
            "checkpoint_id": self.checkpoint_id,
            "parent_checkpoint_id": self.parent_checkpoint_id,
            "is_head": self.is_head,
            "created_at": self.created_at,
            "created": iso(self.created_at),
            "ts": self.ts,
            "step": self.step,
            "source": self.source,
            "metadata": jsonable(self.metadata),
            "values": jsonable(self.values),
            "internal": jsonable(self.internal),
            "next": list(self.next),
            "pending_writes": [w.to_json() for w in self.pending_writes],
            "interrupts": [jsonable(i) for i in self.interrupts],
            "answered": [jsonable(i) for i in self.answered],
            "pending_applied": self.pending_applied,
            "computed_by": self.computed_by,
            "channel_versions": self.channel_versions,
        }


def _version_gt(a: Any, b: Any) -> bool:
    if b is None:
        return a is not None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a > b
    return str(a) > str(b)


def next_nodes(checkpoint: Mapping[str, Any]) -> list[str]:
    """Nodes a checkpoint triggers, from its stored channels alone (no graph needed).

    LangGraph 1.x (``StateGraph``) triggers node ``N`` through channel
    ``branch:to:N`` (``join:…:N`` for waiting edges, ``__start__`` for the input)
    when that channel holds a value and its version is newer than
    ``versions_seen[N]``; ``Send`` pushes wait in ``__pregel_tasks``. This mirrors
    ``prepare_next_tasks`` for graphs built with ``StateGraph``; for other Pregel
    graphs pass the graph to ``state_at`` instead.
    """
    values = checkpoint.get("channel_values") or {}
    versions = checkpoint.get("channel_versions") or {}
    seen = checkpoint.get("versions_seen") or {}
    out: list[str] = []
    for ch, version in versions.items():
        if ch not in values:
            continue
        if ch == "__start__":
            node = "__start__"
        elif ch.startswith("branch:to:"):
            node = ch[len("branch:to:"):]
        elif ch.startswith("join:"):
            node = ch.rsplit(":", 1)[-1]
        else:
            continue
        if _version_gt(version, (seen.get(node) or {}).get(ch)) and node not in out:
            out.append(node)
    for send in values.get(TASKS) or []:
        node = getattr(send, "node", None)
        if node:
            out.append(node)
    return sorted(out, key=lambda n: (n != "__start__", n)) if len(out) > 1 else out


def _writes_meta_op(d: Dialect, tid: str, ns: str, cid: str) -> Op[dict[tuple[str, int], tuple[str, float]]]:
    found = yield Q(d.CHECKPOINT_WRITE_TASKS, (tid, ns, cid))
    return {(r[0], int(r[1])): (r[2] or "", float(r[3])) for r in found}


def split_interrupts(pending: list[PendingWriteView]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The interrupts of a checkpoint's pending writes, split into those still waiting and those
    answered, each ``{"id", "value", "node", "task_id"}`` (answered ones with ``answer``).

    An interrupt is answered when a ``__resume__`` write is stored beside it: its task's own
    (the list of answers to the task's interrupts, in order, written as the task resumed) or,
    failing that, the run's (``Command(resume=…)``, written under the null task)."""
    by_task = {w.task_id: w.value for w in pending if w.channel == RESUME and w.task_id != NULL_TASK_ID}
    run_answer = [w.value for w in pending if w.channel == RESUME and w.task_id == NULL_TASK_ID]
    waiting: list[dict[str, Any]] = []
    answered: list[dict[str, Any]] = []
    for w in pending:
        if w.channel != INTERRUPT:
            continue
        for k, item in enumerate(w.value if isinstance(w.value, (list, tuple)) else [w.value]):
            entry = {"id": getattr(item, "id", None), "value": getattr(item, "value", item), "node": w.node, "task_id": w.task_id}
            answers = by_task.get(w.task_id)
            if isinstance(answers, (list, tuple)) and k < len(answers):
                answered.append({**entry, "answer": answers[k]})
            elif answers is None and run_answer:
                answer = run_answer[0]
                if isinstance(answer, dict) and entry["id"] in answer:  # a resume map {interrupt_id: answer}
                    answer = answer[entry["id"]]
                answered.append({**entry, "answer": answer})
            else:
                waiting.append(entry)
    return waiting, answered


def stored_state_op(
    d: Dialect,
    serde: SerializerProtocol,
    thread_id: Any,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str = "",
    bc: codec.BlobCodec | None = None,
) -> Op[tuple[StateView, CheckpointTuple]]:
    """The state at a checkpoint (head when ``checkpoint_id`` is None) derived from storage alone.

    Pending writes are listed, not folded into ``values`` (that needs the graph's
    reducers: use ``state_at(..., graph=)``). ``next`` comes from ``next_nodes``;
    at the head (no checkpoint_id given) tasks that already finished are dropped
    from ``next`` and only unanswered interrupts are listed, as LangGraph's
    ``get_state`` does for the latest state (seed 003).
    """
    tid = thread_id_of(thread_id)
    ns = checkpoint_ns_of(checkpoint_ns)
    row = yield from checkpoint_row_op(d, tid, ns, checkpoint_id)
    head = yield from head_op(d, tid, ns)
    tup = (yield from ops.load_tuples(d, serde, [row], bc))[0]
    meta_by_key = yield from _writes_meta_op(d, tid, ns, row[2])
    live = checkpoint_id is None
    # Pair each decoded pending write with its row: within one task_id both are in idx order.
    idx_by_task: dict[str, list[int]] = defaultdict(list)
    for task_id, idx in sorted(meta_by_key):
        idx_by_task[task_id].append(idx)
    used: dict[str, int] = defaultdict(int)
    pushed = yield from push_nodes_op(d, [(tid, ns, row[2], task, path) for (task, _), (path, _) in meta_by_key.items()])
    pending: list[PendingWriteView] = []
    for task_id, channel, value in tup.pending_writes:
        idxs = idx_by_task.get(task_id, [])
        idx = idxs[used[task_id]] if used[task_id] < len(idxs) else -99
        used[task_id] += 1
        path = meta_by_key.get((task_id, idx), ("", 0.0))[0]
        pending.append(PendingWriteView(task_id, node_of_write(pushed, (tid, ns, row[2], task_id), path), channel, idx, path, value))
    cp = tup.checkpoint
    all_values = cp["channel_values"]
    values = {k: v for k, v in all_values.items() if not is_internal_channel(k)}
    internal = {k: v for k, v in all_values.items() if is_internal_channel(k)}
    nxt = next_nodes(cp)
    # by pull-task node only: one finished Send task does not finish its node's other Sends
    finished = {node_of_task_path(w.task_path, w.task_id) for w in pending
                if w.channel not in (INTERRUPT, ERROR, RESUME) and w.task_id != NULL_TASK_ID}
    interrupted_nodes = {node_of_task_path(w.task_path, w.task_id) for w in pending if w.channel in (INTERRUPT, ERROR)}
    if live:
        nxt = [n for n in nxt if n not in finished or n in interrupted_nodes]
    interrupts, answered = split_interrupts(pending)
    view = StateView(
        thread_id=tid,
        checkpoint_ns=ns,
        checkpoint_id=row[2],
        parent_checkpoint_id=row[3],
        is_head=row[2] == head,
        created_at=float(row[8]) if row[8] is not None else None,
        ts=cp.get("ts"),
        step=row[6],
        source=row[7],
        metadata=dict(tup.metadata or {}),
        values=values,
        internal=internal,
        next=nxt,
        pending_writes=pending,
        interrupts=interrupts,
        answered=answered,
        pending_applied=False,
        computed_by="stored",
        channel_versions=dict(cp.get("channel_versions") or {}),
    )
    return view, tup


def state_at(
    saver: Any, thread_id: Any, checkpoint_id: str | None = None, *, checkpoint_ns: str = "", graph: Any = None
) -> StateView:
    """The state of a thread at a checkpoint (its head when ``checkpoint_id`` is None).

    With ``graph`` (a compiled LangGraph graph, any checkpointer), ``values``,
    ``next`` and ``interrupts`` come from LangGraph's own ``get_state`` run on this
    saver — at the head the finished tasks' pending writes are applied through the
    graph's reducers, at a named checkpoint they are not (seed 003: history is
    shown as recorded); writes of the null task (``update_state`` / resume input)
    are applied at every checkpoint, as LangGraph 1.x does. ``pending_applied``
    says whether any write was folded in. Without a graph the view is derived from
    storage (``stored_state_op``) and nothing is folded in.

    Raises NotFoundError for an unknown thread or checkpoint.
    """
    view, tup = saver.run(
        stored_state_op(saver.dialect, serdes.showing(saver.serde), thread_id, checkpoint_id, checkpoint_ns=checkpoint_ns, bc=saver.blob_codec)
    )
    if graph is None:
        return view
    g = bind_graph(graph, saver)
    conf: dict[str, Any] = {"thread_id": view.thread_id, "checkpoint_ns": view.checkpoint_ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = view.checkpoint_id
    snap = g.get_state({"configurable": conf})
    view.values = dict(snap.values) if isinstance(snap.values, Mapping) else {"__root__": snap.values}
    view.next = list(snap.next)
    done = {i["id"] for i in view.answered}
    view.interrupts = [{"id": getattr(i, "id", None), "value": getattr(i, "value", i)} for i in snap.interrupts if getattr(i, "id", None) not in done]
    null_writes = any(w.task_id == NULL_TASK_ID for w in view.pending_writes)
    finished = any(w.task_id != NULL_TASK_ID and w.channel not in SPECIAL_WRITE_CHANNELS for w in view.pending_writes)
    view.pending_applied = null_writes or (checkpoint_id is None and finished)
    view.computed_by = "graph"
    return view
