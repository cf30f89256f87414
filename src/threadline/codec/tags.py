"""Type tags, zstd compression, and encode/decode of self-contained rows.

The tag constants (``EMPTY``, ``ZSTD``, ``DELTA_LIST``, ``DELTA_DICT``, ``DELTA_REF``), the
measured defaults for compression and deltas, ``encode`` (a value to the
serializer's ``(type, bytes)``), ``compress``/``decompress`` and ``decode`` (a
stored, non-delta ``(type, bytes)`` pair back to a value), and ``holds_delta_snapshot`` (whether
such a pair is a LangGraph ``_DeltaSnapshot``, read from its first bytes).
"""

from __future__ import annotations

import os
from typing import Any

import ormsgpack
import zstandard
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline import limits
from threadline.codec import dictionary
from threadline.codec.pool import Pool
from threadline.codec.where import unserializable
from threadline.errors import CorruptRowError, ValueTooLargeError

EMPTY = "empty"
ZSTD = "+zstd"
DELTA_LIST = "delta-list:"
DELTA_DICT = "delta-dict:"
DELTA_REF = "delta-ref:"  # a list delta whose items are the parent's pending writes (``codec.refs``)
_REFUSED = frozenset({"pickle"})

# Defaults, chosen by measurement (benchmarks/RESULTS.md, "Choosing the defaults").
COMPRESS_MIN_BYTES = 128  # compress a stored value of at least this many bytes …
COMPRESS_MAX_RATIO = 0.9  # … when zstd makes it at most 90 % of its size
ZSTD_LEVEL = 3
DICTIONARY_MAX_BYTES = 64 << 10  # the dictionary (codec.dictionary) for smaller values; larger ones compress better without
DELTA_MAX_DEPTH = 64  # K: a full snapshot at least every K deltas
DELTA_MIN_BYTES = 256  # values smaller than this are always snapshots
DELTA_MAX_RATIO = 0.5  # a delta larger than this fraction of its value is written as a snapshot
DELTA_PIECE_BYTES = 1024  # a chain holds at most one delta per this many bytes of its value


def check_size(size: int, what: str = "value", channel: str | None = None, task_id: str | None = None) -> None:
    """ValueTooLargeError (with ``channel``, ``task_id``, ``size`` and the limit as attributes) when a
    serialized value of ``size`` bytes exceeds ``max_value_bytes``."""
    top = limits.current().max_value_bytes
    if size > top:
        raise ValueTooLargeError(f"{what} serializes to {size} bytes, more than max_value_bytes={top} (threadline.limits)",
                                 channel=channel, task_id=task_id, size=size, limit=top)


def encode(serde: SerializerProtocol, value: Any, channel: str | None = None, task_id: str | None = None) -> tuple[str, bytes]:
    """Serialize one value (of ``channel``; a pending write of ``task_id``) to the serializer's
    ``(type, bytes)``; refuses to produce a pickle.

    Raises SerializationError (a TypeError) naming the channel, the path in the value and the
    type the serializer refused (found only then: ``codec.where``); ValueTooLargeError beyond
    ``threadline.limits`` ``max_value_bytes``."""
    try:
        tag, data = serde.dumps_typed(value)
    except TypeError as exc:  # the serializer's "cannot serialize"; other errors (a faulty serializer's) stay as raised
        raise unserializable(serde, value, exc, channel, task_id) from exc
    if tag in _REFUSED:
        raise TypeError(f"threadline does not store {tag!r} payloads; value of type {type(value).__name__} is not serializable")
    check_size(len(data), f"a value of type {type(value).__name__}", channel, task_id)
    return tag, data


# --- compression -------------------------------------------------------------

_COMPRESSORS: dict[tuple[int, bool], Pool[zstandard.ZstdCompressor]] = {}  # (level, with the dictionary)
_DECOMPRESSORS = {
    0: Pool(zstandard.ZstdDecompressor),
    dictionary.DICT_ID: Pool(lambda: zstandard.ZstdDecompressor(dict_data=dictionary.load())),
}  # the dictionary a frame needs (0: none) → decompressors


def _compressors(level: int, size: int) -> Pool[zstandard.ZstdCompressor]:
    """The compressors at ``level`` for ``size`` bytes: with the dictionary below ``DICTIONARY_MAX_BYTES``."""
    key = (level, size < DICTIONARY_MAX_BYTES)
    found = _COMPRESSORS.get(key)
    if found is None:
        d = dictionary.load(level) if key[1] else None
        found = _COMPRESSORS.setdefault(key, Pool(lambda: zstandard.ZstdCompressor(level=level, dict_data=d, write_content_size=True)))
    return found


def compress(tag: str, data: bytes, *, min_bytes: int = COMPRESS_MIN_BYTES, level: int = ZSTD_LEVEL) -> tuple[str, bytes]:
    """``(tag + "+zstd", zstd(data))`` when ``data`` has at least ``min_bytes`` bytes and
    shrinks to at most ``COMPRESS_MAX_RATIO`` of its size; otherwise ``(tag, data)`` unchanged.

    Below ``DICTIONARY_MAX_BYTES`` the frame is compressed with threadline's dictionary
    (``codec.dictionary``) and names it."""
    if min_bytes < 0 or len(data) < min_bytes or tag.endswith(ZSTD):
        return tag, data
    packed = _compressors(level, len(data)).lend(lambda c: c.compress(data))
    if len(packed) > len(data) * COMPRESS_MAX_RATIO:
        return tag, data
    return tag + ZSTD, packed


def decompress(tag: str, data: bytes | None, where: object) -> tuple[str, bytes]:
    """Undo ``compress``: ``(tag without "+zstd", plain bytes)``. Plain rows pass through.

    A frame must state its content size (``compress`` always writes it), at most
    ``threadline.limits`` ``max_value_bytes``, checked before anything is allocated
    (a decompression bomb), need no dictionary or threadline's (``codec.dictionary``), and
    be followed by nothing.
    """
    raw = b"" if data is None else bytes(data)
    if not tag.endswith(ZSTD):
        return tag, raw
    try:
        frame = zstandard.get_frame_parameters(raw)
        size = frame.content_size
        if size >= zstandard.CONTENTSIZE_ERROR:
            raise CorruptRowError(f"{where}: {tag!r} frame does not state its content size")
        top = limits.current().max_value_bytes
        if size > top:
            raise CorruptRowError(
                f"{where}: {tag!r} frame declares {size} bytes, more than the limit max_value_bytes={top} (threadline.limits)"
            )
        if frame.dict_id not in (0, dictionary.DICT_ID):
            raise CorruptRowError(f"{where}: {tag!r} frame needs zstd dictionary {frame.dict_id}, which threadline does not have")
        return tag[: -len(ZSTD)], _DECOMPRESSORS[frame.dict_id].lend(lambda d: d.decompress(raw, allow_extra_data=False))
    except zstandard.ZstdError as exc:
        raise CorruptRowError(f"{where}: {tag!r} payload is not a readable zstd frame ({exc})") from exc


# A per-process end marker: a msgpack value followed by it parses as a 2-item array
# whose second item is the marker only when the value's bytes end exactly where it ends.
_MARK = os.urandom(16)
_END = ormsgpack.packb(_MARK)


def _unpack_exact(ext_hook: Any, raw: bytes, where: object) -> Any:
    """A msgpack decode with LangGraph's serializer's ``ext_hook``, refusing bytes after the value
    (msgpack itself ignores them)."""
    found = ormsgpack.unpackb(b"\x92" + raw + _END, ext_hook=ext_hook, option=ormsgpack.OPT_NON_STR_KEYS)
    if len(found) != 2 or found[1] != _MARK:
        raise CorruptRowError(f"{where}: 'msgpack' payload has bytes after its value")
    return found[0]


def decode(serde: SerializerProtocol, tag: str, data: bytes | None, where: object) -> Any:
    """Deserialize an opened (unsealed, ``codec.seal.open_sealed``), self-contained ``(type,
    bytes)`` pair, compressed or not.

    ``where`` names the row (table and key) for the error message. Delta rows are
    not self-contained: read blobs through ``storage.ops`` (``fetch_blobs`` /
    ``load_tuples``), which resolves them against their base. Strict about the bytes:
    a ``null`` holds none, a ``msgpack`` value ends where its bytes end.

    Raises:
        CorruptRowError: unknown, refused or delta tag, or bytes that cannot be read.
    """
    if tag.startswith((DELTA_LIST, DELTA_DICT, DELTA_REF)):
        raise CorruptRowError(f"{where}: {tag!r} row is a delta on its base_version; read it through storage.ops.fetch_blobs")
    tag, raw = decompress(tag, data, where)
    if tag in _REFUSED:
        raise CorruptRowError(f"{where}: refusing to load a {tag!r} payload")
    if tag == "null" and raw:
        raise CorruptRowError(f"{where}: a 'null' payload holds {len(raw)} bytes")
    try:
        # LangGraph's JsonPlusSerializer (and threadline's, which derive from it) has an ext hook:
        # looked up rather than isinstance-checked, so this module loads no LangGraph serializer
        if tag == "msgpack" and (hook := getattr(serde, "_unpack_ext_hook", None)) is not None:
            return _unpack_exact(hook, raw, where)
        return serde.loads_typed((tag, raw))
    except CorruptRowError:
        raise
    except Exception as exc:  # the serializer raises many types; all mean "unreadable row"
        raise CorruptRowError(f"{where}: cannot decode {tag!r} payload ({type(exc).__name__}: {exc})") from exc


# A msgpack ext value's header: its first byte, then where its type code is (fixext 1–16, ext 8/16/32).
_EXT_CODE_AT = {0xD4: 1, 0xD5: 1, 0xD6: 1, 0xD7: 1, 0xD8: 1, 0xC7: 2, 0xC8: 3, 0xC9: 5}


def holds_delta_snapshot(tag: str, data: bytes | None, where: object) -> bool:
    """Whether an opened (``codec.seal.open_sealed``), self-contained ``(type, bytes)`` pair holds a
    LangGraph ``_DeltaSnapshot``: a ``DeltaChannel``'s stored snapshot, which LangGraph's serializer
    writes as a msgpack ext value of type ``EXT_DELTA_SNAPSHOT`` (checked on the header; nothing is
    decoded). False for delta rows and other serializers' tags. CorruptRowError as ``decompress``."""
    if tag.startswith((DELTA_LIST, DELTA_DICT, DELTA_REF)) or tag.removesuffix(ZSTD) != "msgpack":
        return False
    from langgraph.checkpoint.serde.jsonplus import EXT_DELTA_SNAPSHOT  # loaded by maintenance only

    raw = decompress(tag, data, where)[1]
    at = _EXT_CODE_AT.get(raw[0]) if raw else None
    return at is not None and len(raw) > at and raw[at] == EXT_DELTA_SNAPSHOT
