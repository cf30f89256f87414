"""The sweeper: a saver's TTL and retention policy, applied in the background.

One sweep (``sweep_job``, a job of ``lifecycle.jobs``):

1. claims the database's sweeper lease (``storage.ops.sweep.claim``): of many processes
   or workers sweeping one database only one sweeps at a time, and a background sweeper
   skips a run when another finished one within its interval;
2. expires threads whose TTL has passed (``threadline.ttl``: threads written under a TTL;
   with ``all_threads``, every thread, the sweep's ``default_ttl`` for those written without
   one), each as a whole in one transaction that first
   re-checks it under a lock (a put in between keeps the thread), then the cold ones
   (``lifecycle.cold``: their stub deleted only if still expired; their archive goes with the
   object sweep, which runs later in the same sweep when the saver has the store);
3. applies the retention policy to the threads it may change, one transaction each,
   through ``retention.prune_thread_op`` (so heads, fork points that kept branches meet
   at, DeltaChannel ancestors and delta bases are never removed); on monthly partitioned
   tables (``lifecycle.partition``) it then creates the months ahead and drops past
   months retention emptied;
4. gives the freed space back (``vacuum.reclaim``) and records the result with the
   lease's release.

A dry run (``dry_run``) takes no lease and changes nothing: its report lists the threads the
sweep would expire and the checkpoints retention would delete (tiering, the object sweep and
giving space back are left out).

``BackgroundSweeper`` runs sweeps every interval in a daemon thread (sync savers);
``AsyncBackgroundSweeper`` in a task on the saver's event loop (async savers). A failed
sweep is logged and retried at the next interval.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from threadline import codec, metrics
from threadline.lifecycle import partition
from threadline.lifecycle import objects
from threadline.lifecycle.cold import tier_job
from threadline.lifecycle.jobs import Job, arun_job, run_job
from threadline.lifecycle.retention import RetentionPolicy, prune_thread_op
from threadline.lifecycle.vacuum import LARGE_DELETE, SpaceReport, disk_bytes_op, reclaim
from threadline.errors import ConfigError
from threadline.storage.dialect import Dialect
from threadline.storage.ops import sweep as sweep_ops
from threadline.ttl import TTL

logger = logging.getLogger(__name__)

JOB = "sweeper"  # the lease's name in threadline_sweeps
LEASE_SECONDS = 300.0  # renewed while sweeping; a crashed sweeper's lease runs out after this
PAGE = 200  # threads listed per query
DEFAULT_INTERVAL_MINUTES = 5.0  # as the official stores' sweeper
LISTED = 10_000  # thread_ids a report names (``expired``, ``pruned``); its counts are exact


def new_owner() -> str:
    """A name for one sweeper: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class SweepReport:
    """One sweep. ``ran`` is False when another sweeper held the lease or swept within the
    interval (nothing was done). ``space``: bytes on disk before and after, when it ran.
    ``expired``: the thread_ids expired (the first ``LISTED``); ``pruned``: thread_id → the
    checkpoints retention deleted. With ``dry_run`` nothing was changed: the counts and lists
    are what the sweep would do."""

    owner: str
    ran: bool = False
    threads_expired: int = 0
    threads_pruned: int = 0
    checkpoints_deleted: int = 0
    partitions_dropped: list[str] = field(default_factory=list)
    space: SpaceReport | None = None
    errors: list[str] = field(default_factory=list)
    objects_deleted: int = 0  # offloaded values' objects no row names any more (lifecycle.objects)
    threads_tiered: int = 0  # idle threads moved to the object store (Offload.cold_after, lifecycle.cold)
    started_at: float = 0.0
    finished_at: float = 0.0
    dry_run: bool = False
    all_threads: bool = False
    expired: list[str] = field(default_factory=list)
    pruned: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "ran": self.ran,
            "dry_run": self.dry_run,
            "all_threads": self.all_threads,
            "threads_expired": self.threads_expired,
            "threads_pruned": self.threads_pruned,
            "checkpoints_deleted": self.checkpoints_deleted,
            "partitions_dropped": self.partitions_dropped,
            "space": self.space.to_json() if self.space else None,
            "errors": self.errors,
            "objects_deleted": self.objects_deleted,
            "threads_tiered": self.threads_tiered,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "expired": self.expired,
            "pruned": self.pruned,
        }


class _Lease:
    """The sweeper's lease as one sweep holds it: renewed once a third of it has passed (a dry
    run holds none: ``held`` False)."""

    def __init__(self, d: Dialect, owner: str, clock: Callable[[], float], seconds: float, held: bool = True) -> None:
        self.d, self.owner, self.clock, self.seconds, self.held = d, owner, clock, seconds, held
        self.until = clock() + seconds
        self.lost = False

    def keep(self) -> Job[bool]:
        if self.held and self.clock() > self.until - self.seconds * 2 / 3:
            until = self.clock() + self.seconds
            self.lost = not (yield sweep_ops.renew(self.d, JOB, self.owner, until), True)
            self.until = until
        return not self.lost


def sweep_job(
    d: Dialect,
    ttl: TTL | None,
    retention: RetentionPolicy | None,
    owner: str,
    *,
    bc: codec.BlobCodec | None = None,
    min_gap: float = 0.0,
    clock: Callable[[], float] = time.time,
    stopping: Callable[[], bool] = lambda: False,
    lease_seconds: float = LEASE_SECONDS,
    dry_run: bool = False,
    all_threads: bool = False,
) -> Job[SweepReport]:
    """One sweep (see the module docstring); ``min_gap``: skip it when the last sweep of this
    database finished less than this many seconds ago. ``stopping()`` true ends it early.
    ``all_threads``: expire every thread idle longer than its TTL, ``ttl.default_ttl`` for those
    written without one (ConfigError without a ``default_ttl``); ``dry_run``: change nothing."""
    if all_threads and (ttl is None or ttl.default_ttl is None):
        raise ConfigError("a sweep of the whole database needs ttl={'default_ttl': minutes}: the TTL it gives threads written "
                          "without one", flags={"ttl={'default_ttl': minutes}": "--ttl DURATION"})
    report = SweepReport(owner, started_at=clock(), dry_run=dry_run, all_threads=all_threads)
    tiering = bc is not None and bc.offload is not None and bc.offload.cold_after is not None
    if ttl is None and retention is None and not tiering:
        return report
    if dry_run:
        report.ran = True
        lease = _Lease(d, owner, clock, lease_seconds, held=False)
        if ttl is not None:
            yield from _expire(d, ttl, report, lease, bc, clock, stopping, all_threads)
        if retention is not None:
            yield from _retain(d, retention, report, lease, clock, stopping)
        report.finished_at = clock()
        return report
    if not (yield sweep_ops.claim(d, JOB, owner, report.started_at, lease_seconds, min_gap), True):
        metrics.sweep_done(report, 0.0)
        return report
    report.ran = True
    lease = _Lease(d, owner, clock, lease_seconds)
    before = yield disk_bytes_op(d), False
    if ttl is not None:
        yield from _expire(d, ttl, report, lease, bc, clock, stopping, all_threads)
    if retention is not None and not lease.lost:
        yield from _retain(d, retention, report, lease, clock, stopping)
    if not lease.lost and (yield partition.partitioned_op(d), False):
        yield partition.ensure_op(d, clock()), True
        report.partitions_dropped = yield partition.drop_empty_op(d, clock()), True
    if bc is not None and bc.offload is not None and bc.offload.objects is not None and bc.offload.cold_after is not None and not lease.lost:
        try:
            report.threads_tiered = len((yield from tier_job(d, bc, bc.offload.cold_after)).threads)
        except Exception as exc:
            report.errors.append(f"moving idle threads to the object store: {type(exc).__name__}: {exc}")
    if bc is not None and bc.offload is not None and bc.offload.objects is not None and not lease.lost:
        try:
            report.objects_deleted = (yield from objects.collect_job(d, bc)).deleted
        except Exception as exc:  # the store unreachable: the rows are swept, the objects wait
            report.errors.append(f"collecting offloaded objects: {type(exc).__name__}: {exc}")
    if (report.checkpoints_deleted or report.partitions_dropped) and not lease.lost:
        report.space = yield from reclaim(d, large=report.checkpoints_deleted >= LARGE_DELETE, before=before)
    else:
        report.space = SpaceReport(before, before)
    report.finished_at = clock()
    if not lease.lost:
        yield sweep_ops.finish(d, JOB, owner, report.finished_at, report.to_json()), True
    metrics.sweep_done(report, report.finished_at - report.started_at)
    return report


def _expire(
    d: Dialect, ttl: TTL, report: SweepReport, lease: _Lease, bc: Any, clock: Callable[[], float], stopping: Callable[[], bool],
    all_threads: bool,
) -> Job[None]:
    """Expire the threads past their TTL, then the cold ones (``lifecycle.cold``: their stubs; the
    object sweep below deletes their archives once no row names them); in a dry run, list them."""
    fallback = ttl.default_ttl if all_threads else None  # threads written without a TTL: kept unless all_threads
    kinds = [(sweep_ops.expired_threads, lambda tid: sweep_ops.expire_thread(d, tid, fallback, clock(), bc))]
    if getattr(d, "offloads", False):
        kinds.append((sweep_ops.expired_cold_threads, lambda tid: sweep_ops.expire_cold_thread(d, tid, fallback, clock())))
    now = clock()
    for listing, expire in kinds:
        after = sweep_ops.FIRST
        while True:
            listed = yield listing(d, fallback, now, PAGE, after), False
            for tid, updated, count in listed:
                if stopping() or not (yield from lease.keep()):
                    return
                after = (updated, tid)
                try:
                    deleted = count if report.dry_run else (yield expire(tid), True)
                except Exception as exc:  # one bad thread does not stop the sweep
                    report.errors.append(f"expiring thread {tid!r}: {type(exc).__name__}: {exc}")
                    continue
                if deleted is not None:
                    report.threads_expired += 1
                    report.checkpoints_deleted += deleted
                    if len(report.expired) < LISTED:
                        report.expired.append(tid)
            if len(listed) < PAGE:
                break


def _retain(
    d: Dialect, policy: RetentionPolicy, report: SweepReport, lease: _Lease, clock: Callable[[], float], stopping: Callable[[], bool]
) -> Job[None]:
    now = clock()
    after = ""
    while True:
        ids = yield sweep_ops.retention_candidates(
            d, after, PAGE,
            keep_last=policy.keep_last,
            older_than=None if policy.older_than is None else now - policy.older_than,
            idle_since=None if policy.idle_longer_than is None else now - policy.idle_longer_than,
        ), False
        expired = set(report.expired) if report.dry_run else ()  # what the sweep would have deleted already
        for tid in ids:
            if stopping() or not (yield from lease.keep()):
                return
            if tid in expired:
                continue
            try:
                plan = yield prune_thread_op(d, tid, policy, now=clock(), dry_run=report.dry_run), not report.dry_run
            except Exception as exc:
                report.errors.append(f"applying retention to thread {tid!r}: {type(exc).__name__}: {exc}")
                continue
            if plan.checkpoints:
                report.threads_pruned += 1
                report.checkpoints_deleted += len(plan.checkpoints)
                if len(report.pruned) < LISTED:
                    report.pruned[tid] = len(plan.checkpoints)
        if len(ids) < PAGE:
            return
        after = ids[-1]


def _log(report: SweepReport) -> SweepReport:
    if report.errors:
        logger.warning("threadline sweep by %s: %d error(s), first: %s", report.owner, len(report.errors), report.errors[0])
    if report.checkpoints_deleted:
        space = report.space
        logger.info(
            "threadline sweep: %d thread(s) expired, %d pruned, %d checkpoint(s) deleted; disk %s -> %s bytes",
            report.threads_expired, report.threads_pruned, report.checkpoints_deleted,
            space and space.bytes_before, space and space.bytes_after,
        )
    return report


def _wait(interval: float) -> float:
    # spread the processes' wake-ups so they do not all claim at the same instant
    return interval * random.uniform(0.9, 1.1)


class BackgroundSweeper:
    """Sweeps ``saver`` (a sync saver) every ``interval`` seconds in a daemon thread."""

    def __init__(self, saver: Any, interval: float) -> None:
        self.saver, self.interval = saver, interval
        self.reports: deque[SweepReport] = deque(maxlen=100)  # the latest sweeps, newest last
        self.stop_event = threading.Event()
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.future.add_done_callback(lambda f: self.stop_event.set() if f.cancelled() else None)
        self.thread = threading.Thread(target=self._loop, daemon=True, name="threadline-sweeper")

    def _loop(self) -> None:
        while not self.stop_event.wait(_wait(self.interval)):
            try:
                self.reports.append(_log(run_job(self.saver, self.saver.sweep_job(min_gap=self.interval * 0.9, stopping=self.stop_event.is_set))))
            except Exception:  # retried at the next interval
                logger.exception("threadline sweep failed")
        if not self.future.done():
            self.future.set_result(None)

    def start(self) -> concurrent.futures.Future[None]:
        self.thread.start()
        return self.future

    def stop(self, timeout: float | None = None) -> bool:
        self.stop_event.set()
        self.thread.join(timeout)
        return not self.thread.is_alive()


class AsyncBackgroundSweeper:
    """Sweeps ``saver`` (an async saver) every ``interval`` seconds in a task on the running loop."""

    def __init__(self, saver: Any, interval: float) -> None:
        self.saver, self.interval = saver, interval
        self.reports: deque[SweepReport] = deque(maxlen=100)
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.stop_event.wait(), _wait(self.interval))
                return
            except asyncio.TimeoutError:
                pass
            try:
                self.reports.append(_log(await arun_job(self.saver, self.saver.sweep_job(min_gap=self.interval * 0.9, stopping=self.stop_event.is_set))))
            except Exception:
                logger.exception("threadline sweep failed")

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.get_running_loop().create_task(self._loop(), name="threadline-sweeper")
        return self.task

    async def stop(self, timeout: float | None = None) -> bool:
        self.stop_event.set()
        if self.task is None or self.task.done():
            return True
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except asyncio.TimeoutError:
            return False
        return True
