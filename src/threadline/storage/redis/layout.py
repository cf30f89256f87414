"""Where a thread's rows live on Redis, and how a row is packed.

Every key of a thread carries the thread_id as its hash tag (``<prefix>:{<thread_id>}:…``),
so all of them are in one cluster slot: a ``put`` is one server-side script, atomic,
and never CROSSSLOT. Eight keys a thread, whatever its namespaces and history:

==========  ======  ==============================================  ====================================
key         type    field / member                                  value
==========  ======  ==============================================  ====================================
``ck``      HASH    ``ns \\0 checkpoint_id``                         checkpoint row (msgpack, below)
``ids``     ZSET    ``ns \\0 checkpoint_id`` (score 0: lexical)       —  (latest, ``before``, ``limit``)
``bl``      HASH    ``ns \\0 channel \\0 version``                    blob: ``type \\0 base_version \\0`` flag bytes
``wr``      HASH    ``ns \\0 checkpoint_id \\0 task_id \\0 idx``        pending write row (msgpack)
``wix``     HASH    ``ns \\0 checkpoint_id``                         its writes' ``task_id \\0 idx``, ``\\1``-separated
                    latest_blobs                                    the root namespace's latest checkpoint
                                                                    field, ``\\2``, its blob fields
                                                                    ``\\1``-separated (a get's one round trip)
``th``      HASH    created, updated, count, bytes, ttl, accessed,   the thread index row (``dttl``: the
                    dttl                                             default TTL it was written under)
``rec``     HASH    metadata, archived, created, updated            the thread's record, when one was set
``tg``      HASH    ``t \\0 name`` / ``pin``                          its tags and pin (``tags.py``)
==========  ======  ==============================================  ====================================

The scripts that write a thread give all eight the same expiry (``scripts.py``), so a thread
never half-expires: its record and tags go with it.

Beside them, ``<prefix>:{<thread_id>}:lease`` (STRING, the same hash tag) while a run holds
the thread's guard lease (``storage/redis/leases.py``): not the thread's data, it expires by
itself. And two keys for the whole database: ``<prefix>:threads`` (ZSET of thread_ids by
last update, for listings across threads) and ``<prefix>:migrations`` (HASH version →
applied_at). uuid6 checkpoint ids sort lexically by time, so ``ids`` gives the latest
checkpoint and ``before`` with one ``ZRANGE … BYLEX REV``.

A blob value starts with its type tag and base version (empty: a snapshot) so the put
script can check a delta's base (type and stored size) without decoding anything; the
flag byte says whether the row holds bytes (``1``) or none (``0``, an empty channel).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import ormsgpack
import zstandard

from threadline.codec.pool import Pool
from threadline.errors import CorruptRowError

SEP = "\x00"
THREAD_KEYS = ("ck", "ids", "bl", "wr", "wix", "th", "rec", "tg")


class ThreadKeys(NamedTuple):
    ck: str
    ids: str
    bl: str
    wr: str
    wix: str
    th: str
    rec: str
    tg: str


@lru_cache(maxsize=1024)  # a put, a read and their handlers ask for the same thread's keys several times
def thread_keys(prefix: str, thread_id: str) -> ThreadKeys:
    base = f"{prefix}:{{{thread_id}}}:"
    return ThreadKeys(*(base + k for k in THREAD_KEYS))


def lease_key(prefix: str, thread_id: str) -> str:
    """The key of ``thread_id``'s guard lease, in the thread's cluster slot."""
    return f"{prefix}:{{{thread_id}}}:lease"



def field(*parts: Any) -> str:
    return SEP.join(str(p) for p in parts)


def split(raw: bytes | str, parts: int, where: str) -> list[str]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    out = text.split(SEP, parts - 1)
    if len(out) != parts:
        raise CorruptRowError(f"{where}: malformed key {text!r} under threadline's Redis prefix")
    return out


# --- blobs -----------------------------------------------------------------------------


def pack_blob(type_: str, blob: bytes | None, base: str | None) -> bytes:
    head = f"{type_}{SEP}{base or ''}{SEP}".encode()
    return head + (b"0" if blob is None else b"1" + bytes(blob))


def unpack_blob(raw: bytes, where: str) -> tuple[str, bytes | None, str | None]:
    """(type, blob, base_version) of a packed blob; CorruptRowError when it is not one."""
    try:
        i = raw.index(0)
        j = raw.index(0, i + 1)
        flag = raw[j + 1 : j + 2]
        if flag not in (b"0", b"1") or (flag == b"0" and len(raw) != j + 2):
            raise ValueError("bad flag")
        base = raw[i + 1 : j].decode()
        return raw[:i].decode(), (bytes(raw[j + 2 :]) if flag == b"1" else None), base or None
    except (ValueError, UnicodeDecodeError, AttributeError, TypeError):
        raise CorruptRowError(f"{where}: not a threadline blob value") from None


def blob_size(raw: bytes) -> int:
    """Stored bytes of a packed blob's value (what the SQL backends count)."""
    j = raw.index(0, raw.index(0) + 1)
    return max(0, len(raw) - j - 2)


# --- checkpoints and writes: msgpack arrays ---------------------------------------------

# checkpoint row after its key: parent_checkpoint_id, checkpoint (JSON text), metadata (JSON text),
# step, source, run_id, created_at, checksum
CHECKPOINT_WIDTH = 8
# write row after its key: channel, task_path, type, blob, created_at
WRITE_WIDTH = 5


def pack(values: Sequence[Any]) -> bytes:
    return ormsgpack.packb(list(values))


# A checkpoint row is mostly JSON of version strings: zstd halves it (memory is what Redis costs).
# First byte: 0 as is, 1 zstd. Only Python reads these rows; the scripts test their presence.
_ZSTD_FROM = 128
_COMPRESSORS = Pool(lambda: zstandard.ZstdCompressor(level=1, write_content_size=True))
_DECOMPRESSORS = Pool(zstandard.ZstdDecompressor)


def pack_checkpoint(values: Sequence[Any]) -> bytes:
    raw = ormsgpack.packb(list(values))
    if len(raw) < _ZSTD_FROM:
        return b"\x00" + raw
    return b"\x01" + _COMPRESSORS.lend(lambda c: c.compress(raw))


def unpack_checkpoint(raw: bytes, where: str) -> list[Any]:
    try:
        if raw[:1] == b"\x01":
            body = _DECOMPRESSORS.lend(lambda d: d.decompress(raw[1:], max_output_size=MAX_CHECKPOINT_BYTES))
        else:
            body = raw[1:] if raw[:1] == b"\x00" else None
    except zstandard.ZstdError:
        body = None
    if body is None:
        raise CorruptRowError(f"{where}: not a threadline checkpoint row")
    return unpack(body, CHECKPOINT_WIDTH, where)


MAX_CHECKPOINT_BYTES = 1 << 30


def unpack(raw: bytes, width: int, where: str) -> list[Any]:
    try:
        row = ormsgpack.unpackb(raw)
    except (ormsgpack.MsgpackDecodeError, TypeError, ValueError):
        row = None
    if not isinstance(row, list) or len(row) != width:
        raise CorruptRowError(f"{where}: not a threadline row")
    return row
