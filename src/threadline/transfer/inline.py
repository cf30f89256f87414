"""Offloaded values brought back into their rows for a file that travels alone: backups and
bundles (docs/offload.md). A row whose value is in the object store (``codec.objects``) is
opened — the object fetched and checked — and sealed again in-row, to the same row, with the
same keys; every other row is copied as stored. Restoring such an archive stores the values
in-row, into a database with or without offload.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from threadline.codec import BlobCodec
from threadline.codec.objects import OBJ
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op
from threadline.transfer.backup import Rows, Transform

_KEYS = {
    "blobs": (R.blob_row_ref, ("thread_id", "checkpoint_ns", "channel", "version", "base_version")),
    "writes": (R.write_row_ref, ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel")),
}


def inliner(bc: BlobCodec) -> Transform | None:
    """The ``Transform`` (``transfer.backup``) that inlines a thread's offloaded values, read
    through ``bc`` (its store and keys); None when ``bc`` offloads nothing. Raises
    CorruptRowError for a missing or damaged object (an archive never holds a dangling reference)."""
    if bc.offload is None or bc.offload.objects is None:
        return None
    in_row = dataclasses.replace(bc, cache=None, offload=None)

    def transform(d: Dialect, tid: str, rows: Rows) -> Op[Rows]:
        out = dict(rows)
        for table, (ref_of, names) in _KEYS.items():
            if table not in rows:
                continue
            cols, data = rows[table]
            at = {c: i for i, c in enumerate(cols)}
            fixed = []
            for r in data:
                tag = r[at["type"]]
                if isinstance(tag, str) and OBJ + "+" in tag:
                    row = ref_of(*(r[at[c]] for c in names))
                    sealed = in_row.seal(row, *bc.open(row, tag, r[at["blob"]]))
                    r = tuple(sealed[0] if i == at["type"] else sealed[1] if i == at["blob"] else v for i, v in enumerate(r))
                fixed.append(r)
            out[table] = (cols, fixed)
        return out
        yield  # an operation (``Transform``) that needs no statement

    return transform


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


__all__ = ["chained", "inliner"]
