"""Pure mapping between LangGraph objects and table rows. No I/O.

Row shapes (in column order):

* checkpoint row: thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
  checkpoint (JSON without ``channel_values``), metadata (JSON), step, source,
  run_id, created_at (seconds since the epoch, UTC), checksum (``codec.seal``: key,
  parent, checkpoint and metadata)
* blob row: thread_id, checkpoint_ns, channel, version, type, blob, base_version
  (``type`` is a ``codec`` tag; a delta row names its base in ``base_version``)
* write row: thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,
  task_path, type, blob, created_at

Every value is sealed to its row (``codec.Row``: ``blob_row_ref``, ``write_row_ref``).
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import TASKS

from threadline import codec
from threadline.errors import CorruptRowError
from threadline.keys import Key, config_of, is_text_key, text_key
from threadline.lazy import on_first_call
from threadline.storage.inline import EMPTIES, NULLS, SCALARS, all_versions, inline_maps, inline_values, read_back, scalar_map  # noqa: F401  (R.* for readers)

if TYPE_CHECKING:
    from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

# LangGraph's checkpoint base loads with the first put or tuple built, not with this module: a
# listing of threads reads rows and decodes nothing (the base imports LangChain)
CheckpointTuple = on_first_call(globals(), "CheckpointTuple", "langgraph.checkpoint.base:CheckpointTuple")  # noqa: F811
get_checkpoint_metadata = on_first_call(globals(), "get_checkpoint_metadata", "langgraph.checkpoint.base:get_checkpoint_metadata")
_WRITES_IDX_MAP: dict[str, int] = {}  # LangGraph's, from the first ``write_rows``


def _writes_idx_map() -> dict[str, int]:
    from langgraph.checkpoint.base import WRITES_IDX_MAP

    _WRITES_IDX_MAP.update(WRITES_IDX_MAP)
    return _WRITES_IDX_MAP

# What ``to_tuple`` takes; the checksum is always the LAST column of a checkpoint row read for values.
CHECKPOINT_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, checksum"
# A checkpoint row as operations read it: the first six CHECKPOINT_COLUMNS, step, source, created_at, checksum.
CHECKPOINT_ROW = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, step, source, created_at, checksum"
BLOB_COLUMNS = "thread_id, checkpoint_ns, channel, version, type, blob, base_version"
WRITE_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob"
SENDS = "__pending_sends__"
# Channels a checkpoint names at a version it neither stored (not in ``new_versions``) nor
# inherited from its parent, as LangGraph's migration of older checkpoints renames channels:
# the official savers read such a channel back without a value when no blob has that version.
ABSENT = "__absent__"
_DOC_ONLY = frozenset((SENDS, ABSENT, NULLS, EMPTIES, SCALARS))  # stored keys that are not the checkpoint's


def version_key(version: Any) -> str:
    """Blobs are keyed by the text of a channel version (LangGraph uses str, int or float)."""
    return version if isinstance(version, str) else repr(version) if isinstance(version, float) else str(version)


# 100-ns intervals from the UUID epoch (1582-10-15) to the Unix epoch, as LangGraph's ``uuid6``.
_UUID_EPOCH = 0x01B21DD213814000


def id_time(checkpoint_id: Any) -> float | None:
    """When a checkpoint was written, read from its id (epoch seconds): LangGraph's checkpoint ids
    are UUID version 6, which hold their creation time (``langgraph.checkpoint.base.id.uuid6``).
    None for an id that is not such a UUID."""
    text = str(checkpoint_id or "").replace("-", "")
    if len(text) != 32:
        return None
    try:
        value = int(text, 16)
    except ValueError:
        return None
    if (value >> 76) & 0xF != 6:
        return None
    ticks = ((value >> 80) << 12) | ((value >> 64) & 0x0FFF)
    return (ticks - _UUID_EPOCH) / 1e7 if ticks > _UUID_EPOCH else None


def blob_row_ref(thread_id: str, checkpoint_ns: str, channel: str, version: str, base_version: str | None = None) -> codec.Row:
    """The blob row a value is sealed to: its key and base_version."""
    return codec.Row("blob", (thread_id, checkpoint_ns, channel, version), (base_version,))


def write_row_ref(thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str, idx: int, channel: str) -> codec.Row:
    """The write row a pending write is sealed to: its key and channel."""
    return codec.Row("write", (thread_id, checkpoint_ns, checkpoint_id, task_id, idx), (channel,))


def sends_ref(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> codec.Row:
    """What a LangGraph < v4 checkpoint's stored ``pending_sends`` are sealed to."""
    return codec.Row("checkpoint", (thread_id, checkpoint_ns, checkpoint_id), ("pending_sends",))


def checkpoint_doc(serde: SerializerProtocol, checkpoint: Checkpoint, key: Key | None = None, bc: codec.BlobCodec = codec.PLAIN) -> dict[str, Any]:
    """The checkpoint as stored: everything but ``channel_values``.

    ``pending_sends`` (only in checkpoints written before LangGraph v4) may hold
    arbitrary objects, so they go through the serializer, sealed to the checkpoint
    (``key``), base64-wrapped; an empty list is kept as ``[]`` so the checkpoint reads
    back with exactly the keys it had.
    """
    doc = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "pending_sends", ABSENT)}
    if "pending_sends" in checkpoint:
        sends = checkpoint["pending_sends"] or []
        if sends:
            assert key is not None
            row = sends_ref(key.thread_id, key.checkpoint_ns, checkpoint["id"])
            tag, data = bc.store(row, *codec.encode(serde, list(sends), "pending_sends"))
            doc[SENDS] = [tag, base64.b64encode(data).decode()]
        else:
            doc[SENDS] = []
    return doc


@dataclass(slots=True)
class Value:
    """One channel value of a ``put``, serialized: the serializer's ``(tag, data)`` (None: an
    empty channel) and, when it may be stored as a delta, its ``codec.Container``."""

    channel: str
    version: str
    tag: str | None
    data: bytes | None
    container: codec.Container | None = None


@dataclass(slots=True)
class BlobRow:
    """A blob row to insert (``params``, in column order), the stored type and size its base
    row must still have for a delta (``guard``), and the value to cache once inserted."""

    params: tuple
    guard: tuple[str | None, int | None] = (None, None)
    value: codec.Container | None = None

    @property
    def delta(self) -> bool:
        return self.params[6] is not None


def stored_sends(doc: Mapping[str, Any], key: tuple[str, str, str]) -> tuple[str, bytes] | None:
    """The sealed ``(type, bytes)`` of a stored doc's ``pending_sends`` (``SENDS``: as
    ``checkpoint_doc`` writes it, ``[type, base64]``, or ``[]`` for none); None when it holds none.
    CorruptRowError for any other shape (``key``: the checkpoint's, for the message)."""
    sends = doc.get(SENDS)
    if sends is None or sends == []:
        return None
    if type(sends) is list and len(sends) == 2 and all(isinstance(part, str) for part in sends):
        try:
            return sends[0], base64.b64decode(sends[1], validate=True)
        except ValueError:
            pass
    raise CorruptRowError(f"checkpoint {key!r}: malformed pending_sends")


def sends_list(value: Any, where: object) -> list:
    """``value`` of a checkpoint's pending sends or of its ``TASKS`` channel, which LangGraph keeps
    as a list of ``Send`` (it skips an item of another type). CorruptRowError for anything else,
    which would fail inside LangGraph with a raw TypeError."""
    if not isinstance(value, list):
        raise CorruptRowError(f"{where} holds a {type(value).__name__} where LangGraph keeps a list of Sends")
    return value


def resealed_sends(doc: dict[str, Any], src: tuple[str, str, str], dst: tuple[str, str, str], bc: codec.BlobCodec) -> dict[str, Any]:
    """A stored checkpoint doc copied from checkpoint ``src`` to ``dst`` (thread_id, checkpoint_ns,
    checkpoint_id): its stored ``pending_sends``, if any, checked and sealed to the new checkpoint."""
    sends = stored_sends(doc, src)
    if sends is None:
        return dict(doc)
    tag, data = bc.reseal(sends_ref(*src), sends_ref(*dst), *sends)
    return {**doc, SENDS: [tag, base64.b64encode(data).decode()]}


def put_docs(
    serde: SerializerProtocol, config: dict, checkpoint: Checkpoint, metadata: CheckpointMetadata, key: Key, bc: codec.BlobCodec
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored checkpoint doc (without ``channel_values``) and metadata doc of a ``put``.

    Metadata is LangGraph's ``get_checkpoint_metadata`` (the config's extra keys added),
    every key kept as the official SqliteSaver keeps it, ``writes`` included."""
    return checkpoint_doc(serde, checkpoint, key, bc), get_checkpoint_metadata(config, metadata)


def put_keys(checkpoint: Checkpoint, new_versions: ChannelVersions) -> None:
    """ConfigError (``keys.text_key``) for a checkpoint id, channel or version no key column can hold."""
    text_key("checkpoint id", checkpoint["id"])
    for channel, version in new_versions.items():
        text_key("channel", channel)
        if not is_text_key(key := version_key(version)):  # the error's name made only for an error
            text_key(f"version of channel {channel!r}", key)


def delta_channels(checkpoint: Checkpoint, new_versions: ChannelVersions) -> list[tuple[str, str]]:
    """(channel, version key) of the new values that are lists or dicts: those may be deltas."""
    values = checkpoint["channel_values"]
    return [
        (ch, version_key(v)) for ch, v in new_versions.items() if ch in values and isinstance(values[ch], (list, dict))
    ]


def serialize_values(
    serde: SerializerProtocol,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    bc: codec.BlobCodec = codec.PLAIN,
    bases: Mapping[str, tuple[str, codec.Entry]] | None = None,
    encoded: Mapping[str, tuple[str, bytes]] | None = None,
) -> list[Value]:
    """Serialize the channels in ``new_versions`` (only those get a blob row: unchanged
    channels are shared by reference through ``channel_versions``). A channel with a new
    version but no value is ``empty``, so every version a checkpoint names exists.

    A list whose ``bases`` entry (its value in the parent checkpoint) it extends is
    serialized item by item from where the base ends (``codec.BlobCodec.encode_list``);
    ``encoded`` holds values already serialized whole (``codec.encode``)."""
    values = checkpoint["channel_values"]
    out = []
    for channel, version in new_versions.items():
        if channel not in values:
            out.append(Value(channel, version_key(version), None, None))
            continue
        value = values[channel]
        base = bases.get(channel) if bases else None
        fast = bc.encode_list(serde, value, base[1]) if base is not None and type(value) is list else None
        if fast is not None:
            codec.check_size(len(fast[0]), f"channel {channel!r}", channel)
            out.append(Value(channel, version_key(version), "msgpack", fast[0], fast[1]))
        else:
            tag, data = encoded[channel] if encoded and channel in encoded else codec.encode(serde, value, channel)
            out.append(Value(channel, version_key(version), tag, data, bc.candidate(tag, data, value)))
    return out


def blob_rows(
    key: Key,
    values: Sequence[Value],
    bases: Mapping[str, tuple[str, codec.Entry]] | None = None,
    bc: codec.BlobCodec = codec.PLAIN,
) -> list[BlobRow]:
    """Blob rows of a ``put``. ``bases`` maps a channel to ``(base_version, cached entry)``:
    the channel's version in the parent checkpoint, on which its new value may be a delta;
    a list delta whose items are the parent's pending writes on the channel (as this
    process stored them, ``codec.BlobCache.writes``) references them (``codec.refs``)."""
    rows = []
    parent = (key.thread_id, key.checkpoint_ns, key.checkpoint_id)
    for v in values:
        if v.tag is None:
            empty = bc.seal(blob_row_ref(key.thread_id, key.checkpoint_ns, v.channel, v.version), codec.EMPTY, None)
            rows.append(BlobRow((key.thread_id, key.checkpoint_ns, v.channel, v.version, *empty, None)))
            continue
        base = (bases or {}).get(v.channel)
        writes = bc.cache.writes(parent, v.channel) if base is not None and bc.cache is not None else None
        refs = (key.checkpoint_id, writes) if writes else None
        tag, data, is_delta, value = bc.encode_blob(v.tag, v.data, v.container, base[1] if base else None, refs)  # type: ignore[arg-type]
        base_version = base[0] if is_delta and base else None
        tag, data = bc.seal(blob_row_ref(key.thread_id, key.checkpoint_ns, v.channel, v.version, base_version), tag, data)
        if is_delta:
            assert base is not None
            rows.append(
                BlobRow(
                    (key.thread_id, key.checkpoint_ns, v.channel, v.version, tag, data, base[0]),
                    (base[1].stored_type, base[1].stored_len),
                    value,
                )
            )
        else:
            rows.append(BlobRow((key.thread_id, key.checkpoint_ns, v.channel, v.version, tag, data, None), value=value))
    return rows


def snapshot_row(serde_value: Value, key: Key, bc: codec.BlobCodec = codec.PLAIN) -> tuple:
    """The snapshot row of a value (when its delta could not be written)."""
    row = blob_row_ref(key.thread_id, key.checkpoint_ns, serde_value.channel, serde_value.version)
    tag, data = bc.store(row, serde_value.tag, serde_value.data)  # type: ignore[arg-type]
    return (key.thread_id, key.checkpoint_ns, serde_value.channel, serde_value.version, tag, data, None)


def extracted_columns(meta: Mapping[str, Any]) -> tuple[int | None, str | None, str | None]:
    """(step, source, run_id) pulled out of metadata into indexed columns."""
    step = meta.get("step")
    step = step if isinstance(step, int) and not isinstance(step, bool) else None
    source = meta.get("source")
    run_id = meta.get("run_id")
    return step, source if isinstance(source, str) else None, None if run_id is None else str(run_id)


def write_row(
    serde: SerializerProtocol,
    key: Key,
    channel: str,
    value: Any,
    task_id: str,
    idx: int,
    task_path: str,
    now: float,
    bc: codec.BlobCodec,
    encoded: tuple[str, bytes] | None = None,
) -> tuple:
    """One write row (``WRITE_COLUMNS``, created_at): the value (or its ``encoded`` form,
    ``codec.encode``) packed and sealed to the row.
    ConfigError for a channel, task_id or task_path no key column can hold."""
    text_key("channel", channel)
    row = write_row_ref(key.thread_id, key.checkpoint_ns, key.checkpoint_id, task_id, idx, channel)  # type: ignore[arg-type]
    tag, data = bc.store(row, *(encoded or codec.encode(serde, value)))
    return (key.thread_id, key.checkpoint_ns, key.checkpoint_id, task_id, idx, channel, task_path, tag, data, now)


def write_rows(
    serde: SerializerProtocol,
    key: Key,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    now: float,
    bc: codec.BlobCodec = codec.PLAIN,
) -> tuple[bool, list[tuple], list[tuple[str, bytes]]]:
    """Rows for ``put_writes``, whether they replace (all special channels) or insert-or-ignore,
    and each value as serialized (``codec.encode``: ``(type, bytes)``, before compression).

    Special channels (``__error__``, ``__interrupt__``, ``__scheduled__``, ``__resume__``)
    take LangGraph's negative ``WRITES_IDX_MAP`` index; others their list position.
    Values at or above the codec's threshold are zstd-compressed (``<tag>+zstd``); every
    value is sealed to its row. ConfigError for a task_id, task_path or channel no key
    column can hold.
    """
    idx_map = _WRITES_IDX_MAP or _writes_idx_map()
    text_key("task_id", task_id)
    text_key("task_path", task_path)
    encoded = [codec.encode(serde, value, channel, task_id) for channel, value in writes]
    rows = [write_row(serde, key, channel, None, task_id, idx_map.get(channel, i), task_path, now, bc, enc)
            for i, ((channel, _), enc) in enumerate(zip(writes, encoded))]
    replace = bool(writes) and all(w[0] in idx_map for w in writes)
    return replace, rows, encoded


def needs_parent_sends(parent: str | None, doc: Mapping[str, Any]) -> bool:
    """A checkpoint of LangGraph < v4 with a parent, whose Send packets the official
    PostgresSaver reads from the parent's TASKS writes (``Dialect.migrates_parent_sends``)."""
    v = doc.get("v")
    return isinstance(v, int) and v < 4 and bool(parent)


def next_version(current: Any) -> str:
    """The official savers' version format: a 32-digit zero-padded per-channel counter, a dot,
    and a random fraction (seed 000 §version); only the counter orders versions."""
    if current is None:
        n = 0
    elif isinstance(current, int):
        n = current
    else:
        n = int(str(current).split(".")[0])
    return f"{n + 1:032}.{random.random():016}"


_STR = frozenset((str,))


def blob_pairs(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(channel, version key) pairs a stored checkpoint doc references.

    Raises CorruptRowError when ``channel_versions`` is not a mapping of names to versions.
    """
    versions = doc.get("channel_versions", {})
    if type(versions) is dict and set(map(type, versions.values())) <= _STR:
        return list(versions.items())  # LangGraph's versions: strings, their own keys (checked in C: a wide graph names hundreds)
    if not isinstance(versions, Mapping) or not all(isinstance(v, (str, int, float)) for v in versions.values()):
        raise CorruptRowError(f"checkpoint {doc.get('id')!r}: channel_versions is not a mapping of channel to version")
    return [(ch, version_key(v)) for ch, v in versions.items()]


def absent_channels(doc: Mapping[str, Any]) -> frozenset[str]:
    """The channels a stored checkpoint doc names without having stored or inherited their
    version (``ABSENT``, written by ``put``): each may have no blob."""
    found = doc.get(ABSENT)
    if found is None:
        return frozenset()
    if not isinstance(found, list) or not all(isinstance(ch, str) for ch in found):
        raise CorruptRowError(f"checkpoint {doc.get('id')!r}: {ABSENT} is not a list of channels")
    return frozenset(found)


def channel_values(
    serde: SerializerProtocol,
    blobs: Mapping[tuple[str, str, str, str], codec.Resolved],
    thread_id: str,
    checkpoint_ns: str,
    pairs: Iterable[tuple[str, str]],
    checkpoint_id: str | None = None,
    absent: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The decoded values of a checkpoint's (channel, version key) ``pairs`` from ``blobs``
    (``ops.fetch_blobs`` output); an empty channel has no value, nor has one of ``absent``
    (``absent_channels``) without a blob.

    Raises CorruptRowError when any other blob the checkpoint names is missing: the
    checkpoint would otherwise load without that channel, and a graph resumed from it
    would silently start that channel over."""
    values: dict[str, Any] = {}
    for channel, version in pairs:
        found = blobs.get((thread_id, checkpoint_ns, channel, version))
        if found is None and channel in absent:
            continue
        if found is None:
            raise CorruptRowError(
                f"checkpoint ({thread_id!r}, {checkpoint_ns!r}, {checkpoint_id!r}) names blob ({channel!r}, {version!r}), "
                "which is not stored; `threadline fsck` reports it, `threadline rebuild --apply` can recover it"
            )
        if found[0] == codec.EMPTY:
            continue
        row = blob_row_ref(thread_id, checkpoint_ns, channel, version)
        values[channel] = codec.load(serde, found, row)
        if channel == TASKS:
            sends_list(values[channel], row)
    return values


def load_write(serde: SerializerProtocol, w: Sequence[Any], bc: codec.BlobCodec = codec.PLAIN) -> Any:
    """The value of a write row (``WRITE_COLUMNS``), its seal checked."""
    return bc.load(serde, write_row_ref(w[0], w[1], w[2], w[3], w[4], w[5]), w[7], w[8])


def check_row(row: Sequence[Any], doc: Any, metadata: Any, bc: codec.BlobCodec = codec.PLAIN) -> None:
    """CorruptRowError (EncryptionError) unless a checkpoint row (``CHECKPOINT_COLUMNS`` or
    ``CHECKPOINT_ROW``: its checksum last) matches its checksum; ``doc`` and ``metadata`` parsed."""
    if isinstance(row[-1], str) and row[-1].startswith("x3:") and isinstance(row[4], str) and isinstance(row[5], str):
        doc, metadata = row[4], row[5]  # an x3 checksum covers the JSON texts as stored: check those
    bc.check_checkpoint(row[-1], (row[0], row[1], row[2]), row[3], doc, metadata)


def to_tuple(
    serde: SerializerProtocol,
    row: Sequence[Any],
    doc: dict[str, Any],
    metadata: dict[str, Any],
    blobs: Mapping[tuple[str, str, str, str], codec.Resolved],
    writes: Iterable[Sequence[Any]],
    parent_sends: Sequence[Sequence[Any]] = (),
    bc: codec.BlobCodec = codec.PLAIN,
) -> CheckpointTuple:
    """Assemble a CheckpointTuple from its checkpoint row, its blobs and its writes.

    ``row`` is ``CHECKPOINT_COLUMNS`` (or ``CHECKPOINT_ROW``), checked against its checksum;
    ``blobs`` maps (thread_id, checkpoint_ns, channel, version) → the value as
    ``codec.resolve`` reconstructs it; ``writes`` are write rows (``WRITE_COLUMNS``)
    already in ``writes_sort_key`` order; ``parent_sends``, for a checkpoint of
    LangGraph < v4 (``needs_parent_sends``), the parent's TASKS write rows in the order
    of the official PostgresSaver (task_path, task_id, idx). ``bc`` opens sealed values.
    """
    thread_id, ns, cid, parent = row[0], row[1], row[2], row[3]
    check_row(row, doc, metadata, bc)
    values = channel_values(serde, blobs, thread_id, ns, blob_pairs(doc), cid, absent_channels(doc))
    checkpoint = {k: v for k, v in doc.items() if k not in _DOC_ONLY}
    if NULLS in doc or EMPTIES in doc or SCALARS in doc:
        checkpoint["channel_versions"] = read_back(doc, checkpoint.get("channel_versions", {}), values)
    checkpoint["channel_values"] = values
    if SENDS in doc:
        sends = stored_sends(doc, (thread_id, ns, cid))
        row = sends_ref(thread_id, ns, cid)
        checkpoint["pending_sends"] = sends_list(bc.load(serde, row, *sends), f"the pending_sends of {row}") if sends is not None else []
    if parent_sends:
        # LangGraph < v4 kept a step's Send packets as the parent's TASKS writes; like the
        # official PostgresSaver, hand them to the checkpoint as the TASKS channel.
        versions = checkpoint.setdefault("channel_versions", {})
        values[TASKS] = [load_write(serde, w, bc) for w in parent_sends]
        versions[TASKS] = max(versions.values()) if versions else next_version(None)
    pending = [(w[3], w[5], load_write(serde, w, bc)) for w in writes]
    return CheckpointTuple(
        config=config_of(thread_id, ns, cid),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=metadata,  # type: ignore[arg-type]
        parent_config=config_of(thread_id, ns, parent) if parent else None,
        pending_writes=pending,
    )
