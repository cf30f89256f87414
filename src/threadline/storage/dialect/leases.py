"""The named statements of the thread guard (``threadline.guard``), in SQL for both dialects:
a thread's lease, one row of ``threadline_leases`` per thread held. Each statement's comment
gives its parameters, then (→) the columns of the rows it returns; ``storage/redis/leases.py``
implements the same names on Redis.

Time is the database server's clock (``now_sql``), never the callers': every process compares
leases on one clock, so a client whose clock is off neither steals a live lease nor keeps a dead
one. Times are seconds since the epoch; durations are seconds.
"""

from __future__ import annotations

_LEASE_ROW = "holder, acquired_at, expires_at, expires_at - {now}"


class LeaseStatements:
    """Mixed into ``Dialect``; ``now_sql`` is the dialect's SQL for the server's time."""

    # SQL for the database server's current time in seconds since the epoch (a float)
    now_sql: str

    def take_lease(self) -> str:
        """(thread_id, holder, seconds, seconds) → holder, acquired_at, expires_at, seconds left:
        the row when ``holder`` now holds the thread's lease for ``seconds`` more — it was free,
        expired or already ``holder``'s (then renewed, keeping its acquired_at) — and no row when
        another holder's lease is still running. One statement: of many takers exactly one wins."""
        now = self.now_sql
        return (
            f"INSERT INTO threadline_leases (thread_id, holder, acquired_at, expires_at) VALUES (?, ?, {now}, {now} + ?) "
            f"ON CONFLICT (thread_id) DO UPDATE SET expires_at = {now} + ?, "
            "acquired_at = CASE WHEN threadline_leases.holder = excluded.holder THEN threadline_leases.acquired_at "
            "ELSE excluded.acquired_at END, holder = excluded.holder "
            f"WHERE threadline_leases.holder = excluded.holder OR threadline_leases.expires_at <= {now} "
            f"RETURNING {_LEASE_ROW.format(now=now)}"
        )

    def read_lease(self) -> str:
        """(thread_id) → holder, acquired_at, expires_at, seconds left (≤ 0: expired) of the
        thread's lease row; no row when none was taken or it was released."""
        return f"SELECT {_LEASE_ROW.format(now=self.now_sql)} FROM threadline_leases WHERE thread_id = ?"

    # (thread_id, holder): the lease row deleted when ``holder`` holds it (else nothing changes)
    RELEASE_LEASE = "DELETE FROM threadline_leases WHERE thread_id = ? AND holder = ?"
