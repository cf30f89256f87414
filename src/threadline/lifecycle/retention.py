"""Retention: a ``RetentionPolicy`` (keep last N, older than, idle threads) applied by ``prune``.

``prune_thread_op`` selects one thread's doomed checkpoints by the policy, keeps
the head and every ancestor a kept checkpoint needs for its DeltaChannel state,
makes kept checkpoints whose parent goes roots, and deletes through the
``DeletePlan`` machinery of ``threadline.lifecycle.delete`` (or the whole thread
when it is idle). ``prune`` runs it over many threads, one transaction each, and
sums the plans into a ``PruneReport``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.storage import ops
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.errors import ConfigError
from threadline.read import all_thread_ids_op
from threadline.keys import thread_id_of
from threadline.lifecycle.delete import DeletePlan, _execute_plan, _plan
from threadline.lifecycle.thread import _load_thread_op



@dataclass
class RetentionPolicy:
    """Which checkpoints ``prune`` removes. A checkpoint goes when ANY given rule selects it.

    * ``keep_last``: per thread, root-namespace checkpoints beyond the newest N go;
    * ``older_than``: root-namespace checkpoints created more than this many
      seconds ago go;
    * ``idle_longer_than``: threads not updated for this many seconds go entirely.

    Always kept: each thread's head (unless the whole thread goes), the ancestors
    a kept checkpoint needs to rebuild DeltaChannel state, and the subgraph runs
    started from a kept root checkpoint (a subgraph run goes with its root
    checkpoint). A kept checkpoint whose parent goes becomes a root.
    """

    keep_last: int | None = None
    older_than: float | None = None
    idle_longer_than: float | None = None

    def __post_init__(self) -> None:
        if self.keep_last is not None and (not isinstance(self.keep_last, int) or self.keep_last < 1):
            raise ConfigError(f"keep_last must be a positive integer, got {self.keep_last!r}")
        for name in ("older_than", "idle_longer_than"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or v < 0):
                raise ConfigError(f"{name} must be a non-negative number of seconds, got {v!r}")
        if self.keep_last is None and self.older_than is None and self.idle_longer_than is None:
            raise ConfigError("a retention policy needs at least one of keep_last, older_than, idle_longer_than")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def prune_thread_op(
    d: Dialect, thread_id: Any, policy: RetentionPolicy, *, dry_run: bool = False, now: float | None = None, bc: Any = None
) -> Op[DeletePlan]:
    """Apply a retention policy to one thread (one transaction): plan, check, delete, GC, restat.
    ``bc``: the saver's codec (its keys check and re-seal re-parented rows)."""
    tid = thread_id_of(thread_id)
    now = time.time() if now is None else now
    t = yield from _load_thread_op(d, tid)
    if not t.rows:
        return DeletePlan(tid, [], {}, 0, 0, 0, executed=not dry_run)
    if policy.idle_longer_than is not None:
        index = yield Q(d.THREAD, (tid,))
        last = float(index[0][1]) if index else max(r[3] for r in t.rows.values())
        if last <= now - policy.idle_longer_than:
            plan = _plan(t, set(t.rows), {})
            if not dry_run:
                yield from ops.delete_thread(d, tid)
                plan.executed = True
            return plan
    root = sorted((cid for ns, cid in t.rows if ns == ""), reverse=True)
    doomed: set[tuple[str, str]] = set()
    if policy.keep_last is not None:
        doomed |= {("", cid) for cid in root[policy.keep_last:]}
    if policy.older_than is not None:
        cutoff = now - policy.older_than
        doomed |= {("", cid) for cid in root if t.rows[("", cid)][3] < cutoff}
    if root:
        doomed.discard(("", root[0]))
    # keep what kept checkpoints need for DeltaChannel state
    changed = True
    while changed:
        changed = False
        for ns, cid in [k for k in t.rows if k not in doomed]:
            for need in t.delta_requirements(ns, cid):
                if (ns, need) in doomed:
                    doomed.discard((ns, need))
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
        yield from _execute_plan(d, t, plan, reparent, bc)
    return plan


@dataclass
class PruneReport:
    """The result of ``prune`` over many threads: per-thread plans that removed something, and totals."""

    policy: RetentionPolicy
    dry_run: bool
    plans: list[DeletePlan]

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
) -> PruneReport:
    """Apply ``policy`` to ``thread_ids`` (default: every thread), one transaction per thread.

    ``progress(done, total, thread_id)`` is called after each thread. Returns a
    ``PruneReport`` (with ``dry_run``: what would go, nothing changed).
    """
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else saver.run(all_thread_ids_op(saver.dialect))
    now = time.time() if now is None else now
    plans = []
    for i, tid in enumerate(ids):
        plan = saver.run(prune_thread_op(saver.dialect, tid, policy, dry_run=dry_run, now=now, bc=saver.blob_codec), write=not dry_run)
        if plan.checkpoints:
            plans.append(plan)
        if progress:
            progress(i + 1, len(ids), tid)
    return PruneReport(policy, dry_run, plans)
