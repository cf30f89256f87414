"""Blob codec: LangGraph's serializer plus threadline's type tags, compression and delta encoding.

Every stored value (a channel blob, a pending write) is a ``(type, bytes)`` pair.
The type tag says exactly how the bytes are encoded, so every row ever written
stays readable:

=============================  ==============================================================
``msgpack``, ``json``, …       the serializer's own ``(type, bytes)`` (the serializer's tag)
``null``                       ``None`` (serializer tag, empty bytes)
``empty``                      the channel has a version but no value (LangGraph's "empty
                               channel", ``DeltaChannel`` between snapshots); bytes NULL
``<tag>+zstd``                 the bytes of ``<tag>``, zstd-compressed (one frame with its
                               content size)
``delta-list:msgpack``         a list that extends the value of ``base_version``: the
                               appended items (see below)
``delta-dict:msgpack``         a dict that extends the value of ``base_version``: the added
                               and changed key/value pairs (see below)
``delta-…:msgpack+zstd``       the same, zstd-compressed
=============================  ==============================================================

Delta rows (seed 000 "方式 B"). A list or dict channel value whose serialized
form extends the value its channel had in the parent checkpoint is stored as the
extension only, with ``blobs.base_version`` naming the base. The decision is
made on the serialized bytes, never on object identity, so a value mutated in
place is compared by content and still round-trips exactly:

* a msgpack array is a header (the item count) followed by the items'
  encodings back to back; a map is a header followed by key, value, key,
  value, …. So the new list extends its base exactly when the base's item bytes
  are a byte prefix of the new item bytes, and the delta is the remaining
  items, stored as a msgpack array. Reconstruction concatenates item bytes and
  writes a new header: the result is byte-for-byte the snapshot the serializer
  would have produced, and it is decoded by the serializer like any snapshot.
* a dict delta holds the pairs whose key is new or whose value bytes changed,
  as a msgpack map. Reconstruction walks the base's pairs in order, replacing
  the changed ones, then appends the new ones; a delta is only written when
  that merge reproduces the new value's bytes exactly (checked at write time).
  Removed keys or a different key order mean a snapshot.

A delta row's bytes are a 23-byte header then the msgpack container: format
(1 byte, ``1``), chain depth (deltas since the last snapshot, this one
included), item count, body length and CRC-32 of the reconstructed value's item
bytes, and the delta bytes accumulated since the last snapshot. Reconstruction
checks count, length and CRC, so a delta applied to the wrong base fails with
``CorruptRowError`` instead of returning a wrong value.

Bounded reconstruction: a snapshot is written instead of a delta when the chain
would exceed ``max_depth`` deltas (K), when the deltas accumulated since the
last snapshot would exceed the value's own size, or when the delta would not be
clearly smaller than the value.

Deserialization is strict by default (``threadline.serde``: no pickle; stored
constructors only for LangGraph's safe types, explicitly allowed types, and data
classes already imported by the process). A ``pickle`` tag is refused, never loaded. A
tampered delta or compressed row can fail to load (``CorruptRowError``) but is
only ever handed to the same strict serializer.
"""

from __future__ import annotations

import marshal
import struct
import threading
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
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

LIST, DICT = 1, 2
_HEADER = struct.Struct("<BHIQII")  # format, depth, count, body length, crc32, chain bytes
_FORMAT = 1
_MAX_U32 = 0xFFFFFFFF


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
    not self-contained: read blobs through ``engine.ops`` (``fetch_blobs`` /
    ``load_tuples``), which resolves them against their base.

    Raises:
        CorruptRowError: unknown, refused or delta tag, or bytes that cannot be read.
    """
    if tag.startswith((DELTA_LIST, DELTA_DICT)):
        raise CorruptRowError(f"{where}: {tag!r} row is a delta on its base_version; read it through engine.ops.fetch_blobs")
    tag, raw = decompress(tag, data, where)
    if tag in _REFUSED:
        raise CorruptRowError(f"{where}: refusing to load a {tag!r} payload")
    try:
        return serde.loads_typed((tag, raw))
    except Exception as exc:  # the serializer raises many types; all mean "unreadable row"
        raise CorruptRowError(f"{where}: cannot decode {tag!r} payload ({type(exc).__name__}: {exc})") from exc


# --- msgpack containers --------------------------------------------------------


class Container:
    """A serialized list or dict: its kind, item count, and ``data``, the whole msgpack
    value (header then items), whose items start at ``offset``.

    The item bytes are never copied out: prefix checks and CRCs work on ``data``
    at ``offset``. ``crc`` is ``zlib.crc32`` of the item bytes, computed on first
    use (a delta extends its base's CRC instead of reading the whole value);
    ``depth`` is the number of deltas since the last snapshot of the row it was
    read from or written as (0: a snapshot); ``chain`` the delta bytes
    accumulated since that snapshot.
    """

    __slots__ = ("kind", "count", "data", "offset", "_crc", "depth", "chain", "fps")

    def __init__(
        self,
        kind: int,
        count: int,
        data: bytes,
        offset: int,
        crc: int | None = None,
        depth: int = 0,
        chain: int = 0,
        fps: bytes | None = None,
    ) -> None:
        self.kind, self.count, self.data, self.offset = kind, count, data, offset
        self._crc, self.depth, self.chain = crc, depth, chain
        self.fps = fps  # a list's item fingerprints (see ``fingerprints``), when known

    @property
    def body_len(self) -> int:
        return len(self.data) - self.offset

    @property
    def nbytes(self) -> int:
        """Bytes held (the value, and about as much again for item fingerprints)."""
        return len(self.data) + (len(self.fps) if self.fps is not None else 0)

    def body(self) -> memoryview:
        """The item bytes (a view: no copy)."""
        return memoryview(self.data)[self.offset:]

    @property
    def crc(self) -> int:
        if self._crc is None:
            self._crc = zlib.crc32(self.body())
        return self._crc

    def serialized(self) -> bytes:
        """The msgpack bytes of the whole value (what the serializer produced or would produce)."""
        return self.data

    def with_chain(self, depth: int, chain: int) -> Container:
        return Container(self.kind, self.count, self.data, self.offset, self._crc, depth, chain, self.fps)

    def __repr__(self) -> str:
        return f"Container(kind={self.kind}, count={self.count}, bytes={self.body_len}, depth={self.depth}, chain={self.chain})"


def _header(kind: int, count: int) -> bytes:
    if kind == LIST:
        if count < 16:
            return bytes((0x90 | count,))
        return b"\xdc" + count.to_bytes(2, "big") if count < 0x10000 else b"\xdd" + count.to_bytes(4, "big")
    if count < 16:
        return bytes((0x80 | count,))
    return b"\xde" + count.to_bytes(2, "big") if count < 0x10000 else b"\xdf" + count.to_bytes(4, "big")


def split(data: bytes) -> tuple[int, int, int] | None:
    """``(kind, count, header length)`` when ``data`` is a msgpack array or map; else None."""
    if not data:
        return None
    b = data[0]
    if 0x90 <= b <= 0x9F:
        return LIST, b & 0x0F, 1
    if 0x80 <= b <= 0x8F:
        return DICT, b & 0x0F, 1
    if b in (0xDC, 0xDE) and len(data) >= 3:
        return (LIST if b == 0xDC else DICT), int.from_bytes(data[1:3], "big"), 3
    if b in (0xDD, 0xDF) and len(data) >= 5:
        return (LIST if b == 0xDD else DICT), int.from_bytes(data[1:5], "big"), 5
    return None


def container(data: bytes, *, depth: int = 0, chain: int = 0) -> Container | None:
    """The ``Container`` of serialized msgpack ``data`` (not copied), or None when it is not a list/dict."""
    found = split(data)
    if found is None:
        return None
    kind, count, hl = found
    return Container(kind, count, bytes(data), hl, None, depth, chain)


# Byte lengths of the fixed-size msgpack types 0xc0..0xdf (None: variable or invalid).
_FIXED = {0xC0: 1, 0xC2: 1, 0xC3: 1, 0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9,
          0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9, 0xD4: 3, 0xD5: 4, 0xD6: 6, 0xD7: 10, 0xD8: 18}
# Variable-size types: (bytes of the length field, extra fixed bytes after it, items per length unit).
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1),
          0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0)}
_NESTED = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}


def skip(buf: bytes, pos: int, n: int = 1) -> int:
    """Position after ``n`` consecutive msgpack objects starting at ``pos``.

    Raises ValueError when the bytes end early or hold the reserved byte 0xc1.
    """
    end = len(buf)
    while n:
        if pos >= end:
            raise ValueError("msgpack data ends inside an object")
        b = buf[pos]
        n -= 1
        if b <= 0x7F or b >= 0xE0:
            pos += 1
        elif b <= 0x8F:
            n += 2 * (b & 0x0F)
            pos += 1
        elif b <= 0x9F:
            n += b & 0x0F
            pos += 1
        elif b <= 0xBF:
            pos += 1 + (b & 0x1F)
        elif b in _FIXED:
            pos += _FIXED[b]
        elif b in _SIZED:
            width, extra = _SIZED[b]
            pos += 1 + width + extra + int.from_bytes(buf[pos + 1 : pos + 1 + width], "big")
        elif b in _NESTED:
            width, per = _NESTED[b]
            n += per * int.from_bytes(buf[pos + 1 : pos + 1 + width], "big")
            pos += 1 + width
        else:
            raise ValueError(f"reserved msgpack byte 0x{b:02x} at {pos}")
    if pos > end:
        raise ValueError("msgpack data ends inside an object")
    return pos


def _pairs(body: bytes, count: int) -> list[tuple[bytes, int, int]]:
    """A map body's pairs as (key bytes, pair start, pair end)."""
    out = []
    pos = 0
    for _ in range(count):
        k_end = skip(body, pos)
        v_end = skip(body, k_end)
        out.append((body[pos:k_end], pos, v_end))
        pos = v_end
    if pos != len(body):
        raise ValueError("map body has bytes after its last pair")
    return out


def _merge(count: int, body: bytes, delta_count: int, delta_body: bytes) -> tuple[int, bytes]:
    """Dict delta: the base's pairs in order (changed ones replaced), then the new pairs."""
    changes = _pairs(delta_body, delta_count)
    if not changes:
        return count, body
    by_key = {k: delta_body[s:e] for k, s, e in changes}
    parts = [by_key.pop(k) if k in by_key else body[s:e] for k, s, e in _pairs(body, count)]
    added = [delta_body[s:e] for k, s, e in changes if k in by_key]
    return count + len(added), b"".join(parts + added)


def make_delta(
    base: Container, new: Container, *, max_depth: int, max_ratio: float = DELTA_MAX_RATIO
) -> tuple[str, bytes, Container] | None:
    """``(tag prefix, delta payload, new with its chain depth)`` storing ``new`` as an extension of ``base``.

    None when ``new`` does not extend ``base`` by content, or a snapshot is due
    (chain depth K; a delta larger than ``max_ratio`` of the value; deltas since
    the last snapshot adding up to more than ``2 * max_ratio`` of the value).
    """
    if base.kind != new.kind or base.depth + 1 > max_depth or new.count < base.count:
        return None
    new_len = new.body_len
    if new.kind == LIST:
        # one memcmp, no copy: the base's item bytes are a prefix of the new item bytes
        if not new.data.startswith(base.body(), new.offset):
            return None
        dcount, dbody = new.count - base.count, new.data[new.offset + base.body_len:]
        crc = zlib.crc32(dbody, base.crc)
    else:
        base_body, new_body = bytes(base.body()), bytes(new.body())
        try:
            base_pairs = _pairs(base_body, base.count)
            new_pairs = _pairs(new_body, new.count)
        except ValueError:
            return None
        if [k for k, _, _ in new_pairs[: len(base_pairs)]] != [k for k, _, _ in base_pairs]:
            return None  # a key removed or the order changed: snapshot
        changed = [new_body[s:e] for (_, s, e), (_, bs, be) in zip(new_pairs, base_pairs) if new_body[s:e] != base_body[bs:be]]
        added = [new_body[s:e] for _, s, e in new_pairs[len(base_pairs):]]
        dcount, dbody = len(changed) + len(added), b"".join(changed + added)
        try:
            if _merge(base.count, base_body, dcount, dbody) != (new.count, new_body):
                return None  # keys with equal bytes: the merge would not reproduce the value
        except ValueError:
            return None
        crc = zlib.crc32(new_body)
    payload_len = len(dbody) + 5
    chain = base.chain + payload_len
    if payload_len > new_len * max_ratio or chain > new_len * 2 * max_ratio or chain > _MAX_U32 or new.count > _MAX_U32:
        return None
    depth = base.depth + 1
    header = _HEADER.pack(_FORMAT, depth, new.count, new_len, crc, chain)
    prefix = DELTA_LIST if new.kind == LIST else DELTA_DICT
    return prefix, header + _header(new.kind, dcount) + dbody, Container(new.kind, new.count, new.data, new.offset, crc, depth, chain, new.fps)


def is_delta(tag: str) -> bool:
    """Whether a stored type tag names a delta row (which needs its base_version to be read)."""
    return tag.startswith((DELTA_LIST, DELTA_DICT))


Resolved = tuple  # (serializer tag, bytes or None, Container or None): see ``resolve``


def resolve(
    rows: Mapping[str, tuple[str, bytes | None, str | None]],
    version: str,
    where: str,
    memo: dict[str, Resolved] | None = None,
) -> Resolved:
    """Reconstruct one stored version of a channel from its rows.

    ``rows`` maps the versions of one (thread_id, checkpoint_ns, channel) fetched
    by the chain query to ``(type, bytes, base_version)``. Returns the
    serializer's tag with either the value's bytes or (after deltas) its
    ``Container``: feed it to ``load``. A list delta chain is joined once, not
    copied per link. ``memo`` shares reconstructed versions between calls
    (resolve versions in ascending order to reuse them).

    Raises:
        CorruptRowError: a missing base, a cycle, or a delta that does not
            reproduce its recorded value (count, length and CRC-32 are checked).
    """
    memo = {} if memo is None else memo
    if version in memo:
        return memo[version]
    path: list[str] = []  # newest first: the requested version down to a snapshot or a memoized version
    cur = version
    while cur not in memo:
        row = rows.get(cur)
        if row is None:
            if path:
                raise CorruptRowError(f"{where}: version {path[-1]!r} is a delta on version {cur!r}, which is not stored")
            raise CorruptRowError(f"{where}: version {cur!r} is not stored")
        if len(path) > len(rows):
            raise CorruptRowError(f"{where}: the base_version chain of {version!r} has a cycle")
        path.append(cur)
        if not is_delta(row[0]):
            break
        if row[2] is None:
            raise CorruptRowError(f"{where} version {cur!r}: {row[0]!r} row has no base_version")
        cur = row[2]
    if not is_delta(rows[path[-1]][0]):
        snap = path.pop()
        tag, data, _ = rows[snap]
        memo[snap] = (EMPTY, None, None) if tag == EMPTY else (*decompress(tag, data, f"{where} version {snap!r}"), None)
        if not path:
            return memo[snap]
        base_v = snap
    else:
        base_v = rows[path[-1]][2]  # type: ignore[assignment]
    base_tag, base_raw, base = memo[base_v]
    if base is None:
        base = container(base_raw) if base_tag == "msgpack" and base_raw is not None else None
        if base is None:
            raise CorruptRowError(f"{where}: version {path[-1]!r} is a delta on {base_v!r}, which is not a list or dict")
        memo[base_v] = (base_tag, base_raw, base)
    kind, count, crc, length = base.kind, base.count, base.crc, base.body_len
    parts: list = [base.body()]
    tag = base_tag
    depth = chain = 0
    for v in reversed(path):
        here = f"{where} version {v!r}"
        row_tag, data, _ = rows[v]
        tag, payload = decompress(row_tag[len(DELTA_LIST):], data, here)
        try:
            fmt, depth, want_count, want_len, want_crc, chain = _HEADER.unpack_from(payload)
        except struct.error as exc:
            raise CorruptRowError(f"{here}: delta header is truncated") from exc
        found = split(payload[_HEADER.size:]) if fmt == _FORMAT else None
        if found is None or found[0] != kind or (LIST if row_tag.startswith(DELTA_LIST) else DICT) != kind:
            raise CorruptRowError(f"{here}: delta (format {fmt}) does not match its base")
        dbody = memoryview(payload)[_HEADER.size + found[2]:]
        if kind == LIST:
            parts.append(dbody)
            count += found[1]
            length += len(dbody)
            crc = zlib.crc32(dbody, crc)
        else:
            try:
                count, body = _merge(count, b"".join(parts), found[1], bytes(dbody))
            except ValueError as exc:
                raise CorruptRowError(f"{here}: delta or its base is not a well-formed msgpack map ({exc})") from exc
            parts, length, crc = [body], len(body), zlib.crc32(body)
        if (count, length, crc) != (want_count, want_len, want_crc):
            raise CorruptRowError(
                f"{here}: delta does not reproduce its recorded value (its base_version was rewritten or the row "
                f"tampered with: {count}/{want_count} items, {length}/{want_len} bytes)"
            )
    head = _header(kind, count)
    memo[version] = (tag, None, Container(kind, count, b"".join([head, *parts]), len(head), crc, depth, chain))
    return memo[version]


def load(serde: SerializerProtocol, resolved: Resolved, where: str) -> Any:
    """Deserialize a resolved value (``resolve``'s result; ``EMPTY`` is the caller's to skip)."""
    tag, data, value = resolved
    if data is None and value is not None:
        data = value.serialized()
    return decode(serde, tag, data, where)


# --- item fingerprints: serializing only the new items of a list ------------------------

_CORE = frozenset({dict, list, tuple, str, bytes, int, float, bool, type(None)})
_PLAIN_MODELS: dict[type, bool] = {}


def _plain_model(cls: type) -> bool:
    """A pydantic v2 model whose ``model_dump()`` is a function of its ``__dict__`` and
    ``__pydantic_extra__`` alone: no computed fields, no custom serializers."""
    found = _PLAIN_MODELS.get(cls)
    if found is None:
        try:
            decorators = cls.__pydantic_decorators__  # type: ignore[attr-defined]
            found = (
                hasattr(cls, "model_dump")
                and not cls.model_computed_fields  # type: ignore[attr-defined]
                and not decorators.field_serializers
                and not decorators.model_serializers
            )
        except AttributeError:
            found = False
        _PLAIN_MODELS[cls] = found
    return found


_MODEL_TAGS: dict[type, tuple | None] = {}


def _model_tag(cls: type) -> tuple | None:
    """``(1, module, name)`` for a plain pydantic model class (one shared tuple per class), else None."""
    try:
        return _MODEL_TAGS[cls]
    except KeyError:
        tag = _MODEL_TAGS[cls] = (1, cls.__module__, cls.__name__) if _plain_model(cls) else None
        return tag


def fingerprints(items: Any) -> bytes | None:
    """A content fingerprint of a list's items, or None when an item has none.

    ``marshal`` (format 4) of the items' states as one list: C-speed, exact
    about types (``True``, ``1`` and ``1.0`` differ; ``str`` and dict subclasses
    and other objects are refused), and it keeps dict key order. ``marshal.loads``
    rebuilds exactly what was dumped, so equal fingerprints mean equal content,
    and equal content serializes to equal bytes. An item's encoding depends only
    on the items before it, so "the first n items are unchanged" is a prefix
    comparison of two fingerprints. Unequal fingerprints of equal content (marshal
    also encodes which objects are shared) only cost a whole serialization. A pydantic model's state (no computed fields, no
    custom serializers) is its class's module and name, ``__dict__`` and
    ``__pydantic_extra__`` — what LangGraph's serializer dumps. Never object
    identity: an item mutated in place has a different encoding.
    """
    states: list = []
    append = states.append
    for item in items:
        cls = type(item)
        tag = _MODEL_TAGS.get(cls) if cls not in _CORE else None
        if tag is not None:
            append((tag, item.__dict__, item.__pydantic_extra__))
        elif cls in _CORE:
            append((0, item))
        else:
            tag = _model_tag(cls)
            if tag is None:
                return None
            append((tag, item.__dict__, item.__pydantic_extra__))
    try:
        return marshal.dumps(states, 4)
    except (ValueError, TypeError):  # something marshal cannot hold
        return None


_FP_HEADER = 5  # marshal: the list type byte and a 4-byte count


# --- the codec a saver holds -----------------------------------------------------


@dataclass(slots=True)
class Entry:
    """A stored list/dict value as cached: its container, and its row's type and stored size
    (a put checks both against the base row before writing a delta on it)."""

    value: Container
    stored_type: str
    stored_len: int


def entry_of(resolved: Resolved, stored_type: str, stored_len: int) -> Entry | None:
    """A cache entry for a resolved list/dict value (None for anything else)."""
    tag, data, value = resolved
    if value is None and tag == "msgpack" and data is not None:
        value = container(data)
    return None if value is None else Entry(value, stored_type, stored_len)


class BlobCache:
    """Bounded LRU of (thread_id, checkpoint_ns, channel, version) → ``Entry``, plus
    (thread_id, checkpoint_ns, checkpoint_id) → channel_versions of recent checkpoints.

    Keyed by version, so branches are safe: a version names one value. Thread-safe.
    ``max_bytes`` bounds the item bytes held; ``max_checkpoints`` the versions maps.
    A stale entry can never corrupt data: a put writes a delta only if the base
    row still has the cached type and size, and every delta records the CRC-32
    of the value it reproduces.
    """

    def __init__(self, max_bytes: int = 64 << 20, max_checkpoints: int = 4096) -> None:
        self.max_bytes = max_bytes
        self.max_checkpoints = max_checkpoints
        self._blobs: OrderedDict[tuple, Entry] = OrderedDict()
        self._versions: OrderedDict[tuple, dict[str, str]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Entry | None:
        with self._lock:
            entry = self._blobs.get(key)
            if entry is not None:
                self._blobs.move_to_end(key)
            return entry

    def put(self, key: tuple, entry: Entry) -> None:
        size = entry.value.nbytes
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._blobs.pop(key, None)
            if old is not None:
                self._bytes -= old.value.nbytes
            self._blobs[key] = entry
            self._bytes += size
            while self._bytes > self.max_bytes and self._blobs:
                _, dropped = self._blobs.popitem(last=False)
                self._bytes -= dropped.value.nbytes

    def discard(self, key: tuple) -> None:
        with self._lock:
            old = self._blobs.pop(key, None)
            if old is not None:
                self._bytes -= old.value.nbytes

    def versions(self, key: tuple) -> dict[str, str] | None:
        with self._lock:
            found = self._versions.get(key)
            if found is not None:
                self._versions.move_to_end(key)
            return found

    def put_versions(self, key: tuple, versions: dict[str, str]) -> None:
        with self._lock:
            self._versions[key] = versions
            self._versions.move_to_end(key)
            while len(self._versions) > self.max_checkpoints:
                self._versions.popitem(last=False)

    def forget_threads(self, thread_ids: Any) -> None:
        """Drop everything cached for these threads (after deletes; tidy, never needed for correctness)."""
        tids = set(thread_ids)
        with self._lock:
            for key in [k for k in self._blobs if k[0] in tids]:
                self._bytes -= self._blobs.pop(key).value.nbytes
            for key in [k for k in self._versions if k[0] in tids]:
                del self._versions[key]

    def clear(self) -> None:
        with self._lock:
            self._blobs.clear()
            self._versions.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._blobs)


@dataclass
class BlobCodec:
    """How a saver stores values: compression and delta settings, and its cache.

    * ``compress_min_bytes`` — zstd-compress stored values (blobs and pending
      writes) of at least this many bytes (negative: never compress);
    * ``zstd_level`` — the zstd level;
    * ``max_depth`` — K: at most K deltas between two snapshots of a channel
      value (0 disables delta encoding);
    * ``delta_min_bytes`` — list/dict values smaller than this are snapshots;
    * ``delta_max_ratio`` — a delta larger than this fraction of the value, or a
      chain whose deltas add up to more than twice this fraction, means a snapshot;
    * ``cache`` — recently written and read values, so a put computes its delta
      without reading the base back (on a miss it reads it, in the same transaction);
    * ``fast_lists`` — serialize only the items appended to a list since the
      parent's value, when item fingerprints show the rest unchanged (``encode_list``).
    """

    compress_min_bytes: int = COMPRESS_MIN_BYTES
    zstd_level: int = ZSTD_LEVEL
    max_depth: int = DELTA_MAX_DEPTH
    delta_min_bytes: int = DELTA_MIN_BYTES
    delta_max_ratio: float = DELTA_MAX_RATIO
    cache: BlobCache | None = field(default_factory=BlobCache)
    fast_lists: bool = True
    _checks_left: int = field(default=3, repr=False)

    @property
    def deltas(self) -> bool:
        return self.max_depth > 0 and self.cache is not None

    def pack(self, tag: str, data: bytes) -> tuple[str, bytes]:
        """A self-contained value's stored ``(type, bytes)`` (compressed at or above the threshold)."""
        return compress(tag, data, min_bytes=self.compress_min_bytes, level=self.zstd_level)

    def candidate(self, tag: str, data: bytes, value: Any = None) -> Container | None:
        """The container of a serialized value that may be stored as a delta, or None.

        For a list, its items' fingerprints are kept too, so the next put of the
        channel can serialize only the items appended since (``encode_list``)."""
        if not self.deltas or tag != "msgpack" or len(data) < self.delta_min_bytes:
            return None
        found = container(data)
        if found is not None and found.kind == LIST and self.fast_lists and type(value) is list and len(value) == found.count:
            found.fps = fingerprints(value)
        return found

    def encode_list(self, serde: SerializerProtocol, value: list, base: Entry) -> tuple[bytes, Container] | None:
        """Serialize a list that extends ``base`` by serializing only its new items.

        The decision is content-based: the items the base had must have the same
        ``fingerprints`` now as when the base was written (an item mutated in place,
        replaced or removed has not). Then the base's item bytes are exactly what the
        serializer would write for those items, and the value's bytes are the base's
        items followed by the new items' (a msgpack array is its items back to back).
        Returns the serialized value and its ``Container``, or None (serialize it whole).
        The first encodings of a codec, and every one that starts a new chain, are
        checked against a whole serialization; a mismatch turns this path off.
        """
        fps = base.value.fps
        n = base.value.count
        if not self.fast_lists or fps is None or base.value.kind != LIST or len(value) < n:
            return None
        new_fps = fingerprints(value)
        if new_fps is None or not new_fps.startswith(memoryview(fps)[_FP_HEADER:], _FP_HEADER):
            return None  # an item changed, was replaced or removed, or cannot be fingerprinted
        tail_items = value[n:]
        tag, tail = serde.dumps_typed(tail_items)
        found = split(tail) if tag == "msgpack" else None
        if found is None or found[0] != LIST or found[1] != len(tail_items):
            return None
        head = _header(LIST, len(value))
        data = b"".join((head, base.value.body(), memoryview(tail)[found[2]:]))
        new = Container(LIST, len(value), data, len(head), fps=new_fps)
        if self._checks_left > 0 or base.value.depth + 1 >= self.max_depth:
            self._checks_left -= 1
            full_tag, full = serde.dumps_typed(value)
            if (full_tag, full) != ("msgpack", data):
                self.fast_lists = False
                warnings.warn(
                    "threadline: serializing only a list's new items did not reproduce the serializer's bytes "
                    "for this serializer; every value is serialized whole from now on",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return None
        return data, new

    def encode_blob(
        self, tag: str, data: bytes, new: Container | None, base: Entry | None
    ) -> tuple[str, bytes, bool, Container | None]:
        """Stored ``(type, bytes, is_delta, container with its chain depth)`` of a serialized channel value.

        With ``new`` (from ``candidate``) and the ``base`` entry, a delta when
        ``make_delta`` allows one; otherwise a snapshot (compressed at or above the threshold).
        """
        if new is not None and base is not None:
            found = make_delta(base.value, new, max_depth=self.max_depth, max_ratio=self.delta_max_ratio)
            if found is not None:
                prefix, payload, value = found
                stored_tag, stored = self.pack(prefix + tag, payload)
                return stored_tag, stored, True, value
        stored_tag, stored = self.pack(tag, data)
        return stored_tag, stored, False, new


PLAIN = BlobCodec(max_depth=0, cache=None)
"""Compression only: no deltas, no cache. What ``engine.ops`` uses when a caller passes no codec."""
