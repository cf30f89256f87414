"""Operations of the thread guard (``threadline.guard``): a thread's lease taken, renewed,
read and released, each one statement (``storage/dialect/leases.py``), atomic on its own.

A lease is per thread_id (every namespace of the thread). ``take`` wins when the thread has no
lease, its lease expired, or the caller already holds it (a renewal: the same statement), so a
holder whose lease ran out keeps it unless another run took it meanwhile. Times come from the
database server's clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from threadline.storage.dialect import Dialect
from threadline.storage.ops.base import Op, Q


@dataclass(frozen=True)
class LeaseState:
    """A thread's lease as stored: ``holder`` (the string its run gave), ``acquired_at`` and
    ``expires_at`` (seconds since the epoch, the database's clock), ``remaining`` (seconds
    until it expires, measured on that clock when read; ≤ 0: expired)."""

    thread_id: str
    holder: str
    acquired_at: float
    expires_at: float
    remaining: float


def _state(thread_id: str, rows: list) -> LeaseState | None:
    if not rows:
        return None
    holder, acquired, expires, remaining = rows[0]
    return LeaseState(thread_id, str(holder), float(acquired), float(expires), float(remaining))


def take(d: Dialect, thread_id: str, holder: str, seconds: float) -> Op[tuple[bool, LeaseState | None]]:
    """Take (or renew, when ``holder`` holds it) ``thread_id``'s lease for ``seconds``: (True,
    the lease now held) when won; (False, the other holder's lease) when it is busy (None in
    the rare case that lease was released between the two statements)."""
    won = yield Q(d.take_lease(), (thread_id, holder, seconds, seconds), single=True)
    if won:
        return True, _state(thread_id, won)
    return False, _state(thread_id, (yield Q(d.read_lease(), (thread_id,))))


def read(d: Dialect, thread_id: str) -> Op[LeaseState | None]:
    """``thread_id``'s lease row (expired ones included: ``remaining`` ≤ 0), or None."""
    return _state(thread_id, (yield Q(d.read_lease(), (thread_id,), read=True)))


def release(d: Dialect, thread_id: str, holder: str) -> Op[None]:
    """Delete ``thread_id``'s lease if ``holder`` holds it (another holder's lease is kept)."""
    yield Q(d.RELEASE_LEASE, (thread_id, holder), single=True)
