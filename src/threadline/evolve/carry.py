"""The pending writes of a thread's head, carried to the checkpoint ``threadline migrate`` writes
on top of it, so a thread interrupted (or failed, or part-way through a superstep) before the
migration still is after it: ``threadline inbox`` lists its interrupt, its status reads
interrupted, and ``Command(resume=…)`` resumes it.

LangGraph keys a pending write by its task's id, and a task's id hashes the checkpoint's id and
step: on a new checkpoint every task has a new id. The graph the app deploys says which tasks
it runs next from the migrated checkpoint (its ``get_state``, over an in-memory copy of that
one checkpoint); each write of the head moves to the task with the same path (``task_path``:
the node, renamed as the migration renamed it, or the ``Send``'s index), and an interrupt's id,
which hashes its task's namespace, is recomputed the way LangGraph computes it. A write of a
task the graph no longer runs stays only on the head (the migrated checkpoint's parent), where
``threadline check`` reports an interrupt pending in a removed node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xxhash import xxh3_128_hexdigest

from threadline.errors import ConfigError
from threadline.evolve.steps import RenameNode, Step
from threadline.read.common import INTERRUPT, NULL_TASK_ID, RESUME, node_of_task_path

PULL = "__pregel_pull"


def interrupt_id(task_ns: str, answered: int) -> str:
    """LangGraph's id of the interrupt a task raises after ``answered`` answers, from the task's
    namespace (``node:task_id`` in the root graph): ``langgraph.types.Interrupt``'s rule."""
    return xxh3_128_hexdigest((f"{task_ns}|{answered}" if answered else task_ns).encode())


def path_text(path: Any) -> str:
    """A task path as LangGraph stores it with a pending write (``task_path``)."""
    if isinstance(path, (tuple, list)):
        return "~" + ", ".join(path_text(p) for p in path)
    return f"{path:010d}" if isinstance(path, int) else str(path)


def renamer(steps: Iterable[Step]) -> tuple[Any, Any]:
    """(forward, back): a node's name after the ``RenameNode`` steps among ``steps``, and before."""
    pairs = [(s.old, s.new) for s in steps if isinstance(s, RenameNode)]

    def forward(name: str) -> str:
        for old, new in pairs:
            name = new if name == old else name
        return name

    def back(name: str) -> str:
        for old, new in reversed(pairs):
            name = old if name == new else name
        return name

    return forward, back


def next_tasks(graph: Any, serde: Any, checkpoint: dict, metadata: dict) -> dict[str, tuple[str, str]]:
    """task_path → (task_id, node) of the tasks ``graph`` runs next from ``checkpoint`` (LangGraph's
    ``get_state`` over an in-memory saver holding only that checkpoint).

    Raises ConfigError when the graph cannot read the checkpoint (it does not fit this thread)."""
    from langgraph.checkpoint.memory import InMemorySaver

    memory = InMemorySaver(serde=serde)
    try:
        config = memory.put({"configurable": {"thread_id": "migrate", "checkpoint_ns": ""}}, checkpoint, metadata,
                            checkpoint.get("channel_versions") or {})
        snapshot = graph.copy(update={"checkpointer": memory}).get_state(config)
    except Exception as exc:
        raise ConfigError(f"the graph cannot read the migrated checkpoint's next tasks ({type(exc).__name__}: {exc})") from exc
    return {path_text(t.path): (t.id, t.name) for t in snapshot.tasks}


def _interrupts(value: Any, old_ns: Sequence[str], new_ns: str, answered: int) -> Any:
    """An ``__interrupt__`` write's interrupts with the ids their new task gives them (an id not
    derived from a candidate old namespace is kept)."""
    import dataclasses

    items = value if isinstance(value, (list, tuple)) else [value]
    moved = []
    for item in items:
        old_id = getattr(item, "id", None)
        k = next((k for ns in old_ns for k in range(answered + len(items) + 1) if interrupt_id(ns, k) == old_id), None)
        moved.append(dataclasses.replace(item, id=interrupt_id(new_ns, k)) if k is not None else item)
    return type(value)(moved) if isinstance(value, (list, tuple)) else moved[0]


def carried(writes: Sequence[tuple[str, str, Any]], paths: Mapping[str, str], tasks: Mapping[str, tuple[str, str]],
            steps: Iterable[Step]) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """(task_id, task_path, [(channel, value)]) per task of the migrated checkpoint: ``writes``
    (the head's, migrated: (old task_id, channel, value)) moved to the task of ``tasks``
    (``next_tasks``) with the same path; ``paths``: old task_id → its stored task_path;
    ``steps``: the steps applied (node renames)."""
    forward, back = renamer(steps)
    out: dict[str, tuple[str, str, list[tuple[str, Any]]]] = {}
    answers = {t: len(v) for t, c, v in writes if c == RESUME and isinstance(v, (list, tuple))}
    for old_task, channel, value in writes:
        path = paths.get(old_task, "")
        if old_task == NULL_TASK_ID:
            out.setdefault(old_task, (old_task, path, []))[2].append((channel, value))
            continue
        node = node_of_task_path(path)
        new_path = f"~{PULL}, {forward(node)}" if node is not None else path
        if new_path not in tasks:
            continue  # a task the graph no longer runs: its writes stay on the head
        new_task, new_node = tasks[new_path]
        if channel == INTERRUPT:
            old_ns = [f"{name}:{old_task}" for name in dict.fromkeys((node or back(new_node), new_node))]
            value = _interrupts(value, old_ns, f"{new_node}:{new_task}", answers.get(old_task, 0))
        out.setdefault(old_task, (new_task, new_path, []))[2].append((channel, value))
    return list(out.values())
