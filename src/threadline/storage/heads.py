"""Head rows (storage format 2): a thread namespace's latest channel values, readable in one keyed read.

A put writes, beside its checkpoint and blob rows, one ``heads`` row per (thread_id,
checkpoint_ns): the checkpoint_id it belongs to and, per channel the checkpoint names, the
serializer's ``(tag, bytes)`` of the whole value and the type and size of the channel's blob
row (so the next put can write a delta on it without reading it back). A read of that
checkpoint takes its values from the head row instead of resolving each blob's delta chain;
a read of any other checkpoint ignores it.

The head is derived data: the blob rows stay the record. It is served only for the checkpoint
row it was written with: its checkpoint_id is the one read and it holds that row's checksum
(``codec.seal``: its key, parent, document and metadata), so the versions it describes are the
ones the row names (a version names one value) without storing them (on a 100-node graph they
were three quarters of a head's bytes; the read takes them from the row); an empty channel, most
of a wide graph's, is its name alone. A channel it lacks (too large, or a value this process never
saw) is read from the blobs as before. Heads written before (``head``, each entry with its
version) are read too. Its bytes are bound to the row and
checked: an xxh3-128 checksum, or AES-256-GCM under a keyring (``pack``). A head that
does not open (damaged, or sealed under a key the keyring no longer holds) is not used:
the read falls back to the blobs, which are checked as always; ``threadline fsck`` reports
it. Deleting a thread's checkpoints or re-sealing its values (prune, delete, erase, tier,
rekey) deletes its head rows; the next put writes a new one.

Bounded on long threads: a value over ``VALUE_MAX`` bytes, or one the object store would take
(offload), stays out, and so does any value once the head holds ``HEAD_MAX`` bytes, so a put's
head costs at most that much however long the thread (its long list is then read from its
blob's chain, as before).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import ormsgpack

from threadline import codec
from threadline.codec.seal import Row, seal, xxh3
from threadline.errors import CorruptRowError, EncryptionError

VALUE_MAX = 32 << 10  # bytes of one serialized value a head holds at most
HEAD_MAX = 128 << 10  # bytes of values one head holds at most
TAG = "head2"  # the packed type of a head's payload (``head2+x3``, or sealed ``head2+gcm``; ``+zstd`` is read too)
LEGACY = "head"  # a head whose entries carry their versions (written before ``head2``)
X3 = "+x3"
# An empty channel's entry but its version: serializer tag, bytes, its blob row's type and size (a
# ``+sum`` envelope of nothing: 2 + 8 bytes), stored as the channel's name alone
_EMPTY_SIZE = 10
_DATA = itemgetter(2)  # an entry's serialized value
_EMPTY = (codec.EMPTY, b"", codec.EMPTY, _EMPTY_SIZE)

# channel → (version, serializer tag, bytes (b"" for an empty channel), blob row type, blob row size)
Entries = dict[str, tuple[str, str, bytes, str, int]]


def head_ref(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> Row:
    """The head row a payload is sealed to: the namespace and the checkpoint it describes."""
    return Row("head", (thread_id, checkpoint_ns, checkpoint_id))


def entries_of(
    pairs: Sequence[tuple[str, str]],
    written: Mapping[str, tuple[str, str, bytes, str, int]],
    inherited: Mapping[str, tuple[str, str, bytes, str, int]] | None,
    offload_min: int,
    followed: bool = False,
) -> Entries:
    """A new checkpoint's head entries: its (channel, version) ``pairs`` from the values this put
    ``written`` (channel → entry) and, for channels it took unchanged, from the parent's head
    entries ``inherited`` (None: unknown) when their version matches; bounded (module doc).
    ``followed``: ``pairs`` are the versions of ``inherited``'s checkpoint with ``written``'s over them
    (``ops.write._follows``), so every inherited entry is at its version: taken without a pass per channel."""
    limit = min(VALUE_MAX, offload_min)
    if followed and inherited is not None:
        out = {**inherited, **written}
        if sum(map(len, map(_DATA, out.values()))) <= HEAD_MAX and all(len(e[2]) <= limit for e in written.values()):
            return out
    out = {}
    left = HEAD_MAX
    mine, theirs = written.get, (inherited or {}).get
    for channel, version in pairs:
        entry = mine(channel) or theirs(channel)
        if entry is None or entry[0] != version:
            continue
        size = len(entry[2])
        if size <= limit and size <= left:
            out[channel] = entry
            left -= size
    return out


def pack(bc: codec.BlobCodec, key: tuple[str, str, str], entries: Entries, checksum: str | None) -> tuple[str, bytes]:
    """The stored ``(type, bytes)`` of a head: its checkpoint row's ``checksum`` and the entries without
    their versions (module doc) as one msgpack array, sealed to ``key``: under a keyring that writes,
    as every value (``codec.seal``: AES-256-GCM); else with an xxh3-128 checksum of the row and the
    payload (``head2+x3``: a head is rewritten whole at every put, and BLAKE2b over its bytes would
    cost a put ~1 µs per KB). Not compressed: zstd would cost a put ~40 µs per 10 KB of state (the
    blobs, which are, stay the record of every value)."""
    # an empty channel's entry, most of a wide graph's, as its name alone
    empty = codec.EMPTY
    flat = [
        ch if e[1] == empty and e[4] == _EMPTY_SIZE and e[3] == empty else [ch, e[1], e[2], e[3], e[4]] for ch, e in entries.items()
    ]
    payload = ormsgpack.packb([checksum, flat])
    if bc.keys is not None and (bc.keys.writer is not None or bc.keys.require):
        return seal(bc.keys, head_ref(*key), TAG, payload)
    return TAG + X3, xxh3(head_ref(*key).ad(TAG), payload, wide=True) + payload


def _open(bc: codec.BlobCodec, ref: Row, stored_type: str, data: bytes) -> tuple[str, bytes]:
    """A stored head's packed ``(type, payload)``, its checksum or seal checked (CorruptRowError,
    EncryptionError as ``BlobCodec.open``); an ``x3`` head is refused where encryption is required."""
    tag = stored_type[: -len(X3)] if stored_type.endswith(X3) else None
    if tag not in (TAG, LEGACY):
        return bc.open(ref, stored_type, data)
    if bc.keys is not None and bc.keys.require:
        raise EncryptionError(f"{ref}: not encrypted, and this keyring requires encryption")
    raw = bytes(data)
    if len(raw) < 16 or xxh3(ref.ad(tag), memoryview(raw)[16:], wide=True) != raw[:16]:
        raise CorruptRowError(f"{ref}: checksum mismatch")
    return tag, raw[16:]


def row_params(bc: codec.BlobCodec, key: tuple[str, str, str], entries: Entries, checksum: str | None) -> tuple:
    """``UPSERT_HEAD``'s parameters for a head of ``entries`` of the checkpoint row with ``checksum``."""
    return (*key, *pack(bc, key, entries, checksum))


def unpack(
    bc: codec.BlobCodec, key: tuple[str, str, str], stored_type: Any, data: Any, versions: Mapping[str, str], checksum: str | None
) -> Entries | None:
    """A stored head's entries, its seal checked and its checkpoint row the one with ``checksum``, whose
    ``versions`` (channel → version key, ``rows.blob_pairs``) they take; None when it does not open, is
    malformed or was written with another row (the caller reads the blobs instead: the module doc)."""
    if stored_type is None or data is None:
        return None
    try:
        ref = head_ref(*key)
        tag, payload = codec.decompress(*_open(bc, ref, stored_type, data), ref)
        found = ormsgpack.unpackb(payload)
        if tag == LEGACY:
            return {e[0]: (e[1], e[2], e[3], e[4], e[5]) for e in found}
        if tag != TAG or found[0] != checksum:
            return None
        out: Entries = {}
        for e in found[1]:
            if type(e) is str:
                out[e] = (versions[e], *_EMPTY)
            else:
                out[e[0]] = (versions[e[0]], e[1], e[2], e[3], e[4])
        return out
    except (CorruptRowError, EncryptionError, ValueError, TypeError, IndexError, KeyError):
        return None
