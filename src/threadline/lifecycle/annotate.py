"""Annotating a checkpoint a graph wrote: keys added to its metadata (``annotate_op``).

LangGraph's ``update_state`` writes a checkpoint's metadata itself (source ``update``, step,
parents); a merge names its two parents (``merge``) and a bulk edit marks what it applied
(``threadline_edit``) by adding keys afterwards, in their own transaction. The row is checked
against its checksum first and sealed again with the new metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadline import codec
from threadline.read.common import checkpoint_row_op
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.ops import Op, Q


def annotate_op(d: Dialect, thread_id: str, checkpoint_ns: str, checkpoint_id: str, extra: Mapping[str, Any],
                bc: codec.BlobCodec | None = None) -> Op[dict[str, Any]]:
    """Add ``extra`` (JSON-able) to the metadata of one checkpoint; its new metadata.
    NotFoundError when it does not exist, CorruptRowError when the row fails its checksum."""
    bc = bc or codec.PLAIN
    row = yield from checkpoint_row_op(d, thread_id, checkpoint_ns, checkpoint_id)
    where = f"checkpoint ({thread_id!r}, {checkpoint_ns!r}, {checkpoint_id!r})"
    doc, meta = d.load_object(row[4], where), d.load_json(row[5], where)
    key = (thread_id, checkpoint_ns, checkpoint_id)
    bc.check_checkpoint(row[9], key, row[3], doc, meta)
    meta = {**(meta if isinstance(meta, dict) else {}), **extra}
    yield Q(d.SET_METADATA, (dumps_json(meta, sort_keys=False), bc.checkpoint_checksum(key, row[3], doc, meta), *key))
    return meta
