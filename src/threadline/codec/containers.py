"""msgpack containers: a serialized list or dict seen as a header plus item bytes.

``Container`` (the value, its item count and chain bookkeeping), ``split``
(recognize an array/map header), ``container``, ``skip`` (walk msgpack objects)
and ``_pairs`` (a map body's key/value pairs). Everything here works on bytes
and never deserializes.
"""

from __future__ import annotations

import zlib
from typing import Any

LIST, DICT = 1, 2
EMPTY_LIST = b"\x90"  # the msgpack empty array
KEEP = object()  # ``Container.decoded``: keep the value the next load decodes
SEEN = object()  # ``Container.decoded``: decoded once and not kept (the next read keeps it)
DECODED_BYTES = 4  # bytes a decoded value holds per serialized byte (LangChain messages: 3.9, tracemalloc)


class Extended:
    """``Container.decoded`` of a list written as its base's kept list plus new items: the kept
    list and the new items' msgpack arrays (``tails``), decoded by the first read that wants
    the value (``deltas.load``), so a put that appends to a list decodes nothing."""

    __slots__ = ("base", "tails")

    def __init__(self, base: list, tails: tuple[bytes, ...]) -> None:
        self.base, self.tails = base, tails


class Container:
    """A serialized list or dict: its kind, item count, and ``data``, the whole msgpack
    value (header then items), whose items start at ``offset``.

    The item bytes are never copied out: prefix checks and CRCs work on ``data``
    at ``offset``. ``crc`` is ``zlib.crc32`` of the item bytes, computed on first
    use (a delta extends its base's CRC instead of reading the whole value);
    ``depth`` is the number of deltas since the last snapshot of the row it was
    read from or written as (0: a snapshot); ``chain`` the delta bytes
    accumulated since that snapshot; ``decoded`` the value as decoded, kept by the cache
    (``copies.private``: handed out only as copies; ``kept``), or to be decoded from a kept
    list (``Extended``), ``KEEP`` (keep the value the next ``deltas.load`` decodes), ``SEEN``
    (read once, not kept) or None.
    """

    __slots__ = ("kind", "count", "data", "offset", "_crc", "depth", "chain", "fps", "decoded")

    def __init__(
        self,
        kind: int,
        count: int,
        data: bytes,
        offset: int,
        crc: int | None = None,
        depth: int = 0,
        chain: int = 0,
        fps: Any = None,
    ) -> None:
        self.kind, self.count, self.data, self.offset = kind, count, data, offset
        self._crc, self.depth, self.chain = crc, depth, chain
        self.fps = fps  # a list's item ``Fingerprint`` (see ``fingerprinting``), when known
        self.decoded: Any = None

    @property
    def body_len(self) -> int:
        return len(self.data) - self.offset

    @property
    def empty_list(self) -> bool:
        """Whether this is the empty list: a delta base whatever its size (``BlobCodec.candidate``)."""
        return self.kind == LIST and self.count == 0

    @property
    def nbytes(self) -> int:
        """Bytes held: the value, its item fingerprints (about as much again) and a kept decoded value."""
        decoded = DECODED_BYTES * len(self.data) if self.kept else 0
        return len(self.data) + (self.fps.nbytes if self.fps is not None else 0) + decoded

    @property
    def kept(self) -> bool:
        """Whether ``decoded`` holds a kept decoded value (or an ``Extended`` one)."""
        return self.decoded is not None and self.decoded is not KEEP and self.decoded is not SEEN

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

    def bare(self) -> Container:
        """This value's bytes alone: no item fingerprints, nothing decoded."""
        return Container(self.kind, self.count, self.data, self.offset, self._crc, self.depth, self.chain)

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
