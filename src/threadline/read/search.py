"""Threads searched as the LangGraph Agent Server's threads API searches them:
``search_threads`` / ``count_threads`` (and ``asearch_threads`` / ``acount_threads``) on a
saver, with its names and shapes — ``metadata`` (the thread records' metadata, ``read.records``),
``values``, ``status``, ``limit``, ``offset``, ``sort_by``, ``sort_order`` — over
``read.threads.threads_op``, the one listing (``docs/threads.md`` maps the two APIs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadline.read.official import Scope
from threadline.read.status import BusyCheck
from threadline.read.threads import ThreadInfo, ThreadPage, threads_op
from threadline.storage.ops import Op

# (sort_by, sort_order) → the listing's order
SORTS = {
    ("updated_at", "desc"): "updated",
    ("updated_at", "asc"): "updated_asc",
    ("created_at", "desc"): "created",
    ("created_at", "asc"): "created_asc",
    ("thread_id", "asc"): "thread_id",
    ("thread_id", "desc"): "thread_id_desc",
}


def order_of(sort_by: str, sort_order: str) -> str:
    """The ``threads_op`` order of an Agent Server ``sort_by`` (``updated_at``, ``created_at``,
    ``thread_id``) and ``sort_order`` (``asc``, ``desc``); ValueError naming the choices."""
    try:
        return SORTS[(sort_by, sort_order)]
    except KeyError:
        raise ValueError(
            f"sort_by must be one of updated_at, created_at, thread_id and sort_order asc or desc, got {sort_by!r}, {sort_order!r}"
        ) from None


def search_op(
    d: Any,
    serde: Any,
    bc: Any = None,
    *,
    metadata: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
    status: str | None = None,
    ids: Sequence[str] | None = None,
    limit: int = 10,
    offset: int = 0,
    sort_by: str = "updated_at",
    sort_order: str = "desc",
    archived: bool | None = False,
    checkpoint_metadata: Mapping[str, Any] | None = None,
    busy: BusyCheck | None = None,
    with_status: bool = True,
    count: bool = True,
) -> Op[ThreadPage]:
    """The page of threads matching every filter given, each with its ``status``.

    Args:
        metadata: a ``storage.jsonfilter`` filter on the thread record's metadata (``$eq $ne
            $gt $gte $lt $lte $in $nin``, dotted keys nested paths; plain values equal).
        values: ``{channel: value}`` the head state holds (or ``{channel: {"$op": bound}}``).
        status: ``idle``, ``busy``, ``interrupted``, ``error`` or a finer kind (``read.status``).
        ids: only these thread_ids (None: any).
        limit, offset: paging (``limit`` ≥ 1); sort_by, sort_order: see ``order_of``.
        archived: False hides archived threads (default), True lists only them, None both.
        checkpoint_metadata: keep threads with a checkpoint whose metadata matches, as
            ``list(filter=…)`` matches it (operators included).
        busy: ``busy(thread_id)`` → a run holds it (the thread guard's check; None: never busy).
        count: compute ``total`` exactly (``threads_op``); ``search_threads`` does not need it.

    Raises ValueError for bad paging, sort or status, FilterError for an unusable filter.
    """
    return (yield from threads_op(
        d, metadata=checkpoint_metadata, thread_metadata=metadata, values=values, status=status, archived=archived, thread_ids=ids,
        limit=limit, offset=offset, order_by=order_of(sort_by, sort_order), with_status=with_status, busy=busy,
        serde=serde, bc=bc, scope=Scope(official=False), count=count,
    ))


def _args(saver: Any) -> tuple[Any, Any, Any]:
    return saver.dialect, saver.serde, getattr(saver, "blob_codec", None)


def search_threads(saver: Any, **kwargs: Any) -> list[ThreadInfo]:
    """Sync ``search_op`` on a saver (same keyword arguments): the threads of the page."""
    return saver.run(search_op(*_args(saver), count=False, **kwargs)).threads


def count_threads(saver: Any, **kwargs: Any) -> int:
    """How many threads ``search_threads`` with these filters finds over all pages (no paging arguments)."""
    return saver.run(search_op(*_args(saver), limit=1, with_status=False, **kwargs)).total


async def asearch_threads(saver: Any, **kwargs: Any) -> list[ThreadInfo]:
    """Async ``search_threads``."""
    return (await saver.arun(search_op(*_args(saver), count=False, **kwargs))).threads


async def acount_threads(saver: Any, **kwargs: Any) -> int:
    """Async ``count_threads``."""
    return (await saver.arun(search_op(*_args(saver), limit=1, with_status=False, **kwargs))).total
