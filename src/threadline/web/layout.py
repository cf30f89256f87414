"""The checkpoint tree of one namespace laid out as a branch graph (like ``git log --graph``).

Rows are checkpoints in checkpoint_id order (creation order), newest on top. A *chain*
is a run of checkpoints following each one's main child: the child on the head path
when there is one, else the oldest child. The chain holding the head gets lane 0 (a
straight line from the root to the head); every other chain — a branch made by a
fork, a rollback or time travel, or another root — gets the lowest lane free over the
rows it spans, from its fork point to its tip (interval colouring, greedy by start
row, which uses the fewest lanes). O(n log n) for n checkpoints.
"""

from __future__ import annotations

import heapq
from typing import Any

from threadline.read import CheckpointNode, ThreadHistory


def _main_child(node: CheckpointNode, nodes: dict[str, CheckpointNode]) -> str | None:
    kids = node.children
    if not kids:
        return None
    for kid in kids:
        if nodes[kid].on_head_path:
            return kid
    return kids[0]


def lay_out(history: ThreadHistory, checkpoint_ns: str = "", errors: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """JSON-able layout of one namespace of ``history``.

    Returns ``{"nodes": [...], "lanes": n, "head": id}``; each node is
    ``{"id", "row", "lane", "step"}`` plus, when not false / empty / zero, ``"parent"``,
    ``"source"``, ``"writers"``, ``"head"``, ``"on_head_path"``, ``"fork"``,
    ``"interrupted"``, ``"error"`` (an ``__error__`` write, from ``errors``),
    ``"pending"`` (pending writes) and ``"subgraphs"`` (namespaces started there).
    ``row`` 0 is the oldest checkpoint; rows are the list's order.
    """
    nodes = history.nodes.get(checkpoint_ns, {})
    order = list(nodes)  # checkpoint_id order
    row_of = {cid: i for i, cid in enumerate(order)}
    starts = [cid for cid, n in nodes.items() if not n.parent_checkpoint_id or n.parent_checkpoint_id not in nodes]
    starts += [kid for cid, n in nodes.items() for kid in n.children if kid != _main_child(n, nodes)]
    chains = []
    for start in starts:
        chain = [start]
        while (nxt := _main_child(nodes[chain[-1]], nodes)) is not None:
            chain.append(nxt)
        parent = nodes[start].parent_checkpoint_id
        begin = row_of[parent] if parent in row_of else row_of[start]
        chains.append((0 if nodes[chain[-1]].is_head else 1, begin, row_of[chain[-1]], chain))
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
    out = []
    for cid in order:
        n = nodes[cid]
        node = {
            "id": cid,
            "parent": n.parent_checkpoint_id if n.parent_checkpoint_id in nodes else None,
            "row": row_of[cid],
            "lane": lane_of[cid],
            "step": n.step,
            "source": n.source,
            "writers": n.writers,
            "head": n.is_head,
            "on_head_path": n.on_head_path,
            "fork": n.is_fork_point,
            "interrupted": n.interrupted,
            "error": cid in errors,
            "pending": n.pending_writes,
            "subgraphs": n.subgraphs,
        }
        # a thread can hold 10,000s of checkpoints: leave out what is false, empty or zero
        out.append({k: v for k, v in node.items() if v or k in ("id", "row", "lane", "step")})
    return {"nodes": out, "lanes": lanes, "head": next((c for c in order if nodes[c].is_head), None)}
