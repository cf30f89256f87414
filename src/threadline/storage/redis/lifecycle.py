"""The named statements of ``threadline.lifecycle`` on Redis: the names, parameters and rows of
``storage/dialect/lifecycle.py``, each a handler (``storage/redis/base.py``).

* The sweeper's job lease is a key set with ``SET NX PX`` (it expires with the lease) beside the
  job's record, both under one hash tag and changed by one script (``scripts.SWEEP``).
* TTL is Redis's own expiry, set on all of a thread's keys at once for a thread written under a
  TTL: a sweep expires none of those. A sweep of the whole database (``threadline.ttl``) expires
  the threads written without a TTL, each checked and deleted by one script (``scripts.EXPIRE_IDLE``).
  Retention (``keep_last``,
  ``older_than``, ``idle_for``) finds its threads in the ``<prefix>:threads`` index.
* No rows lock (each step is atomic on its own) and no space waits to be given back (Redis frees
  memory as it deletes): ``vacuum`` and monthly ``partition`` do not apply.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.dialect.reads import ThreadFilter
from threadline.storage.redis.base import Call, Cmd, all_threads, group, statement, text, thread_checkpoint_rows, thread_writes_of
from threadline.storage.redis.reads import checkpoints_of, kept_threads, lockstep, value_size

THREADS_A_ROUND = 256  # threads whose index rows one round of ``retention_candidates`` reads


def _job_keys(d: Any, job: str) -> tuple[str, str]:
    base = f"{d.prefix}:sweep:{{{job}}}"
    return base, base + ":lease"


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def claim_sweep(d: Any, params: Sequence[Any], many: bool) -> Generator:
    owner, until, now, job, _now, latest_finish = params
    won = (yield [Call("sweep", _job_keys(d, job), ["claim", owner, repr(float(now)), _ms(until - now), repr(float(latest_finish))])])[0]
    return [(job,)] if won else []


def renew_sweep(d: Any, params: Sequence[Any], many: bool) -> Generator:
    until, job, owner = params
    kept = (yield [Call("sweep", _job_keys(d, job), ["renew", owner, repr(float(until)), _ms(until - time.time())])])[0]
    return [(job,)] if kept else []


def finish_sweep(d: Any, params: Sequence[Any], many: bool) -> Generator:
    now, result, job, owner = params
    yield [Call("sweep", _job_keys(d, job), ["finish", owner, repr(float(now)), result])]
    return []


def sweep_run(d: Any, params: Sequence[Any], many: bool) -> Generator:
    row = (yield [("HMGET", _job_keys(d, params[0])[0], "owner", "lease_until", "started_at", "finished_at", "result")])[0]
    if row[0] is None:
        return []
    owner, until, started, finished, result = row
    return [(text(owner), float(until), float(started) if started else None, float(finished) if finished else None, text(result))]


def _idle(d: Any, tid: str) -> Generator:
    """Whether ``tid`` was written without a TTL and is untagged and unpinned, with its last activity
    (the later of its put and read times) and checkpoint count; None when its keys are gone."""
    k = d.keys(tid)
    row, tagged = yield [("HMGET", k.th, "count", "ttl", "dttl", "updated", "accessed"), ("EXISTS", k.tg)]
    if row[0] is None:
        return None
    count, ttl, dttl, updated, accessed = row
    return ttl is None and dttl is None and not tagged, max(float(updated), float(accessed or 0)), int(count)


def expired_threads(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """``EXPIRED_THREADS``: none unless the sweep gives threads written without a TTL one (the
    others expire by Redis itself); then those of the index idle that long, after the cursor."""
    minutes, _, now, after_updated, _, after_tid, limit = params
    if minutes is None:
        return []
    found = (yield [("ZRANGE", d.index, after_updated, now - minutes * 60, "BYSCORE", "WITHSCORES")])[0]
    scored = found if found and isinstance(found[0], (list, tuple)) else group(found, 2)  # RESP3 pairs, else RESP2 flat
    listed = [(text(t), float(s)) for t, s in scored if (float(s), text(t)) > (after_updated, after_tid)]
    out: list[tuple[str, float, int]] = []
    for i in range(0, len(listed), THREADS_A_ROUND):
        part = listed[i : i + THREADS_A_ROUND]
        for (tid, updated), state in zip(part, (yield from lockstep([_idle(d, t) for t, _ in part]))):
            if state is not None and state[0] and state[1] + minutes * 60 <= now:
                out.append((tid, updated, state[2]))
                if len(out) == int(limit):
                    return out
    return out


def expiring_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """``expiring_thread``: the thread deleted at once if it is still expired (``scripts.EXPIRE_IDLE``)."""
    tid, minutes, _, now = params
    if minutes is None:
        return []
    count = (yield [Call("expire_idle", d.keys(tid), [minutes, now])])[0]
    return [(count,)] if count >= 0 else []


def every_thread_id(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return [(t,) for t in (yield from all_threads(d))]


def _index_row(d: Any, tid: str) -> Generator:
    return (yield [("HMGET", d.keys(tid).th, "count", "updated")])[0]


def _oldest_checkpoint(d: Any, tid: str) -> Generator:
    rows = yield from thread_checkpoint_rows(d, (tid,), False)
    return min((float(r[8]) for r in rows), default=None)


def retention_candidates(d: Any, params: Sequence[Any], many: bool, keep_last: bool, older_than: bool, idle: bool) -> Generator:
    """The threads of the index after ``after`` that a rule may change, in order, up to ``limit``."""
    rules = iter(params[1:-1:2])
    after, limit = params[0], int(params[-1])
    most, before, since = (next(rules) if on else None for on in (keep_last, older_than, idle))
    ids = sorted(t for t in (yield from all_threads(d)) if t > after)
    out: list[tuple[str]] = []
    for i in range(0, len(ids), THREADS_A_ROUND):
        part = ids[i : i + THREADS_A_ROUND]
        rows = yield from lockstep([_index_row(d, t) for t in part])
        oldest = (yield from lockstep([_oldest_checkpoint(d, t) for t in part])) if before is not None else [None] * len(part)
        for tid, (count, updated), first in zip(part, rows, oldest):
            if count is None:  # its keys expired: no thread any more
                continue
            if ((most is not None and int(count) > most) or (first is not None and first < before)
                    or (since is not None and float(updated) <= since)):
                out.append((tid,))
                if len(out) == limit:
                    return out
    return out


def thread_checkpoint_sizes(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """checkpoint_ns, checkpoint_id, parent, step, source, created_at, checkpoint, metadata, stored bytes
    (the JSON texts', as the SQL backends count them), checksum."""
    return [
        (r[0], r[1], r[2], r[5], r[6], r[8], r[3], r[4], len(r[3].encode()) + len(r[4].encode()), r[9])
        for r in (yield from thread_checkpoint_rows(d, params, many))
    ]


def _updated_since(d: Any, since: float) -> Generator:
    """The threads of the ``<prefix>:threads`` index updated at or after ``since``."""
    return [r[0] for r in (yield from kept_threads(d, ThreadFilter(updated_since=since)))]


def checkpoints_since(d: Any, params: Sequence[Any], many: bool) -> Generator:
    since = float(params[0])
    found = yield from checkpoints_of(d, (yield from _updated_since(d, since)))
    sizes = [value_size(c[4]) + value_size(c[5]) for c in found if c[9] >= since]
    return [(len(sizes), sum(sizes))]


def writes_since(d: Any, params: Sequence[Any], many: bool) -> Generator:
    since = float(params[0])
    found = yield from lockstep([thread_writes_of(d, t) for t in (yield from _updated_since(d, float(params[1])))])
    sizes = [value_size(w[8]) for part in found for w in part if w[9] >= since]
    return [(len(sizes), sum(sizes))]


def nothing(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return []
    yield  # a generator


NOTHING = statement(nothing)
EXPIRING_THREAD = statement(expiring_thread)
THREAD_CHECKPOINT_SIZES = statement(thread_checkpoint_sizes)
CHECKPOINTS_SINCE = statement(checkpoints_since)
WRITES_SINCE = statement(writes_since)


class RedisLifecycleStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""

    reclaims_space = False
    ENSURE_SWEEP_JOB = NOTHING  # the job's record is written by its first claim
    CLAIM_SWEEP = statement(claim_sweep)
    RENEW_SWEEP = statement(renew_sweep)
    FINISH_SWEEP = statement(finish_sweep)
    SWEEP_RUN = statement(sweep_run)
    EXPIRED_THREADS = statement(expired_threads)
    EVERY_THREAD_ID = statement(every_thread_id)

    def expiring_thread(self) -> Cmd:  # type: ignore[override]
        return EXPIRING_THREAD

    def lock_thread(self) -> None:
        return None

    def checkpoints_since(self) -> Cmd:  # type: ignore[override]
        return CHECKPOINTS_SINCE

    def writes_since(self) -> Cmd:  # type: ignore[override]
        return WRITES_SINCE

    def retention_candidates(self, keep_last: bool, older_than: bool, idle: bool) -> Cmd:  # type: ignore[override]
        return Cmd(retention_candidates, (keep_last, older_than, idle), "retention_candidates")

    def thread_checkpoint_sizes(self) -> Cmd:  # type: ignore[override]
        return THREAD_CHECKPOINT_SIZES
