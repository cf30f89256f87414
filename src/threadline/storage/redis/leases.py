"""The thread guard's named statements on Redis: the names, parameters and rows of
``storage/dialect/leases.py``, each a handler (``storage/redis/base.py``).

A thread's lease is one key in the thread's hash tag (``layout.lease_key``), set with
``SET NX PX`` so it expires by itself, and changed only by one script (``scripts.LEASE``):
take, renew and release compare the holder and act in one step. Times are the Redis
server's clock (``TIME`` inside the script).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis import layout as L
from threadline.storage.redis.base import Call, Cmd, statement, text


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _row(reply: list) -> list[tuple[str, float, float, float]]:
    """holder, acquired_at, expires_at, seconds left of a script's reply ({won, value, ms left, now ms})."""
    _, value, left, now = reply
    if value is None or int(left) == -2:  # no lease (or it expired in between)
        return []
    holder, _, acquired = text(value).rpartition(L.SEP)
    remaining = int(left) / 1000 if int(left) >= 0 else float("inf")  # -1: set without expiry (not by threadline)
    return [(holder, int(acquired) / 1000, int(now) / 1000 + remaining, remaining)]


def take_lease(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, holder, seconds, _ = params
    reply = (yield [Call("lease", [L.lease_key(d.prefix, tid)], ["take", holder, _ms(seconds)])])[0]
    return _row(reply) if int(reply[0]) else []


def read_lease(d: Any, params: Sequence[Any], many: bool) -> Generator:
    reply = (yield [Call("lease", [L.lease_key(d.prefix, params[0])], ["read", ""])])[0]
    return _row(reply)


def release_lease(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, holder = params
    yield [Call("lease", [L.lease_key(d.prefix, tid)], ["release", holder])]
    return []


TAKE_LEASE = statement(take_lease)
READ_LEASE = statement(read_lease)


class RedisLeaseStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""

    now_sql = ""  # the script reads the server's clock itself
    RELEASE_LEASE = statement(release_lease)

    def take_lease(self) -> Cmd:  # type: ignore[override]
        return TAKE_LEASE

    def read_lease(self) -> Cmd:  # type: ignore[override]
        return READ_LEASE
