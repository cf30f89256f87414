"""``Pool``: zstandard compressors and decompressors shared by every thread of the process.

A zstandard object must not be used by two threads at once (a shared compressor crashes the
process), and LangGraph writes checkpoints from worker threads it starts anew every few
supersteps, so objects kept per thread were rebuilt several times a turn (a compressor with
threadline's dictionary: its tables, tens of µs and up to a MB of memory each time). A pool
lends an object to one caller at a time and keeps it for the next: as many objects as calls
ever ran at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Pool(Generic[T]):
    """Objects made by ``make``, each lent to one call at a time (``lend``)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._idle: list[T] = []  # list.pop and list.append are atomic: no lock needed

    def lend(self, use: Callable[[T], R]) -> R:
        """``use(obj)`` with an object no other thread holds meanwhile (an idle one, else a new one)."""
        try:
            obj = self._idle.pop()
        except IndexError:
            obj = self._make()
        try:
            return use(obj)
        finally:
            self._idle.append(obj)
