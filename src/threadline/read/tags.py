"""Tags and pins as stored (``threadline.lifecycle.tags`` writes them): ``Tag``, a thread's tags,
every tag, whether a thread is pinned, and ``check_tag_name`` — what a tag may be called.

A tag names one checkpoint of a thread (``golden``), unique in that thread; a pinned thread is
kept whole. A database set up before tags existed (schema version 10), opened read-only, has
none: the reads below then return nothing.

Errors: ``ConfigError`` for a tag name that could be read as a checkpoint name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from threadline.errors import ConfigError
from threadline.read.common import iso
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.storage.schema import table

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_HEXISH = re.compile(r"^[0-9a-fA-F-]+$")
_RESERVED = {"head"}


@dataclass(frozen=True)
class Tag:
    """A tag: ``name`` of checkpoint ``checkpoint_id`` (in ``checkpoint_ns``) of ``thread_id``,
    set at ``created_at`` (seconds since the epoch)."""

    thread_id: str
    name: str
    checkpoint_ns: str
    checkpoint_id: str
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "name": self.name, "checkpoint_ns": self.checkpoint_ns,
                "checkpoint_id": self.checkpoint_id, "created_at": self.created_at, "created": iso(self.created_at)}


def check_tag_name(name: Any) -> str:
    """``name`` when it may name a checkpoint: a letter or ``_`` then up to 63 letters, digits,
    ``_``, ``.`` or ``-``, and nothing a checkpoint name already means (``HEAD``, ``step:N``,
    hex digits like an id, ``~``/``^`` moves). ConfigError otherwise."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"bad tag name {name!r}: use a letter or _ then letters, digits, _, . or - (at most 64 characters)")
    if name.lower() in _RESERVED or (_HEXISH.match(name) and len(name.replace("-", "")) >= 6):
        raise ConfigError(f"tag name {name!r} reads as a checkpoint name (HEAD or hex digits of an id); choose another")
    return name


def tags_stored_op(d: Dialect) -> Op[bool]:
    """Whether the database can hold tags (it has the tables of schema version 10)."""
    if not d.tags_need_table:
        return True
    return table("tags") in {r[0] for r in (yield Q(d.tables_sql))}


def thread_tags_op(d: Dialect, thread_id: str) -> Op[list[Tag]]:
    """The tags of ``thread_id``, by name ([] when there are none or the database has no tags)."""
    if not (yield from tags_stored_op(d)):
        return []
    return [Tag(thread_id, r[0], r[1], r[2], float(r[3])) for r in (yield Q(d.THREAD_TAGS, (thread_id,)))]


def every_tag_op(d: Dialect) -> Op[list[Tag]]:
    """Every tag of the database, by thread_id and name."""
    if not (yield from tags_stored_op(d)):
        return []
    return [Tag(r[0], r[1], r[2], r[3], float(r[4])) for r in (yield Q(d.EVERY_TAG))]


def tag_named_op(d: Dialect, thread_id: str, name: str) -> Op[tuple[str, str] | None]:
    """(checkpoint_ns, checkpoint_id) the tag ``name`` of ``thread_id`` names, or None."""
    if not (yield from tags_stored_op(d)):
        return None
    found = yield Q(d.TAG_NAMED, (thread_id, name))
    return (found[0][0], found[0][1]) if found else None


def thread_pin_op(d: Dialect, thread_id: str) -> Op[float | None]:
    """When ``thread_id`` was pinned (seconds since the epoch), or None when it is not."""
    if not (yield from tags_stored_op(d)):
        return None
    found = yield Q(d.THREAD_PIN, (thread_id,))
    return float(found[0][0]) if found else None


def every_pin_op(d: Dialect) -> Op[list[tuple[str, float]]]:
    """(thread_id, pinned_at) of every pinned thread, by thread_id."""
    if not (yield from tags_stored_op(d)):
        return []
    return [(r[0], float(r[1])) for r in (yield Q(d.EVERY_PIN))]
