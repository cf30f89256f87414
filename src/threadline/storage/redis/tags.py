"""The named statements of tags and pins on Redis: the names, parameters and rows of
``storage/dialect/tags.py``, each a handler (``storage/redis/base.py``).

A thread's tags and pin are one HASH beside its other keys, under its hash tag
(``<prefix>:{<thread_id>}:tg``, ``layout.ThreadKeys.tg``): field ``t \\0 <name>`` → ``checkpoint_ns
\\0 checkpoint_id \\0 created_at``, field ``pin`` → pinned_at. Deleting the thread deletes it. While
it exists the thread does not expire (``scripts.py``): each change here restarts the thread's expiry.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from threadline.storage.redis import layout as L
from threadline.storage.redis.base import all_threads, expire_thread, statement, text

PIN = "pin"


def tags_key(d: Any, thread_id: str) -> str:
    """The HASH of ``thread_id``'s tags and pin."""
    return d.keys(thread_id).tg



def _tag(name: str) -> str:
    return L.field("t", name)


def _rows(raw: dict) -> list[tuple[str, str, str, float]]:
    out = []
    for f, v in raw.items():
        f = text(f)
        if not f.startswith("t" + L.SEP):
            continue
        ns, cid, created = L.split(v, 3, f"tag {f!r}")
        out.append((f[2:], ns, cid, float(created)))
    return sorted(out)


def thread_tags(d: Any, params: Sequence[Any], many: bool) -> Generator:
    return _rows((yield [("HGETALL", tags_key(d, params[0]))])[0])


def every_tag(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tids = yield from all_threads(d)
    found = (yield [("HGETALL", tags_key(d, t)) for t in tids]) if tids else []
    return [(t, *r) for t, raw in sorted(zip(tids, found)) for r in _rows(raw)]


def tag_named(d: Any, params: Sequence[Any], many: bool) -> Generator:
    raw = (yield [("HGET", tags_key(d, params[0]), _tag(params[1]))])[0]
    return [] if raw is None else [tuple(L.split(raw, 3, f"tag {params[1]!r}")[:2])]


def insert_tag(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, name, ns, cid, created = params
    new = (yield [("HSETNX", tags_key(d, tid), _tag(name), L.field(ns, cid, repr(float(created)))), expire_thread(d, tid)])[0]
    return [(name,)] if new else []


def delete_tag(d: Any, params: Sequence[Any], many: bool) -> Generator:
    found = yield from tag_named(d, params, many)
    if found:
        yield [("HDEL", tags_key(d, params[0]), _tag(params[1])), expire_thread(d, params[0])]
    return found


def delete_checkpoint_tags(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tid, ns, cid = params
    names = [r[0] for r in (yield from thread_tags(d, (tid,), False)) if (r[1], r[2]) == (ns, cid)]
    if names:
        yield [("HDEL", tags_key(d, tid), *map(_tag, names)), expire_thread(d, tid)]
    return []


def pin_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    yield [("HSETNX", tags_key(d, params[0]), PIN, repr(float(params[1]))), expire_thread(d, params[0])]
    return []


def unpin_thread(d: Any, params: Sequence[Any], many: bool) -> Generator:
    gone = (yield [("HDEL", tags_key(d, params[0]), PIN), expire_thread(d, params[0])])[0]
    return [(params[0],)] if gone else []


def thread_pin(d: Any, params: Sequence[Any], many: bool) -> Generator:
    raw = (yield [("HGET", tags_key(d, params[0]), PIN)])[0]
    return [] if raw is None else [(float(raw),)]


def every_pin(d: Any, params: Sequence[Any], many: bool) -> Generator:
    tids = yield from all_threads(d)
    found = (yield [("HGET", tags_key(d, t), PIN) for t in tids]) if tids else []
    return [(t, float(raw)) for t, raw in sorted(zip(tids, found)) if raw is not None]


def delete_thread_tags(d: Any, params: Sequence[Any], many: bool) -> Generator:
    yield [("DEL", tags_key(d, params[0]))]
    return []


class RedisTagStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""

    tags_need_table = False
    THREAD_TAGS = statement(thread_tags)
    EVERY_TAG = statement(every_tag)
    TAG_NAMED = statement(tag_named)
    INSERT_TAG = statement(insert_tag)
    DELETE_TAG = statement(delete_tag)
    DELETE_CHECKPOINT_TAGS = statement(delete_checkpoint_tags)
    PIN_THREAD = statement(pin_thread)
    UNPIN_THREAD = statement(unpin_thread)
    THREAD_PIN = statement(thread_pin)
    EVERY_PIN = statement(every_pin)
    DELETE_THREAD_TAGS = (statement(delete_thread_tags),)
