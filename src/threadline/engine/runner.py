"""Drive a sans-IO operation (see ``ops``) with a sync or async ``execute``.

``execute(q)`` runs one ``Q`` on the backend's cursor and returns its rows; the
driver sends them back into the operation and returns the operation's result.
Transactions are the caller's (one per operation).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from threadline.engine.ops import Op, Q

T = TypeVar("T")


def drive(op: Op[T], execute: Callable[[Q], list]) -> T:
    try:
        q = next(op)
        while True:
            q = op.send(execute(q))
    except StopIteration as stop:
        return stop.value


async def adrive(op: Op[T], execute: Callable[[Q], Awaitable[list]]) -> T:
    try:
        q = next(op)
        while True:
            q = op.send(await execute(q))
    except StopIteration as stop:
        return stop.value


__all__ = ["drive", "adrive"]
