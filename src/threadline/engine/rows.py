"""Pure mapping between LangGraph objects and table rows. No I/O.

Row shapes (in column order):

* checkpoint row: thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
  checkpoint (JSON without ``channel_values``), metadata (JSON), step, source,
  run_id, created_at (seconds since the epoch, UTC)
* blob row: thread_id, checkpoint_ns, channel, version, type, blob, base_version
* write row: thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,
  task_path, type, blob, created_at
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import codec
from threadline.errors import CorruptRowError
from threadline.keys import Key, config_of

CHECKPOINT_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata"
WRITE_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob"
_SENDS = "__pending_sends__"


def version_key(version: Any) -> str:
    """Blobs are keyed by the text of a channel version (LangGraph uses str, int or float)."""
    return version if isinstance(version, str) else repr(version) if isinstance(version, float) else str(version)


def checkpoint_doc(serde: SerializerProtocol, checkpoint: Checkpoint) -> dict[str, Any]:
    """The checkpoint as stored: everything but ``channel_values``.

    ``pending_sends`` (only non-empty in checkpoints written before LangGraph v4) may
    hold arbitrary objects, so they go through the serializer, base64-wrapped.
    """
    doc = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "pending_sends")}
    sends = checkpoint.get("pending_sends") or []
    if sends:
        tag, data = codec.encode(serde, list(sends))
        doc[_SENDS] = [tag, base64.b64encode(data).decode()]
    return doc


def put_rows(
    serde: SerializerProtocol,
    key: Key,
    config: dict,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    now: float,
) -> tuple[dict[str, Any], dict[str, Any], list[tuple]]:
    """Turn ``put`` arguments into (checkpoint doc, metadata doc, blob rows).

    Only channels in ``new_versions`` get a blob row (unchanged channels are shared
    by reference through ``channel_versions``). A channel with a new version but
    no value gets an ``empty`` row, so every version a checkpoint names exists.
    """
    values = checkpoint["channel_values"]
    blobs = []
    for channel, version in new_versions.items():
        if channel in values:
            tag, data = codec.encode(serde, values[channel])
        else:
            tag, data = codec.EMPTY, None
        blobs.append((key.thread_id, key.checkpoint_ns, channel, version_key(version), tag, data, None))
    meta = get_serializable_checkpoint_metadata(config, metadata)
    return checkpoint_doc(serde, checkpoint), meta, blobs


def extracted_columns(meta: Mapping[str, Any]) -> tuple[int | None, str | None, str | None]:
    """(step, source, run_id) pulled out of metadata into indexed columns."""
    step = meta.get("step")
    step = step if isinstance(step, int) and not isinstance(step, bool) else None
    source = meta.get("source")
    run_id = meta.get("run_id")
    return step, source if isinstance(source, str) else None, None if run_id is None else str(run_id)


def write_rows(
    serde: SerializerProtocol,
    key: Key,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    now: float,
) -> tuple[bool, list[tuple]]:
    """Rows for ``put_writes`` and whether they replace (all special channels) or insert-or-ignore.

    Special channels (``__error__``, ``__interrupt__``, ``__scheduled__``, ``__resume__``)
    take LangGraph's negative ``WRITES_IDX_MAP`` index; others their list position.
    """
    rows = []
    for i, (channel, value) in enumerate(writes):
        tag, data = codec.encode(serde, value)
        idx = WRITES_IDX_MAP.get(channel, i)
        rows.append((key.thread_id, key.checkpoint_ns, key.checkpoint_id, task_id, idx, channel, task_path, tag, data, now))
    replace = bool(writes) and all(w[0] in WRITES_IDX_MAP for w in writes)
    return replace, rows


def blob_pairs(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(channel, version key) pairs a stored checkpoint doc references."""
    return [(ch, version_key(v)) for ch, v in doc.get("channel_versions", {}).items()]


def to_tuple(
    serde: SerializerProtocol,
    row: Sequence[Any],
    doc: dict[str, Any],
    metadata: dict[str, Any],
    blobs: Mapping[tuple[str, str, str, str], tuple[str, bytes | None]],
    writes: Iterable[Sequence[Any]],
) -> CheckpointTuple:
    """Assemble a CheckpointTuple from its checkpoint row, its blobs and its writes.

    ``blobs`` maps (thread_id, checkpoint_ns, channel, version) → (type, bytes);
    ``writes`` are write rows (``WRITE_COLUMNS``) already in ``writes_sort_key`` order.
    """
    thread_id, ns, cid, parent = row[0], row[1], row[2], row[3]
    values: dict[str, Any] = {}
    for channel, version in blob_pairs(doc):
        found = blobs.get((thread_id, ns, channel, version))
        if found is None or found[0] == codec.EMPTY:
            continue
        values[channel] = codec.decode(serde, found[0], found[1], f"blob ({thread_id!r}, {ns!r}, {channel!r}, {version!r})")
    checkpoint = {k: v for k, v in doc.items() if k != _SENDS}
    checkpoint["channel_values"] = values
    sends = doc.get(_SENDS)
    try:
        checkpoint["pending_sends"] = (
            codec.decode(serde, sends[0], base64.b64decode(sends[1]), f"checkpoint {cid!r} pending_sends") if sends else []
        )
    except (TypeError, ValueError, IndexError) as exc:
        raise CorruptRowError(f"checkpoint ({thread_id!r}, {ns!r}, {cid!r}): malformed pending_sends") from exc
    pending = [
        (w[3], w[5], codec.decode(serde, w[7], w[8], f"write ({thread_id!r}, {ns!r}, {cid!r}, {w[3]!r}, {w[4]})"))
        for w in writes
    ]
    return CheckpointTuple(
        config=config_of(thread_id, ns, cid),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=metadata,  # type: ignore[arg-type]
        parent_config=config_of(thread_id, ns, parent) if parent else None,
        pending_writes=pending,
    )
