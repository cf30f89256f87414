"""The named statements of the thread guard (``threadline.guard``), in SQL for both dialects:
a thread's lease, one row of ``threadline_leases`` per thread ever held. Each statement's
comment gives its parameters, then (→) the columns of the rows it returns;
``storage/redis/leases.py`` implements the same names on Redis.

Time is the database server's clock (``now_sql``), never the callers': every process compares
leases on one clock, so a client whose clock is off neither steals a live lease nor keeps a dead
one. Times are seconds since the epoch; durations are seconds.

Fencing: every run that takes the lease gets the thread's next ``token`` (1, 2, …); a renewal
keeps it. A released lease keeps its row, expired, so the count goes on. A put made under the
lease checks, in its own statement or transaction, that the lease still has the holder and token
it was taken with and has not expired (``check_fence``).
"""

from __future__ import annotations

_LEASE_ROW = "holder, acquired_at, expires_at, expires_at - {now}, token"


class LeaseStatements:
    """Mixed into ``Dialect``; ``now_sql`` is the dialect's SQL for the server's time."""

    # SQL for the database server's current time in seconds since the epoch (a float)
    now_sql: str
    # appended to the fence check's SELECT: a put holds the lease row until it commits, so a run
    # taking the thread over waits for it ("" where a write transaction holds the one write lock)
    lock_shared: str = ""
    # whether the put and put_writes statements check the fence themselves (``put_statement``,
    # ``insert_writes`` with ``fenced``); else a put under a lease runs ``check_fence`` first
    fences_in_statement: bool = False

    def take_lease(self) -> str:
        """(thread_id, holder, seconds) → holder, acquired_at, expires_at, seconds left, token:
        the row when ``holder`` now holds the thread's lease for ``seconds`` — it was free, expired
        or already ``holder``'s — with the thread's next token; no row when another holder's lease
        is still running. One statement: of many takers exactly one wins."""
        now = self.now_sql
        return (
            f"INSERT INTO threadline_leases (thread_id, holder, acquired_at, expires_at, token) VALUES (?, ?, {now}, {now} + ?, 1) "
            "ON CONFLICT (thread_id) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, "
            "expires_at = excluded.expires_at, token = threadline_leases.token + 1 "
            f"WHERE threadline_leases.holder = excluded.holder OR threadline_leases.expires_at <= {now} "
            f"RETURNING {_LEASE_ROW.format(now=now)}"
        )

    def renew_lease(self) -> str:
        """(seconds, thread_id, holder, token) → the lease row (as ``take_lease``) when it still
        has that holder and token, now running ``seconds`` more — also when it had expired, as long
        as no other run took it since; no row when one did (the token moved on)."""
        now = self.now_sql
        return (
            f"UPDATE threadline_leases SET expires_at = {now} + ? WHERE thread_id = ? AND holder = ? AND token = ? "
            f"RETURNING {_LEASE_ROW.format(now=now)}"
        )

    def read_lease(self) -> str:
        """(thread_id) → holder, acquired_at, expires_at, seconds left (≤ 0: expired or released),
        token of the thread's lease row; no row when none was ever taken."""
        return f"SELECT {_LEASE_ROW.format(now=self.now_sql)} FROM threadline_leases WHERE thread_id = ?"

    def release_lease(self) -> str:
        """(thread_id, holder, token): the lease ends now when it still has that holder and token
        (else nothing changes); the row stays, expired, keeping the token count."""
        return f"UPDATE threadline_leases SET expires_at = {self.now_sql} WHERE thread_id = ? AND holder = ? AND token = ?"

    def check_fence(self) -> str:
        """(thread_id, holder, token) → one row when the thread's lease has that holder and token
        and is running: a put under that lease may write. On Postgres the row stays locked
        (``lock_shared``) until the put's transaction ends."""
        return (
            f"SELECT 1 FROM threadline_leases WHERE thread_id = ? AND holder = ? AND token = ? "
            f"AND expires_at > {self.now_sql}{self.lock_shared}"
        )

    def live_leases(self, count: int) -> str:
        """(``count`` thread_ids; 0: every thread) → thread_id of those whose lease is running (not
        expired): the threads a run holds now, for their ``busy`` status (``read.status``)."""
        among = f" AND thread_id IN ({','.join('?' * count)})" if count else ""
        return f"SELECT thread_id FROM threadline_leases WHERE expires_at > {self.now_sql}{among}"
