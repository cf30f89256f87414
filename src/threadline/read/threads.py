"""The threads listing: ``ThreadInfo`` / ``ThreadPage`` and ``threads_op`` (with its sync
``list_threads``), read from the ``threads`` index with each thread's head checkpoint
(id, step, source), filtered by metadata, idleness, activity or ids and paged; plus
``all_thread_ids_op``, every thread_id in the index.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.storage.dialect import Dialect
from threadline.storage.dialect.reads import THREAD_ORDERS, ThreadFilter
from threadline.storage.ops import Op, Q, lease
from threadline.read.common import Damage, checkpoint_row_op, isolated, iso, jsonable, load_channels_op
from threadline.read.status import STATUS_NAMES, BusyCheck, ThreadStatus, status_name, thread_status_op
from threadline.storage.jsonfilter import compile_filter, is_operators
from threadline.storage.schema import table
from threadline.read.official import Scope, heads_op, matching_op, merge, scope_of, unadopted_threads_op
from threadline.errors import CorruptRowError
from threadline.keys import thread_id_of

class _NamedOrUnarchived:
    """``threads_op``'s default ``archived``: hidden, unless the threads are named by id."""

    def __repr__(self) -> str:
        return "NAMED_OR_UNARCHIVED"


NAMED_OR_UNARCHIVED: Any = _NamedOrUnarchived()


@dataclass
class ThreadInfo:
    """One row of ``threads``: times in epoch seconds (``updated_at``: the last put's, to within
    a second), ``bytes`` stored for the thread; ``metadata`` and ``archived``: its record
    (``read.records``); ``status``: its ``ThreadStatus`` when the listing was asked for it.

    ``unadopted``: checkpoints of the thread in the official saver's tables that threadline has
    not adopted yet (``read.official``; a threadline saver adopts them on the thread's first
    use); ``official_only``: only the official tables hold the thread (its counts, times, size
    and head are those of its official checkpoints). ``cold``: the thread was moved to the object
    store whole (``lifecycle.cold``): counts, times and size are its stub's, it has no head, record
    or status here; its first read restores it.

    ``damage``: a stored row of the thread (its head, a value the listing decodes, its record)
    cannot be read (``read.common.Damage``: the error and the command that explains it); the
    listing goes on with the other threads, and this one has no ``status`` (nor ``metadata``
    when its record is the damaged row)."""

    thread_id: str
    created_at: float
    updated_at: float
    checkpoint_count: int
    bytes: int
    head_checkpoint_id: str | None
    head_step: int | None
    head_source: str | None
    unadopted: int = 0
    official_only: bool = False
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    archived: bool = False
    status: ThreadStatus | None = None
    cold: bool = False
    damage: Damage | None = None

    @property
    def adopted(self) -> bool:
        """Nothing of the thread waits in the official saver's tables."""
        return not self.unadopted

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.to_json() if self.status is not None else None
        d["created"] = iso(self.created_at)
        d["updated"] = iso(self.updated_at)
        d["adopted"] = self.adopted
        return d


@dataclass
class ThreadPage:
    """A page of threads (most recently updated first), the total matching, and the next offset
    (None at the end); ``damaged``: its threads that could not be read (``ThreadInfo.damage``)."""

    threads: list[ThreadInfo]
    total: int
    offset: int
    next_offset: int | None

    @property
    def damaged(self) -> list[ThreadInfo]:
        return [t for t in self.threads if t.damage is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "threads": [t.to_json() for t in self.threads],
            "total": self.total,
            "offset": self.offset,
            "next_offset": self.next_offset,
            "damaged": len(self.damaged),
        }



def threads_op(
    d: Dialect,
    *,
    metadata: Mapping[str, Any] | None = None,
    idle_for: float | None = None,
    active_within: float | None = None,
    thread_ids: Sequence[str] | None = None,
    limit: int = 50,
    offset: int = 0,
    order_by: str = "updated",
    now: float | None = None,
    scope: Scope | None = None,
    thread_metadata: Mapping[str, Any] | None = None,
    archived: Any = NAMED_OR_UNARCHIVED,
    status: str | None = None,
    values: Mapping[str, Any] | None = None,
    with_status: bool = False,
    busy: BusyCheck | None = None,
    serde: Any = None,
    bc: Any = None,
    count: bool = True,
) -> Op[ThreadPage]:
    """Threads, most recently updated first, from the ``threads`` index (no checkpoint scan
    unless ``metadata`` is given), and, when ``scope`` shows them (``read.official.scope_of``),
    the threads of the official saver's tables not adopted yet, in the same order and filters
    (their metadata matched key by key), marked ``official_only``; a thread threadline holds
    with newer official checkpoints to adopt carries their number (``ThreadInfo.unadopted``).

    Args:
        metadata: keep threads having at least one checkpoint whose metadata
            matches this filter as ``list(filter=…)`` matches it on the backend.
        idle_for: keep threads not updated for at least this many seconds.
        active_within: keep threads updated within this many seconds.
        thread_ids: restrict to these threads.
        limit, offset: paging (``limit`` ≥ 1, ``offset`` ≥ 0).
        order_by: ``"updated"`` (most recent first, default), ``"created"``
            (newest first), ``"bytes"`` (largest first) or ``"thread_id"``.
        now: the clock (epoch seconds), default ``time.time()``.
        thread_metadata: keep threads whose record's metadata (``read.records``; ``{}`` without
            one) matches this ``storage.jsonfilter`` filter (``$eq $ne $gt $gte $lt $lte $in
            $nin``, dotted keys nested paths): the Agent Server's ``threads.search(metadata=…)``.
        archived: False hides archived threads, True lists only them, None both; by default
            False, unless ``thread_ids`` names the threads (then None: a thread asked for by
            its id is found archived or not).
        status: keep threads of this status or kind (``read.status.STATUS_NAMES``: ``idle``,
            ``busy``, ``interrupted``, ``error``, ``errored``, ``pending``, ``done``, ``new``).
        values: keep threads whose head state has these top-level channel values: ``{channel:
            value}`` equal, or ``{channel: {"$op": bound}}`` a jsonfilter condition on the value as JSON.
        with_status: compute each listed thread's ``status`` (given ``status``, always).
        busy: ``busy(thread_id)`` → a run holds the thread (None: the thread guard's running
            leases, ``threadline.guard``, read once for the page).
        serde, bc: the saver's serializer and blob codec, needed for ``status``, ``values`` and
            ``with_status`` (``list_threads`` passes them).
        order_by also takes ``"updated_asc"``, ``"created_asc"`` and ``"thread_id_desc"``.
        count: count every match for ``total`` (default). False spares that query where the
            page comes from SQL alone: ``total`` is then only a lower bound (``offset`` plus
            the rows read, one past the page), ``next_offset`` still exact.

    ``idle``, ``interrupted`` and ``error`` (when no run holds a thread) are decided by the one SQL
    query from the head's pending writes (an error write; an interrupt write its task has no
    resume write for), as ``read.status`` decides them; only the page's heads are decoded, for
    their ``ThreadStatus``. ``values``, the kinds ``done`` / ``pending`` / ``new`` and a ``busy``
    check need decoding: the SQL query gives the candidates in order, then their heads are
    decoded, so ``total`` decodes them all.
    Threads of the official saver's tables not adopted yet are left out when ``thread_metadata``,
    ``status``, ``values`` or ``archived=True`` is given (they have no record or decoded head).
    Cold threads (``lifecycle.cold``: moved whole to the object store) are listed, marked ``cold``,
    with their stub's counts and times, unless ``thread_metadata``, ``status``, ``values``,
    ``metadata`` or ``archived=True`` is given (their checkpoints and record are in their archive).

    A thread a stored row of which cannot be read (its head, a value decoded, its record) is
    listed with its ``damage`` instead of failing the page (``read.common.isolated``); where a
    filter (``status``, ``values``) needs that row, it is listed as not known not to match.

    Returns a ``ThreadPage``; each thread carries its head checkpoint's id, step and source.
    Raises ValueError for a bad ``limit``/``offset``/``order_by``/``status``, FilterError for an
    unusable metadata filter.
    """
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")
    if order_by not in THREAD_ORDERS:
        raise ValueError(f"order_by must be one of {sorted(THREAD_ORDERS)}, got {order_by!r}")
    now = time.time() if now is None else now
    ids = None
    if thread_ids is not None:
        ids = tuple(thread_id_of(t) for t in thread_ids)
        if not ids:
            return ThreadPage([], 0, offset, None)
    if archived is NAMED_OR_UNARCHIVED:
        archived = None if thread_ids is not None else False
    if status is not None:
        status_name(status)
    decoded = status is not None or bool(values) or with_status
    if decoded and serde is None:
        raise ValueError("status, values and with_status need the saver's serde (list_threads passes it)")
    selected = ThreadFilter(
        updated_until=None if idle_for is None else now - float(idle_for),
        updated_since=None if active_within is None else now - float(active_within),
        thread_ids=ids,
        metadata=metadata or None,
        thread_metadata=thread_metadata or None,
        archived=archived,
        records=(yield from records_table_op(d)),
        head_stop=_HEAD_STOP.get(STATUS_NAMES[status]) if status is not None else None,
        # a cold thread's head and record are in its archive: filters on them leave it out
        cold=not (status is not None or values or thread_metadata) and (yield from cold_listed_op(d)),
    )
    if busy is None and (status is not None or with_status):
        # the threads a run holds now (the guard's running leases, few): the status check of the rest
        held = yield from lease.held(d, ids)
        busy = held.__contains__
        if not held:
            busy = _NEVER
    # idle / interrupted / error are decided by the SQL query itself when no thread is held
    in_sql = status is not None and STATUS_NAMES[status] in _EXACT and busy is _NEVER
    scope = scope or Scope()
    waiting = yield from unadopted_threads_op(d, scope, ids)
    partly = {t.thread_id: t.checkpoints for t in waiting if t.in_threadline}
    only = [t for t in waiting if not t.in_threadline]
    if thread_metadata or status is not None or values or archived:
        only = []
    if (status is not None and not in_sql) or values:
        return (yield from _decoded_page(d, serde, bc, selected, order_by, limit, offset, status, values, busy, partly))
    if selected.updated_until is not None:
        only = [t for t in only if t.updated_at <= selected.updated_until]
    if selected.updated_since is not None:
        only = [t for t in only if t.updated_at >= selected.updated_since]
    if metadata and only:
        keep = yield from matching_op(d, only, metadata, {})
        only = [t for t in only if t.thread_id in keep]
    total, found = 0, []
    if scope.threadline and not count and not only:
        found = yield Q(*d.threads_page(selected, order_by, limit + 1, offset))  # one more: is there a next page
        total = offset + len(found)
        found = found[:limit]
    elif scope.threadline:
        total = (yield Q(*d.count_threads(selected)))[0][0]
        found = yield Q(*d.threads_page(selected, order_by, offset + limit if only else limit, 0 if only else offset))
    threads = [_info(d, r, partly) for r in found]
    if only:
        extra = [ThreadInfo(t.thread_id, t.created_at, t.updated_at, t.checkpoints, t.bytes, None, None, None, t.checkpoints, True) for t in only]
        threads = merge(threads, extra, ORDER_KEYS[order_by], offset, limit)
        heads = yield from heads_op(d, [t.thread_id for t in threads if t.official_only])
        for t in threads:
            if t.thread_id in heads and t.official_only:
                t.head_checkpoint_id, t.head_step, t.head_source = heads[t.thread_id]
        total = int(total) + len(extra)
    if with_status or status is not None:
        for t in threads:
            if not t.official_only and not t.cold:
                yield from _status_of(d, serde, bc, t, bool(busy and busy(t.thread_id)))
    nxt = offset + len(threads)
    return ThreadPage(threads, int(total), offset, nxt if nxt < total else None)


# what the SQL query requires of a head of each status (``ThreadFilter.head_stop``), and the
# statuses it decides alone (the others are decoded: done / pending, and busy from its check)
_HEAD_STOP = {"interrupted": "interrupted", "error": "error", "errored": "error", "idle": "none", "done": "none",
              "pending": "none", "new": "none"}
_EXACT = ("idle", "interrupted", "error", "errored")
_ALL = 1 << 62  # no LIMIT: every candidate


def _NEVER(thread_id: str) -> bool:
    """The busy check when no run holds any thread."""
    return False


def _info(d: Dialect, r: tuple, partly: Mapping[str, int]) -> ThreadInfo:
    """A ``threads_page`` row as a ``ThreadInfo`` (an unreadable record: its ``damage``)."""
    meta, damage = {}, None
    if len(r) > 8 and r[8] is not None:
        try:
            meta = d.load_object(r[8], f"record of thread {r[0]!r}")
        except CorruptRowError as exc:
            damage = Damage.of(r[0], exc)
    archived = bool(r[9]) if len(r) > 9 and r[9] is not None else False
    return ThreadInfo(r[0], float(r[1]), float(r[2]), int(r[3]), int(r[4]), r[5], r[6], r[7], partly.get(r[0], 0),
                      metadata=meta, archived=archived, cold=bool(r[11]) if len(r) > 11 else False, damage=damage)


def _status_of(d: Dialect, serde: Any, bc: Any, t: ThreadInfo, busy: bool) -> Op[None]:
    """Fill ``t.status``, or ``t.damage`` when its head cannot be read (``isolated``)."""
    t.status, damage = yield from isolated(t.thread_id, thread_status_op(d, serde, t.thread_id, t.head_checkpoint_id, bc, busy=busy))
    t.damage = t.damage or damage


def cold_listed_op(d: Dialect) -> Op[bool]:
    """Whether the listings take cold threads in (``ThreadFilter.cold``): the backend keeps them
    (not Redis), the database has their table (schema migration 12) and holds at least one."""
    if not getattr(d, "offloads", False) or not (yield Q(d.columns_sql, (table("cold"),))):
        return False
    return bool((yield Q(d.ANY_COLD)))


def records_table_op(d: Dialect) -> Op[bool]:
    """Whether the database has the thread records table (schema migration 7; a database opened
    read-only may predate it; on Redis, always)."""
    return bool((yield Q(d.columns_sql, (table("thread_records"),))))


def _values_match(d: Dialect, serde: Any, bc: Any, thread_id: str, head: str | None, values: Mapping[str, Any]) -> Op[bool]:
    """Whether the head state of the thread has ``values`` (see ``threads_op``)."""
    if head is None:
        return False
    row = yield from checkpoint_row_op(d, thread_id, "", head)
    found = (yield from load_channels_op(d, serde, [row], list(values), bc))[0]
    for channel, want in values.items():
        if channel not in found:
            return False
        got = found[channel]
        if is_operators(want):
            if not compile_filter({channel: want})({channel: jsonable(got)}):
                return False
        elif not (got == want or jsonable(got) == want):
            return False
    return True


def _decoded_page(d: Dialect, serde: Any, bc: Any, selected: ThreadFilter, order_by: str, limit: int, offset: int,
                  status: str | None, values: Mapping[str, Any] | None, busy: BusyCheck | None, partly: Mapping[str, int]) -> Op[ThreadPage]:
    """The page of a listing by status or values: SQL candidates in order, their heads decoded."""
    if status is not None and STATUS_NAMES[status] == "busy" and busy in (None, _NEVER):
        return ThreadPage([], 0, offset, None)
    kept: list[ThreadInfo] = []
    held: set[str] = set()
    unread: set[str] = set()  # threads whose head could not be read: not decoded again
    for r in (yield Q(*d.threads_page(selected, order_by, _ALL, 0))):
        t = _info(d, r, partly)
        if values:
            match, damage = yield from isolated(t.thread_id, _values_match(d, serde, bc, t.thread_id, t.head_checkpoint_id, values))
            if damage is not None:
                t.damage = damage
                unread.add(t.thread_id)
            elif not match:
                continue
        if busy is not None and busy(t.thread_id):
            held.add(t.thread_id)
        if status == "idle" and t.thread_id not in held and len(r) > 10 and r[10] == 0:
            kept.append(t)  # no interrupt or error write at the head: idle without decoding (status filled below if paged)
            continue
        if t.thread_id not in unread:
            yield from _status_of(d, serde, bc, t, t.thread_id in held)
            if t.status is None:
                unread.add(t.thread_id)
        if status is not None and t.status is not None and not t.status.matches(status):
            continue
        kept.append(t)
    page = kept[offset : offset + limit]
    for t in page:
        if t.status is None and t.thread_id not in unread:
            yield from _status_of(d, serde, bc, t, t.thread_id in held)
    nxt = offset + len(page)
    return ThreadPage(page, len(kept), offset, nxt if nxt < len(kept) else None)


class _Descending(str):
    """A thread_id that sorts the other way (``sorted`` compares with ``<`` only)."""

    def __lt__(self, other: str) -> bool:  # type: ignore[override]
        return str.__gt__(self, other)


# The orders of THREAD_ORDERS as Python sort keys (merging the official saver's threads in).
ORDER_KEYS = {
    "updated": lambda t: (-t.updated_at, t.thread_id),
    "created": lambda t: (-t.created_at, t.thread_id),
    "bytes": lambda t: (-t.bytes, t.thread_id),
    "thread_id": lambda t: t.thread_id,
    "updated_asc": lambda t: (t.updated_at, t.thread_id),
    "created_asc": lambda t: (t.created_at, t.thread_id),
    "thread_id_desc": lambda t: _Descending(t.thread_id),
}


def list_threads(saver: Any, *, official: bool | None = None, **kwargs: Any) -> ThreadPage:
    """Sync ``threads_op`` on a saver (same keyword arguments; its serde and blob codec passed).
    ``official``: list the threads of the official saver's tables not adopted yet too (None: when
    the saver adopts them; ``read.official.scope_of``)."""
    kwargs.setdefault("serde", saver.serde)
    kwargs.setdefault("bc", getattr(saver, "blob_codec", None))
    return saver.run(threads_op(saver.dialect, scope=scope_of(saver, official), **kwargs))


def all_thread_ids_op(d: Dialect) -> Op[list[str]]:
    """Every thread_id in the ``threads`` index, sorted."""
    return [r[0] for r in (yield Q(d.ALL_THREAD_IDS))]
