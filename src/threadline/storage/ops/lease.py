"""Operations of the thread guard (``threadline.guard``): a thread's lease taken, renewed,
read and released, each one statement (``storage/dialect/leases.py``), atomic on its own; and
the fence a put made under a lease carries (``Fence``, ``fenced_writes``, ``check``).

A lease is per thread_id (every namespace of the thread). ``take`` wins when the thread has no
lease, its lease expired, or the caller's holder string holds it, and gives the run the thread's
next fencing token. ``renew`` keeps the lease of that holder and token — also once it ran out,
unless another run took it meanwhile. Times come from the database server's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from threadline.errors import LeaseLostError
from threadline.keys import key_of
from threadline.storage.dialect import Dialect
from threadline.storage.ops.base import Op, Q, flat
from threadline.storage.schema import table


@dataclass(frozen=True)
class LeaseState:
    """A thread's lease as stored: ``holder`` (the string its run gave), ``acquired_at`` and
    ``expires_at`` (seconds since the epoch, the database's clock), ``remaining`` (seconds
    until it expires, measured on that clock when read; ≤ 0: expired or released), ``token``
    (its fencing token: the thread's count of runs that took the lease)."""

    thread_id: str
    holder: str
    acquired_at: float
    expires_at: float
    remaining: float
    token: int = 0


@dataclass(frozen=True)
class Fence:
    """A run's lease as the puts made under it carry it: the saver it was taken on (``owner``:
    only that saver's puts are fenced), the thread, the holder and the lease's token."""

    owner: Any
    thread_id: str
    holder: str
    token: int


# The leases the current code runs under (``threadline.guard`` sets it for a run; LangGraph's
# executors copy the context into the threads and tasks that call put and put_writes).
FENCES: ContextVar[tuple[Fence, ...]] = ContextVar("threadline_fences", default=())


def fence_of(fences: tuple[Fence, ...], owner: Any, config: Any) -> Fence | None:
    """The fence among ``fences`` of ``owner`` (a saver) on ``config``'s thread, or None."""
    thread_id = key_of(config).thread_id
    return next((f for f in fences if f.owner is owner and f.thread_id == thread_id), None)


def _state(thread_id: str, rows: list) -> LeaseState | None:
    if not rows:
        return None
    holder, acquired, expires, remaining, token = rows[0]
    return LeaseState(thread_id, str(holder), float(acquired), float(expires), float(remaining), int(token))


def take(d: Dialect, thread_id: str, holder: str, seconds: float) -> Op[tuple[bool, LeaseState | None]]:
    """Take ``thread_id``'s lease for ``seconds`` with its next token: (True, the lease now held)
    when won; (False, the other holder's lease) when it is busy (None in the rare case that lease
    was released between the two statements)."""
    won = yield Q(d.take_lease(), (thread_id, holder, seconds), single=True)
    if won:
        return True, _state(thread_id, won)
    return False, _state(thread_id, (yield Q(d.read_lease(), (thread_id,))))


def renew(d: Dialect, lease: LeaseState, seconds: float) -> Op[tuple[bool, LeaseState | None]]:
    """Extend ``lease`` (as taken) by ``seconds``: (True, the lease) while no other run took the
    thread since; else (False, the thread's lease now, or None)."""
    won = yield Q(d.renew_lease(), (seconds, lease.thread_id, lease.holder, lease.token), single=True)
    if won:
        return True, _state(lease.thread_id, won)
    return False, _state(lease.thread_id, (yield Q(d.read_lease(), (lease.thread_id,))))


def read(d: Dialect, thread_id: str) -> Op[LeaseState | None]:
    """``thread_id``'s lease row (expired and released ones included: ``remaining`` ≤ 0), or None."""
    return _state(thread_id, (yield Q(d.read_lease(), (thread_id,), read=True)))


def release(d: Dialect, lease: LeaseState) -> Op[None]:
    """End ``lease`` now if the thread still has it (another run's lease is kept)."""
    yield Q(d.release_lease(), (lease.thread_id, lease.holder, lease.token), single=True)


def held(d: Dialect, thread_ids: Sequence[str] | None = None) -> Op[frozenset[str]]:
    """The threads (of ``thread_ids``; None: all) a run holds now: a running lease. Empty on a
    database without the leases table (one opened read-only from before the guard)."""
    if not (yield Q(d.columns_sql, (table("leases"),), read=True)):
        return frozenset()
    ids = list(thread_ids or ())
    if thread_ids is not None and not ids:
        return frozenset()
    return frozenset(r[0] for r in (yield Q(d.live_leases(len(ids)), ids, read=True)))


# --- fencing: the puts made under a lease ------------------------------------------------------


def refuse(d: Dialect, fence: Fence, what: str) -> Op[None]:
    """Raise ``LeaseLostError`` for ``what`` (the put refused: "checkpoint 'x'", …), naming the
    thread's lease now. Run inside the refused put's transaction: nothing of it is written."""
    now = _state(fence.thread_id, (yield Q(d.read_lease(), (fence.thread_id,))))
    running = now is not None and now.remaining > 0
    if running and now.token != fence.token:  # type: ignore[union-attr]
        who = (f"run {now.holder!r} took the thread over (token {now.token}; "  # type: ignore[union-attr]
               f"its lease expires in {now.remaining:.1f} s unless renewed)")  # type: ignore[union-attr]
    elif now is not None and now.token != fence.token:
        who = f"run {now.holder!r} took the thread over meanwhile (token {now.token}; its lease has ended since)"
    else:
        who = "it expired (no run holds the thread now)"
    raise LeaseLostError(
        f"thread {fence.thread_id!r}: not writing {what}: this run's lease (token {fence.token}, holder "
        f"{fence.holder!r}) is lost — {who}; nothing was written. This run went on past its lease (paused or cut off from the database "
        "for longer than lease_seconds); its state is stale: run it again from the thread's head, or give runs "
        "that pause this long a longer lease_seconds",
        thread_id=fence.thread_id, token=fence.token, holder=now.holder if running else None,  # type: ignore[union-attr]
        holder_token=now.token if running else None, expires_at=now.expires_at if running else None,  # type: ignore[union-attr]
        remaining=now.remaining if running else None,  # type: ignore[union-attr]
    )


def check(d: Dialect, fence: Fence, what: str) -> Op[None]:
    """In a put's transaction, before it writes: ``LeaseLostError`` unless ``fence`` still holds."""
    if not (yield Q(d.check_fence(), (fence.thread_id, fence.holder, fence.token))):
        yield from refuse(d, fence, what)


def fenced_writes(d: Dialect, fence: Fence, replace: bool, rows: list[tuple], what: str, stores: tuple) -> Op[list]:
    """``Dialect.insert_writes(replace, live=True)`` of ``rows`` under ``fence``: the task_id, idx
    of the rows inserted; ``LeaseLostError`` (nothing written) when the lease is lost."""
    if not d.fences_in_statement:
        yield from check(d, fence, what)
        return (yield Q(d.insert_writes(replace, live=True), rows, many=True, stores=stores))
    found = yield Q(d.insert_writes(replace, live=True, fenced=len(rows)), [fence.thread_id, fence.holder, fence.token, *flat(rows)],
                    stores=stores)
    if not any(r[0] is None and r[1] for r in found):
        yield from refuse(d, fence, what)
    return [r for r in found if r[0] is not None]
