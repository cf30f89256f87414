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


class Pool(Generic[T]):
    """Objects made by ``make``: ``take`` one (yours alone), ``give`` it back when done."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._idle: list[T] = []  # list.pop and list.append are atomic: no lock needed

    def take(self) -> T:
        try:
            return self._idle.pop()
        except IndexError:
            return self._make()

    def give(self, obj: T) -> None:
        self._idle.append(obj)
