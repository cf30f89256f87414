"""Import from databases written by LangGraph's official savers, and reading their threads
without adopting them.

``import_langgraph(source, saver)`` copies every thread of an official
``langgraph.checkpoint.sqlite.SqliteSaver`` file (or an official
``PostgresSaver`` database) into threadline — checkpoints with their values,
pending writes with their task_id, idx and task_path — and verifies each thread
by comparing ``list``/``get_tuple`` on both sides (values, metadata, parents,
pending writes), i.e. what ``get_state`` and ``get_state_history`` are built from.

``thread_view(saver, thread_ids)`` serves threads of a database switched from the official
savers as a threadline saver would after adopting them, without writing anything: the
read commands and the browser read a thread not adopted yet through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import NotADatabaseError
from threadline.backends.readonly import open_readonly
from threadline.errors import ConfigError, ThreadlineError
from threadline.keys import thread_id_of
from threadline.storage import adopt, ops
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.lifecycle.cold import cold_archives_op, cold_rows
from threadline.lifecycle.thread_rows import columns_op, store_thread_op, thread_rows_op
from threadline.lazy import LazyModule

serdes = LazyModule("threadline.codec.serde")  # LangGraph's serializer loads when values are copied


@dataclass
class ThreadImport:
    """One imported thread: checkpoints and writes copied, and whether verification found differences."""

    thread_id: str
    checkpoints: int
    writes: int
    verified: bool | None
    mismatches: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoints": self.checkpoints,
            "writes": self.writes,
            "verified": self.verified,
            "mismatches": self.mismatches,
        }


@dataclass
class ImportReport:
    source: str
    threads: list[ThreadImport]

    @property
    def ok(self) -> bool:
        return all(t.verified is not False for t in self.threads)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ok": self.ok,
            "threads": [t.to_json() for t in self.threads],
            "checkpoints": sum(t.checkpoints for t in self.threads),
            "writes": sum(t.writes for t in self.threads),
        }


@contextmanager
def _official_source(url: str) -> Iterator[Any]:
    """A threadline saver shell on an official LangGraph database, opened read-only
    (``backends.readonly``) and never set up: only ``peek`` runs on it. ConfigError when it
    is no such database."""
    try:
        with open_readonly(url) as (source, state):
            if not state.official:
                raise ConfigError(
                    f"import source {url!r} is not a database of LangGraph's official {type(source).__name__} "
                    "(no checkpoints/writes tables of that layout)"
                )
            yield source
    except NotADatabaseError as exc:
        raise ConfigError(f"import source: {exc}") from None


def check_source(url: str) -> None:
    """ConfigError/BackendError unless ``url`` is an official LangGraph database (opened read-only)."""
    with _official_source(url):
        pass


def import_thread_op(
    d: Dialect, serde: Any, thread_id: str, records: Sequence[Any], *, replace: bool = False, verify: bool = True, bc: Any = None
) -> Op[tuple[int, int, list[str]]]:
    """Store one source thread's records (``adopt.read_thread_op``) in one transaction:
    (checkpoints, writes, mismatches). With ``verify``, a thread that does not read back
    as the source rows is not stored (the transaction is rolled back by the raise).

    Raises ThreadlineError when the thread already exists in threadline (unless ``replace``)."""
    exists = yield Q(d.HAS_CHECKPOINTS, (thread_id,))
    if exists:
        if not replace:
            raise ThreadlineError(f"thread {thread_id!r} already exists in the target database (pass replace=True to replace it)",
                                 flags={"replace=True": "--replace"})
        yield from ops.delete_thread(d, thread_id)
    n_ck, n_w = yield from adopt.store_op(d, serde, thread_id, records, bc)
    problems = (yield from adopt.verify_op(d, serde, thread_id, records, bc)) if verify else []
    if problems:
        if not d.rolls_back:  # no transaction to undo the rows written: they go again
            yield from ops.delete_thread(d, thread_id, bc)
        raise _Mismatch(problems)
    if records:
        yield Q(d.RETIME_THREAD, (thread_id, thread_id, thread_id))
        yield from ops.restat(d, [thread_id])
    return n_ck, n_w, problems


class _Mismatch(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def _history_problems(graph: Any, saver: Any, thread_id: str, records: Sequence[Any]) -> list[str]:
    """With a graph: ``get_state_history`` of the imported thread lists every root checkpoint, newest first."""
    from threadline.read import bind_graph

    expected = sorted((r.checkpoint_id for r in records if r.checkpoint and r.checkpoint_ns == ""), reverse=True)
    try:
        got = [s.config["configurable"]["checkpoint_id"] for s in bind_graph(graph, saver).get_state_history({"configurable": {"thread_id": thread_id}})]
    except Exception as exc:  # any failure of the graph on the imported thread is a finding
        return [f"get_state_history failed ({type(exc).__name__}: {exc})"]
    return [] if got == expected else ["get_state_history differs from the source's checkpoints"]


def import_langgraph(
    source: str,
    saver: Any,
    *,
    thread_ids: Sequence[Any] | None = None,
    verify: bool = True,
    replace: bool = False,
    graph: Any = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> ImportReport:
    """Copy threads from an official LangGraph database into ``saver`` (one transaction per thread).

    ``source``: a file path / ``sqlite:///path`` written by
    ``langgraph.checkpoint.sqlite.SqliteSaver``, or a ``postgresql://`` URL of
    ``langgraph.checkpoint.postgres.PostgresSaver`` tables; it is opened read-only and
    never changed. Values are copied through ``transfer_serde`` (never the official saver's
    serializer: nothing a stored row names is constructed; each value is written back byte
    for byte) and stored by ``saver``'s codec (deltas, compression, seal or encryption);
    blobs are stored once per (channel, version). With ``verify``
    every imported checkpoint must read back as the source rows (values, versions,
    metadata, parent, pending writes) or that thread is not stored and is reported with
    its mismatches; with ``graph`` its ``get_state_history`` is checked too. An existing
    target thread is an error unless ``replace``. Raises ConfigError when the source is
    not such a database.
    """
    report = ImportReport(source, [])
    serde = serdes.transfer_serde()
    with _official_source(source) as src:
        d = src.dialect
        ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else src.peek(adopt.official_thread_ids_op(d))
        for i, tid in enumerate(ids):
            records = src.peek(adopt.read_thread_op(d, serde, tid))
            try:
                n_ck, n_w, _ = saver.run(
                    import_thread_op(saver.dialect, serde, tid, records, replace=replace, verify=verify, bc=saver.blob_codec), write=True
                )
                item = ThreadImport(tid, n_ck, n_w, None)
                if verify:
                    item.mismatches = _history_problems(graph, saver, tid, records) if graph is not None else []
                    item.verified = not item.mismatches
            except _Mismatch as exc:
                item = ThreadImport(tid, 0, 0, False, exc.problems)
            report.threads.append(item)
            if progress:
                progress(i + 1, len(ids), tid)
    return report



@contextmanager
def thread_view(saver: Any, thread_ids: Sequence[Any], *, official: bool | None = None) -> Iterator[Any]:
    """A saver serving ``thread_ids`` as ``saver`` would once it adopted their checkpoints of the
    official saver's tables (``storage.adopt``), writing nothing to ``saver``'s database.

    ``saver`` itself when none of the threads has official checkpoints to adopt (or its
    database has no official tables, or ``official`` is False; None: when the saver adopts,
    ``read.official.scope_of``). Otherwise a threadline saver on a private in-memory SQLite
    database holding the threads with checkpoints to adopt: each one's threadline rows copied as stored,
    then its official checkpoints stored and verified as adoption stores them (with
    ``saver``'s serializer and keys). It serves only those threads (its ``viewed``: the ones
    with checkpoints to adopt; the others are ``saver``'s); it is closed on exit.
    ``saver`` may be read-only, and its database may hold no threadline tables yet.

    A cold thread (``lifecycle.cold``) is served the same way, its rows read from its archive
    (its ``cold``: those threads), so reading it restores nothing and writes nothing.

    Raises AdoptionError when a thread would not adopt (as the saver's first touch would),
    CorruptRowError for an official row that cannot be decoded."""
    from threadline.read.official import scope_of


    scope = scope_of(saver, official)
    d = saver.dialect
    waiting: dict[str, tuple[str, str | None]] = {}
    if scope.official:
        for tid in dict.fromkeys(thread_id_of(t) for t in thread_ids):
            found = saver.run(adopt.view_progress_op(d, tid, scope.threadline))
            if found is not None:
                waiting[tid] = found
    cold = saver.run(cold_archives_op(d, thread_ids)) if scope.threadline else {}
    if not waiting and not cold:
        yield saver
        return
    with _scratch(saver) as view:
        mine = view.run(columns_op(view.dialect))
        for tid, rows in cold_rows(saver, cold):  # a cold thread: its rows from its archive
            view.run(store_thread_op(view.dialect, tid, rows, mine, replace=True, bc=view.blob_codec), write=True)
        theirs = saver.run(columns_op(d)) if scope.threadline else {}
        serde = serdes.transfer_serde()
        for tid, (latest, adopted) in waiting.items():
            if theirs and adopted is not None:  # adopted before: threadline's rows of it first
                rows = saver.run(thread_rows_op(d, tid, theirs))
                view.run(store_thread_op(view.dialect, tid, rows, mine, replace=True, bc=view.blob_codec), write=True)
            records = saver.run(adopt.read_thread_op(d, serde, tid, adopted or ""))
            view.run(adopt.adopt_records_op(view.dialect, tid, records, latest, view.blob_codec), write=True)
        view.viewed = frozenset(waiting) | frozenset(cold)  # the threads it serves
        view.cold = frozenset(cold)  # of them, the cold ones
        yield view


def adopt_now(saver: Any, thread_ids: Sequence[Any]) -> None:
    """Adopt each thread (a writable saver's first touch of it, ``storage.adopt``) before an
    operation that works on threadline's rows directly (the lifecycle's, the browser's actions)."""
    for tid in thread_ids:
        saver._adopt(thread_id_of(tid))


@contextmanager
def _scratch(saver: Any) -> Iterator[Any]:
    """A threadline saver on a new in-memory SQLite database, with ``saver``'s serializer and keys
    (a cache of its own), set up."""
    from threadline.backends.sqlite import SqliteSaver
    from threadline.backends.sqliteconn import connect
    from threadline.codec import BlobCache

    conn = connect(":memory:")
    try:
        view = SqliteSaver(conn, serde=saver.serde, adopt=False)
        view.blob_codec = dataclasses.replace(saver.blob_codec, cache=BlobCache())
        view.setup()
        yield view
    finally:
        conn.close()


__all__ = ["ImportReport", "ThreadImport", "adopt_now", "check_source", "import_langgraph", "import_thread_op", "thread_view"]
