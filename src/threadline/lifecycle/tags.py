"""Tags and pins: name a checkpoint (``tag``), keep a thread whole (``pin``), and what they protect.

A tag names one checkpoint of a thread, unique in the thread (``read.tags.check_tag_name``
says what names are allowed); every command that takes a checkpoint name accepts it
(``read.names``). A pinned thread is kept whole. Retention (``prune``), TTL expiry, the
sweeper and ``delete_checkpoint`` never remove a tagged checkpoint — nor what it needs to be
read: its blobs, delta bases and DeltaChannel ancestors — or anything of a pinned thread,
unless forced (``force=True``, ``--force``); a forced removal drops the tags of what it removed.
LangGraph's own ``saver.delete_thread`` deletes a thread with its tags and pin: it is the
application's explicit call.

Errors: ``NotFoundError`` (unknown thread, checkpoint or tag), ``ConfigError`` (a bad tag name,
or a name the thread already uses).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import ConfigError, NotFoundError
from threadline.keys import checkpoint_ns_of, thread_id_of
from threadline.read.names import resolve_checkpoint_op, resolve_thread_op
from threadline.read.tags import Tag, check_tag_name, every_pin_op, every_tag_op, thread_pin_op, thread_tags_op
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.storage.ops import sweep as sweep_ops


@dataclass
class Protection:
    """What of one thread removal must keep: ``pinned`` (when it was pinned, seconds since the
    epoch, or None) and ``tags``: (checkpoint_ns, checkpoint_id) → the tag names on it."""

    pinned: float | None = None
    tags: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    @property
    def tagged(self) -> set[tuple[str, str]]:
        return set(self.tags)

    def __bool__(self) -> bool:
        return self.pinned is not None or bool(self.tags)


def protection_op(d: Dialect, thread_id: str) -> Op[Protection]:
    """``thread_id``'s pin and tagged checkpoints."""
    tags: dict[tuple[str, str], list[str]] = {}
    for t in (yield from thread_tags_op(d, thread_id)):
        tags.setdefault((t.checkpoint_ns, t.checkpoint_id), []).append(t.name)
    return Protection((yield from thread_pin_op(d, thread_id)), tags)


def drop_tags_op(d: Dialect, thread_id: str, checkpoints: Any) -> Op[None]:
    """Remove the tags of the (checkpoint_ns, checkpoint_id) ``checkpoints`` (deleted by force)."""
    for ns, cid in checkpoints:
        yield Q(d.DELETE_CHECKPOINT_TAGS, (thread_id, ns, cid))


def tag_op(d: Dialect, thread_id: Any, checkpoint: str, name: str, *, checkpoint_ns: str = "", now: float | None = None) -> Op[Tag]:
    """Name ``checkpoint`` (any checkpoint name: id, short id, HEAD~1, step:N, another tag) of
    ``thread_id`` ``name``. ConfigError when the thread already has a tag of that name."""
    name = check_tag_name(name)
    tid = yield from resolve_thread_op(d, thread_id)
    ns = checkpoint_ns_of(checkpoint_ns)
    yield from sweep_ops.lock_thread(d, tid)  # a concurrent expiry sees the tag, or deletes first
    cid = yield from resolve_checkpoint_op(d, tid, checkpoint, ns)
    created = time.time() if now is None else now
    if not (yield Q(d.INSERT_TAG, (tid, name, ns, cid, created))):
        found = yield Q(d.TAG_NAMED, (tid, name))
        raise ConfigError(f"thread {tid!r} already has a tag {name!r} (on checkpoint {found[0][1] if found else '?'}); "
                          "untag it first to move it")
    return Tag(tid, name, ns, cid, created)


def untag_op(d: Dialect, thread_id: Any, name: str) -> Op[Tag]:
    """Remove the tag ``name`` of ``thread_id``; the tag removed. NotFoundError when there is none."""
    tid = yield from resolve_thread_op(d, thread_id)
    found = yield Q(d.DELETE_TAG, (tid, name))
    if not found:
        known = [t.name for t in (yield from thread_tags_op(d, tid))]
        raise NotFoundError(f"thread {tid!r} has no tag {name!r}" + (f" (its tags: {', '.join(known)})" if known else " (it has no tags)"))
    return Tag(tid, name, found[0][0], found[0][1], time.time())


def pin_op(d: Dialect, thread_id: Any, *, now: float | None = None) -> Op[float]:
    """Pin ``thread_id``; when it was pinned (a pinned thread keeps its first time)."""
    tid = yield from resolve_thread_op(d, thread_id)
    yield from sweep_ops.lock_thread(d, tid)
    yield Q(d.PIN_THREAD, (tid, time.time() if now is None else now))
    pinned = yield from thread_pin_op(d, tid)
    assert pinned is not None
    return pinned


def unpin_op(d: Dialect, thread_id: Any) -> Op[None]:
    """Unpin ``thread_id``. NotFoundError when it is unknown or not pinned."""
    tid = yield from resolve_thread_op(d, thread_id)
    if not (yield Q(d.UNPIN_THREAD, (tid,))):
        raise NotFoundError(f"thread {tid!r} is not pinned")


@dataclass
class TagListing:
    """Tags (``Tag``) and pinned threads ((thread_id, pinned_at)), of one thread or all."""

    tags: list[Tag]
    pins: list[tuple[str, float]]

    def to_json(self) -> dict[str, Any]:
        return {"tags": [t.to_json() for t in self.tags], "pins": [{"thread_id": t, "pinned_at": p} for t, p in self.pins]}


def listing_op(d: Dialect, thread_id: Any = None) -> Op[TagListing]:
    """The tags and pin of ``thread_id`` (NotFoundError when unknown), or of every thread (None)."""
    if thread_id is None:
        return TagListing((yield from every_tag_op(d)), (yield from every_pin_op(d)))
    tid = yield from resolve_thread_op(d, thread_id)
    pinned = yield from thread_pin_op(d, tid)
    return TagListing((yield from thread_tags_op(d, tid)), [] if pinned is None else [(tid, pinned)])


def tag(saver: Any, thread_id: Any, checkpoint: str, name: str, *, checkpoint_ns: str = "") -> Tag:
    """Sync ``tag_op`` (one transaction)."""
    return saver.run(tag_op(saver.dialect, thread_id, checkpoint, name, checkpoint_ns=checkpoint_ns), write=True)


def untag(saver: Any, thread_id: Any, name: str) -> Tag:
    """Sync ``untag_op``."""
    return saver.run(untag_op(saver.dialect, thread_id, name), write=True)


def pin(saver: Any, thread_id: Any) -> float:
    """Sync ``pin_op``: when the thread was pinned."""
    return saver.run(pin_op(saver.dialect, thread_id), write=True)


def unpin(saver: Any, thread_id: Any) -> None:
    """Sync ``unpin_op``."""
    saver.run(unpin_op(saver.dialect, thread_id), write=True)


def listing(saver: Any, thread_id: Any = None) -> TagListing:
    """Sync ``listing_op``."""
    return saver.run(listing_op(saver.dialect, thread_id if thread_id is None else thread_id_of(thread_id)))
