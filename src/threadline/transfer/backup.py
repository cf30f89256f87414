"""Backup and restore, with values: a threadline database in one portable file, and back.

The archive is a threadline SQLite database (open it with any threadline command:
``threadline threads --db backup.db``), so one format serves every backend:

* ``backup(saver, to)`` from SQLite is ``VACUUM INTO``: a consistent, compacted copy of
  the whole file taken while writers go on; from Postgres, every row of threadline's
  checkpoint tables is copied as stored (values stay encoded, never decoded) inside ONE
  ``REPEATABLE READ`` read-only transaction, so the archive is a consistent snapshot.
* ``restore(saver, path)`` copies an archive's threads into any threadline database,
  one transaction per thread that checks the stored rows read back exactly and, with
  ``verify``, loads every checkpoint on both sides — values, metadata, parent, pending
  writes — before it commits: a thread that differs is rolled back and reported, and the
  target keeps what it had.

An archive is a file from elsewhere (a bug report's bundle), so it is read only when it is
a regular file, sound to SQLite's ``quick_check``, whose ``threadline_*`` objects are plain
tables (a view could make every read endless) and whose values are within
``threadline.limits`` (``open_archive``): reading it then costs no more than the file holds.
Outputs are never written through a symbolic link (``refuse_links``).

Rows are copied by the columns both sides have, so an archive of an older schema
restores into a newer one. Thread bundles (``transfer.bundle``) are archives of some
threads.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadline import limits
from threadline.codec.serde import inspecting
from threadline.errors import ConfigError
from threadline.keys import thread_id_of
from threadline.storage import ops
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.ops import Op, Q

# The tables a thread's rows live in, in the order they are inserted.
THREAD_TABLES = ("threads", "checkpoints", "blobs", "writes", "adopted", "thread_records")
Rows = dict[str, tuple[list[str], list[tuple]]]  # table → (columns, rows)
Sink = Callable[[str, Rows], None]  # (thread_id, its rows)
Transform = Callable[[Dialect, str, Rows], Op[Rows]]  # (source dialect, thread_id, its rows) → rows to write
# Files SQLite writes beside a database: a link planted at one of them is a way out too.
SIDE_FILES = ("-wal", "-shm", "-journal")
# The columns of an archive holding stored values, each bounded by ``limits.max_value_bytes``.
VALUE_COLUMNS = {"checkpoints": ("checkpoint", "metadata"), "blobs": ("blob",), "writes": ("blob",)}


def _plain(value: Any) -> Any:
    """A value as any backend's driver takes it back: JSON documents as text, bytes as bytes."""
    if isinstance(value, (dict, list)):
        return dumps_json(value, sort_keys=False)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def columns_op(d: Dialect) -> Op[dict[str, list[str]]]:
    """table → its column names, for the ``THREAD_TABLES`` the database has."""
    out: dict[str, list[str]] = {}
    for t in THREAD_TABLES:
        cols = [r[0] for r in (yield Q(d.columns_sql, (f"threadline_{t}",)))]
        if cols:
            out[t] = sorted(cols)
    return out


def thread_ids_op(d: Dialect, tables: Iterable[str]) -> Op[list[str]]:
    """Every thread_id with a row in any of ``tables``, in order."""
    return [r[0] for r in (yield Q(d.thread_ids_in(tuple(tables))))]


def thread_rows_op(d: Dialect, thread_id: str, columns: Mapping[str, Sequence[str]]) -> Op[Rows]:
    """Every row of ``thread_id`` in each table of ``columns``, values as stored."""
    out: Rows = {}
    for t, cols in columns.items():
        found = yield Q(d.thread_table_rows(t, tuple(cols)), (thread_id,))
        out[t] = (list(cols), [tuple(_plain(v) for v in r) for r in found])
    return out


def read_op(d: Dialect, thread_ids: Sequence[str] | None, sink: Sink, transform: Transform | None = None) -> Op[int]:
    """Hand every (or each named) thread's rows to ``sink``, all read in this one transaction
    (``d.snapshot_sql`` makes it one snapshot where statements see commits otherwise), each
    rewritten by ``transform`` first when given (in the same transaction). Threads read."""
    if d.snapshot_sql:
        yield Q(d.snapshot_sql)
    columns = yield from columns_op(d)
    ids = list(thread_ids) if thread_ids is not None else (yield from thread_ids_op(d, columns))
    for tid in ids:
        rows = yield from thread_rows_op(d, tid, columns)
        sink(tid, (yield from transform(d, tid, rows)) if transform else rows)
    return len(ids)


def _normal(rows: list[tuple]) -> list[tuple]:
    """Rows as compared across backends, sorted: a JSON document in its canonical text (Postgres
    JSONB keeps no key order), a float and an equal int alike."""

    def norm(v: Any) -> Any:
        if isinstance(v, (str, dict, list)) and (not isinstance(v, str) or v[:1] in "{["):
            try:
                return dumps_json(json.loads(v) if isinstance(v, str) else v)
            except ValueError:
                return v
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v

    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


@dataclass
class Expected:
    """What a restored thread must load as: its checkpoints loaded from the archive
    (``_loaded_op``) with ``serde`` and ``bc``, which load the restored rows too."""

    serde: Any
    bc: Any
    loaded: dict[tuple[str, str], Any]


def store_thread_op(
    d: Dialect, thread_id: str, rows: Rows, columns: Mapping[str, Sequence[str]], *, replace: bool, bc: Any = None,
    expected: Expected | None = None, tags: bool = True,
) -> Op[None]:
    """Insert one thread's rows (the columns both sides have) in one transaction and read them
    back; with ``expected``, also load every checkpoint and compare. Raises ``_Differs``
    (rolling it all back; where the backend has no transaction, ``rolls_back``, deleting the
    thread's rows) unless they read back and load exactly. Raises ConfigError when
    the thread exists and not ``replace``. ``tags`` False keeps the thread's tags and pin in
    the target (a cold thread restored: ``transfer.cold``)."""
    exists = yield Q(d.HAS_CHECKPOINTS, (thread_id,))
    if exists and not replace:
        raise ConfigError(f"thread {thread_id!r} already exists in the target; pass replace=True to overwrite it",
                          flags={"replace=True": "--replace"})
    yield from ops.delete_thread(d, thread_id, bc, tags=tags)
    yield Q(d.DELETE_ADOPTED, (thread_id,))
    wanted: Rows = {}
    for t in THREAD_TABLES:
        if t not in rows or t not in columns:
            continue
        cols, values = rows[t]
        keep = [i for i, c in enumerate(cols) if c in columns[t]]
        shared = [cols[i] for i in keep]
        data = [tuple(r[i] for i in keep) for r in values]
        wanted[t] = (shared, data)
        if data:
            yield Q(d.insert_table_rows(t, tuple(shared)), data, many=True)
    try:
        yield from _check_stored_op(d, thread_id, wanted, expected)
    except _Differs:
        if not d.rolls_back:  # no transaction to undo the rows written: they go again
            yield from ops.delete_thread(d, thread_id, bc, tags=tags)
        raise


def _check_stored_op(d: Dialect, thread_id: str, wanted: Rows, expected: Expected | None) -> Op[None]:
    """``_Differs`` unless the thread's rows read back as ``wanted`` and, with ``expected``, load so."""
    got = yield from thread_rows_op(d, thread_id, {t: c for t, (c, _) in wanted.items()})
    differs = [t for t, (_, data) in wanted.items() if _normal(data) != _normal(got[t][1])]
    if differs:
        raise _Differs([f"rows of {', '.join(differs)} did not read back identical"])
    if expected is not None:
        try:
            loaded = yield from _loaded_op(d, expected.serde, thread_id, expected.bc)
        except Exception as exc:  # an unreadable checkpoint is a finding of the verification
            raise _Differs([f"loading failed: {type(exc).__name__}: {exc}"]) from None
        problems = _differences(expected.loaded, loaded)
        if problems:
            raise _Differs(problems)


class _Differs(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


@dataclass
class ThreadRestore:
    """One restored thread: rows per table, and differences found loading it on both sides."""

    thread_id: str
    rows: dict[str, int]
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "rows": self.rows, "problems": self.problems}


@dataclass
class RestoreReport:
    """What ``restore`` copied; ``ok`` when every thread read back identical (``verified``:
    its checkpoints were also loaded and compared on both sides). ``redacted``: the channels
    a bundle's values were redacted of (identical means identical to the bundle)."""

    source: str
    threads: list[ThreadRestore]
    verified: bool
    redacted: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(t.problems for t in self.threads)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ok": self.ok,
            "verified": self.verified,
            "redacted": self.redacted,
            "threads": [t.to_json() for t in self.threads],
            "rows": {tb: sum(t.rows.get(tb, 0) for t in self.threads) for tb in THREAD_TABLES},
        }


@dataclass
class BackupReport:
    """A backup: the file, its size in bytes, how it was taken, and its rows per table."""

    path: str
    bytes: int
    method: str  # "vacuum-into" (SQLite) or "rows" (a snapshot's rows copied)
    threads: int
    rows: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "method": self.method, "threads": self.threads, "rows": self.rows}


def refuse_links(*paths: str) -> None:
    """ConfigError naming the first of ``paths`` that is a symbolic link: an output is never
    written through one (a link planted there would send it elsewhere)."""
    for p in paths:
        if os.path.islink(p):
            raise ConfigError(f"{p!r} is a symbolic link: threadline does not write through links; remove it or name another path")


def _fresh_path(path: str, overwrite: bool) -> None:
    refuse_links(path, *(path + s for s in SIDE_FILES))
    if os.path.isdir(path):
        raise ConfigError(f"{path!r} is a directory; name the archive file to write")
    if os.path.exists(path):
        if not overwrite:
            raise ConfigError(f"{path!r} already exists; choose a new file or pass overwrite=True", flags={"overwrite=True": "--overwrite"})
        for p in (path, path + "-wal", path + "-shm"):
            if os.path.exists(p):
                os.remove(p)


def _counts_op(d: Dialect) -> Op[dict[str, int]]:
    out = {}
    have = yield from columns_op(d)
    for t in ("threads", "checkpoints", "blobs", "writes", "thread_records"):
        if t in have:
            out[t] = int((yield Q(d.count_rows(t)))[0][0])
    return out


def write_archive(path: str, source: Any, *, thread_ids: Sequence[str] | None = None, transform: Transform | None = None) -> int:
    """Copy ``source``'s threads (all, or ``thread_ids``) into a new threadline SQLite file at
    ``path`` as one snapshot; ``transform`` may rewrite each thread's rows on the way (an
    operation run in the source's read transaction). Threads copied."""
    from threadline.backends.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(path, adopt=False) as archive:
        target = archive.run(columns_op(archive.dialect))

        def sink(tid: str, rows: Rows) -> None:
            archive.run(store_thread_op(archive.dialect, tid, rows, target, replace=True), write=True)

        return source.run(read_op(source.dialect, thread_ids, sink, transform))  # closing folds the WAL into the file


def backup(saver: Any, to: str, *, overwrite: bool = False) -> BackupReport:
    """Write a consistent snapshot of ``saver``'s database to the file ``to`` (a threadline
    SQLite database). SQLite: ``VACUUM INTO``, the whole file; other backends: every thread's
    rows as stored, read in one snapshot. Raises ConfigError when ``to`` exists (unless
    ``overwrite``) or is a directory."""
    _fresh_path(to, overwrite)
    from threadline.transfer.inline import inliner

    inline = inliner(saver.blob_codec)  # offloaded values go into the archive's rows (docs/offload.md)
    if saver.dialect.file_sql and inline is None:
        saver.run(_vacuum_into(saver.dialect, to))
        method = "vacuum-into"
    else:
        write_archive(to, saver, transform=inline)
        from threadline.transfer.cold import archive_cold

        archive_cold(saver, to)  # threads moved to the object store whole (the cold tier) come along
        method = "rows"
    from threadline.backends.sqlite import open_read_only

    with open_read_only(to) as (archive, _):
        rows = archive.peek(_counts_op(archive.dialect))
    return BackupReport(to, os.path.getsize(to), method, rows["threads"], rows)


def _vacuum_into(d: Dialect, path: str) -> Op[None]:
    yield Q(d.VACUUM_INTO, (path,), single=True)


def _sound_op(d: Dialect, path: str) -> Op[None]:
    """ConfigError unless the archive at ``path`` (a SQLite file) holds ``threadline_*`` objects
    that are plain tables (or their indexes), passes SQLite's ``quick_check`` and stores no
    value larger than ``limits.max_value_bytes``."""
    refused = f"{path!r} is not a threadline archive"
    fix = "restore only files that `threadline backup` or `bundle-export` wrote"
    for kind, name in (yield Q(d.ARCHIVE_OBJECTS)):
        if kind not in ("table", "index"):
            raise ConfigError(f"{refused}: {name} is a {kind}, not a table; {fix}")
    check = (yield Q(d.QUICK_CHECK))[0][0]
    if check != "ok":
        raise ConfigError(f"{refused}: SQLite finds it damaged ({check}); {fix}")
    tables = {r[0] for r in (yield Q(d.TABLE_NAMES))}
    most = limits.current().max_value_bytes
    for t, cols in VALUE_COLUMNS.items():
        if f"threadline_{t}" in tables:
            found = yield Q(d.oversized_value(t, cols), (most,) * len(cols))
            if found:
                raise ConfigError(f"{refused}: thread {found[0][0]!r} has a value in threadline_{t} larger than max_value_bytes "
                                  f"({most} bytes, threadline.limits); {fix}")


@contextmanager
def open_archive(path: str) -> Iterator[Any]:
    """A read-only saver on the archive at ``path`` once it proved safe to read (``_sound_op``).
    NotADatabaseError for a missing file, a directory, a named pipe or anything else that is
    not a regular file; ConfigError for a file that is not a sound threadline archive."""
    from threadline.backends.sqlite import open_read_only

    with open_read_only(path) as (archive, state):
        archive.peek(_sound_op(archive.dialect, path))
        if not state.is_threadline:
            raise ConfigError(f"{path!r} is not a threadline backup or bundle (no threadline tables)")
        yield archive


def check_archive(path: str) -> None:
    """Raise as ``open_archive`` unless ``path`` is an archive safe to restore."""
    with open_archive(path):
        pass


def _redacted_op(d: Dialect) -> Op[list[str]]:
    """The channels a bundle was redacted of (its ``threadline_bundle`` row; none for a backup)."""
    if not (yield Q(d.columns_sql, ("threadline_bundle",))):
        return []
    found = yield Q(d.BUNDLE_REDACTED)
    try:
        channels = json.loads(found[0][0]) if found else []
    except (TypeError, ValueError):
        channels = None
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        raise ConfigError("the bundle's threadline_bundle row is malformed (redacted is not a list of channel names)")
    return channels


def restore(
    saver: Any,
    path: str,
    *,
    thread_ids: Sequence[Any] | None = None,
    replace: bool = False,
    verify: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> RestoreReport:
    """Copy the threads of the archive ``path`` (a backup or a thread bundle) into ``saver``.

    Each thread is stored in one transaction that reads its rows back and, with ``verify``,
    loads every checkpoint and compares it with the archive's (values, metadata, parent,
    pending writes); a thread that differs, or whose archived checkpoints do not load, is
    not restored (the target keeps what it had) and is reported. Before anything is
    written, a thread that already exists in the target is a ConfigError unless
    ``replace``. Raises as ``open_archive`` when ``path`` is not an archive safe to read."""
    report = RestoreReport(path, [], verify)
    # values load as inspection does, and never through the saver's cache: a thread rolled
    # back must leave nothing behind
    from threadline.transfer.inline import offloaded

    serde, reader = inspecting(saver.serde), dataclasses.replace(saver.blob_codec, cache=None)
    with open_archive(path) as archive:
        a = archive.dialect
        have = archive.peek(columns_op(a))
        report.redacted = archive.peek(_redacted_op(a))
        ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else archive.peek(thread_ids_op(a, have))
        target = saver.run(columns_op(saver.dialect))
        if not replace:
            taken = [t for t in ids if saver.run(_exists_op(saver.dialect, t))]
            if taken:
                raise ConfigError(
                    f"{len(taken)} thread(s) of the archive already exist in the target ({', '.join(map(repr, taken[:5]))}"
                    f"{', …' if len(taken) > 5 else ''}); pass replace=True to overwrite them", flags={"replace=True": "--replace"}
                )
        for i, tid in enumerate(ids):
            rows = archive.peek(thread_rows_op(a, tid, have))
            item = ThreadRestore(tid, {t: len(r) for t, (_, r) in rows.items() if r})
            try:
                expected = Expected(serde, reader, _archived(archive, serde, reader, tid)) if verify else None
                rows = offloaded(saver.blob_codec, rows)  # large values to the target's object store, as a put
                saver.run(store_thread_op(saver.dialect, tid, rows, target, replace=True, bc=saver.blob_codec, expected=expected),
                          write=True)
            except _Differs as exc:
                item.problems += [_not_stored(saver.dialect), *exc.problems]
            report.threads.append(item)
            if progress:
                progress(i + 1, len(ids), tid)
    return report


def _not_stored(d: Dialect) -> str:
    if d.rolls_back:
        return "thread not restored (the target keeps what it had)"
    return f"thread not restored (its rows are deleted from the target: {d.name} has no transaction to roll back)"


def _archived(archive: Any, serde: Any, bc: Any, thread_id: str) -> dict[tuple[str, str], Any]:
    """The archive's checkpoints of a thread loaded; ``_Differs`` when one does not load."""
    try:
        return archive.peek(_loaded_op(archive.dialect, serde, thread_id, bc))
    except Exception as exc:  # an unreadable checkpoint is a finding of the verification
        raise _Differs([f"the archive's checkpoints do not load: {type(exc).__name__}: {exc}"]) from None


def _exists_op(d: Dialect, thread_id: str) -> Op[bool]:
    return bool((yield Q(d.HAS_CHECKPOINTS, (thread_id,))))


def _loaded_op(d: Dialect, serde: Any, thread_id: str, bc: Any = None) -> Op[dict[tuple[str, str], Any]]:
    """Every checkpoint of a thread loaded (values decoded), as comparable data."""
    from threadline.read import jsonable

    where = ops.list_where(d, {"configurable": {"thread_id": thread_id}}, None, None)
    out: dict[tuple[str, str], Any] = {}
    after = None
    while True:
        page, after = yield from ops.list_page(d, serde, where, after, ops.PAGE_SIZE, bc)
        for t in page:
            c = t.config["configurable"]
            out[(c["checkpoint_ns"], c["checkpoint_id"])] = jsonable(
                (t.checkpoint, t.metadata, t.parent_config and t.parent_config["configurable"]["checkpoint_id"], t.pending_writes)
            )
        if after is None:
            return out


def _differences(want: dict[tuple[str, str], Any], got: dict[tuple[str, str], Any]) -> list[str]:
    if set(want) != set(got):
        return [f"checkpoints differ: {len(want)} in the archive, {len(got)} restored"]
    return [f"checkpoint {cid!r} (ns {ns!r}) loads differently" for (ns, cid) in sorted(want) if want[(ns, cid)] != got[(ns, cid)]]


__all__ = ["BackupReport", "RestoreReport", "ThreadRestore", "backup", "check_archive", "open_archive", "read_op", "refuse_links", "restore", "write_archive"]
