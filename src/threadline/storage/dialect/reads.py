"""The named statements of ``threadline.read``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). ``storage/redis/reads.py`` implements the same names on Redis.

Two kinds of names, as in ``statements.py``:

* an UPPERCASE attribute is one statement; its comment gives its parameters, then (→) the
  columns of the rows it returns;
* a method takes what selects the rows in logical terms — a thread, a namespace, a
  ``ThreadFilter``, a ``WriteSelection``, a list of thread_ids (``thread_ids``: None is the
  whole database) — and returns ``(statement, parameters)`` for ``Q``: each dialect turns the
  selection into its own query (here a WHERE clause with bound parameters), as ``list_where``
  does for ``list``. Its docstring gives (→) the rows.

Byte counts are the stored sizes the backend's ``bytes_of`` gives (checkpoints: checkpoint +
metadata JSON; blobs and writes: the stored value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.keys import RESERVED_THREAD_PREFIX
from threadline.storage.dialect.statements import placeholders, prefixed
from threadline.storage.jsonfilter import SqliteJson, Term, filter_terms, where_terms
from threadline.storage.rows import CHECKPOINT_ROW

# The orders of the threads listing (``threads_page``): SQL per order name.
THREAD_ORDERS = {
    "updated": "t.updated_at DESC, t.thread_id",  # most recently updated first
    "created": "t.created_at DESC, t.thread_id",  # newest first
    "bytes": "t.bytes DESC, t.thread_id",  # largest first
    "thread_id": "t.thread_id",
    "updated_asc": "t.updated_at, t.thread_id",  # least recently updated first
    "created_asc": "t.created_at, t.thread_id",  # oldest first
    "thread_id_desc": "t.thread_id DESC",
}
# The channels of the writes that stop a run at its head (LangGraph's interrupt and error), and
# the condition of their partial index (schema migration 7), spelled as there so the planner uses it.
INTERRUPT_CHANNEL, ERROR_CHANNEL, RESUME_CHANNEL = "__interrupt__", "__error__", "__resume__"
_STOPS = "w.channel IN ('__interrupt__', '__error__') AND w.checkpoint_ns = ''"
HEAD_STOPS = ("error", "interrupted", "none")
_HEAD = "(SELECT MAX(c2.checkpoint_id) FROM threadline_checkpoints c2 WHERE c2.thread_id = w.thread_id AND c2.checkpoint_ns = '')"
# (ERROR_CHANNEL) → the threads whose head has an error write
_ERRORED = f"SELECT w.thread_id FROM threadline_writes w WHERE {_STOPS} AND w.channel = ? AND w.checkpoint_id = {_HEAD}"
# (INTERRUPT_CHANNEL, RESUME_CHANNEL) → the threads whose head has an interrupt write its task has no resume write for
_WAITING = (
    f"SELECT w.thread_id FROM threadline_writes w WHERE {_STOPS} AND w.channel = ? AND w.checkpoint_id = {_HEAD} "
    "AND NOT EXISTS (SELECT 1 FROM threadline_writes x WHERE x.thread_id = w.thread_id AND x.checkpoint_ns = '' "
    "AND x.checkpoint_id = w.checkpoint_id AND x.task_id = w.task_id AND x.channel = ?)"
)
# The tables whose rows and bytes ``table_totals`` counts.
COUNTED_TABLES = ("checkpoints", "blobs", "writes")
_INDEXED_TABLES = ("threadline_threads", "threadline_checkpoints", "threadline_writes", "threadline_blobs")


# The threads index with each cold thread's stub (``lifecycle.cold``, table threadline_cold) as a
# row of it, marked ``cold`` (its times copied from its ``threads`` row, migration 13). A stub whose id has rows again (a new tree started on it) is left out.
WITH_COLD = (
    "(SELECT thread_id, created_at, updated_at, checkpoint_count, bytes, 0 AS cold FROM threadline_threads UNION ALL "
    "SELECT c.thread_id, c.created_at, c.updated_at, c.checkpoints, c.bytes, 1 "
    "FROM threadline_cold c WHERE NOT EXISTS (SELECT 1 FROM threadline_threads x WHERE x.thread_id = c.thread_id))"
)


@dataclass(frozen=True)
class ThreadFilter:
    """Which threads of the ``threads`` index the listing keeps (never threadline's own,
    ``keys.RESERVED_THREAD_PREFIX``): updated at or before
    ``updated_until`` (idle), at or after ``updated_since`` (active), among ``thread_ids``
    (None: any; never empty), having at least one checkpoint whose metadata matches
    ``metadata`` as ``list(filter=…)`` matches it on the backend (None: any)."""

    updated_until: float | None = None
    updated_since: float | None = None
    thread_ids: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] | None = None
    # the thread records (schema migration 7): a ``storage.jsonfilter`` filter on the record's
    # metadata (a thread without a record has ``{}``), and archived (None: either; False: not
    # archived; True: archived only). ``records``: the database has the records table (False
    # on a database opened read-only before migration 7: every thread then has no record).
    thread_metadata: Mapping[str, Any] | None = None
    archived: bool | None = None
    records: bool = True
    # keep threads whose head (root namespace) is stopped so (``HEAD_STOPS``): "error" (an error
    # write), "interrupted" (an interrupt write not answered by a resume write of its task, and
    # no error write), "none" (neither)
    head_stop: str | None = None
    # take the cold threads' stubs in as rows of the index (``lifecycle.cold``; ``threads_page``
    # marks them), when the database has any (``read.threads.cold_listed_op``)
    cold: bool = False

    @property
    def uses_records(self) -> bool:
        """The query joins each thread's record (to filter on its metadata)."""
        return self.records and bool(self.thread_metadata)


@dataclass(frozen=True)
class WriteSelection:
    """Which pending writes: of one thread (None: every thread), one checkpoint_ns (None: every
    namespace), one checkpoint_id (None: every checkpoint), created at or after ``since``
    (None: any time)."""

    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    since: float | None = None


def counted(table: str) -> str:
    """``table`` when it is one of ``COUNTED_TABLES``; ValueError otherwise."""
    if table not in COUNTED_TABLES:
        raise ValueError(f"table must be one of {COUNTED_TABLES}, got {table!r}")
    return table


def like_prefix(prefix: str) -> str:
    """The LIKE pattern (``ESCAPE '\\'``) of the texts starting with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _in_threads(column: str, thread_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
    """``WHERE column IN (…)`` and its parameters for a scope of thread_ids ("" for None)."""
    if thread_ids is None:
        return "", []
    return (f"WHERE {column} IN ({placeholders(len(thread_ids))})" if thread_ids else "WHERE 1 = 0"), list(thread_ids)


def _writes_where(s: WriteSelection) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("thread_id", s.thread_id), ("checkpoint_ns", s.checkpoint_ns), ("checkpoint_id", s.checkpoint_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if s.since is not None:
        clauses.append("created_at >= ?")
        params.append(float(s.since))
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _bucket_counts(column: str, bounds: Sequence[float]) -> tuple[str, list[float]]:
    """One ``SUM(CASE …)`` per interval [bounds[i], bounds[i+1]) of ``column`` and its parameters."""
    sql = ", ".join(f"SUM(CASE WHEN {column} >= ? AND {column} < ? THEN 1 ELSE 0 END)" for _ in bounds[1:])
    return sql, [v for lo, hi in zip(bounds, bounds[1:]) for v in (lo, hi)]


class ReadsStatements:
    """Mixed into ``Dialect``, whose hooks (``bytes_of``, ``metadata_filter``,
    ``checkpoint_size``, ``channel_references``, ``state_bytes``) these statements use."""

    bytes_of: Callable[[str, str], str]
    metadata_filter: Callable[[Any], tuple[str, list[Any]]]
    record_json: Callable[[bool], SqliteJson]
    record_prefilter: Callable[[Sequence[Term]], tuple[list[str], list[Any]]]
    checkpoint_size: Callable[[], str]
    channel_references: Callable[[str], str]
    state_bytes: Callable[[str], str]

    # --- threads ----------------------------------------------------------------------

    # () → thread_id of every thread of the ``threads`` index, sorted
    ALL_THREAD_IDS = "SELECT thread_id FROM threadline_threads ORDER BY thread_id"

    def _threads_where(self, f: ThreadFilter) -> tuple[str, list[Any]]:
        # threadline's own short-lived threads (``keys.RESERVED_THREAD_PREFIX``) are never listed
        clauses: list[str] = ["t.thread_id NOT LIKE ? ESCAPE '\\'"]
        params: list[Any] = [like_prefix(RESERVED_THREAD_PREFIX)]
        if f.updated_until is not None:
            clauses.append("t.updated_at <= ?")
            params.append(f.updated_until)
        if f.updated_since is not None:
            clauses.append("t.updated_at >= ?")
            params.append(f.updated_since)
        if f.thread_ids is not None:
            clauses.append(f"t.thread_id IN ({placeholders(len(f.thread_ids))})")
            params += f.thread_ids
        if f.metadata:
            cond, p = self.metadata_filter(f.metadata)
            clauses.append(f"EXISTS (SELECT 1 FROM threadline_checkpoints c WHERE c.thread_id = t.thread_id AND {cond})")
            params += p
        if f.archived is not None and f.records:
            # a probe of the record's primary key per thread: the listing still walks its order's index
            archived = "EXISTS (SELECT 1 FROM threadline_thread_records ra WHERE ra.thread_id = t.thread_id AND ra.archived <> 0)"
            clauses.append(archived if f.archived else f"NOT {archived}")
        elif f.archived:
            clauses.append("1 = 0")  # no records table: nothing is archived
        if f.thread_metadata:
            terms = filter_terms(f.thread_metadata)
            if f.uses_records:
                conds, p = self.record_prefilter(terms)
                clauses += conds
                params += p
            conds, p = where_terms(self.record_json(f.uses_records), terms)
            clauses += conds
            params += p
        if f.head_stop is not None:
            if f.head_stop not in HEAD_STOPS:
                raise ValueError(f"head_stop must be one of {HEAD_STOPS}, got {f.head_stop!r}")
            errored, waiting = f"t.thread_id IN ({_ERRORED})", f"t.thread_id IN ({_WAITING})"
            if f.head_stop == "error":
                clauses.append(errored)
                params += [ERROR_CHANNEL]
            elif f.head_stop == "interrupted":
                clauses += [waiting, f"NOT {errored}"]
                params += [INTERRUPT_CHANNEL, RESUME_CHANNEL, ERROR_CHANNEL]
            else:
                clauses += [f"NOT {errored}", f"NOT {waiting}"]
                params += [ERROR_CHANNEL, INTERRUPT_CHANNEL, RESUME_CHANNEL]
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

    @staticmethod
    def _threads_from(f: ThreadFilter) -> str:
        """The listing's FROM: the threads index (with the cold threads' stubs when ``f.cold``),
        with each thread's record when ``f`` needs it."""
        base = f"{WITH_COLD} t" if f.cold else "threadline_threads t"
        if f.uses_records:
            return f"{base} LEFT JOIN threadline_thread_records r ON r.thread_id = t.thread_id"
        return base

    def count_threads(self, f: ThreadFilter) -> tuple[str, list[Any]]:
        """→ one row: how many threads ``f`` keeps. FilterError for an unusable metadata filter."""
        where, params = self._threads_where(f)
        return f"SELECT COUNT(*) FROM {self._threads_from(f)} {where}", params

    def threads_page(self, f: ThreadFilter, order_by: str, limit: int, offset: int) -> tuple[str, list[Any]]:
        """→ thread_id, created_at, updated_at, checkpoint_count, bytes, the checkpoint_id, step and
        source of the thread's head in the root namespace (NULLs without one), the thread's
        record's metadata (JSON text) and archived flag (NULLs without one), whether the head
        has a pending interrupt or error write (1/0; Redis: NULL, unknown) and whether the thread
        is cold (1/0; Redis: absent) of the threads ``f`` keeps in ``THREAD_ORDERS[order_by]``
        order, ``limit`` of them from ``offset``."""
        where, params = self._threads_where(f)
        order = THREAD_ORDERS[order_by]
        if f.records:
            record, rjoin = ", CAST(r.metadata AS TEXT), r.archived", " LEFT JOIN threadline_thread_records r ON r.thread_id = t.thread_id"
        else:
            record, rjoin = ", NULL, NULL", ""
        # the page first, then the heads and records of its threads only (not of every thread skipped by OFFSET)
        return (
            f"SELECT t.thread_id, t.created_at, t.updated_at, t.checkpoint_count, t.bytes, h.checkpoint_id, h.step, h.source{record}, "
            f"CASE WHEN EXISTS (SELECT 1 FROM threadline_writes w WHERE w.thread_id = t.thread_id AND w.checkpoint_id = h.checkpoint_id "
            f"AND {_STOPS}) THEN 1 ELSE 0 END{', t.cold' if f.cold else ', 0'} "
            f"FROM (SELECT t.* FROM {self._threads_from(f)} {where} ORDER BY {order} LIMIT ? OFFSET ?) t{rjoin} "
            "LEFT JOIN threadline_checkpoints h ON h.thread_id = t.thread_id AND h.checkpoint_ns = '' "
            "AND h.checkpoint_id = (SELECT MAX(c2.checkpoint_id) FROM threadline_checkpoints c2 WHERE c2.thread_id = t.thread_id AND c2.checkpoint_ns = '') "
            f"ORDER BY {order}",
            [*params, limit, offset],
        )

    def known_thread(self, thread_id: str) -> tuple[str, list[Any]]:
        """→ at least one row when any of threadline's tables holds a row of ``thread_id``."""
        sql = " UNION ALL ".join(f"SELECT 1 FROM (SELECT 1 FROM {t} WHERE thread_id = ? LIMIT 1) x{i}" for i, t in enumerate(_INDEXED_TABLES))
        return sql, [thread_id] * len(_INDEXED_TABLES)

    def threads_with_prefix(self, prefix: str) -> tuple[str, list[Any]]:
        """→ thread_id of the threads (in the index or with checkpoints) whose id starts with ``prefix``."""
        like = like_prefix(prefix)
        return (
            "SELECT thread_id FROM threadline_threads WHERE thread_id LIKE ? ESCAPE '\\' UNION "
            "SELECT DISTINCT thread_id FROM threadline_checkpoints WHERE thread_id LIKE ? ESCAPE '\\'",
            [like, like],
        )

    # --- checkpoints --------------------------------------------------------------------

    # (thread_id, checkpoint_ns, checkpoint_id) → checkpoint_id, when that checkpoint is stored
    CHECKPOINT_ID = "SELECT checkpoint_id FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
    # (thread_id, checkpoint_ns) → checkpoint_id, parent_checkpoint_id, step of the namespace's checkpoints, by checkpoint_id
    NAMESPACE_CHECKPOINTS = (
        "SELECT checkpoint_id, parent_checkpoint_id, step FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
        "ORDER BY checkpoint_id"
    )

    def history_checkpoints(self, thread_id: str, checkpoint_ns: str | None) -> tuple[str, list[Any]]:
        """→ checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, metadata,
        checkpoint of the thread's checkpoints in one namespace (None: every one), by
        checkpoint_ns then checkpoint_id."""
        if checkpoint_ns is None:
            return (
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, metadata, checkpoint "
                "FROM threadline_checkpoints WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id",
                [thread_id],
            )
        return (
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, metadata, checkpoint "
            "FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id",
            [thread_id, checkpoint_ns],
        )

    def heads(self, checkpoint_ns: str, thread_ids: Sequence[str] | None = None, recent: int | None = None) -> tuple[str, list[Any]]:
        """→ ``rows.CHECKPOINT_ROW`` of the head (largest checkpoint_id) of ``checkpoint_ns`` in each
        of ``thread_ids`` (None: every thread; with ``recent``, of the ``recent`` most recently
        updated threads of the index) that has one, by thread_id."""
        head = (
            f"SELECT {prefixed(CHECKPOINT_ROW, 'c')} FROM threadline_checkpoints c "
            "WHERE c.checkpoint_ns = ? AND c.checkpoint_id = (SELECT MAX(c2.checkpoint_id) FROM threadline_checkpoints c2 "
            "WHERE c2.thread_id = c.thread_id AND c2.checkpoint_ns = c.checkpoint_ns)"
        )
        if thread_ids is not None:
            return head + f" AND c.thread_id IN ({placeholders(len(thread_ids))}) ORDER BY c.thread_id", [checkpoint_ns, *thread_ids]
        if recent is not None:
            return (
                head + " AND c.thread_id IN (SELECT thread_id FROM threadline_threads ORDER BY updated_at DESC LIMIT ?) ORDER BY c.thread_id",
                [checkpoint_ns, recent],
            )
        return head + " ORDER BY c.thread_id", [checkpoint_ns]

    def push_candidates(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str]) -> tuple[str, list[Any]]:
        """→ checkpoint_id, step, checkpoint of the namespace's checkpoints among ``checkpoint_ids``,
        their children and the namespace's head (the nodes a Send task may have run)."""
        marks = placeholders(len(checkpoint_ids))
        return (
            "SELECT checkpoint_id, step, checkpoint FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            f"AND (checkpoint_id IN ({marks}) OR parent_checkpoint_id IN ({marks}) OR checkpoint_id = "
            "(SELECT MAX(checkpoint_id) FROM threadline_checkpoints WHERE thread_id = ? AND checkpoint_ns = ?))",
            [thread_id, checkpoint_ns, *checkpoint_ids, *checkpoint_ids, thread_id, checkpoint_ns],
        )

    # --- pending writes -----------------------------------------------------------------

    # (thread_id, checkpoint_ns, checkpoint_id) → task_id, idx, task_path, created_at of the checkpoint's writes
    CHECKPOINT_WRITE_TASKS = (
        "SELECT task_id, idx, task_path, created_at FROM threadline_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
    )

    def write_counts(self, thread_id: str, checkpoint_ns: str | None, channel: str) -> tuple[str, list[Any]]:
        """→ checkpoint_ns, checkpoint_id, writes, writes to ``channel``: per checkpoint of the
        thread with writes, in one namespace (None: every one)."""
        select = "SELECT checkpoint_ns, checkpoint_id, COUNT(*), SUM(CASE WHEN channel = ? THEN 1 ELSE 0 END) FROM threadline_writes "
        if checkpoint_ns is None:
            return select + "WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id", [channel, thread_id]
        return select + "WHERE thread_id = ? AND checkpoint_ns = ? GROUP BY checkpoint_ns, checkpoint_id", [channel, thread_id, checkpoint_ns]

    def audit_writes(self, s: WriteSelection, limit: int | None = None, offset: int = 0) -> tuple[str, list[Any]]:
        """→ thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, stored
        bytes, created_at of the writes ``s`` selects (a thread's), by checkpoint_ns, checkpoint_id,
        created_at, task_path, task_id, idx; ``limit`` of them from ``offset`` (None: all)."""
        where, params = _writes_where(s)
        tail = ""
        if limit is not None:
            tail = " LIMIT ? OFFSET ?"
            params += [int(limit), int(offset)]
        return (
            f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, {self.bytes_of('blob', 'blob')}, created_at "
            f"FROM threadline_writes {where} ORDER BY checkpoint_ns, checkpoint_id, created_at, task_path, task_id, idx{tail}",
            params,
        )

    def task_groups(self, s: WriteSelection, task_id: str) -> tuple[str, list[Any]]:
        """→ task_path, 1 when the group's task_id is ``task_id`` else 0, writes, stored bytes,
        distinct task_ids: the writes ``s`` selects grouped by those two."""
        where, params = _writes_where(s)
        quoted = task_id.replace("'", "''")  # a constant of the caller's, quoted as SQL text
        is_task = f"CASE WHEN task_id = '{quoted}' THEN 1 ELSE 0 END"
        return (
            f"SELECT task_path, {is_task}, COUNT(*), SUM({self.bytes_of('blob', 'blob')}), COUNT(DISTINCT task_id) FROM threadline_writes "
            f"{where} GROUP BY task_path, {is_task}",
            params,
        )

    def path_task_totals(self, s: WriteSelection, path_prefix: str) -> tuple[str, list[Any]]:
        """→ thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes, stored bytes per
        task of the writes ``s`` selects whose task_path starts with ``path_prefix``."""
        where, params = _writes_where(s)
        return (
            f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, COUNT(*), SUM({self.bytes_of('blob', 'blob')}) FROM threadline_writes "
            f"{where} {'AND' if where else 'WHERE'} task_path LIKE ? ESCAPE '\\' "
            "GROUP BY thread_id, checkpoint_ns, checkpoint_id, task_id, task_path",
            [*params, like_prefix(path_prefix)],
        )

    def path_tasks(self, thread_id: str, checkpoint_ns: str | None, path_prefix: str) -> tuple[str, list[Any]]:
        """→ distinct checkpoint_ns, checkpoint_id, task_id, task_path of the thread's writes (one
        namespace; None: every one) whose task_path starts with ``path_prefix``."""
        like = like_prefix(path_prefix)
        space, params = ("", [thread_id, like]) if checkpoint_ns is None else (" AND checkpoint_ns = ?", [thread_id, like, checkpoint_ns])
        return (
            "SELECT DISTINCT checkpoint_ns, checkpoint_id, task_id, task_path FROM threadline_writes "
            f"WHERE thread_id = ? AND task_path LIKE ? ESCAPE '\\'{space}",
            params,
        )

    # --- sizes --------------------------------------------------------------------------

    def blob_totals(self, thread_id: str | None, checkpoint_ns: str | None) -> tuple[str, list[Any]]:
        """→ one row: the number and stored bytes of the blobs of a thread (None: every thread)
        in one namespace (None: every one)."""
        where, params = _writes_where(WriteSelection(thread_id, checkpoint_ns))
        return f"SELECT COUNT(*), COALESCE(SUM({self.bytes_of('blob', 'blob')}), 0) FROM threadline_blobs {where}", params

    def table_totals(self, table: str, thread_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
        """→ one row: the rows and stored bytes of ``table`` (one of ``COUNTED_TABLES``) of the threads."""
        size = self.checkpoint_size() if table == "checkpoints" else self.bytes_of("blob", "blob")
        where, params = _in_threads("thread_id", thread_ids)
        return f"SELECT COUNT(*), COALESCE(SUM({size}), 0) FROM threadline_{counted(table)} {where}", params

    def thread_count(self, thread_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
        """→ one row: how many of the threads are in the ``threads`` index."""
        where, params = _in_threads("thread_id", thread_ids)
        return f"SELECT COUNT(*) FROM threadline_threads {where}", params

    def namespace_count(self, thread_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
        """→ one row: how many (thread_id, checkpoint_ns) of the threads have checkpoints."""
        where, params = _in_threads("thread_id", thread_ids)
        return f"SELECT COUNT(*) FROM (SELECT DISTINCT thread_id, checkpoint_ns FROM threadline_checkpoints {where}) n", params

    def source_counts(self, thread_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
        """→ source (NULL where none), checkpoints: per metadata source of the threads' checkpoints."""
        where, params = _in_threads("thread_id", thread_ids)
        return f"SELECT source, COUNT(*) FROM threadline_checkpoints {where} GROUP BY source ORDER BY source", params

    def reference_totals(self, thread_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
        """→ one row: the channel references the threads' checkpoints make (one per
        ``channel_versions`` entry) and the stored bytes of the blobs they name, once per reference."""
        where, params = _in_threads("c.thread_id", thread_ids)
        return self.channel_references(where), params

    def checkpoint_counts(self, thread_ids: Sequence[str] | None, bounds: Sequence[float]) -> tuple[str, list[Any]]:
        """→ one row: per interval [bounds[i], bounds[i+1]), how many of the threads' checkpoints
        were created in it (NULL for none at all)."""
        where, params = _in_threads("thread_id", thread_ids)
        counts, pairs = _bucket_counts("created_at", bounds)
        return (
            f"SELECT {counts} FROM threadline_checkpoints {where} {'AND' if where else 'WHERE'} created_at >= ?",
            [*pairs, *params, bounds[0]],
        )

    def state_size_counts(self, thread_ids: Sequence[str] | None, bounds: Sequence[float]) -> tuple[str, list[Any]]:
        """→ one row: per interval [bounds[i], bounds[i+1]), how many of the threads' checkpoints
        name blobs whose stored bytes sum to a size in it, then how many name any channel."""
        where, params = _in_threads("c.thread_id", thread_ids)
        counts, pairs = _bucket_counts("s", bounds)
        return f"SELECT {counts}, COUNT(*) FROM ({self.state_bytes(where)}) x", [*pairs, *params]
