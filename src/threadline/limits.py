"""The size limits threadline enforces, in one place.

=======================  ============  =================================================================
limit                    default       exceeded by … → error
=======================  ============  =================================================================
``max_key_bytes``        512           a thread_id, checkpoint_ns, checkpoint_id, channel, version,
                                       task_id or task_path longer than this in UTF-8 →
                                       ``KeyTooLongError`` (a ``ConfigError``). Four keys of this size
                                       fit Postgres's B-tree index entry (2,704 bytes) together.
``max_value_bytes``      256 MiB       a serialized channel value or pending write larger than this →
                                       ``ValueTooLargeError`` on write; a stored value that would
                                       decompress to more → ``CorruptRowError`` on read, refused before
                                       anything is allocated (a decompression bomb).
``max_filter_keys``      64            a ``list(filter=…)`` with more keys → ``FilterTooLargeError``
``max_filter_bytes``     64 KiB        a filter whose JSON is larger → ``FilterTooLargeError``
=======================  ============  =================================================================

The limits are process-wide: ``configure(max_value_bytes=1 << 30)`` changes them,
``override(...)`` changes them for a ``with`` block (tests), ``current()`` reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """See the module docstring for what each limit bounds and the error it raises."""

    max_key_bytes: int = 512
    max_value_bytes: int = 256 << 20
    max_filter_keys: int = 64
    max_filter_bytes: int = 64 << 10

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"limit {f.name} must be a positive integer, got {value!r}")


_current = Limits()


def current() -> Limits:
    """The limits in force."""
    return _current


def configure(**changes: int) -> Limits:
    """Change limits process-wide (keyword names as ``Limits``); returns the new limits.
    Raises ValueError for an unknown name or a value that is not a positive integer."""
    global _current
    unknown = set(changes) - {f.name for f in dataclasses.fields(Limits)}
    if unknown:
        raise ValueError(f"unknown limit(s) {sorted(unknown)}; known: {[f.name for f in dataclasses.fields(Limits)]}")
    _current = dataclasses.replace(_current, **changes)
    return _current


@contextmanager
def override(**changes: int) -> Iterator[Limits]:
    """``configure`` for the duration of a ``with`` block, then restore the previous limits."""
    global _current
    before = _current
    try:
        yield configure(**changes)
    finally:
        _current = before
