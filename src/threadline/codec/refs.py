"""List deltas that reference pending writes instead of holding their items (``DELTA_REF``).

In a LangGraph loop the items a superstep appends to a list channel are the items of the
pending writes its tasks stored against the parent checkpoint, in LangGraph's write order:
a ``messages`` channel appends a list write's items, and a ``Topic`` channel such as
``__pregel_tasks`` holds the values written to it (each ``Send`` a task wrote, which with
``create_react_agent`` carries the whole state). Storing them again in the channel's value
would store each of them twice, so such a delta is stored as a reference to those writes:

* type ``delta-ref:msgpack`` (``+zstd`` when large, then sealed ``+sum`` / ``+gcm``) with
  ``blobs.base_version`` naming its base, as a ``delta-list`` row; a ``Topic`` value is a
  delta on the empty list the channel held before (``BlobCodec.encode_blob``);
* bytes: the 23-byte delta header of a ``delta-list`` row (format, chain depth, item
  count, body length and CRC-32 of the reconstructed value, chain bytes), then the UTF-8
  JSON ``[checkpoint_id, [[task_id, idx], …]]``: the writes, in the blob row's own
  thread_id, checkpoint_ns and channel, whose items (``write_items``: a msgpack array's
  items, any other msgpack value itself, as LangGraph's channels append them) are the
  appended items in that order.

``make_ref`` builds one when the delta's items are exactly those of the candidate
writes, known by their length and xxh3-128 (``item_digest``: a saver remembers that
much of each write it stored, not its bytes, so a large ``Send`` costs its cache no more
than a small one); ``ref_of`` reads one back (``ref_in``: from a stored row's opened type
and bytes); ``splice`` turns it and the writes' item bytes into the equivalent
``delta-list`` payload, which ``deltas.resolve`` checks (count, length
and CRC-32) like any delta. ``storage.ops.read`` fetches the writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import xxhash

from threadline.codec.containers import LIST, _header, split
from threadline.codec.deltas import _HEADER
from threadline.codec.seal import _DIGEST, SUM
from threadline.codec.tags import DELTA_REF, decompress
from threadline.errors import CorruptRowError

WriteRef = tuple[str, int]  # (task_id, idx) of a pending write
Digest = tuple[int, bytes]  # ``item_digest``: (length, xxh3-128) of a write's item bytes
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode  # ``json.dumps``' text, its encoder built once
Candidate = tuple[str, int, Digest]  # (task_id, idx, the digest of its items: ``write_items``)
# A checksummed, uncompressed reference row's type, and where its JSON starts in its sealed bytes
# (0-based: after the seal's head and checksum and the delta header). A server-side read (Postgres's
# get statement, Redis's GET script) takes the checkpoint_id from there, unchecked, only to fetch
# the writes it names in the same round trip; the reader checks the seal and parses the row.
PLAIN_REF_TYPE = DELTA_REF + "msgpack" + SUM
REF_JSON_AT = 2 + _DIGEST + _HEADER.size


def write_items(tag: str, raw: bytes) -> tuple[int, memoryview] | None:
    """``(item count, item bytes)`` a pending write's serialized value appends to a list channel:
    a msgpack array's items, any other msgpack value as one item; None for other serializer tags."""
    if tag != "msgpack":
        return None
    found = split(raw)
    if found is not None and found[0] == LIST:
        return found[1], memoryview(raw)[found[2]:]
    return 1, memoryview(raw)


def item_digest(items: bytes | memoryview) -> Digest:
    """``(length, xxh3-128)`` of item bytes: what ``make_ref`` compares a delta's items with. Held in
    memory only, never stored; a reference is checked when read like any delta (count, length and
    CRC-32 of the value it rebuilds), so a fast unkeyed hash serves."""
    return len(items), xxhash.xxh3_128_digest(items)


def _all_of(items: memoryview, writes: Sequence[Candidate]) -> bool:
    """Whether ``items`` are the items of every one of ``writes``, back to back in their order."""
    if len(items) != sum(w[2][0] for w in writes):
        return False
    at = 0
    for _, _, (n, digest) in writes:
        if item_digest(items[at : at + n])[1] != digest:
            return False
        at += n
    return True


def make_ref(payload: bytes, checkpoint_id: str, writes: Sequence[Candidate]) -> bytes | None:
    """A ``DELTA_REF`` payload for a ``delta-list`` ``payload`` whose appended items are exactly
    the items of ``writes`` (all of them in order, or one of them), or None."""
    found = split(payload[_HEADER.size:])
    if found is None or found[0] != LIST or not writes:
        return None
    items = memoryview(payload)[_HEADER.size + found[2]:]
    if len(writes) > 1 and _all_of(items, writes):  # one write: the test below, hashing once
        chosen = list(writes)
    else:
        mine = item_digest(items) if any(w[2][0] == len(items) for w in writes) else None
        chosen = [w for w in writes if w[2] == mine][:1]
    if not chosen:
        return None
    refs = _COMPACT([checkpoint_id, [[task_id, idx] for task_id, idx, _ in chosen]])
    return payload[: _HEADER.size] + refs.encode()


def ref_of(payload: bytes, where: object) -> tuple[bytes, str, list[WriteRef]]:
    """``(delta header, checkpoint_id, [(task_id, idx), …])`` of a ``DELTA_REF`` payload.

    Raises CorruptRowError for a payload that is not one."""
    try:
        found = json.loads(bytes(payload[_HEADER.size:]).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptRowError(f"{where}: its pending-write reference is not JSON") from exc
    ok = (
        len(payload) > _HEADER.size
        and isinstance(found, list) and len(found) == 2 and isinstance(found[0], str)
        and isinstance(found[1], list) and found[1]
        and all(isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) and type(r[1]) is int for r in found[1])
    )
    if not ok:
        raise CorruptRowError(f"{where}: malformed pending-write reference")
    return bytes(payload[: _HEADER.size]), found[0], [(r[0], r[1]) for r in found[1]]


def ref_in(tag: str, data: bytes | None, where: object) -> tuple[bytes, str, list[WriteRef]]:
    """``ref_of`` of a ``DELTA_REF`` row's opened (unsealed) type and bytes, decompressed first.

    Raises CorruptRowError as ``ref_of`` and ``tags.decompress``."""
    return ref_of(decompress(tag[len(DELTA_REF):], data, where)[1], where)


def splice(header: bytes, items: Sequence[tuple[int, memoryview | bytes]]) -> bytes:
    """The ``delta-list`` payload of a reference: its ``header``, then the referenced writes'
    items (``(count, item bytes)`` each, in reference order) as one msgpack array."""
    return b"".join([header, _header(LIST, sum(n for n, _ in items)), *(bytes(body) for _, body in items)])
