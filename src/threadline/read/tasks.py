"""Which node a Send (push) task ran, read back from stored ids without decoding any value.

LangGraph stores a task's writes with ``task_path``: ``"~__pregel_pull, NODE"`` names the
node of an edge-triggered task (``common.node_of_task_path``), but a task started by a
``Send`` — the tool calls of ``create_agent`` / ``create_react_agent`` — is stored as
``"~__pregel_push, 0000000003[, …]"``: the index of the Send, not its node. Its
``task_id`` is LangGraph's hash of the checkpoint_id, the task's namespace, the step,
the node name and that index (``langgraph.pregel._algo.prepare_push_task_send``), so
the node is the candidate name whose hash is the task_id (computed here as LangGraph's
``_xxhash_str`` / ``_uuid5_str`` compute it; importing ``langgraph.pregel`` for them would
add a second to every command). Candidates are the nodes the
thread's checkpoints have seen (``versions_seen`` keys) around the checkpoint the writes
are stored against: that checkpoint, its children and the namespace's head. A task whose
node never finished on the thread (interrupted on its first run) stays unattributed.
"""

from __future__ import annotations

import binascii
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import xxhash

from threadline.read.common import node_of_task_path
from threadline.storage import ops
from threadline.storage.dialect import Dialect
from threadline.storage.dialect.reads import WriteSelection
from threadline.storage.ops import Op, Q

PUSH = "__pregel_push"
PUSH_PATH = f"~{PUSH}, "  # how a push task's task_path starts

TaskKey = tuple[str, str, str, str]  # thread_id, checkpoint_ns, checkpoint_id, task_id


def push_index(task_path: str | None) -> int | None:
    """The Send index of a push task's ``task_path`` (``"~__pregel_push, 0000000003, …"`` → 3); None otherwise."""
    if not task_path or not task_path.startswith(PUSH_PATH):
        return None
    part = task_path.split(",")[1].strip()
    return int(part) if part.isdigit() else None


def push_node(task_id: str, task_path: str, checkpoint_id: str, checkpoint_ns: str, step: int, version: int,
              candidates: Iterable[str]) -> str | None:
    """The node among ``candidates`` whose Send task at ``task_path`` has ``task_id``, or None.

    ``step`` and ``version`` are the metadata step and the ``v`` of the checkpoint the
    writes are stored against (its tasks run at ``step + 1``)."""
    idx = push_index(task_path)
    if idx is None:
        return None
    try:
        namespace = binascii.unhexlify(checkpoint_id.replace("-", ""))
    except (binascii.Error, ValueError):
        return None
    for name in sorted(set(candidates)):
        ns = f"{checkpoint_ns}|{name}" if checkpoint_ns else name
        if task_id_hash(version, namespace, ns, str(step + 1), name, PUSH, str(idx)) == task_id:
            return name
    return None


def task_id_hash(version: int, namespace: bytes, *parts: str) -> str:
    """LangGraph's task id: XXH3-128 (checkpoint ``v`` > 1) or UUID5-style SHA-1 of the
    namespace and the parts, formatted as a UUID (``langgraph.pregel._algo``)."""
    data = b"".join(p.encode() for p in parts)
    if version > 1:
        digest = xxhash.xxh3_128_hexdigest(namespace + data)
    else:
        sha = hashlib.sha1(namespace, usedforsecurity=False)
        sha.update(data)
        digest = sha.hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def push_nodes_op(d: Dialect, tasks: Iterable[tuple[str, str, str, str, str]]) -> Op[dict[TaskKey, str]]:
    """Nodes of push tasks: ``{(thread_id, checkpoint_ns, checkpoint_id, task_id): node}`` for the
    ``(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path)`` given whose node is found."""
    by_space: dict[tuple[str, str], dict[TaskKey, str]] = defaultdict(dict)
    for tid, ns, cid, task_id, path in tasks:
        if push_index(path) is not None:
            by_space[(tid, ns)][(tid, ns, cid, task_id)] = path
    found: dict[TaskKey, str] = {}
    for (tid, ns), wanted in by_space.items():
        cids = sorted({key[2] for key in wanted})
        rows: list = []
        for part in ops.chunks(cids, max(1, (d.max_params - 4) // 2)):
            rows += yield Q(*d.push_candidates(tid, ns, part))
        docs = {r[0]: (r[1], d.load_object(r[2], f"checkpoint ({tid!r}, {ns!r}, {r[0]!r})")) for r in rows}
        names = {n for _, doc in docs.values() for n in (doc.get("versions_seen") or {})}
        for key, path in wanted.items():
            if key[2] in docs:
                step, doc = docs[key[2]]
                node = push_node(key[3], path, key[2], ns, int(step or 0), int(doc.get("v") or 1), names)
                if node is not None:
                    found[key] = node
    return found


def node_of_write(pushed: Mapping[TaskKey, str], key: TaskKey, task_path: str | None) -> str | None:
    """The node a write came from: its push task's node in ``pushed`` (``push_nodes_op``),
    else what its ``task_path`` names (``common.node_of_task_path``)."""
    return pushed.get(key) or node_of_task_path(task_path, key[3])


def push_tasks_op(d: Dialect, selected: WriteSelection) -> Op[list[tuple[str, int, int]]]:
    """``(node, writes, bytes)`` per push task among the writes ``selected``, the node falling
    back to the task_path when it cannot be attributed."""
    rows = yield Q(*d.path_task_totals(selected, PUSH_PATH))
    pushed = yield from push_nodes_op(d, [tuple(r[:5]) for r in rows])
    return [(pushed.get(tuple(r[:4])) or r[4], int(r[5]), int(r[6] or 0)) for r in rows]


def push_nodes_by_checkpoint_op(d: Dialect, thread_id: str, checkpoint_ns: str | None) -> Op[dict[tuple[str, str], set[str]]]:
    """``{(checkpoint_ns, checkpoint_id): nodes}``: the nodes of the Send tasks whose writes are
    stored against each checkpoint of a thread (one namespace, or every one for None)."""
    rows = yield Q(*d.path_tasks(thread_id, checkpoint_ns, PUSH_PATH))
    pushed = yield from push_nodes_op(d, [(thread_id, *r) for r in rows])
    out: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (_, ns, cid, _), node in pushed.items():
        out[(ns, cid)].add(node)
    return out
