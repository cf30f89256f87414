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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadline import limits
from threadline.codec.serde import inspecting
from threadline.errors import ConfigError
from threadline.keys import thread_id_of
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.lifecycle.cold import cold_objects_op, cold_rows
from threadline.lifecycle.inline import inliner, offloaded
from threadline.lifecycle.thread_rows import (
    THREAD_TABLES, Differs, Expected, Rows, Transform, columns_op, loaded_op, read_op, store_thread_op, thread_ids_op, thread_rows_op,
)

# Files SQLite writes beside a database: a link planted at one of them is a way out too.
SIDE_FILES = ("-wal", "-shm", "-journal")
# The columns of an archive holding stored values, each bounded by ``limits.max_value_bytes``.
VALUE_COLUMNS = {"checkpoints": ("checkpoint", "metadata"), "blobs": ("blob",), "writes": ("blob",)}


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

    inline = inliner(saver.blob_codec)  # offloaded values go into the archive's rows (docs/offload.md)
    if saver.dialect.file_sql and inline is None:
        saver.run(_vacuum_into(saver.dialect, to))
        method = "vacuum-into"
    else:
        write_archive(to, saver, transform=inline)

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
            except Differs as exc:
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
    """The archive's checkpoints of a thread loaded; ``Differs`` when one does not load."""
    try:
        return archive.peek(loaded_op(archive.dialect, serde, thread_id, bc))
    except Exception as exc:  # an unreadable checkpoint is a finding of the verification
        raise Differs([f"the archive's checkpoints do not load: {type(exc).__name__}: {exc}"]) from None


def _exists_op(d: Dialect, thread_id: str) -> Op[bool]:
    return bool((yield Q(d.HAS_CHECKPOINTS, (thread_id,))))


def archive_cold(saver: Any, path: str) -> int:
    """Write every cold thread of ``saver`` into the threadline SQLite archive at ``path`` (a
    backup), its rows taken from its archive object, checked; how many. CorruptRowError for a
    missing or damaged archive (a backup never silently leaves a thread out)."""
    d, bc = saver.dialect, saver.blob_codec
    if bc.offload is None or bc.offload.objects is None or not getattr(d, "offloads", False):
        return 0
    stubs = saver.run(cold_objects_op(d))
    if not stubs:
        return 0
    from threadline.backends.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(path, adopt=False) as archive:
        target = archive.run(columns_op(archive.dialect))
        for tid, rows in cold_rows(saver, dict(stubs)):
            archive.run(store_thread_op(archive.dialect, tid, rows, target, replace=True), write=True)
    return len(stubs)


__all__ = ["BackupReport", "RestoreReport", "ThreadRestore", "backup", "check_archive", "open_archive", "read_op", "refuse_links", "restore", "write_archive"]
