"""Retention: a ``RetentionPolicy`` (keep last N, older than, idle threads) applied by ``prune``.

``prune_thread_op`` selects one thread's doomed checkpoints by the policy, keeps
every head, the fork points kept branches meet at and every ancestor a kept checkpoint
needs for its DeltaChannel state, makes kept checkpoints whose parent goes roots, and deletes through the
``DeletePlan`` machinery of ``threadline.lifecycle.delete`` (or the whole thread
when it is idle). ``prune`` runs it over many threads, one transaction each, and
sums the plans into a ``PruneReport``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.storage import ops
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.storage.ops import sweep as sweep_ops
from threadline.errors import ConfigError
from threadline.read import all_thread_ids_op
from threadline.keys import thread_id_of
from threadline.lifecycle.delete import DeletePlan, _execute_plan, _plan
from threadline.lifecycle.jobs import run_job
from threadline.lifecycle.tags import Protection, drop_tags_op, protection_op
from threadline.lifecycle.vacuum import LARGE_DELETE, SpaceReport, disk_bytes_op, reclaim
from threadline.lifecycle.thread import _load_thread_op, _Thread


KEEP_LAST_PER = ("branch", "thread")


@dataclass
class RetentionPolicy:
    """Which checkpoints ``prune`` (and a saver's sweeper) removes. A checkpoint goes when ANY
    given rule selects it and nothing below keeps it.

    * ``keep_last``: per branch (``keep_last_per="branch"``, the default), root-namespace
      checkpoints beyond the newest N of every branch go (a branch: the path from a
      checkpoint without children, the branch's head, back to the root; on a thread
      without rollback or time travel, the newest N of the thread); with
      ``keep_last_per="thread"``, all but the newest N of the whole thread go, old branches
      included;
    * ``older_than``: root-namespace checkpoints created more than this many
      seconds ago go;
    * ``idle_longer_than``: threads not updated for this many seconds go entirely.

    Always kept, unless the whole thread goes: every head (a checkpoint without children:
    the thread's head and the tip of every other branch; a thread paused on an interrupt
    keeps its pending interrupt there, as pending writes of its head) — with
    ``keep_last_per="thread"`` the thread's head only, its newest checkpoint —, every fork point
    two or more kept checkpoints branch from (so they stay one tree), the
    ancestors a kept checkpoint needs to rebuild DeltaChannel state
    (``storage.liveness``), and the blobs kept checkpoints need, delta bases included. A
    subgraph run goes with the root checkpoint it started from. A kept checkpoint whose
    parent goes becomes a root.
    """

    keep_last: int | None = None
    older_than: float | None = None
    idle_longer_than: float | None = None
    keep_last_per: str = "branch"

    def __post_init__(self) -> None:
        if self.keep_last_per not in KEEP_LAST_PER:
            raise ConfigError(f"keep_last_per must be 'branch' or 'thread', got {self.keep_last_per!r}")
        if self.keep_last is not None and (isinstance(self.keep_last, bool) or not isinstance(self.keep_last, int) or self.keep_last < 1):
            raise ConfigError(f"keep_last must be a positive integer, got {self.keep_last!r}")
        for name in ("older_than", "idle_longer_than"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
                raise ConfigError(f"{name} must be a non-negative number of seconds, got {v!r}")
        if self.keep_last is None and self.older_than is None and self.idle_longer_than is None:
            raise ConfigError("a retention policy needs at least one of keep_last, older_than, idle_longer_than")

    @classmethod
    def of(cls, value: Any) -> RetentionPolicy:
        """A policy from a ``RetentionPolicy`` or a mapping of its fields; ConfigError otherwise."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"retention must be a RetentionPolicy or a mapping of its fields, got {type(value).__name__}")
        unknown = sorted(set(value) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ConfigError(f"unknown retention key(s) {unknown}; use keep_last, keep_last_per, older_than, idle_longer_than")
        return cls(**value)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _doomed(t: _Thread, policy: RetentionPolicy, now: float) -> set[tuple[str, str]]:
    """The root-namespace checkpoints ``policy`` removes from ``t`` (the whole-thread rule aside)."""
    children = t.children()
    root = [cid for ns, cid in t.rows if ns == ""]
    heads = {cid for cid in root if not children.get(("", cid))}
    if policy.keep_last_per == "thread":
        heads = {max(root)} if root else set()  # the thread's head: its newest checkpoint, what get_tuple loads
    doomed: set[str] = set()
    if policy.keep_last is not None and policy.keep_last_per == "thread":
        doomed |= set(sorted(root)[:-policy.keep_last])
    elif policy.keep_last is not None:
        recent: set[str] = set()
        for head in heads:
            cur: str | None = head
            for _ in range(policy.keep_last):
                if cur is None or ("", cur) not in t.rows:
                    break
                recent.add(cur)
                cur = t.rows[("", cur)][0]
        doomed |= set(root) - recent
    if policy.older_than is not None:
        cutoff = now - policy.older_than
        doomed |= {cid for cid in root if t.rows[("", cid)][3] < cutoff}
    doomed -= heads
    return {("", cid) for cid in doomed}


def prune_thread_op(
    d: Dialect, thread_id: Any, policy: RetentionPolicy, *, dry_run: bool = False, now: float | None = None, bc: Any = None,
    force: bool = False,
) -> Op[DeletePlan]:
    """Apply a retention policy to one thread (one transaction): plan, check, delete, GC, restat.
    ``bc``: the saver's codec (its keys check and re-seal re-parented rows). A pinned thread is
    left whole and a tagged checkpoint kept, with what it needs (``lifecycle.tags``), unless
    ``force``: then they go like any other, with their tags."""
    tid = thread_id_of(thread_id)
    now = time.time() if now is None else now
    if not dry_run:
        yield from sweep_ops.lock_thread(d, tid)
    t = yield from _load_thread_op(d, tid)
    if not t.rows:
        return DeletePlan(tid, [], {}, 0, 0, 0, executed=not dry_run)
    kept = Protection() if force else (yield from protection_op(d, tid))
    if kept.pinned is not None:
        return DeletePlan(tid, [], {}, 0, 0, 0, executed=not dry_run)
    idle = False
    if policy.idle_longer_than is not None:
        index = yield Q(d.THREAD, (tid,))
        last = float(index[0][1]) if index else max(r[3] for r in t.rows.values())
        idle = last <= now - policy.idle_longer_than
        if idle and not kept.tags:
            plan = _plan(t, set(t.rows), {})
            if not dry_run:
                yield from ops.delete_thread(d, tid)
                plan.executed = True
            return plan
    # an idle thread holding tagged checkpoints keeps them (and what they need) only
    doomed = set(t.rows) if idle else _doomed(t, policy, now)
    doomed -= kept.tagged
    children = t.children()
    changed = True
    while changed:
        changed = False
        for ns, cid in [k for k in t.rows if k not in doomed]:
            # what kept checkpoints need for DeltaChannel state
            needed = {(ns, need) for need in t.delta_requirements(ns, cid)}
            # a fork point two kept checkpoints branch from stays, so they stay one tree
            parent = t.rows[(ns, cid)][0]
            if (ns, parent) in doomed and sum((ns, c) not in doomed for c in children[(ns, parent)]) >= 2:
                needed.add((ns, parent))
            if needed & doomed:
                doomed -= needed
                changed = True
    reparent = {
        (ns, cid): None
        for (ns, cid), r in t.rows.items()
        if (ns, cid) not in doomed and ns == "" and r[0] and (ns, r[0]) in doomed
    }
    if not doomed:
        return DeletePlan(tid, [], {}, 0, 0, 0, executed=not dry_run)
    plan = _plan(t, doomed, reparent)
    # subgraph checkpoints whose in-namespace parent goes become roots too
    gone = set(plan.checkpoints)
    for (ns, cid), r in t.rows.items():
        if ns and (ns, cid) not in gone and r[0] and (ns, r[0]) in gone:
            reparent[(ns, cid)] = None
            plan.reparented[cid] = None
    if not dry_run:
        if force:
            yield from drop_tags_op(d, tid, plan.checkpoints)
        yield from _execute_plan(d, t, plan, reparent, bc)
    return plan


@dataclass
class PruneReport:
    """The result of ``prune`` over many threads: per-thread plans that removed something, and totals."""

    policy: RetentionPolicy
    dry_run: bool
    plans: list[DeletePlan]
    space: SpaceReport | None = None  # bytes on disk before and after (not for a dry run)

    @property
    def checkpoints(self) -> int:
        return sum(len(p.checkpoints) for p in self.plans)

    @property
    def bytes_freed(self) -> int:
        return sum(p.bytes_freed for p in self.plans)

    @property
    def threads_deleted(self) -> list[str]:
        return [p.thread_id for p in self.plans if p.thread_deleted]

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy.to_json(),
            "dry_run": self.dry_run,
            "checkpoints": self.checkpoints,
            "writes": sum(p.writes for p in self.plans),
            "blobs": sum(p.blobs for p in self.plans),
            "bytes_freed": self.bytes_freed,
            "threads_deleted": self.threads_deleted,
            "space": self.space.to_json() if self.space else None,
            "threads": [p.to_json() for p in self.plans],
        }


def prune(
    saver: Any,
    policy: RetentionPolicy,
    *,
    thread_ids: Sequence[Any] | None = None,
    dry_run: bool = False,
    now: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    force: bool = False,
) -> PruneReport:
    """Apply ``policy`` to ``thread_ids`` (default: every thread), one transaction per thread.

    ``progress(done, total, thread_id)`` is called after each thread. Pinned threads and tagged
    checkpoints stay unless ``force`` (``prune_thread_op``). Returns a
    ``PruneReport`` (with ``dry_run``: what would go, nothing changed). ``bytes_freed`` counts
    the stored bytes of what was deleted; the space deleting frees is then given back to the
    file system (``vacuum.reclaim``) and ``space`` gives the bytes on disk before and after.
    """
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else saver.run(all_thread_ids_op(saver.dialect))
    now = time.time() if now is None else now
    before = None if dry_run else saver.run(disk_bytes_op(saver.dialect))
    plans = []
    for i, tid in enumerate(ids):
        plan = saver.run(prune_thread_op(saver.dialect, tid, policy, dry_run=dry_run, now=now, bc=saver.blob_codec, force=force), write=not dry_run)
        if plan.checkpoints:
            plans.append(plan)
        if progress:
            progress(i + 1, len(ids), tid)
    report = PruneReport(policy, dry_run, plans)
    if not dry_run:
        report.space = run_job(saver, reclaim(saver.dialect, large=report.checkpoints >= LARGE_DELETE, before=before))
    return report
