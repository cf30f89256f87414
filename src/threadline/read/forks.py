"""Concurrent forks: the rule telling a fork made by two overlapping runs from a deliberate one.

A thread forks when a checkpoint gets a second child. LangGraph does that on purpose for time
travel (a run from a named past checkpoint, ``update_state`` on an old one), and by accident
when two runs on the thread overlap (two tabs, a retried webhook, two workers): both read the
same head and each writes its own child of it, so the head holds only one of the two turns.
``threadline.guard`` prevents the accident; without it, ``fsck``, ``history`` and the browser
name it, with this one rule (``concurrent_forks``):

Each child of a checkpoint ``P`` begins a *branch*: the child and its descendants reached
through ``source == "loop"`` checkpoints (the steps of one run). A branch was being written from
its first checkpoint's ``created_at`` — or from ``P``'s, when the child is itself a ``loop`` step
(the run that wrote ``P`` went on) — to its newest checkpoint's. A later child ``C`` of ``P``
is a **concurrent fork** when its branch and an earlier sibling's were being written at the same
time (the two spans overlap). Never when ``C`` comes from ``update_state`` or a replay (source
``"update"`` or ``"fork"``), nor when both carry the same ``run_id`` in their metadata (one run).
A run from a named past checkpoint starts after the branch it leaves has been written, so it is
not reported; one started while a run from that same checkpoint is still writing is, as the
stored data cannot tell it from a race. Times are the checkpoints' ``created_at``, the writing
processes' clocks (hosts with skewed clocks blur it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DELIBERATE_SOURCES = frozenset({"update", "fork"})


@dataclass(frozen=True)
class Step:
    """What the rule reads of one checkpoint (``source``, ``created_at`` in seconds since the
    epoch, ``run_id`` from its metadata when any)."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    source: str | None
    created_at: float
    run_id: Any = None


@dataclass(frozen=True)
class ConcurrentFork:
    """The branch begun by ``checkpoint_id`` (a child of ``fork_point``) and the one begun by its
    earlier sibling ``overlaps`` were being written at the same time, until ``overlap_until``
    (seconds since the epoch)."""

    checkpoint_ns: str
    fork_point: str
    checkpoint_id: str
    overlaps: str
    overlap_until: float

    def describe(self, head_path: Iterable[str] = ()) -> str:
        """One line naming both branches and, given the head's ancestors, the one off the head."""
        on = set(head_path)
        off = [c for c in (self.overlaps, self.checkpoint_id) if c not in on] if on else []
        lost = f"; the branch of {off[0]!r} is off the head: its turn is not in the conversation" if len(off) == 1 else ""
        return (
            f"two runs overlapped: {self.checkpoint_id!r} and its sibling {self.overlaps!r} were both written from "
            f"{self.fork_point!r} at the same time{lost}. Run graphs through threadline.guard to serialize runs on a thread"
        )


def line_of(parent_of: Mapping[str, str | None], start: str | None) -> list[str]:
    """``start`` and its ancestors by ``parent_of`` (checkpoint_id → parent), newest first; a
    missing parent or a parent cycle ends it."""
    out: list[str] = []
    seen: set[str] = set()
    cur = start
    while cur is not None and cur in parent_of and cur not in seen:
        seen.add(cur)
        out.append(cur)
        cur = parent_of[cur]
    return out


def concurrent_forks(steps: Iterable[Step]) -> list[ConcurrentFork]:
    """The concurrent forks among a thread's checkpoints (any namespaces), by the rule above, in
    checkpoint order; each later sibling is named once, with the earliest sibling it overlaps."""
    by_key = {(s.checkpoint_ns, s.checkpoint_id): s for s in steps}
    children: dict[tuple[str, str], list[Step]] = defaultdict(list)
    for s in by_key.values():
        if s.parent_checkpoint_id and (s.checkpoint_ns, s.parent_checkpoint_id) in by_key:
            children[(s.checkpoint_ns, s.parent_checkpoint_id)].append(s)
    spans: dict[tuple[str, str], tuple[float, float]] = {}

    def span(s: Step, parent: Step) -> tuple[float, float]:
        """When the branch begun by ``s`` (a child of ``parent``) was being written: (from, to)."""
        key = (s.checkpoint_ns, s.checkpoint_id)
        if key not in spans:
            newest, todo, seen = s.created_at, [s], {key}
            while todo:
                cur = todo.pop()
                for c in children.get((cur.checkpoint_ns, cur.checkpoint_id), ()):
                    if c.source == "loop" and (c.checkpoint_ns, c.checkpoint_id) not in seen:
                        seen.add((c.checkpoint_ns, c.checkpoint_id))
                        newest = max(newest, c.created_at)
                        todo.append(c)
            spans[key] = (parent.created_at if s.source == "loop" else s.created_at, newest)
        return spans[key]

    found = []
    for (ns, parent), kids in sorted(children.items()):
        kids.sort(key=lambda s: s.checkpoint_id)
        p = by_key[(ns, parent)]
        for i, c in enumerate(kids[1:], 1):
            if c.source in DELIBERATE_SOURCES:
                continue
            c_from, c_to = span(c, p)
            for s in kids[:i]:
                s_from, s_to = span(s, p)
                same_run = s.run_id is not None and s.run_id == c.run_id
                if not same_run and max(s_from, c_from) < min(s_to, c_to):
                    found.append(ConcurrentFork(ns, parent, c.checkpoint_id, s.checkpoint_id, min(s_to, c_to)))
                    break
    return sorted(found, key=lambda f: (f.checkpoint_ns, f.checkpoint_id))
