"""The named statements of ``threadline.web``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). ``storage/redis/web.py`` implements the same names on Redis.

As in ``reads.py``: an UPPERCASE attribute is one statement, its comment giving its parameters,
then (→) the columns of the rows it returns; a method takes what selects the rows in logical
terms — a ``ThreadSearch``, a thread (``thread_id``: None is the whole database), a table name
— and returns ``(statement, parameters)`` for ``Q``; its docstring gives (→) the rows. The
browser also reads through statements of ``statements.py`` (``THREAD``) and ``reads.py``
(``thread_count``).

Byte counts are the stored sizes the backend's ``bytes_of`` gives (checkpoints: checkpoint +
metadata JSON; writes and blobs: the stored value). Times are epoch seconds.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from threadline.storage.dialect.reads import THREAD_ORDERS, ThreadFilter
from threadline.storage.dialect.statements import placeholders

# The orders of the browser's threads search (``thread_search_page``), by name: SQL per order.
SEARCH_ORDERS = {
    "updated": THREAD_ORDERS["updated"],  # most recently updated first
    "size": THREAD_ORDERS["bytes"],  # largest first
    "checkpoints": "t.checkpoint_count DESC, t.thread_id",  # most checkpoints first
    "thread_id": THREAD_ORDERS["thread_id"],
}
# The tables ``created_buckets`` buckets by creation time.
TIMED_TABLES = ("checkpoints", "writes")


@dataclass(frozen=True)
class ThreadSearch:
    """Which threads of the ``threads`` index the browser's search keeps: those whose thread_id
    matches ``pattern``, a glob (``*`` any run, ``?`` one character, nothing else special; a
    pattern without a wildcard matches as a prefix; case-sensitive; "": any), having at least
    one checkpoint whose metadata matches ``metadata`` as ``list(filter=…)`` matches it on the
    backend (None: any)."""

    pattern: str = ""
    metadata: Mapping[str, Any] | None = None
    # archived threads (``ThreadFilter.archived``: None either, False hidden, True only) and
    # whether the database has the records table (``ThreadFilter.records``)
    archived: bool | None = None
    records: bool = True
    # the cold threads' stubs listed too, marked (``ThreadFilter.cold``)
    cold: bool = False


def glob_matcher(pattern: str, *, prefix: bool = True) -> re.Pattern[str]:
    """The thread_ids ``ThreadSearch.pattern`` matches: ``*`` and ``?`` are the only wildcards,
    a pattern without one matches as a prefix (unless ``prefix`` is False: then exactly),
    case-sensitive (for matching in Python)."""
    if prefix and "*" not in pattern and "?" not in pattern:
        pattern += "*"
    return re.compile(fnmatch.translate(pattern.replace("[", "[[]")))


def search_order(order: str) -> str:
    """``order`` when it is one of ``SEARCH_ORDERS``; ValueError otherwise."""
    if order not in SEARCH_ORDERS:
        raise ValueError(f"sort must be one of {sorted(SEARCH_ORDERS)}, got {order!r}")
    return order


def timed(table: str) -> str:
    """``table`` when it is one of ``TIMED_TABLES``; ValueError otherwise."""
    if table not in TIMED_TABLES:
        raise ValueError(f"table must be one of {TIMED_TABLES}, got {table!r}")
    return table


def _of_thread(thread_id: str | None, column: str = "thread_id", joiner: str = "WHERE") -> tuple[str, list[Any]]:
    return (f"{joiner} {column} = ?", [thread_id]) if thread_id else ("", [])


class WebStatements:
    """Mixed into ``Dialect``, whose hooks (``thread_glob``, ``json_field``, ``floor_div``,
    ``bytes_of``, ``checkpoint_size``) and reads' ``_threads_where`` / ``_threads_from`` these statements use."""

    thread_glob: Callable[[str], tuple[str, str]]
    json_field: Callable[[str, str], str]
    floor_div: Callable[[str], str]
    bytes_of: Callable[[str, str], str]
    checkpoint_size: Callable[[], str]
    _threads_where: Callable[[ThreadFilter], tuple[str, list[Any]]]
    _threads_from: Callable[[ThreadFilter], str]

    # --- the threads search ------------------------------------------------------------

    def _search_where(self, s: ThreadSearch) -> tuple[str, list[Any]]:
        where, params = self._threads_where(ThreadFilter(metadata=s.metadata, archived=s.archived, records=s.records))
        if not s.pattern:
            return where, params
        cond, param = self.thread_glob(s.pattern)
        return (f"{where} AND {cond}" if where else f"WHERE {cond}"), [*params, param]

    def count_thread_search(self, s: ThreadSearch) -> tuple[str, list[Any]]:
        """→ one row: how many threads ``s`` keeps. FilterError for an unusable metadata filter."""
        where, params = self._search_where(s)
        return f"SELECT COUNT(*) FROM {self._threads_from(ThreadFilter(cold=s.cold))} {where}", params

    def thread_search_page(self, s: ThreadSearch, order: str, limit: int, offset: int) -> tuple[str, list[Any]]:
        """→ thread_id, created_at, updated_at, checkpoint_count, bytes, cold (1/0) of the threads ``s``
        keeps, in ``SEARCH_ORDERS[order]`` order, ``limit`` of them from ``offset``."""
        where, params = self._search_where(s)
        return (
            f"SELECT thread_id, created_at, updated_at, checkpoint_count, bytes, {'cold' if s.cold else '0'} "
            f"FROM {self._threads_from(ThreadFilter(cold=s.cold))} {where} "
            f"ORDER BY {SEARCH_ORDERS[search_order(order)]} LIMIT ? OFFSET ?",
            [*params, int(limit), int(offset)],
        )

    def root_heads(self, thread_ids: list[str]) -> tuple[str, list[Any]]:
        """→ thread_id, checkpoint_id, step, source of the head (largest checkpoint_id) of the root
        namespace of each of ``thread_ids`` (not empty) that has one."""
        return (
            "SELECT c.thread_id, c.checkpoint_id, c.step, c.source FROM threadline_checkpoints c "
            f"WHERE c.checkpoint_ns = '' AND c.thread_id IN ({placeholders(len(thread_ids))}) AND c.checkpoint_id = "
            "(SELECT MAX(c2.checkpoint_id) FROM threadline_checkpoints c2 WHERE c2.thread_id = c.thread_id AND c2.checkpoint_ns = '')",
            list(thread_ids),
        )

    # --- the branch graph --------------------------------------------------------------

    def tree_checkpoints(self, thread_id: str, checkpoint_ns: str) -> tuple[str, list[Any]]:
        """→ checkpoint_id, parent_checkpoint_id, step, source, the checkpoint's ``versions_seen``
        (JSON as the backend returns it, read with ``load_json``; NULL without one), created_at,
        run_id and the metadata's ``merge`` (a merge's parents, ``lifecycle.merge``; JSON or NULL)
        of the namespace's checkpoints, by checkpoint_id."""
        return (
            f"SELECT checkpoint_id, parent_checkpoint_id, step, source, {self.json_field('checkpoint', 'versions_seen')}, created_at, run_id, "
            f"{self.json_field('metadata', 'merge')} "
            "FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id",
            [thread_id, checkpoint_ns],
        )

    # (thread_id, checkpoint_ns, channel, channel) → distinct checkpoint_id, channel of the namespace's
    # pending writes to either channel (``__interrupt__``, ``__error__``)
    STOP_WRITES = (
        "SELECT DISTINCT checkpoint_id, channel FROM threadline_writes WHERE thread_id = ? AND checkpoint_ns = ? AND channel IN (?, ?)"
    )
    # (thread_id) → checkpoint_ns, metadata of the first (smallest checkpoint_id) checkpoint of each
    # namespace other than the root one: where each subgraph run started (its ``parents`` metadata)
    SUBGRAPH_RUNS = (
        "SELECT c.checkpoint_ns, c.metadata FROM threadline_checkpoints c WHERE c.thread_id = ? AND c.checkpoint_ns <> '' "
        "AND c.checkpoint_id = (SELECT MIN(c2.checkpoint_id) FROM threadline_checkpoints c2 "
        "WHERE c2.thread_id = c.thread_id AND c2.checkpoint_ns = c.checkpoint_ns)"
    )
    # (thread_id) → checkpoint_ns, checkpoints: per namespace of the thread, by checkpoint_ns
    NAMESPACE_COUNTS = (
        "SELECT checkpoint_ns, COUNT(*) FROM threadline_checkpoints WHERE thread_id = ? GROUP BY checkpoint_ns ORDER BY checkpoint_ns"
    )

    # --- change markers (polled for live updates) ----------------------------------------

    # () → one row: the newest checkpoint's created_at (NULL: none)
    NEWEST_CHECKPOINT_AT = "SELECT MAX(created_at) FROM threadline_checkpoints"
    # (thread_id) → one row: the newest pending write's created_at (NULL: none), the thread's pending writes
    THREAD_WRITES_MARK = "SELECT MAX(created_at), COUNT(*) FROM threadline_writes WHERE thread_id = ?"

    # --- the stats page ----------------------------------------------------------------

    def checkpoint_span(self, thread_id: str | None) -> tuple[str, list[Any]]:
        """→ one row: the smallest and largest created_at of the thread's checkpoints (None: of
        every checkpoint); NULLs without any."""
        where, params = _of_thread(thread_id)
        return f"SELECT MIN(created_at), MAX(created_at) FROM threadline_checkpoints {where}", params

    def created_buckets(self, table: str, width: int, thread_id: str | None) -> tuple[str, list[Any]]:
        """→ bucket (floor of created_at / ``width`` seconds), rows, stored bytes: per non-empty
        bucket of the rows of ``table`` (one of ``TIMED_TABLES``) of the thread (None: every thread)."""
        size = self.checkpoint_size() if timed(table) == "checkpoints" else self.bytes_of("blob", "blob")
        where, params = _of_thread(thread_id)
        return (
            f"SELECT {self.floor_div('created_at')}, COUNT(*), SUM({size}) FROM threadline_{table} {where} GROUP BY 1",
            [int(width), *params],
        )

    def task_durations(self, thread_id: str | None, skip_task: str, limit: int) -> tuple[str, list[Any]]:
        """→ thread_id, checkpoint_ns, checkpoint_id, task_id, smallest task_path, seconds from the
        creation of the checkpoint a task ran from to its last stored write: per task (thread,
        namespace, checkpoint, task_id) with writes, but the task ``skip_task``, of the thread
        (None: every thread), the ``limit`` whose last write is newest, newest first."""
        where, params = _of_thread(thread_id, "w.thread_id", "AND")
        return (
            "SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, MIN(w.task_path), MAX(w.created_at) - MIN(c.created_at) "
            "FROM threadline_writes w "
            "JOIN threadline_checkpoints c ON c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id "
            f"WHERE w.task_id <> ? {where} GROUP BY w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id "
            "ORDER BY MAX(w.created_at) DESC LIMIT ?",
            [skip_task, *params, int(limit)],
        )

    def delta_totals(self, thread_id: str | None) -> tuple[str, list[Any]]:
        """→ one row: the blobs of the thread (None: every thread) and their stored bytes, then
        those stored as deltas (``base_version`` set) and their stored bytes."""
        where, params = _of_thread(thread_id)
        size = self.bytes_of("blob", "blob")
        return (
            f"SELECT COUNT(*), COALESCE(SUM({size}), 0), "
            "COALESCE(SUM(CASE WHEN base_version IS NOT NULL THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN base_version IS NOT NULL THEN {size} ELSE 0 END), 0) FROM threadline_blobs {where}",
            params,
        )
