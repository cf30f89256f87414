"""Thread records on Redis (``storage/dialect/records.py`` names them): one HASH a thread,
``<prefix>:{<thread_id>}:rec`` (``layout.ThreadKeys.rec``, the thread's hash tag), fields ``metadata``
(JSON text), ``archived`` (0/1), ``created`` and ``updated`` (epoch seconds). It expires with the
thread: a write restarts the thread's expiry on all its keys."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis.base import expire_thread, rows_of, statement, text

FIELDS = ("metadata", "archived", "created", "updated")


def record_rows(d: Any, tids: Sequence[str]) -> Generator:
    """thread_id → (metadata JSON text, archived, created_at, updated_at) of those threads that have a record."""
    found = (yield [("HMGET", d.keys(t).rec, *FIELDS) for t in tids]) if tids else []
    return {t: (text(r[0]), int(r[1] or 0), float(r[2]), float(r[3])) for t, r in zip(tids, found) if r[0] is not None}


def thread_record(d: Any, params: Sequence[Any], many: bool) -> Generator:
    found = yield from record_rows(d, [params[0]])
    return [found[params[0]]] if found else []


def put_thread_record(d: Any, params: Sequence[Any], many: bool) -> Generator:
    cmds: list = []
    for tid, metadata, archived, created, updated in rows_of(params, many):
        k = d.keys(tid)
        cmds += [("HSETNX", k.rec, "created", created), ("HSET", k.rec, "metadata", metadata, "archived", int(archived), "updated", updated),
                 expire_thread(d, tid)]
    yield cmds
    return []


class RedisRecordsStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""

    THREAD_RECORD = statement(thread_record)
    PUT_THREAD_RECORD = statement(put_thread_record)
