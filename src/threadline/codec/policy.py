"""The codec a saver holds: ``BlobCodec`` (compression, delta, cache and encryption settings) and ``PLAIN``.

``BlobCodec`` decides how each value is stored (``pack``, ``candidate``,
``encode_list``, ``encode_blob``) and seals it to its row (``seal``/``open``: a
checksum, or AES-256-GCM with its ``keys``), using the pieces in the sibling modules.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.codec.cache import BlobCache, Entry, entry_of
from threadline.codec.containers import EMPTY_LIST, LIST, Container, Extended, _header, container, split
from threadline.codec.deltas import Resolved, chain_limit, make_delta
from threadline.codec.fingerprinting import fingerprints
from threadline.codec.keyring import Keyring
from threadline.codec.objects import OBJ, fetch, spill
from threadline.codec.refs import Candidate, make_ref
from threadline.codec.seal import UNSEALED_HELP, Row, check_checkpoint, checkpoint_checksum, open_sealed, seal, sealed_as, sealed_empty
from threadline.codec.tags import (
    COMPRESS_MIN_BYTES,
    DELTA_LIST,
    DELTA_MAX_DEPTH,
    DELTA_MAX_RATIO,
    DELTA_MIN_BYTES,
    DELTA_PIECE_BYTES,
    DELTA_REF,
    EMPTY,
    ZSTD_LEVEL,
    compress,
    decode,
)
from threadline.errors import CorruptRowError, EncryptionError


@dataclass
class BlobCodec:
    """How a saver stores values: compression and delta settings, and its cache.

    * ``compress_min_bytes`` — zstd-compress stored values (blobs and pending
      writes) of at least this many bytes (negative: never compress);
    * ``zstd_level`` — the zstd level;
    * ``max_depth`` — K: at most K deltas between two snapshots of a channel
      value (0 disables delta encoding);
    * ``delta_piece_bytes`` — a chain holds at most one delta per this many bytes of
      its value (0: K alone): a small value, which reads fastest whole, is written
      whole more often than every K puts;
    * ``delta_min_bytes`` — list/dict values smaller than this are snapshots;
    * ``delta_max_ratio`` — a delta larger than this fraction of the value, or a
      chain whose deltas add up to more than twice this fraction, means a snapshot;
    * ``cache`` — recently written and read values, so a put computes its delta
      without reading the base back (on a miss it reads it, in the same transaction);
    * ``fast_lists`` — serialize only the items appended to a list since the
      parent's value, when item fingerprints show the rest unchanged (``encode_list``);
    * ``keys`` — a ``Keyring``: encrypt every stored value with AES-256-GCM and key
      checkpoint checksums (None: values carry a checksum; see ``codec.seal``);
    * ``offload`` — a ``threadline.objectstore.Offload``: values whose stored bytes exceed
      its ``min_bytes`` go to its object store, the row keeping a reference (``codec.objects``);
      None (the default): every value in its row.
    """

    compress_min_bytes: int = COMPRESS_MIN_BYTES
    zstd_level: int = ZSTD_LEVEL
    max_depth: int = DELTA_MAX_DEPTH
    delta_piece_bytes: int = DELTA_PIECE_BYTES
    delta_min_bytes: int = DELTA_MIN_BYTES
    delta_max_ratio: float = DELTA_MAX_RATIO
    cache: BlobCache | None = field(default_factory=BlobCache)
    fast_lists: bool = True
    keys: Keyring | None = None
    offload: Any = None
    _checks_left: int = field(default=3, repr=False)
    # the stored size above which ``seal`` hands a value to ``codec.objects`` (offload or warn)
    # (not a field: set with ``offload``)
    _big = 1 << 62

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "offload":
            object.__setattr__(self, "_big", value.threshold if value is not None else 1 << 62)

    @property
    def offload_min(self) -> int:
        """Bytes above which a stored value goes to the object store (``Offload.threshold``; else 2**62)."""
        return self._big

    @property
    def deltas(self) -> bool:
        return self.max_depth > 0 and self.cache is not None

    def pack(self, tag: str, data: bytes) -> tuple[str, bytes]:
        """A self-contained value's stored ``(type, bytes)`` (compressed at or above the threshold)."""
        return compress(tag, data, min_bytes=self.compress_min_bytes, level=self.zstd_level)

    def seal(self, row: Row, tag: str, data: bytes | None) -> tuple[str, bytes]:
        """The stored ``(type, bytes)`` of packed bytes, sealed to ``row`` (``codec.seal``); an
        ``EMPTY`` row keeps its type and holds the seal of no payload."""
        if tag == EMPTY:
            return EMPTY, seal(self.keys, row, EMPTY, b"")[1]
        if len(data) > self._big:  # type: ignore[arg-type]
            tag, data = spill(self.offload, self.keys, row, tag, data)  # type: ignore[arg-type]
        return seal(self.keys, row, tag, data)  # type: ignore[arg-type]

    def store(self, row: Row, tag: str, data: bytes) -> tuple[str, bytes]:
        """A self-contained value's stored ``(type, bytes)``: packed, then sealed to ``row``."""
        return self.seal(row, *self.pack(tag, data))

    def open(self, row: Row, tag: str, data: Any) -> tuple[str, bytes | None]:
        """A stored row's packed ``(type, bytes)``, its seal checked (``EMPTY``: no bytes).

        Raises CorruptRowError (EncryptionError for a key problem) as ``seal.open_sealed``; for
        an ``EMPTY`` row whose seal holds a value, and for an unsealed one (NULL bytes, written
        before empty rows were sealed) when encryption is required."""
        if not isinstance(tag, str):
            raise CorruptRowError(f"{row}: its type is not text ({type(tag).__name__})")
        if tag != EMPTY:
            inner, payload = open_sealed(self.keys, row, tag, data)
            if inner.endswith(OBJ):  # offloaded: the payload is in the object store (``codec.objects``)
                return fetch(self.offload, self.keys, row, inner, payload)
            return inner, payload
        if data is None:
            if self.keys is not None and self.keys.require:
                raise EncryptionError(f"{row}: an unsealed {EMPTY!r} row but this keyring requires encryption; {UNSEALED_HELP}")
            return EMPTY, None
        if self.keys is None and sealed_empty(row, data):
            return EMPTY, None
        if open_sealed(self.keys, row, sealed_as(tag, data), data)[1]:
            raise CorruptRowError(f"{row}: an {EMPTY!r} row holds a value (the type was changed)")
        return EMPTY, None

    def reseal(self, src: Row, dst: Row, tag: str, data: Any) -> tuple[str, bytes]:
        """A stored row's ``(type, bytes)`` checked against ``src`` and sealed to ``dst`` instead
        (copying a value to another thread), with this codec's keys."""
        return self.seal(dst, *self.open(src, tag, data))

    def load(self, serde: SerializerProtocol, row: Row, tag: str, data: Any) -> Any:
        """Open and decode a stored, self-contained value row (a pending write, pending sends)."""
        return decode(serde, *self.open(row, tag, data), row)

    def checkpoint_checksum(
        self, key: tuple, parent: str | None, doc: Any, meta: Any, *, text: bool = False, plain: tuple | None = None
    ) -> str:
        """The ``checksum`` column of a checkpoint row (``seal.checkpoint_checksum``; ``text``: the
        backend keeps the JSON texts given; ``plain``: them as plain JSON data, when known)."""
        return checkpoint_checksum(self.keys, key, parent, doc, meta, text=text, plain=plain)

    def check_checkpoint(self, stored: str | None, key: tuple, parent: str | None, doc: Any, meta: Any) -> None:
        """Raise CorruptRowError / EncryptionError unless the row's ``checksum`` matches (``seal.check_checkpoint``)."""
        check_checkpoint(self.keys, stored, key, parent, doc, meta, Row("checkpoint", key))

    def candidate(self, tag: str, data: bytes, value: Any = None) -> Container | None:
        """The container of a serialized value that may be stored as a delta, or None.

        For a list, its items' fingerprints are kept too, so the next put of the
        channel can serialize only the items appended since (``encode_list``). The empty
        list is one whatever its size: the base of a ``Topic`` channel's next value, which
        references the writes it holds (``encode_blob``)."""
        if not self.deltas or tag != "msgpack" or (len(data) < self.delta_min_bytes and data != EMPTY_LIST):
            return None
        found = container(data)
        if found is not None and found.kind == LIST and self.fast_lists and type(value) is list and len(value) == found.count:
            found.fps = fingerprints(value)
        return found

    def base_entry(self, resolved: Resolved, stored_type: str, stored_len: int) -> Entry | None:
        """The cache entry of a resolved value the next put of its channel may store a delta on
        (a list or dict of at least half ``delta_min_bytes``, or the empty list, which a ``Topic``
        channel's next value references writes on), or None."""
        entry = entry_of(resolved, stored_type, stored_len) if resolved[0] == "msgpack" else None
        if entry is None or (entry.value.body_len * 2 < self.delta_min_bytes and not entry.value.empty_list):
            return None
        return entry

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
        if new_fps is None or not new_fps.extends(fps):
            return None  # an item changed, was replaced or removed, or cannot be fingerprinted
        tail_items = value[n:]
        try:
            tag, tail = serde.dumps_typed(tail_items)
        except TypeError:
            return None  # serialized whole, whose error names the place (``tags.encode``)
        found = split(tail) if tag == "msgpack" else None
        if found is None or found[0] != LIST or found[1] != len(tail_items):
            return None
        head = _header(LIST, len(value))
        data = b"".join((head, base.value.body(), memoryview(tail)[found[2]:]))
        new = Container(LIST, len(value), data, len(head), fps=new_fps)
        new.decoded = self._extend_decoded(base.value.decoded, tail) if base.value.kept else None
        if self._checks_left > 0 or base.value.depth + 1 >= chain_limit(self.max_depth, self.delta_piece_bytes, new.body_len):
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

    @staticmethod
    def _extend_decoded(kept: Any, tail: bytes) -> Extended | None:
        """The base's kept decoded list (``Container.decoded``) extended by the new items'
        msgpack array ``tail``, to be decoded when first read (``Extended``; None for a dict)."""
        if type(kept) is Extended:
            return Extended(kept.base, (*kept.tails, tail))
        return Extended(kept, (tail,)) if type(kept) is list else None

    def encode_blob(
        self,
        tag: str,
        data: bytes,
        new: Container | None,
        base: Entry | None,
        writes: tuple[str, Sequence[Candidate]] | None = None,
    ) -> tuple[str, bytes, bool, Container | None]:
        """Stored ``(type, bytes, is_delta, container with its chain depth)`` of a serialized channel value.

        With ``new`` (from ``candidate``) and the ``base`` entry, a delta when
        ``make_delta`` allows one; otherwise a snapshot (compressed at or above the threshold).
        A list delta whose items are exactly those of ``writes`` (the parent checkpoint_id
        and its pending writes on the channel, ``BlobCache.writes``) references them
        instead of holding them (``codec.refs``); on an empty ``base`` only such a
        reference is a delta, whatever its size.
        """
        if new is not None and base is not None:
            # on an empty list (a ``Topic`` channel's previous value) a delta holds the whole value:
            # worth storing only as a reference to the writes that hold it, whatever its size
            on_empty = base.value.empty_list
            ratio, piece = (math.inf, 0) if on_empty else (self.delta_max_ratio, self.delta_piece_bytes)
            found = make_delta(base.value, new, max_depth=self.max_depth, max_ratio=ratio, piece_bytes=piece)
            if found is not None:
                prefix, payload, value = found
                ref = make_ref(payload, *writes) if writes is not None and prefix == DELTA_LIST else None
                if ref is not None or not on_empty:
                    value.decoded = new.decoded
                    if ref is not None:
                        prefix, payload = DELTA_REF, ref
                    stored_tag, stored = self.pack(prefix + tag, payload)
                    return stored_tag, stored, True, value
        stored_tag, stored = self.pack(tag, data)
        return stored_tag, stored, False, new


PLAIN = BlobCodec(max_depth=0, cache=None)
"""Compression only: no deltas, no cache. What ``storage.ops`` uses when a caller passes no codec."""
