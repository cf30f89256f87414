"""The checkpoint tree of one namespace laid out as a branch graph (like ``git log --graph``).

Rows are checkpoints in checkpoint_id order (creation order), newest on top. A *chain*
is a run of checkpoints following each one's main child: the child on the head path
when there is one, else the oldest child. The chain holding the head gets lane 0 (a
straight line from the root to the head); every other chain — a branch made by a
fork, a rollback or time travel, or another root — gets the lowest lane free over the
rows it spans, from its fork point to its tip (interval colouring, greedy by start
row, which uses the fewest lanes). O(n log n) for n checkpoints.

The tree itself (children, head = newest checkpoint, head path, fork points, the nodes
that wrote each checkpoint) follows ``threadline.read.thread_history``; it is rebuilt
here from ``queries.tree_op``'s narrower rows so that 10,000 checkpoints lay out fast.
"""

from __future__ import annotations

import heapq
from typing import Any

from threadline.read.forks import Step, concurrent_forks
from threadline.web.queries import TreeRow

HIDDEN_WRITERS = ("__input__", "__interrupt__")


def writers(row: TreeRow, parent: TreeRow | None) -> list[str]:
    """The nodes whose results a checkpoint holds: those whose ``versions_seen`` advanced
    since the parent (``__input__`` first for an input checkpoint), as ``CheckpointNode.writers``."""
    before = parent.versions_seen if parent else {}
    names = sorted(n for n, v in row.versions_seen.items() if n not in HIDDEN_WRITERS and v != before.get(n))
    return ["__input__", *names] if row.source == "input" else names


def lay_out(rows: list[TreeRow]) -> dict[str, Any]:
    """JSON-able layout of one namespace's checkpoints (``rows`` in checkpoint_id order).

    Returns ``{"nodes": [...], "lanes": n, "head": id}``: one node per checkpoint, oldest
    first (a node's index is its row), each ``{"id", "lane", "step"}`` plus, when not
    false / empty / zero, ``"parent"`` (the parent's row), ``"source"``, ``"writers"``,
    ``"head"``, ``"on_head_path"``, ``"fork"``, ``"interrupted"``, ``"error"`` (an
    ``__error__`` write), ``"subgraphs"`` (namespaces started there), ``"concurrent"``
    (the row of the earlier sibling whose run overlapped this one's, ``read.forks``), ``"tags"`` (its tag names) and ``"merge"`` (a merge
    checkpoint: the row of the branch merged in); and
    ``"concurrent_forks"``, one line each (``ConcurrentFork.describe``).
    """
    by_id = {r.checkpoint_id: r for r in rows}
    row_of = {cid: i for i, cid in enumerate(by_id)}
    children: dict[str, list[str]] = {cid: [] for cid in by_id}
    for r in rows:
        if r.parent in by_id:
            children[r.parent].append(r.checkpoint_id)
    head = rows[-1].checkpoint_id if rows else None
    on_path: set[str] = set()
    cur = head
    while cur in by_id and cur not in on_path:
        on_path.add(cur)
        cur = by_id[cur].parent

    main: dict[str, str] = {}  # checkpoint → the child its chain continues with
    for cid, kids in children.items():
        if kids:
            main[cid] = next((k for k in kids if k in on_path), kids[0])
    starts = [r.checkpoint_id for r in rows if r.parent not in by_id]
    starts += [k for cid, kids in children.items() for k in kids if k != main.get(cid)]
    chains = []
    for start in starts:
        chain = [start]
        while (nxt := main.get(chain[-1])) is not None:
            chain.append(nxt)
        parent = by_id[start].parent
        begin = row_of[parent] if parent in row_of else row_of[start]
        chains.append((0 if chain[-1] == head else 1, begin, row_of[chain[-1]], chain))
    chains.sort(key=lambda c: (c[0], c[1], c[2]))
    lane_of: dict[str, int] = {}
    busy: list[tuple[int, int]] = []  # (last row, lane)
    free: list[int] = []
    lanes = 0
    for _, begin, end, chain in chains:
        while busy and busy[0][0] < begin:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, lanes = lanes, lanes + 1
        heapq.heappush(busy, (end, lane))
        for cid in chain:
            lane_of[cid] = lane
    forks = concurrent_forks(Step("", r.checkpoint_id, r.parent, r.source, r.created_at, r.run_id) for r in rows)
    overlaps = {f.checkpoint_id: row_of[f.overlaps] for f in forks}
    out = []
    for r in rows:
        cid = r.checkpoint_id
        # a thread can hold 10,000s of checkpoints: flags are sent only when set
        node: dict[str, Any] = {"id": cid, "lane": lane_of[cid], "step": r.step}
        if r.parent in by_id:
            node["parent"] = row_of[r.parent]
        if r.source:
            node["source"] = r.source
        if names := writers(r, by_id.get(r.parent or "")):
            node["writers"] = names
        flags = {"head": cid == head, "on_head_path": cid in on_path, "fork": len(children[cid]) > 1,
                 "interrupted": r.interrupted, "error": r.error, "subgraphs": r.subgraphs, "tags": r.tags}
        node.update((k, v) for k, v in flags.items() if v)
        if cid in overlaps:
            node["concurrent"] = overlaps[cid]
        if (r.merge or {}).get("source") in row_of:
            node["merge"] = row_of[r.merge["source"]]
        out.append(node)
    head_path = [cid for cid in by_id if cid in on_path]
    return {"nodes": out, "lanes": lanes, "head": head, "concurrent_forks": [f.describe(head_path) for f in forks]}
