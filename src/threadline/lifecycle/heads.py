"""Bringing a database to storage format 2 (``migrate_format``): a head row (``storage.heads``) for
every namespace's latest checkpoint, so that a cold read of it is one keyed read.

Format 1 threads (written before format 2, or by a backend without head rows: Postgres and Redis
in this release) read as before:
their values come from the blobs, and the first put on a thread writes its head. This pass writes
the heads of threads that no put touches: one transaction per thread, so savers keep working
meanwhile (online); a namespace whose head is current is skipped, so a pass stopped half-way
resumes where it stopped; each head written is read back in its transaction and compared with the
bytes read from its blobs (verified), and a thread whose values cannot be read is
reported and left as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline import codec
from threadline.errors import ConfigError, CorruptRowError, ThreadlineError
from threadline.keys import thread_id_of
from threadline.lifecycle.fsck import every_thread_id_op
from threadline.storage import heads as H
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q, fetch_blob_rows, fetch_blobs


class HeadVerificationError(ThreadlineError):
    """A head row read back in its transaction differs from the checkpoint's blobs: not written."""


@dataclass
class FormatReport:
    """What ``migrate_format`` did: threads visited, head rows written, namespaces already
    current, and per thread that could not be migrated the reason (its rows are unchanged)."""

    threads: int = 0
    written: int = 0
    current: int = 0
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _written(resolved: codec.Resolved, stored: tuple, version: str) -> tuple[str, str, bytes, str, int]:
    """A head entry of a value read from its blob: (version, tag, whole bytes, row type, row size)."""
    tag, data, value = resolved
    whole = b"" if tag == codec.EMPTY else bytes(data if data is not None else value.serialized())
    return (version, tag, whole, stored[0], len(stored[1] or b""))


def write_heads_op(d: Dialect, bc: codec.BlobCodec, thread_id: str) -> Op[tuple[int, int]]:
    """Write the head row of each namespace of ``thread_id`` whose latest checkpoint has none (or one
    that does not open), verified. Returns (heads written, namespaces already current).
    Raises CorruptRowError for a value that cannot be read, HeadVerificationError (module doc)."""
    written = current = 0
    for (ns,) in (yield Q(d.THREAD_NAMESPACES, (thread_id,))):
        found = yield Q(d.LATEST_WITH_HEAD, (thread_id, ns))
        if not found:
            continue
        row, head = found[0][:10], found[0][10:12]
        key = (row[0], row[1], row[2])
        doc = d.load_object(row[4], f"checkpoint {key!r}")
        pairs = R.blob_pairs(doc)
        if H.unpack(bc, key, *head, dict(pairs), row[9]) is not None:
            current += 1
            continue
        wanted = [(thread_id, ns, ch, v) for ch, v in pairs]
        rows = yield from fetch_blob_rows(d, wanted)
        resolved = yield from fetch_blobs(d, wanted, rows=rows, bc=bc)
        values = {k[2]: _written(r, rows[k[:3]][k[3]], k[3]) for k, r in resolved.items()}
        entries = H.entries_of(pairs, values, None, bc.offload_min)
        if head[0] is not None:
            yield Q(d.DELETE_HEAD, (thread_id, ns))  # one that does not open is replaced
        yield Q(d.UPSERT_HEAD, H.row_params(bc, key, entries, row[9]))
        back = yield Q(d.LATEST_WITH_HEAD, (thread_id, ns))
        if not back or back[0][2] != key[2] or H.unpack(bc, key, *back[0][10:12], dict(pairs), row[9]) != entries:
            raise HeadVerificationError(f"checkpoint {key!r}: its head row did not read back as written; rolled back")
        written += 1
    return written, current


def migrate_format(
    saver: Any, *, thread_ids: Sequence[Any] | None = None, progress: Callable[[int, int, str], None] | None = None
) -> FormatReport:
    """Bring every thread (or ``thread_ids``) of ``saver``'s database to storage format 2, one
    transaction per thread (module doc). ConfigError on a backend without head rows (Redis)."""
    d = saver.dialect
    if not d.head_rows:
        raise ConfigError(f"storage format 2 (head rows) is not available on {d.name}: its threads read as they are")
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else saver.run(every_thread_id_op(d))
    report = FormatReport()
    for i, tid in enumerate(ids):
        report.threads += 1
        try:
            written, current = saver.run(write_heads_op(d, saver.blob_codec, tid), write=True)
        except (CorruptRowError, HeadVerificationError) as exc:
            report.failed[tid] = f"{exc}; `threadline fsck --deep --thread {tid}` says more"
        else:
            report.written += written
            report.current += current
        if progress:
            progress(i + 1, len(ids), tid)
    return report
