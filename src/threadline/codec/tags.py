"""Type tags, zstd compression, and encode/decode of self-contained rows.

The tag constants (``EMPTY``, ``ZSTD``, ``DELTA_LIST``, ``DELTA_DICT``), the
measured defaults for compression and deltas, ``encode`` (a value to the
serializer's ``(type, bytes)``), ``compress``/``decompress`` and ``decode`` (a
stored, non-delta ``(type, bytes)`` pair back to a value).
"""

from __future__ import annotations

import threading
from typing import Any

import zstandard
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.errors import CorruptRowError

EMPTY = "empty"
ZSTD = "+zstd"
DELTA_LIST = "delta-list:"
DELTA_DICT = "delta-dict:"
_REFUSED = frozenset({"pickle"})

# Defaults, chosen by measurement (benchmarks/RESULTS.md, "Choosing the defaults").
COMPRESS_MIN_BYTES = 512  # compress a stored value of at least this many bytes …
COMPRESS_MAX_RATIO = 0.9  # … when zstd makes it at most 90 % of its size
ZSTD_LEVEL = 3
DELTA_MAX_DEPTH = 64  # K: a full snapshot at least every K deltas
DELTA_MIN_BYTES = 256  # values smaller than this are always snapshots
DELTA_MAX_RATIO = 0.5  # a delta larger than this fraction of its value is written as a snapshot
MAX_DECOMPRESSED_BYTES = 1 << 31  # a tampered frame cannot make us allocate more


def encode(serde: SerializerProtocol, value: Any) -> tuple[str, bytes]:
    """Serialize one value to the serializer's ``(type, bytes)``; refuses to produce a pickle."""
    tag, data = serde.dumps_typed(value)
    if tag in _REFUSED:
        raise TypeError(f"threadline does not store {tag!r} payloads; value of type {type(value).__name__} is not serializable")
    return tag, data


# --- compression -------------------------------------------------------------

_local = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    cache = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    c = cache.get(level)
    if c is None:
        c = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return c


def _decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "decompressor", None)
    if d is None:
        d = _local.decompressor = zstandard.ZstdDecompressor()
    return d


def compress(tag: str, data: bytes, *, min_bytes: int = COMPRESS_MIN_BYTES, level: int = ZSTD_LEVEL) -> tuple[str, bytes]:
    """``(tag + "+zstd", zstd(data))`` when ``data`` has at least ``min_bytes`` bytes and
    shrinks to at most ``COMPRESS_MAX_RATIO`` of its size; otherwise ``(tag, data)`` unchanged."""
    if min_bytes < 0 or len(data) < min_bytes or tag.endswith(ZSTD):
        return tag, data
    packed = _compressor(level).compress(data)
    if len(packed) > len(data) * COMPRESS_MAX_RATIO:
        return tag, data
    return tag + ZSTD, packed


def decompress(tag: str, data: bytes | None, where: str) -> tuple[str, bytes]:
    """Undo ``compress``: ``(tag without "+zstd", plain bytes)``. Plain rows pass through."""
    raw = b"" if data is None else bytes(data)
    if not tag.endswith(ZSTD):
        return tag, raw
    try:
        return tag[: -len(ZSTD)], _decompressor().decompress(raw, max_output_size=MAX_DECOMPRESSED_BYTES)
    except zstandard.ZstdError as exc:
        raise CorruptRowError(f"{where}: {tag!r} payload is not a readable zstd frame ({exc})") from exc


def decode(serde: SerializerProtocol, tag: str, data: bytes | None, where: str) -> Any:
    """Deserialize a stored, self-contained ``(type, bytes)`` pair (compressed or not).

    ``where`` names the row (table and key) for the error message. Delta rows are
    not self-contained: read blobs through ``storage.ops`` (``fetch_blobs`` /
    ``load_tuples``), which resolves them against their base.

    Raises:
        CorruptRowError: unknown, refused or delta tag, or bytes that cannot be read.
    """
    if tag.startswith((DELTA_LIST, DELTA_DICT)):
        raise CorruptRowError(f"{where}: {tag!r} row is a delta on its base_version; read it through storage.ops.fetch_blobs")
    tag, raw = decompress(tag, data, where)
    if tag in _REFUSED:
        raise CorruptRowError(f"{where}: refusing to load a {tag!r} payload")
    try:
        return serde.loads_typed((tag, raw))
    except Exception as exc:  # the serializer raises many types; all mean "unreadable row"
        raise CorruptRowError(f"{where}: cannot decode {tag!r} payload ({type(exc).__name__}: {exc})") from exc
