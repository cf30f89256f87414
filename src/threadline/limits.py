"""The size limits threadline enforces, in one place.

=========================  ============  =================================================================
limit                      default       exceeded by … → error
=========================  ============  =================================================================
``max_key_bytes``          512           a thread_id, checkpoint_ns, checkpoint_id, channel, version,
                                         task_id, task_path, Store key or Cache key longer than this in UTF-8 →
                                         ``KeyTooLongError`` (a ``ConfigError``). Four keys of this size
                                         fit Postgres's B-tree index entry (2,704 bytes) together.
``max_value_bytes``        256 MiB       a serialized channel value or pending write larger than this →
                                         ``ValueTooLargeError`` on write; a stored value that would
                                         decompress to more → ``CorruptRowError`` on read, refused before
                                         anything is allocated (a decompression bomb).
``max_filter_keys``        64            a ``list(filter=…)`` with more keys, a Store ``search(filter=…)``
                                         with more conditions → ``FilterTooLargeError``
``max_filter_bytes``       64 KiB        a filter whose JSON is larger → ``FilterTooLargeError``
``max_filter_path_depth``  16            a Store filter key naming a path of more fields
                                         (``"a.b.c"`` is 3) → ``FilterTooLargeError``
``max_json_depth``         64            checkpoint metadata, a Store value or a filter nested deeper
                                         (objects and arrays within each other) →
                                         ``ValueTooLargeError`` (a filter: ``FilterTooLargeError``)
``max_metadata_bytes``     16 MiB        checkpoint metadata whose JSON is larger → ``ValueTooLargeError``
``max_namespace_bytes``    1024          a Store namespace (labels joined with ``.``) or Cache namespace
                                         (a JSON array) longer in UTF-8 → ``KeyTooLongError``; with a
                                         key of ``max_key_bytes`` it fits Postgres's index entry
``max_ttl_seconds``        10**11        a Store TTL (minutes × 60) or Cache TTL (seconds) beyond ±this
                                         (about 3,000 years) → ``ConfigError``
=========================  ============  =================================================================

The limits are process-wide: ``configure(max_value_bytes=1 << 30)`` changes them,
``override(...)`` changes them for a ``with`` block (tests), ``current()`` reads them.
``check_bytes`` and ``check_depth`` apply the byte and nesting limits to JSON text already
made, in time that does not grow with the data on the common path; ``check_filter_json``
applies both to a filter (the savers' ``list`` and the Store's ``search``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from threadline.errors import FilterError, FilterTooLargeError, ThreadlineError


@dataclass(frozen=True)
class Limits:
    """See the module docstring for what each limit bounds and the error it raises."""

    max_key_bytes: int = 512
    max_value_bytes: int = 256 << 20
    max_filter_keys: int = 64
    max_filter_bytes: int = 64 << 10
    max_filter_path_depth: int = 16
    max_json_depth: int = 64
    max_metadata_bytes: int = 16 << 20
    max_namespace_bytes: int = 1024
    max_ttl_seconds: int = 10**11

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


def check_bytes(text: str, limit: str, what: str, error: type[ThreadlineError]) -> None:
    """``error`` naming ``limit`` (a field of ``Limits``) when ``text`` is longer in UTF-8; text
    short enough in characters is not encoded."""
    top = getattr(_current, limit)
    if len(text) * 4 <= top:
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > top:
        raise error(f"{what} is {size} bytes of JSON, more than {limit}={top} (threadline.limits)")


def too_deep(what: str, error: type[ThreadlineError]) -> ThreadlineError:
    """The ``error`` for ``what`` nested deeper than ``max_json_depth``."""
    return error(f"{what} is nested more than max_json_depth={_current.max_json_depth} objects and arrays deep (threadline.limits)")


def check_depth(value: Any, text: str, what: str, error: type[ThreadlineError]) -> None:
    """``too_deep`` when ``value`` (whose JSON is ``text``) nests more than ``max_json_depth``
    objects and arrays. Walked only when ``text`` has more brackets than the limit."""
    top = _current.max_json_depth
    if text.count("{") + text.count("[") <= top:
        return
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, (list, tuple)):
            continue
        if depth == top:
            raise too_deep(what, error)
        stack.extend((child, depth + 1) for child in node)


def value_too_large(exc: Any, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> ThreadlineError:
    """``exc`` (a ``ValueTooLargeError`` of ``max_value_bytes`` raised while a put or put_writes
    serialized a value) again, naming the thread, namespace, checkpoint, channel and task, and the fix."""
    if exc.channel is None or exc.limit is None:  # another limit's, or not a value's: as raised
        return exc
    what = f"the pending write of task {exc.task_id!r} to channel {exc.channel!r}" if exc.task_id is not None else f"channel {exc.channel!r}"
    return type(exc)(
        f"thread {thread_id!r}, checkpoint_ns {checkpoint_ns!r}, checkpoint {checkpoint_id!r}: {what} serializes to {exc.size} "
        f"bytes, more than max_value_bytes={exc.limit}; nothing was written. Store less in it, or raise the limit: "
        "threadline.limits.configure(max_value_bytes=…) (values that large are best kept in an object store: offload, docs/offload.md)",
        channel=exc.channel, task_id=exc.task_id, size=exc.size, limit=exc.limit,
        thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id,
    )


def check_filter_json(filter: Any, what: str) -> None:
    """FilterTooLargeError for a filter of more than ``max_filter_bytes`` of JSON or nested more
    than ``max_json_depth``; FilterError for one that is not JSON."""
    try:
        text = json.dumps(filter, ensure_ascii=False, default=str)
    except RecursionError:
        raise too_deep(what, FilterTooLargeError) from None
    except (TypeError, ValueError) as exc:
        raise FilterError(f"{what} cannot be matched: {exc}") from exc
    check_bytes(text, "max_filter_bytes", what, FilterTooLargeError)
    check_depth(filter, text, what, FilterTooLargeError)
