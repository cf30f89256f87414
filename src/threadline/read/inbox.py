"""The inbox: every interrupt waiting for a person's answer across the database, oldest first.

Built on the one status rule (``read.search``'s ``status="interrupted"``, i.e. ``read.status``):
an interrupt answered by a ``__resume__`` write stored beside it is not waiting (``read.state``'s
``split_interrupts``), so it is never listed here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from threadline.read.common import Damage, checkpoint_row_op, iso, jsonable
from threadline.read.search import search_op
from threadline.storage.ops import Op


@dataclass
class InboxItem:
    """One interrupt waiting for its answer: where it is (``thread_id``, the head ``checkpoint_id``),
    its ``interrupt_id``, payload ``value`` and ``node``; ``waiting_since`` (the head checkpoint's
    ``created_at``, epoch seconds), ``waited`` (seconds until the inbox was read) and the thread
    record's ``metadata``. ``damage``: a stored row of the thread cannot be read (``read.common.Damage``);
    when it is its head, the item stands for the thread (no ``interrupt_id``, ``value`` or
    ``node``; waiting since its last update), listed rather than hidden."""

    thread_id: str
    checkpoint_id: str | None
    interrupt_id: str | None
    value: Any
    node: str | None
    waiting_since: float | None
    waited: float | None
    metadata: dict[str, Any] = field(default_factory=dict)
    damage: Damage | None = None

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "checkpoint_id": self.checkpoint_id, "interrupt_id": self.interrupt_id,
                "value": jsonable(self.value), "node": self.node, "waiting_since": self.waiting_since,
                "waiting_since_iso": iso(self.waiting_since), "waited": self.waited, "metadata": jsonable(self.metadata),
                "damage": self.damage.to_json() if self.damage is not None else None}


def inbox_op(d: Any, serde: Any, bc: Any = None, *, limit: int = 50, offset: int = 0, now: float | None = None) -> Op[list[InboxItem]]:
    """The interrupts of the threads ``offset .. offset+limit`` waiting on ``interrupt()``, oldest first
    (by the thread's last update; one item per interrupt; one item, its ``damage``, for a thread
    whose head cannot be read). Raises ValueError for bad paging."""
    page = yield from search_op(d, serde, bc, status="interrupted", limit=limit, offset=offset,
                                sort_by="updated_at", sort_order="asc", count=False)
    now = time.time() if now is None else now
    items: list[InboxItem] = []
    for t in page.threads:
        status = t.status
        if status is None and t.damage is not None:
            items.append(InboxItem(t.thread_id, t.head_checkpoint_id, None, None, None, t.updated_at, max(0.0, now - t.updated_at),
                                   dict(t.metadata or {}), t.damage))
            continue
        if status is None or not status.interrupts:
            continue
        head = status.checkpoint_id or t.head_checkpoint_id
        row = (yield from checkpoint_row_op(d, t.thread_id, "", head)) if head else None
        since = float(row[8]) if row is not None and row[8] is not None else t.updated_at
        for i in status.interrupts:
            items.append(InboxItem(t.thread_id, head, i.get("id"), i.get("value"), i.get("node"), since,
                                   None if since is None else max(0.0, now - since), dict(t.metadata or {}), t.damage))
    return items


def inbox(saver: Any, *, limit: int = 50, offset: int = 0) -> list[InboxItem]:
    """Sync ``inbox_op`` on a saver: the waiting interrupts of a page of threads, oldest first."""
    return saver.run(inbox_op(saver.dialect, saver.serde, getattr(saver, "blob_codec", None), limit=limit, offset=offset))


def inbox_count(saver: Any) -> int:
    """How many threads wait on an interrupt (``count_threads(status="interrupted")``)."""
    return saver.run(search_op(saver.dialect, saver.serde, getattr(saver, "blob_codec", None), status="interrupted",
                               limit=1, with_status=False)).total
