"""Re-sealing a database under the saver's current key: encrypt, rotate, or decrypt (``rekey``).

``rekey_thread_op`` brings one thread to the saver's codec (``saver.blob_codec``): every
value row (blob, pending write, stored pending sends) not sealed with the write key is
opened with any key of the keyring and sealed again with the write key (with none, a
checksum: the database is decrypted), and every checkpoint checksum is recomputed, keyed
with the write key. Each re-sealed row is read back and opened in the same transaction
and compared with what it held (verified); a row that does not open is reported and left
as it is. While the keyring requires encryption (the default), a plaintext value row or a
checkpoint row without a keyed checksum does not open: only encrypting an existing
database (``Keyring(require=False)``) seals such rows. One transaction per thread: savers
keep working meanwhile (online), rows written meanwhile already use the write key, and a
run stopped half-way resumes where it stopped (rows already current are skipped).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline import codec
from threadline.errors import ConfigError, CorruptRowError
from threadline.keys import thread_id_of
from threadline.lifecycle.fsck import every_thread_id_op
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.ops import Op, Q

TABLES = ("checkpoints", "blobs", "writes")


@dataclass
class RekeyReport:
    """What ``rekey`` did: ``key_id`` (hex) the rows are now sealed with (None: checksums only,
    no encryption); per table, rows re-sealed and rows already current; ``unreadable`` the
    rows that did not open (damaged, or under a key the keyring lacks), left unchanged."""

    key_id: str | None
    threads: int = 0
    resealed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    current: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    unreadable: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.unreadable

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ok": self.ok}


def _reader(bc: codec.BlobCodec) -> codec.BlobCodec:
    """``bc`` for opening rows during a rekey, without its cache. It keeps the keyring's
    ``require``: while encryption is required, a plaintext value or a checkpoint without a
    keyed checksum is what someone who can write the database would plant, so it is
    unreadable (reported, left as it is); only a keyring made with ``require=False`` (encrypting
    an existing database, or decrypting) opens such rows to seal them."""
    return dataclasses.replace(bc, cache=None)


def _current(bc: codec.BlobCodec, tag: str, data: Any) -> bool:
    """Whether a stored value row is already sealed as ``bc`` would seal it now."""
    writer = bc.keys.writer if bc.keys is not None else None
    tag = codec.sealed_as(tag, data)
    if writer is None:
        return tag.endswith(codec.SUM)
    return tag.endswith(codec.GCM) and data is not None and bytes(data[2:6]) == writer[0]


def rekey_thread_op(d: Dialect, thread_id: str, bc: codec.BlobCodec, *, dry_run: bool = False) -> Op[RekeyReport]:
    """Re-seal one thread (see the module docstring); a report of that thread alone."""
    tid = thread_id_of(thread_id)
    reader = _reader(bc)
    report = RekeyReport(None, 1, dry_run=dry_run)

    def value(table: str, row: codec.Row, tag: Any, data: Any) -> tuple | None:
        """(new type, new bytes, the packed (type, bytes) it holds) of a row to re-seal; None when
        it is current, or unreadable (reported)."""
        if isinstance(tag, str) and _current(bc, tag, data):
            report.current[table] += 1
            return None
        try:
            packed = reader.open(row, tag, data)
        except CorruptRowError as exc:
            report.unreadable.append(str(exc))
            return None
        report.resealed[table] += 1
        return (*bc.seal(row, *packed), packed)  # type: ignore[arg-type]

    blobs, writes, cks = [], [], []
    for b in (yield Q(d.THREAD_BLOBS, (tid,))):
        row = R.blob_row_ref(*b[:4], b[6])
        if (new := value("blobs", row, b[4], b[5])) is not None:
            blobs.append((row, *new))
    for w in (yield Q(d.THREAD_WRITES, (tid,))):
        row = R.write_row_ref(*w[:6])
        if (new := value("writes", row, w[7], w[8])) is not None:
            writes.append((row, *new))
    for ns, cid, parent, raw_doc, raw_meta, checksum in (yield Q(d.THREAD_CHECKPOINTS, (tid,))):
        key = (tid, ns, cid)
        where = str(codec.Row("checkpoint", key))
        try:
            doc, meta = d.load_object(raw_doc, where), d.load_json(raw_meta, where)
            reader.check_checkpoint(checksum, key, parent, doc, meta)
            new_doc = _resealed_sends(doc, key, bc, reader)
        except CorruptRowError as exc:
            report.unreadable.append(str(exc))
            continue
        new_sum = bc.checkpoint_checksum(key, parent, new_doc, meta)
        if new_sum == checksum and new_doc is doc:
            report.current["checkpoints"] += 1
            continue
        report.resealed["checkpoints"] += 1
        cks.append((dumps_json(new_doc), new_sum, *key))
    if dry_run:
        return report
    if blobs:
        yield Q(d.SET_BLOB_VALUE, [(t, v, *r.key) for r, t, v, _ in blobs], many=True)
    if writes:
        yield Q(d.SET_WRITE_VALUE, [(t, v, *r.key) for r, t, v, _ in writes], many=True)
    if cks:
        yield Q(d.SET_CHECKPOINT_DOC, cks, many=True)
    if d.head_rows and (blobs or writes or cks):  # sealed under the old key: the next put writes a new head
        yield Q(d.DELETE_HEADS, (tid,))
    yield from _verify(d, tid, bc, [*blobs, *writes], {c[2:]: c[1] for c in cks})
    return report


def _resealed_sends(doc: dict, key: tuple, bc: codec.BlobCodec, reader: codec.BlobCodec) -> dict:
    """``doc`` with its stored pending_sends (LangGraph < v4) re-sealed, or ``doc`` itself when current."""
    sends = R.stored_sends(doc, key)
    if sends is None or _current(bc, *sends):
        return doc
    row = R.sends_ref(*key)
    tag, data = bc.seal(row, *reader.open(row, *sends))
    return {**doc, R.SENDS: [tag, base64.b64encode(data).decode()]}


def _verify(d: Dialect, tid: str, bc: codec.BlobCodec, values: Sequence[tuple], checksums: dict[tuple, str]) -> Op[None]:
    """Read the re-sealed rows back in the same transaction: each value opens under the write
    key to the bytes it held, each checkpoint matches its new checksum; otherwise raise (the
    transaction rolls back: the thread is left unchanged)."""
    reader = _reader(bc)
    found: dict[tuple, tuple] = {}
    for b in (yield Q(d.THREAD_BLOBS, (tid,))):
        found[("blob", tuple(b[:4]))] = (b[4], b[5])
    for w in (yield Q(d.THREAD_WRITES, (tid,))):
        found[("write", tuple(w[:5]))] = (w[7], w[8])
    for row, _, _, packed in values:
        tag, data = found[(row.table, row.key)]
        if not _current(bc, tag, data) or reader.open(row, tag, data) != packed:
            raise CorruptRowError(f"{row}: did not read back as re-sealed; thread {tid!r} left unchanged")
    for ns, cid, parent, raw_doc, raw_meta, checksum in (yield Q(d.THREAD_CHECKPOINTS, (tid,))):
        if (tid, ns, cid) in checksums:
            where = str(codec.Row("checkpoint", (tid, ns, cid)))
            reader.check_checkpoint(checksum, (tid, ns, cid), parent, d.load_object(raw_doc, where), d.load_json(raw_meta, where))


def rekey(
    saver: Any,
    *,
    thread_ids: Sequence[Any] | None = None,
    dry_run: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> RekeyReport:
    """Re-seal every thread (or ``thread_ids``) under ``saver.blob_codec``'s write key, one
    transaction per thread (see the module docstring). ``dry_run`` counts what would change.

    The keyring must hold the keys the rows are sealed with now (as read keys) and the new
    key first. Raises ConfigError when the saver has no keyring and the database holds
    encrypted rows it cannot open (every such row is reported instead when it has one).
    """
    bc = saver.blob_codec
    writer = bc.keys.writer if bc.keys is not None else None
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else saver.run(every_thread_id_op(saver.dialect))
    total = RekeyReport(writer[0].hex() if writer else None, dry_run=dry_run)
    for i, tid in enumerate(ids):
        part = saver.run(rekey_thread_op(saver.dialect, tid, bc, dry_run=dry_run), write=not dry_run)
        total.threads += 1
        for table in TABLES:
            total.resealed[table] += part.resealed[table]
            total.current[table] += part.current[table]
        total.unreadable += part.unreadable
        if progress:
            progress(i + 1, len(ids), tid)
    if bc.keys is None and any("encrypted with key" in u for u in total.unreadable):
        raise ConfigError("the database holds encrypted rows but no keys are configured: set THREADLINE_ENCRYPTION_KEY (see docs/security.md)")
    return total
