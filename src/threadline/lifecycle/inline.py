"""Offloaded values brought back into their rows for a file that travels alone: backups and
bundles (docs/offload.md). A row whose value is in the object store (``codec.objects``) is
opened — the object fetched and checked — and sealed again in-row, to the same row, with the
same keys; every other row is copied as stored. Restoring such an archive (or a cold thread's,
``lifecycle.cold``) into a saver that offloads offloads its large values again (``offloaded``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from threadline.codec import EMPTY, BlobCodec
from threadline.codec.objects import OBJ, name_of
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op
from threadline.lifecycle.thread_rows import Rows, Transform

_KEYS = {
    "blobs": (R.blob_row_ref, ("thread_id", "checkpoint_ns", "channel", "version", "base_version")),
    "writes": (R.write_row_ref, ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel")),
}


def _rewrite(rows: Rows, change: Callable[[Callable[[], Any], str, Any], tuple[str, bytes] | None]) -> Rows:
    """``rows`` with each blob and write row's (type, bytes) replaced by ``change(row_of, type,
    bytes)`` where that is not None (``row_of()``: the row's ``Row``, for its seal)."""
    out = dict(rows)
    for table, (ref_of, names) in _KEYS.items():
        if table not in rows:
            continue
        cols, data = rows[table]
        at = {c: i for i, c in enumerate(cols)}
        fixed = []
        for r in data:
            new = change(lambda r=r: ref_of(*(r[at[c]] for c in names)), r[at["type"]], r[at["blob"]])
            if new is not None:
                r = tuple(new[0] if i == at["type"] else new[1] if i == at["blob"] else v for i, v in enumerate(r))
            fixed.append(r)
        out[table] = (cols, fixed)
    return out


def inliner(bc: BlobCodec) -> Transform | None:
    """The ``Transform`` (``transfer.backup``) that inlines a thread's offloaded values, read
    through ``bc`` (its store and keys); None when ``bc`` offloads nothing. Raises
    CorruptRowError for a missing or damaged object (an archive never holds a dangling reference)."""
    if bc.offload is None or bc.offload.objects is None:
        return None
    in_row = dataclasses.replace(bc, cache=None, offload=None)

    def inline(row_of: Callable[[], Any], tag: Any, data: Any) -> tuple[str, bytes] | None:
        if isinstance(tag, str) and OBJ + "+" in tag:
            row = row_of()
            return in_row.seal(row, *bc.open(row, tag, data))
        return None

    def transform(d: Dialect, tid: str, rows: Rows) -> Op[Rows]:
        return _rewrite(rows, inline)
        yield  # an operation (``Transform``) that needs no statement

    return transform


def offloaded(bc: BlobCodec, rows: Rows) -> Rows:
    """A thread's ``rows`` (of a backup, a bundle or a cold archive: values in-row) with each value
    whose stored bytes exceed ``bc``'s offload threshold offloaded as a put offloads it (its
    object written now, its row a reference under the same seal), so that restoring them into a
    saver that offloads keeps its database small; ``rows`` as they are when ``bc`` offloads
    nothing. Raises CorruptRowError for a row whose seal does not check."""
    off = bc.offload
    if off is None or off.objects is None:
        return rows

    def offload(row_of: Callable[[], Any], tag: Any, data: Any) -> tuple[str, bytes] | None:
        if not isinstance(tag, str) or tag == EMPTY or OBJ + "+" in tag or not isinstance(data, (bytes, bytearray, memoryview)):
            return None
        if len(data) <= off.min_bytes:  # a sealed value is longer than its payload: smaller ones stay
            return None
        row = row_of()
        return bc.seal(row, *bc.open(row, tag, data))

    return _rewrite(rows, offload)


def object_names(bc: BlobCodec, rows: Rows) -> set[str]:
    """The names the values of a thread's in-row ``rows`` have as objects (``codec.objects.name_of``,
    whatever their size): the objects its rows named before they were archived (``lifecycle.erase``
    deletes those still stored). Raises CorruptRowError for a row whose seal does not check."""
    names: set[str] = set()

    def name(row_of: Callable[[], Any], tag: Any, data: Any) -> None:
        if isinstance(tag, str) and tag != EMPTY and OBJ + "+" not in tag:
            names.add(name_of(bc.keys, bc.open(row_of(), tag, data)[1]))  # type: ignore[arg-type]

    _rewrite(rows, name)
    return names


def chained(*transforms: Transform | None) -> Transform | None:
    """The ``transforms`` given (None skipped) applied in order, as one."""
    given = [t for t in transforms if t is not None]
    if len(given) <= 1:
        return given[0] if given else None

    def transform(d: Dialect, tid: str, rows: Rows) -> Op[Rows]:
        for t in given:
            rows = yield from t(d, tid, rows)
        return rows

    return transform


__all__ = ["chained", "inliner", "object_names", "offloaded"]
