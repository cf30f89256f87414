"""Operations of the background sweeper (``threadline.lifecycle.sweeper``): a job's lease,
a thread's TTL and read clock, and expiring a thread as a whole.

The lease (table ``threadline_sweeps``, one row per job) lets many processes share one
database with one sweep at a time: ``claim`` wins only while nobody holds the lease and
the last run finished at least ``min_gap`` seconds ago, in one conditional UPDATE, so
exactly one of many concurrent claimers wins (on Postgres behind a transaction-scoped
advisory lock, so a claim never waits for another); a holder renews it while it works;
a crashed holder's lease simply runs out.

A thread expires when its last activity (``threads.updated_at``, the last put, or
``accessed_at``, the last read that restarted its clock) is older than its TTL:
``threads.ttl_minutes`` when set (negative: never), else ``threads.default_ttl``, the default
TTL it was written under; a thread written without a TTL has neither and expires only by a
sweep of the whole database, which gives it the sweep's ``default_ttl`` (``threadline.ttl``).
"""

from __future__ import annotations

from typing import Any

from threadline import codec
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.ops.base import Op, Q


def claim(d: Dialect, job: str, owner: str, now: float, lease: float, min_gap: float) -> Op[bool]:
    """Take ``job``'s lease for ``lease`` seconds if it is free and its last run finished at
    least ``min_gap`` seconds ago; whether this caller won."""
    if d.claim_lock:
        free = yield Q(*d.claim_lock)
        if not (free and free[0][0]):
            return False
    yield Q(d.ENSURE_SWEEP_JOB, (job,))
    won = yield Q(d.CLAIM_SWEEP, (owner, now + lease, now, job, now, now - min_gap))
    return bool(won)


def renew(d: Dialect, job: str, owner: str, until: float) -> Op[bool]:
    """Extend ``owner``'s lease to ``until``; False when it is no longer ``owner``'s."""
    kept = yield Q(d.RENEW_SWEEP, (until, job, owner), single=True)
    return bool(kept)


def finish(d: Dialect, job: str, owner: str, now: float, result: dict[str, Any]) -> Op[None]:
    """Release ``owner``'s lease and record the run's end and result (JSON)."""
    yield Q(d.FINISH_SWEEP, (now, dumps_json(result), job, owner), single=True)


def last_run(d: Dialect, job: str) -> Op[dict[str, Any] | None]:
    """``job``'s row: owner, lease_until, started_at, finished_at and result (decoded); None before its first run."""
    found = yield Q(d.SWEEP_RUN, (job,))
    if not found:
        return None
    owner, until, started, finished, result = found[0]
    return {
        "owner": owner, "lease_until": until, "started_at": started, "finished_at": finished,
        "result": d.load_json(result, f"threadline_sweeps row {job!r}") if result is not None else None,
    }


def with_thread_ttl(d: Dialect, op: Op[Any], thread_id: str, minutes: float) -> Op[Any]:
    """``op`` (a put of ``thread_id``), then, in the same transaction, the thread's own TTL set to ``minutes``."""
    result = yield from op
    yield Q(d.SET_THREAD_TTL, (minutes, thread_id))
    return result


def touch(d: Dialect, thread_id: str, now: float) -> Op[None]:
    """Restart ``thread_id``'s TTL clock (a read, with ``refresh_on_read``)."""
    yield Q(d.TOUCH_READ, (now, thread_id), single=True)


FIRST = (-1.0, "")  # the cursor of a listing of expired threads before its first row


def expired_threads(d: Dialect, default_ttl: float | None, now: float, limit: int, after: tuple[float, str] = FIRST) -> Op[list[tuple[str, float, int]]]:
    """Up to ``limit`` expired threads after ``after`` (the ``updated_at``, ``thread_id`` of the
    last one listed), least recently updated first, as (thread_id, updated_at, checkpoints).
    ``default_ttl``: minutes, the TTL of threads written without one (None: they never expire)."""
    found = yield Q(d.EXPIRED_THREADS, (default_ttl, default_ttl, now, after[0], after[0], after[1], limit))
    return [(r[0], float(r[1]), int(r[2])) for r in found]


def expire_thread(d: Dialect, thread_id: str, default_ttl: float | None, now: float, bc: codec.BlobCodec | None = None) -> Op[int | None]:
    """Delete ``thread_id`` whole if it is still expired once its index row is locked (a put
    since the thread was listed keeps it); the checkpoints deleted, or None when kept.
    ``default_ttl`` as ``expired_threads``'."""
    found = yield Q(d.expiring_thread(), (thread_id, default_ttl, default_ttl, now))
    if not found:
        return None
    from threadline.storage.ops.maintain import delete_thread  # once per expired thread, not on put/get

    yield from delete_thread(d, thread_id, bc)
    return int(found[0][0])


def expired_cold_threads(d: Dialect, default_ttl: float | None, now: float, limit: int, after: tuple[float, str] = FIRST) -> Op[list[tuple[str, float, int]]]:
    """``expired_threads`` of the cold threads (``lifecycle.cold``)."""
    found = yield Q(d.EXPIRED_COLD, (default_ttl, default_ttl, now, after[0], after[0], after[1], limit))
    return [(r[0], float(r[1]), int(r[2])) for r in found]


def expire_cold_thread(d: Dialect, thread_id: str, default_ttl: float | None, now: float) -> Op[int | None]:
    """Delete the stub of the cold thread ``thread_id`` if it is still expired (a restore since it
    was listed keeps it: one of the two deletes the stub); its checkpoints, or None when kept. Its
    archive, no longer named, is deleted by the next object sweep (``lifecycle.objects``)."""
    found = yield Q(d.EXPIRE_COLD, (thread_id, default_ttl, default_ttl, now))
    return int(found[0][0]) if found else None


def retention_candidates(
    d: Dialect, after: str, limit: int, *, keep_last: int | None, older_than: float | None, idle_since: float | None
) -> Op[list[str]]:
    """Up to ``limit`` threads (ordered, after ``after``) a retention policy may change: more
    checkpoints than ``keep_last``, a checkpoint created before ``older_than`` (a time), or
    no update since ``idle_since`` (a time). The policy itself decides what goes."""
    params: list[Any] = []
    for rule in (keep_last, older_than, idle_since):
        if rule is not None:
            params += [after, rule]
    if not params:
        return []
    found = yield Q(d.retention_candidates(keep_last is not None, older_than is not None, idle_since is not None), [*params, limit])
    return [r[0] for r in found]


def lock_thread(d: Dialect, thread_id: str) -> Op[None]:
    """Lock ``thread_id``'s index row until the transaction ends (where rows lock: Postgres), so
    a concurrent put of the thread, which updates that row last, waits for this transaction."""
    sql = d.lock_thread()
    if sql:
        yield Q(sql, (thread_id,))
