"""Monthly partitions of ``checkpoints`` and ``writes`` (Postgres, optional).

``partition(saver)`` (CLI ``threadline partition``) turns the two tables into tables
partitioned by month of creation, in one transaction that copies their rows: one
partition per month from the oldest checkpoint to ``MONTHS_AHEAD`` months from now, and
a default partition for ids that name no time. The month is the one LangGraph's
checkpoint id (a UUIDv6) encodes, which is when the checkpoint was made; partitioning by
``checkpoint_id`` ranges keeps the primary key (thread_id, checkpoint_ns,
checkpoint_id), so every statement, re-puts included, works unchanged, and a
checkpoint's pending writes live in the same month as the checkpoint.

The sweeper then, on each run, creates the months ahead and drops the past months that
retention has emptied: ``DROP TABLE`` gives their space back to the file system at once,
where deleted rows of an unpartitioned table wait for ``VACUUM FULL``. Retention itself
is unchanged (heads, fork points and what kept checkpoints need are never removed, so a
month still holding one stays). Blobs are shared across months by reference and stay
in one table.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass, field
from typing import Any

from threadline.defaults import MONTHS_AHEAD
from threadline.errors import ConfigError
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q

TABLES = ("checkpoints", "writes")
_GREGORIAN = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01 (as uuid6)
_UUID6 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-6[0-9a-f]{3}-")
_PART = re.compile(r"_y(\d{4})m(\d{2})$")


def id_at(when: _dt.datetime) -> str:
    """The smallest LangGraph checkpoint id (UUIDv6) made at ``when`` (UTC): a partition bound."""
    ts = int(when.replace(tzinfo=_dt.timezone.utc).timestamp() * 10_000_000) + _GREGORIAN
    high = (ts >> 12) & 0xFFFFFFFFFFFF
    return f"{high >> 16:08x}-{high & 0xFFFF:04x}-6{ts & 0xFFF:03x}-0000-000000000000"


def month_of(checkpoint_id: str) -> _dt.date | None:
    """The month (its first day, UTC) a UUIDv6 checkpoint id was made in; None for other ids."""
    if not _UUID6.match(checkpoint_id):
        return None
    hexa = checkpoint_id.replace("-", "")
    ts = (int(hexa[:12], 16) << 12) | int(hexa[13:16], 16)
    when = _dt.datetime.fromtimestamp((ts - _GREGORIAN) / 10_000_000, _dt.timezone.utc)
    return when.date().replace(day=1)


def _next(month: _dt.date, n: int = 1) -> _dt.date:
    y, m = divmod(month.year * 12 + month.month - 1 + n, 12)
    return _dt.date(y, m + 1, 1)


def _month_now(now: float) -> _dt.date:
    return _dt.datetime.fromtimestamp(now, _dt.timezone.utc).date().replace(day=1)


def _bounds(month: _dt.date) -> tuple[str, str]:
    start = _dt.datetime(month.year, month.month, 1)
    nxt = _next(month)
    return id_at(start), id_at(_dt.datetime(nxt.year, nxt.month, 1))


def _require(d: Dialect) -> None:
    if not d.partitions:
        raise ConfigError(f"partition does not apply to {d.name}: monthly partitions are a Postgres feature")


def partitioned_op(d: Dialect) -> Op[bool]:
    """Whether ``checkpoints`` is a partitioned table."""
    if not d.partitions:
        return False
    found = yield Q(d.IS_PARTITIONED)
    return bool(found)


def _partitions_op(d: Dialect, table: str) -> Op[list[str]]:
    found = yield Q(d.PARTITIONS_OF, (f"threadline_{table}",))
    return sorted(r[0] for r in found)


def ensure_op(d: Dialect, now: float, first: _dt.date | None = None, months_ahead: int = MONTHS_AHEAD) -> Op[list[str]]:
    """Create the monthly partitions missing from ``first`` (default: this month) to
    ``months_ahead`` months from now; the partitions created."""
    made = []
    month, last = first or _month_now(now), _next(_month_now(now), months_ahead)
    while month <= last:
        lo, hi = _bounds(month)
        for t in TABLES:
            name = f"threadline_{t}_y{month.year:04d}m{month.month:02d}"
            if name not in (yield from _partitions_op(d, t)):
                for sql in d.create_partition(name, t, lo, hi):
                    yield Q(sql)
                made.append(name)
        month = _next(month)
    return made


def drop_empty_op(d: Dialect, now: float) -> Op[list[str]]:
    """Drop the months before this one whose checkpoints and writes partitions are both empty."""
    this = _month_now(now)
    dropped = []
    names = yield from _partitions_op(d, "checkpoints")
    for name in names:
        m = _PART.search(name)
        if not m or _dt.date(int(m.group(1)), int(m.group(2)), 1) >= this:
            continue
        pair = [name, name.replace("threadline_checkpoints_", "threadline_writes_", 1)]
        used = False
        for p in pair:
            used = used or bool((yield Q(d.partition_used(p))))
        if used:
            continue
        for p in pair:
            yield Q(d.drop_partition(p))
        dropped.append(name)
    return dropped


@dataclass
class PartitionReport:
    """What ``partition`` did: rows moved per table, partitions created."""

    partitioned: bool
    rows: dict[str, int] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"partitioned": self.partitioned, "rows": self.rows, "created": self.created}


def partition_op(d: Dialect, now: float | None = None, months_ahead: int = MONTHS_AHEAD) -> Op[PartitionReport]:
    """Turn ``checkpoints`` and ``writes`` into monthly partitioned tables, rows moved, in one
    transaction (it locks both tables meanwhile). Idempotent: on partitioned tables it only
    creates missing months. ConfigError on a backend without partitions."""
    _require(d)
    now = time.time() if now is None else now
    if (yield from partitioned_op(d)):
        return PartitionReport(True, created=(yield from ensure_op(d, now, months_ahead=months_ahead)))
    ids = yield Q(d.FIRST_UUID6_ID)
    first = min(filter(None, [month_of(ids[0][0]) if ids[0][0] else None, _month_now(now)]))
    for t in TABLES:
        for sql in d.repartition(t):
            yield Q(sql)
    created = yield from ensure_op(d, now, first, months_ahead)
    rows = {}
    for t in TABLES:
        move, drop = d.move_unpartitioned(t)
        rows[t] = int((yield Q(move))[0][0])
        yield Q(drop)
    return PartitionReport(True, rows, created)


def partition(saver: Any, *, months_ahead: int = MONTHS_AHEAD) -> PartitionReport:
    """Sync ``partition_op`` (one transaction)."""
    return saver.run(partition_op(saver.dialect, months_ahead=months_ahead), write=True)
