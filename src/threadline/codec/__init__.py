"""Blob codec: LangGraph's serializer plus threadline's type tags, compression and delta encoding.

Every stored value (a channel blob, a pending write) is a ``(type, bytes)`` pair.
The type tag says exactly how the bytes are encoded, so every row ever written
stays readable:

=============================  ==============================================================
``msgpack``, ``json``, …       the serializer's own ``(type, bytes)`` (the serializer's tag)
``null``                       ``None`` (serializer tag, empty bytes)
``empty``                      the channel has a version but no value (LangGraph's "empty
                               channel", ``DeltaChannel`` between snapshots); bytes: the
                               seal of no payload (NULL before empty rows were sealed)
``<tag>+zstd``                 the bytes of ``<tag>``, zstd-compressed (one frame with its
                               content size; below 64 KiB with threadline's dictionary,
                               which the frame names: ``dictionary``)
``delta-list:msgpack``         a list that extends the value of ``base_version``: the
                               appended items (see below)
``delta-dict:msgpack``         a dict that extends the value of ``base_version``: the added
                               and changed key/value pairs (see below)
``delta-ref:msgpack``          a list delta whose appended items are the parent checkpoint's
                               pending writes on the channel: a reference to them (``refs``)
``delta-…:msgpack+zstd``       the same, zstd-compressed
``<any of the above>+sum``     sealed with a checksum bound to its row (``seal``)
``<any of the above>+gcm``     encrypted with AES-256-GCM, bound to its row (``seal``)
=============================  ==============================================================

Every row written is sealed (``+sum``, or ``+gcm`` with a ``Keyring``), after delta
encoding and compression; an ``empty`` row keeps its type and holds the seal of no
payload. Rows written before sealing (no suffix, or an ``empty`` row with NULL bytes)
still load, strictly: a ``null`` holds no bytes, a ``msgpack`` value ends where its bytes
end, a zstd frame states its size within ``threadline.limits``.

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

Deserialization is strict by default (``threadline.codec.serde``: no pickle; stored
constructors only for LangGraph's safe types, explicitly allowed types, and data
classes already imported by the process; inspection and transfer decode with less).
A ``pickle`` tag is refused, never loaded. A damaged or tampered row fails to load
(``CorruptRowError``): it never loads as another value.

The code is split by concept, each module depending only on those before it:
``tags`` (type tags, compression, decode of self-contained rows) ←
``containers`` (msgpack list/dict containers) ← ``deltas`` (list/dict deltas) ← ``refs``
(deltas that reference pending writes);
``fingerprinting`` (list item fingerprints, standalone); ``copies`` (standalone: decoded values
the cache keeps, handed out as fresh copies: safe against mutation); ``cache`` (the blob
cache, on containers and deltas); ``keyring`` (encryption keys) ← ``seal`` (row seals,
checkpoint checksums) ← ``objects`` (offloaded values) ← ``policy`` (``BlobCodec``, ``PLAIN``). This package re-exports
the names the rest of threadline uses, so ``codec.X`` works as before.
"""

from __future__ import annotations

from threadline.codec.cache import BlobCache, Entry, Versions, entry_of
from threadline.codec.containers import KEEP, LIST, SEEN, Container, container, skip, split
from threadline.codec.deltas import Resolved, is_delta, load, make_delta, resolve
from threadline.codec.fingerprinting import fingerprints
from threadline.codec.keyring import Keyring
from threadline.codec.policy import PLAIN, BlobCodec
from threadline.codec.refs import item_digest, ref_in, ref_of, splice, write_items
from threadline.codec.seal import GCM, SUM, Row, is_encrypted, is_sealed, sealed_as
from threadline.codec.tags import DELTA_DICT, DELTA_LIST, DELTA_REF, EMPTY, check_size, compress, decode, decompress, encode, holds_delta_snapshot

__all__ = [
    "DELTA_DICT",
    "DELTA_LIST",
    "DELTA_REF",
    "EMPTY",
    "GCM",
    "KEEP",
    "LIST",
    "PLAIN",
    "BlobCache",
    "BlobCodec",
    "Container",
    "Entry",
    "Keyring",
    "Resolved",
    "Row",
    "Versions",
    "SEEN",
    "SUM",
    "check_size",
    "compress",
    "container",
    "decode",
    "decompress",
    "encode",
    "entry_of",
    "fingerprints",
    "holds_delta_snapshot",
    "is_delta",
    "is_encrypted",
    "is_sealed",
    "item_digest",
    "load",
    "make_delta",
    "ref_in",
    "ref_of",
    "resolve",
    "sealed_as",
    "skip",
    "splice",
    "split",
    "write_items",
]
