"""List/dict deltas: writing a value as an extension of its base, and reading it back.

``make_delta`` (decide and build a delta row), ``is_delta``, ``resolve`` (follow
a ``base_version`` chain and reconstruct a version, checking count, length and
CRC-32) and ``load`` (deserialize a resolved value). The row format is described
in the package docstring (``threadline.codec``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.codec.containers import DICT, KEEP, LIST, Container, Extended, _header, _pairs, container, split
from threadline.codec.copies import NotCopyable, fresh, private
from threadline.codec.tags import DELTA_DICT, DELTA_LIST, DELTA_MAX_RATIO, DELTA_REF, EMPTY, decode, decompress
from threadline.errors import CorruptRowError

_HEADER = struct.Struct("<BHIQII")  # format, depth, count, body length, crc32, chain bytes
_FORMAT = 1
_MAX_U32 = 0xFFFFFFFF


def _merge(count: int, body: bytes, delta_count: int, delta_body: bytes) -> tuple[int, bytes]:
    """Dict delta: the base's pairs in order (changed ones replaced), then the new pairs."""
    changes = _pairs(delta_body, delta_count)
    if not changes:
        return count, body
    by_key = {k: delta_body[s:e] for k, s, e in changes}
    parts = [by_key.pop(k) if k in by_key else body[s:e] for k, s, e in _pairs(body, count)]
    added = [delta_body[s:e] for k, s, e in changes if k in by_key]
    return count + len(added), b"".join(parts + added)


def chain_limit(max_depth: int, piece_bytes: int, body_len: int) -> int:
    """How many deltas a chain may hold for a value of ``body_len`` bytes: K (``max_depth``),
    and with ``piece_bytes`` one per that many bytes of the value."""
    return min(max_depth, body_len // piece_bytes) if piece_bytes > 0 else max_depth


def make_delta(
    base: Container, new: Container, *, max_depth: int, max_ratio: float = DELTA_MAX_RATIO, piece_bytes: int = 0
) -> tuple[str, bytes, Container] | None:
    """``(tag prefix, delta payload, new with its chain depth)`` storing ``new`` as an extension of ``base``.

    None when ``new`` does not extend ``base`` by content, or a snapshot is due
    (chain depth K, or, with ``piece_bytes``, more than one delta per that many bytes of
    the value; a delta larger than ``max_ratio`` of the value; deltas since the last
    snapshot adding up to more than ``2 * max_ratio`` of the value).
    """
    new_len = new.body_len
    if base.kind != new.kind or base.depth + 1 > chain_limit(max_depth, piece_bytes, new_len) or new.count < base.count:
        return None
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
    return tag.startswith((DELTA_LIST, DELTA_DICT, DELTA_REF))


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
        if row_tag.startswith(DELTA_REF):
            raise CorruptRowError(f"{here}: a delta on pending writes; read it through storage.ops.fetch_blobs")
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


def _extended(serde: SerializerProtocol, ext: Extended, where: str) -> list | None:
    """The kept list of an ``Extended`` value: its base's items and the new items decoded
    from their bytes as a read would; None (decode the whole value) when they do not decode
    as a list. The new items are kept as decoded, not copied: nothing else holds them yet
    (``load`` hands out copies, and falls back to a whole decode where one cannot be made)."""
    out = list(ext.base)
    for tail in ext.tails:
        try:
            items = decode(serde, "msgpack", tail, where)
        except CorruptRowError:
            return None
        if type(items) is not list:
            return None
        out += items
    return out


def load(serde: SerializerProtocol, resolved: Resolved, where: str) -> Any:
    """Deserialize a resolved value (``resolve``'s result; ``EMPTY`` is the caller's to skip).

    A container with a kept decoded value (``Container.decoded``) gives a fresh copy of it
    instead (``copies``), an ``Extended`` one decoding only the new items first; one marked
    ``KEEP`` keeps a private copy of what is decoded."""
    tag, data, value = resolved
    if value is not None:
        if type(value.decoded) is Extended:
            value.decoded = _extended(serde, value.decoded, where)
        if value.kept:
            try:
                return fresh(value.decoded)
            except (NotCopyable, RecursionError):
                value.decoded = None  # new items holding what ``copies`` cannot copy: decoded every time
        data = value.serialized() if data is None else data
    out = decode(serde, tag, data, where)
    if value is not None and value.decoded is KEEP:
        value.decoded = private(out)
    return out
