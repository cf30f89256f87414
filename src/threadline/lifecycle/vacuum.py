"""Space that comes back: real bytes on disk, and giving freed space back to the system.

Deleting rows frees space inside a database, not on disk. ``reclaim`` (run by the
sweeper after it deletes, and by ``threadline vacuum``) gives it back without long
locks: on SQLite it returns the free pages of a database that uses incremental
auto-vacuum (threadline creates new databases so) in short transactions, then
checkpoints and truncates the WAL; on Postgres, after a large deletion, ``VACUUM
(ANALYZE)`` makes the space reusable and refreshes statistics. ``vacuum(full=True)``
rewrites the tables compactly (SQLite ``VACUUM``, which also turns on incremental
auto-vacuum in an older file; Postgres ``VACUUM (FULL, ANALYZE)``, which locks each
table while it is rewritten). Every ``SpaceReport`` gives the bytes on disk before and
after: the SQLite file with its WAL, or threadline's Postgres tables with their indexes
and TOAST.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import ConfigError
from threadline.lifecycle.jobs import Job, run_job
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q

PAGES_PER_TRANSACTION = 2000  # ~8 MiB of SQLite pages given back per short write transaction
LARGE_DELETE = 1000  # checkpoints deleted from which reclaiming also runs the table pass (VACUUM (ANALYZE))


@dataclass
class SpaceReport:
    """Bytes on disk before and after (None: an in-memory database), and what ran.

    ``pages_released``: SQLite free pages given back to the file system;
    ``statements``: the maintenance statements run (``failed``: those that could not run,
    with the reason); ``needs_full``: free space is left that only ``vacuum(full=True)``
    (``threadline vacuum --full``) can give back."""

    bytes_before: int | None
    bytes_after: int | None
    pages_released: int = 0
    statements: list[str] = field(default_factory=list)
    needs_full: bool = False
    failed: list[str] = field(default_factory=list)

    @property
    def bytes_freed(self) -> int | None:
        if self.bytes_before is None or self.bytes_after is None:
            return None
        return self.bytes_before - self.bytes_after

    def to_json(self) -> dict[str, Any]:
        return {
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_freed": self.bytes_freed,
            "pages_released": self.pages_released,
            "statements": self.statements,
            "needs_full": self.needs_full,
            "failed": self.failed,
        }


def _file_bytes(path: str) -> int | None:
    if not path:
        return None
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def disk_bytes_op(d: Dialect) -> Op[int | None]:
    """Bytes on disk now: the SQLite file and its WAL (None in memory), or threadline's Postgres tables."""
    if d.file_sql:
        found = yield Q(d.file_sql)
        return _file_bytes(found[0][0] if found else "")
    if d.tables_bytes_sql:
        return int((yield Q(d.tables_bytes_sql))[0][0])
    return None


def free_pages_op(d: Dialect) -> Op[int]:
    """Free pages inside the file (0 where there are none to count)."""
    if not d.free_pages_sql:
        return 0
    return int((yield Q(d.free_pages_sql))[0][0])


def release_pages_op(d: Dialect, limit: int) -> Op[int]:
    """Give up to ``limit`` free pages back (run as a write); how many went (none in a file
    without incremental auto-vacuum)."""
    free = yield from free_pages_op(d)
    for _ in range(min(free, limit)):
        yield Q(d.release_page_sql)  # type: ignore[arg-type]
    return free - (yield from free_pages_op(d))


def statement_op(sql: str) -> Op[list]:
    """One maintenance statement, outside any transaction (VACUUM cannot run in one)."""
    return (yield Q(sql, single=True))


def reclaim(d: Dialect, *, large: bool = True, before: int | None = None) -> Job[SpaceReport]:
    """Give back the space deleting rows freed (a job: ``run_job``/``arun_job``). ``large``
    adds the statements worth a pass over the tables (Postgres ``VACUUM (ANALYZE)``);
    ``before``: the bytes on disk measured before the deletion, if known."""
    report = SpaceReport(before if before is not None else (yield disk_bytes_op(d), False), None)
    if d.release_page_sql:
        while True:
            released = yield release_pages_op(d, PAGES_PER_TRANSACTION), True
            report.pages_released += released
            if released < PAGES_PER_TRANSACTION:
                break
    for sql in (*d.after_delete_sql, *(d.after_large_delete_sql if large else ())):
        try:
            yield statement_op(sql), True
        except Exception as exc:  # e.g. VACUUM on a connection that is not in autocommit: the deletion stands
            report.failed.append(f"{sql}: {type(exc).__name__}: {exc}")
        else:
            report.statements.append(sql)
    report.needs_full = bool((yield free_pages_op(d), False))
    report.bytes_after = yield disk_bytes_op(d), False
    return report


def rebuild(d: Dialect) -> Job[SpaceReport]:
    """Rewrite threadline's tables compactly (SQLite: the whole file). Locks them while it runs."""
    report = SpaceReport((yield disk_bytes_op(d), False), None)
    for sql in d.rebuild_sql:
        yield statement_op(sql), True
        report.statements.append(sql)
    report.bytes_after = yield disk_bytes_op(d), False
    return report


def vacuum(saver: Any, *, full: bool = False) -> SpaceReport:
    """Give freed space back to the system (``reclaim``), or with ``full`` rewrite the tables
    compactly (``rebuild``); bytes on disk before and after.

    Postgres needs an autocommit connection for VACUUM (``from_conn_string`` opens one). ConfigError
    where deleting leaves no space to give back (``reclaims_space``: Redis frees memory as it deletes)."""
    if not saver.dialect.reclaims_space:
        raise ConfigError(f"vacuum does not apply to {saver.dialect.name}: it frees memory as it deletes, nothing waits to be given back")
    return run_job(saver, rebuild(saver.dialect) if full else reclaim(saver.dialect))
