"""Thread records, read: ``ThreadRecord`` and ``thread_record_op`` / ``thread_record``.

A record is a thread's own metadata — title, owner, tags, any JSON object — and whether it is
archived, kept beside its checkpoints (schema migration 7) and set without writing one
(``threadline.lifecycle.records``). It is what the LangGraph Agent Server calls a thread's
``metadata`` (``threads.update(metadata=…)``, ``threads.search(metadata=…)``); the metadata of
each checkpoint (``list(filter=…)``) is another thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from threadline.keys import thread_id_of
from threadline.read.common import iso
from threadline.storage.ops import Op, Q


@dataclass
class ThreadRecord:
    """A thread's record: ``metadata`` (a JSON object; ``{}`` when none was set), ``archived``,
    ``created_at`` / ``updated_at`` (epoch seconds the record was first set / last changed; None
    when none was set)."""

    thread_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    archived: bool = False
    created_at: float | None = None
    updated_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "metadata": self.metadata,
            "archived": self.archived,
            "created": iso(self.created_at) if self.created_at is not None else None,
            "updated": iso(self.updated_at) if self.updated_at is not None else None,
        }


def record_of(d: Any, thread_id: str, row: tuple | None) -> ThreadRecord:
    """The ``ThreadRecord`` of a ``THREAD_RECORD`` row (None: no record set)."""
    if row is None:
        return ThreadRecord(thread_id)
    meta = d.load_object(row[0], f"record of thread {thread_id!r}") if row[0] is not None else {}
    return ThreadRecord(thread_id, meta, bool(row[1]), float(row[2]), float(row[3]))


def thread_record_op(d: Any, thread_id: Any) -> Op[ThreadRecord]:
    """The record of ``thread_id`` (an empty, unarchived one when none was set). ConfigError for a malformed id."""
    tid = thread_id_of(thread_id)
    found = yield Q(d.THREAD_RECORD, (tid,))
    return record_of(d, tid, found[0] if found else None)


def thread_record(saver: Any, thread_id: Any) -> ThreadRecord:
    """Sync ``thread_record_op`` on a saver."""
    return saver.run(thread_record_op(saver.dialect, thread_id))
