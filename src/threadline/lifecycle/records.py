"""Thread records, written: ``update_thread_op`` / ``update_thread`` set a thread's own metadata
and its ``archived`` flag without writing a checkpoint (``threadline.read.records`` reads them).

Named after the LangGraph Agent Server's ``threads.update(thread_id, metadata=…)``, which merges
the given keys into the thread's metadata, as this does unless ``replace`` is given.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from threadline import limits
from threadline.errors import ConfigError
from threadline.keys import thread_id_of
from threadline.read.records import ThreadRecord, thread_record_op
from threadline.storage.jsonfilter import dumps
from threadline.storage.ops import Op, Q


def _checked(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise ConfigError(f"thread metadata must be a mapping of string keys to JSON values, got {type(metadata).__name__}")
    return dict(metadata)


def update_thread_op(
    d: Any,
    thread_id: Any,
    metadata: Mapping[str, Any] | None = None,
    *,
    archived: bool | None = None,
    replace: bool = False,
    now: float | None = None,
) -> Op[ThreadRecord]:
    """Set the record of ``thread_id`` and return it.

    ``metadata``: keys merged into the record's metadata (a key given ``None`` is removed), or,
    with ``replace``, the whole new metadata. ``archived``: archive (True) or restore (False) the
    thread; None leaves it. A thread need not have a checkpoint yet: its record is kept and the
    listings show the thread once it has one. Deleting the thread deletes its record.

    Raises ConfigError for a malformed thread_id, metadata that is not a mapping of string keys
    to JSON values (no NaN, no NUL), or larger than ``limits.max_value_bytes`` as JSON.
    """
    tid = thread_id_of(thread_id)
    given = _checked(metadata or {})
    current = yield from thread_record_op(d, tid)
    merged = dict(given) if replace else {**current.metadata, **given}
    merged = {k: v for k, v in merged.items() if v is not None}
    try:
        text = dumps(merged, f"metadata of thread {tid!r}")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    top = limits.current().max_value_bytes
    if len(text.encode()) > top:
        raise ConfigError(f"metadata of thread {tid!r} is {len(text.encode())} bytes of JSON, more than max_value_bytes={top} (threadline.limits)")
    flag = current.archived if archived is None else bool(archived)
    at = time.time() if now is None else float(now)
    yield Q(d.PUT_THREAD_RECORD, (tid, text, int(flag), at, at))
    return ThreadRecord(tid, merged, flag, current.created_at if current.created_at is not None else at, at)


def update_thread(saver: Any, thread_id: Any, metadata: Mapping[str, Any] | None = None, *, archived: bool | None = None,
                  replace: bool = False) -> ThreadRecord:
    """Sync ``update_thread_op`` on a saver (one write transaction)."""
    return saver.run(update_thread_op(saver.dialect, thread_id, metadata, archived=archived, replace=replace), write=True)
