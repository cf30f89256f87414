"""A thread's checkpoint tree (``history_op`` / ``thread_history``): ``CheckpointNode``
per checkpoint with its writers, children, pending-write counts and head path, and
``ThreadHistory`` per namespace with roots, head and fork points, optionally with the
subgraph namespaces anchored under the checkpoints they started from. Reads
checkpoint JSON and write metadata only, never channel values.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.errors import NotFoundError
from threadline.read.common import INTERRUPT, iso
from threadline.read.forks import ConcurrentFork, Step, concurrent_forks, line_of
from threadline.read.tags import thread_pin_op, thread_tags_op
from threadline.read.tasks import push_nodes_by_checkpoint_op
from threadline.keys import checkpoint_ns_of, thread_id_of

@dataclass
class CheckpointNode:
    """One checkpoint in a thread's tree.

    ``writers`` are the nodes whose results this checkpoint holds (the nodes whose
    ``versions_seen`` advanced since the parent; ``__input__`` for an input
    checkpoint). ``children`` are checkpoint_ids in the same namespace; more than one
    child makes this checkpoint a fork point. ``pending_writes`` counts the writes
    stored against it (``interrupted``: one of them is an ``__interrupt__``).
    ``subgraphs`` lists the namespaces whose runs started from this checkpoint.
    ``concurrent_with``: the earlier sibling whose run was still writing when this checkpoint
    was started from the same parent (a fork by two overlapping runs, ``read.forks``), or None.
    ``tags`` are the names given to it (``lifecycle.tags``).
    """

    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint_ns: str
    step: int | None
    source: str | None
    created_at: float
    writers: list[str]
    children: list[str] = field(default_factory=list)
    pending_writes: int = 0
    interrupted: bool = False
    on_head_path: bool = False
    is_head: bool = False
    subgraphs: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    concurrent_with: str | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def merged(self) -> dict[str, str] | None:
        """A merge checkpoint's parents (metadata ``merge``: ``source`` and ``target`` checkpoint_ids), else None."""
        m = self.metadata.get("merge")
        return m if isinstance(m, dict) and m.get("source") and m.get("target") else None

    @property
    def is_fork_point(self) -> bool:
        return len(self.children) > 1

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["created"] = iso(self.created_at)
        d["fork_point"] = self.is_fork_point
        d["merge"] = self.merged
        return d


@dataclass
class ThreadHistory:
    """A thread's checkpoints as a tree, per namespace.

    ``nodes`` maps checkpoint_ns → checkpoint_id → node (checkpoint_id order =
    creation order). ``roots`` are the parentless checkpoints (or whose parent is
    missing) per namespace. ``head`` is the head of the root namespace.
    ``branches`` lists, for each fork point of the root namespace, its children.
    ``concurrent_forks``: the forks made by two overlapping runs (``read.forks``), each
    described in one line (``describe``) by ``to_json``.
    """

    thread_id: str
    head: str | None
    nodes: dict[str, dict[str, CheckpointNode]]
    roots: dict[str, list[str]]
    concurrent_forks: list[ConcurrentFork] = field(default_factory=list)
    pinned: float | None = None  # when the thread was pinned (``lifecycle.tags``), else None

    @property
    def fork_points(self) -> list[str]:
        return [cid for cid, n in self.nodes.get("", {}).items() if n.is_fork_point]

    def head_path(self, checkpoint_ns: str = "") -> list[str]:
        """The checkpoints from the head back to its root (empty outside the head's namespace)."""
        return [cid for cid, n in self.nodes.get(checkpoint_ns, {}).items() if n.on_head_path]

    def ordered(self, checkpoint_ns: str = "") -> list[CheckpointNode]:
        return list(self.nodes.get(checkpoint_ns, {}).values())

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "head": self.head,
            "fork_points": self.fork_points,
            "roots": self.roots,
            "concurrent_forks": [{**dataclasses.asdict(f), "detail": f.describe(self.head_path(f.checkpoint_ns))} for f in self.concurrent_forks],
            "pinned": self.pinned,
            "namespaces": {ns: [n.to_json() for n in nodes.values()] for ns, nodes in self.nodes.items()},
        }


def _writers(doc: dict, parent_doc: dict | None, source: str | None) -> list[str]:
    seen = doc.get("versions_seen") or {}
    before = (parent_doc or {}).get("versions_seen") or {}
    names = sorted(
        n for n, v in seen.items() if n not in ("__input__", INTERRUPT) and v != before.get(n)
    )
    if source == "input":
        names = ["__input__", *[n for n in names if n != "__input__"]]
    return names


def history_op(d: Dialect, thread_id: Any, *, checkpoint_ns: str | None = "", include_subgraphs: bool = False) -> Op[ThreadHistory]:
    """The checkpoint tree of a thread: reads checkpoint JSON and write metadata, never channel values.

    Args:
        checkpoint_ns: the namespace to show (root ``""`` by default).
        include_subgraphs: also every subgraph namespace (``checkpoint_ns != ""``);
            each subgraph run is listed under the root checkpoint it started from
            (``CheckpointNode.subgraphs``, from the subgraph metadata's ``parents``).

    Raises NotFoundError when the thread has no checkpoint.
    """
    tid = thread_id_of(thread_id)
    ns = checkpoint_ns_of(checkpoint_ns)
    space = None if include_subgraphs else ns
    found = yield Q(*d.history_checkpoints(tid, space))
    wcounts = yield Q(*d.write_counts(tid, space, INTERRUPT))
    if not found:
        raise NotFoundError(f"thread {tid!r} has no checkpoint" + (f" in checkpoint_ns {ns!r}" if ns else ""))
    counts = {(r[0], r[1]): (int(r[2]), bool(r[3])) for r in wcounts}
    docs: dict[tuple[str, str], dict] = {}
    nodes: dict[str, dict[str, CheckpointNode]] = defaultdict(dict)
    for r in found:
        where = f"checkpoint ({tid!r}, {r[0]!r}, {r[1]!r})"
        docs[(r[0], r[1])] = d.load_object(r[7], where)
        meta = d.load_json(r[6], where)
        n_writes, interrupted = counts.get((r[0], r[1]), (0, False))
        nodes[r[0]][r[1]] = CheckpointNode(
            checkpoint_id=r[1],
            parent_checkpoint_id=r[2],
            checkpoint_ns=r[0],
            step=r[3],
            source=r[4],
            created_at=float(r[5]),
            writers=[],
            pending_writes=n_writes,
            interrupted=interrupted,
            metadata=meta if isinstance(meta, dict) else {},
        )
    roots: dict[str, list[str]] = {}
    sent = yield from push_nodes_by_checkpoint_op(d, tid, space)
    for space, by_id in nodes.items():
        roots[space] = []
        for cid, node in by_id.items():
            parent = node.parent_checkpoint_id
            node.writers = _writers(docs[(space, cid)], docs.get((space, parent)) if parent else None, node.source)
            node.writers += sorted(sent.get((space, parent or ""), set()) - set(node.writers))  # Send tasks
            if parent and parent in by_id:
                by_id[parent].children.append(cid)
            else:
                roots[space].append(cid)
    root_ns = ns if not include_subgraphs else ""
    head = max(nodes[root_ns]) if nodes.get(root_ns) else None
    if head:
        nodes[root_ns][head].is_head = True
        for cid in line_of({c: n.parent_checkpoint_id for c, n in nodes[root_ns].items()}, head):
            nodes[root_ns][cid].on_head_path = True
    if include_subgraphs:
        for space, by_id in nodes.items():
            if not space:
                continue
            first = next(iter(by_id.values()))
            parents = first.metadata.get("parents") or {}
            # the innermost enclosing namespace: the longest prefix present in parents
            enclosing = space.rsplit("|", 1)[0] if "|" in space else ""
            anchor = parents.get(enclosing)
            if anchor and anchor in nodes.get(enclosing, {}):
                nodes[enclosing][anchor].subgraphs.append(space)
    forks = concurrent_forks(
        Step(n.checkpoint_ns, n.checkpoint_id, n.parent_checkpoint_id, n.source, n.created_at, n.metadata.get("run_id"))
        for by_id in nodes.values() for n in by_id.values()
    )
    for f in forks:
        nodes[f.checkpoint_ns][f.checkpoint_id].concurrent_with = f.overlaps
    for t in (yield from thread_tags_op(d, tid)):
        if t.checkpoint_id in nodes.get(t.checkpoint_ns, {}):
            nodes[t.checkpoint_ns][t.checkpoint_id].tags.append(t.name)
    return ThreadHistory(tid, head, dict(nodes), roots, forks, (yield from thread_pin_op(d, tid)))


def thread_history(saver: Any, thread_id: Any, **kwargs: Any) -> ThreadHistory:
    """Sync ``history_op``."""
    return saver.run(history_op(saver.dialect, thread_id, **kwargs))
