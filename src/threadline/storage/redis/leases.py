"""The thread guard's named statements on Redis: the names, parameters and rows of
``storage/dialect/leases.py``, each a handler (``storage/redis/base.py``).

A thread's lease is one key in the thread's hash tag (``layout.lease_key``), set with ``PX`` so
it expires by itself, and changed only by one script (``scripts.LEASE``): take, renew and release
compare the holder and token and act in one step. Beside it, ``<lease key>:token`` counts the
runs that took the lease (the fencing token); it is kept a day past the last lease (then the count
starts again: a put checks the lease's holder as well as its token, so an old holder never
matches a new lease). Times are the Redis server's clock (``TIME`` inside the script).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Call, Cmd, statement, text


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def lease_keys(prefix: str, thread_id: str) -> list[str]:
    """The lease key of ``thread_id`` and its token count (one cluster slot: the thread's hash tag)."""
    key = L.lease_key(prefix, thread_id)
    return [key, key + ":token"]


def _row(reply: list) -> list[tuple[str, float, float, float, int]]:
    """holder, acquired_at, expires_at, seconds left, token of a script's reply ({won, value, ms left, now ms})."""
    _, value, left, now = reply
    if value is None or int(left) == -2:  # no lease (or it expired in between)
        return []
    holder, acquired, token = (text(value).rsplit(L.SEP, 2) + ["0"])[:3]  # (a release before fencing: no token)
    # PTTL rounds down: 0 is a lease still held for under a millisecond, which a take still refuses
    remaining = max(int(left), 1) / 1000 if int(left) >= 0 else float("inf")  # -1: set without expiry (not by threadline)
    return [(holder, int(acquired) / 1000, int(now) / 1000 + remaining, remaining, int(token))]


def _lease(d: Any, tid: str, *args: Any) -> Generator:
    return (yield [Call("lease", lease_keys(d.prefix, tid), list(args))])[0]


def take_lease(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, holder, seconds = params
    reply = yield from _lease(d, tid, "take", holder, _ms(seconds))
    return _row(reply) if int(reply[0]) else []


def renew_lease(d: Any, params: Sequence[Any], many: bool) -> Generator:
    seconds, tid, holder, token = params
    reply = yield from _lease(d, tid, "renew", holder, _ms(seconds), str(token))
    return _row(reply) if int(reply[0]) else []


def read_lease(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return _row((yield from _lease(d, params[0], "read", "")))


def release_lease(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, holder, token = params
    yield from _lease(d, tid, "release", holder, str(token))
    return []


def check_fence(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, holder, token = params
    found = _row((yield from _lease(d, tid, "read", "")))
    return [(1,)] if found and found[0][0] == holder and found[0][4] == int(token) and found[0][3] > 0 else []


def live_leases(d: Any, params: Sequence[Any], many: bool) -> Generator:
    """A lease key exists only while it runs (``PX``): the threads whose key exists."""
    tids = [text(t) for t in params] if params else [text(t) for t in (yield [("ZRANGE", d.index, 0, -1)])[0]]
    if not tids:
        return []
    found = yield [("EXISTS", L.lease_key(d.prefix, t)) for t in tids]
    return [(t,) for t, n in zip(tids, found) if int(n)]


TAKE_LEASE = statement(take_lease)
RENEW_LEASE = statement(renew_lease)
READ_LEASE = statement(read_lease)
RELEASE_LEASE = statement(release_lease)
CHECK_FENCE = statement(check_fence)
LIVE_LEASES = statement(live_leases)


class RedisLeaseStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""

    now_sql = ""  # the script reads the server's clock itself
    fences_in_statement = True  # the put and writes scripts check the lease themselves

    def take_lease(self) -> Cmd:  # type: ignore[override]
        return TAKE_LEASE

    def renew_lease(self) -> Cmd:  # type: ignore[override]
        return RENEW_LEASE

    def read_lease(self) -> Cmd:  # type: ignore[override]
        return READ_LEASE

    def release_lease(self) -> Cmd:  # type: ignore[override]
        return RELEASE_LEASE

    def check_fence(self) -> Cmd:  # type: ignore[override]
        return CHECK_FENCE

    def live_leases(self, count: int) -> Cmd:  # type: ignore[override]
        return LIVE_LEASES
