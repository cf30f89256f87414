"""Sealing stored bytes to their row: a checksum, or AES-256-GCM encryption; checkpoint checksums.

Every value row (blob, pending write) is sealed last, after delta encoding and
compression, so deltas and zstd keep their savings. A sealed row's type tag is the
inner tag plus ``+sum`` or ``+gcm``; its bytes are an envelope::

    +sum   C1 03 | xxh3-64 (8 bytes) of the associated data and the payload | payload
    +gcm   C1 02 | key id (4 bytes) | nonce (12 bytes) | AES-256-GCM(payload) with its 16-byte tag

A ``+sum`` envelope written before schema migration 19 holds BLAKE2b-64 instead (``C1 01``), and
is read as before. An unkeyed checksum only finds damage, which xxh3 finds as well as BLAKE2b does
at a tenth of its cost a byte (~0.04 against ~1.3 ns); a keyring's seal is what resists tampering.

The associated data (``Row.ad``) is the table, the row's key, what else of the row
must not change (a blob's ``base_version``, a write's ``channel``) and the inner tag,
so a value moved to another row, re-tagged or cut short fails to open. 0xC1 is the
one byte no msgpack value, UTF-8 text, zstd frame or delta header starts with: a
sealed envelope under an unsealed (legacy) tag is recognised and refused.

An ``empty`` row (a channel version without a value) keeps its type: its bytes are the
envelope of no payload, so a value row turned into an empty one fails to open like any
other tampering (``sealed_as``).

Rows written before sealing existed (no suffix; an ``empty`` row with NULL bytes) still
load; ``Keyring(require=True)`` refuses them, and ``+sum`` rows, when encryption is required.

A checkpoint row is checked as a whole: its key, parent and its checkpoint and metadata JSON
hash into the ``checksum`` column: ``x3:`` + xxh3-128 of the JSON texts as stored, where the
backend keeps them (SQLite; storage format 2); else ``c3:`` + xxh3-128 of orjson's sorted-key text
of the parsed JSON, which Postgres's JSONB gives back the same (``_sorted_digest``; since migration
19), or ``b2:`` + BLAKE2b-64 of their canonical form where it would not (``canonical``: the same on
SQLite's text and Postgres's JSONB, built in Python); or, with a keyring, ``hm:<key id>:`` +
HMAC-SHA-256 (128 bits) of the canonical form under a key derived from the write key, which also
makes the checkpoint row tamper-evident.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from threadline.codec.jsontext import dumps_doc, dumps_json, dumps_meta, expand_doc, loads
from threadline.codec.keyring import KEY_ID_BYTES, Keyring
from threadline.codec.tags import EMPTY
from threadline.errors import CorruptRowError, EncryptionError

SUM = "+sum"
GCM = "+gcm"
MAGIC = 0xC1
_SUM_HEAD = bytes((MAGIC, 3))  # xxh3-64
_B2_HEAD = bytes((MAGIC, 1))  # BLAKE2b-64: read, no longer written
_GCM_HEAD = bytes((MAGIC, 2))
_DIGEST = 8
_NONCE = 12
_GCM_MIN = 2 + KEY_ID_BYTES + _NONCE + 16
_encode_str = json.encoder.encode_basestring  # type: ignore[attr-defined]
_FIELD = struct.Struct("<BI").pack  # an associated-data field: 0x01, its length
UNSEALED_HELP = (
    "either it was written behind threadline's back, or the database is not encrypted yet: then run "
    "`threadline rekey` with THREADLINE_ENCRYPTION_REQUIRED=false (docs/security.md, \"Encrypt an existing database\")"
)


class Row(NamedTuple):
    """A stored row, for error messages (``str``) and as the data its seal binds (``ad``).

    ``table``: ``blob``, ``write`` or ``checkpoint``; ``key``: its key columns; ``bound``:
    other columns the seal covers (a blob's base_version, a write's channel). A named tuple:
    every value row read or written builds one (a frozen dataclass took 3× as long)."""

    table: str
    key: tuple
    bound: tuple = ()

    def __str__(self) -> str:
        return f"{self.table} ({', '.join(repr(k) for k in self.key)})"

    def ad(self, tag: str) -> bytes:
        # joined once: every row read and written builds one; its fields repeat (thread ids,
        # channels, tags), so each is encoded once (``_field``, mapped in C)
        return b"".join([b"threadline/1\x00", *map(_field, (self.table, *self.key, *self.bound, tag))])


@lru_cache(maxsize=4096)  # untyped: a single str or int argument is its own key (no tuple built)
def _field(value: str | int | None) -> bytes:
    """An associated-data field: 0x00 for None, else 0x01, the UTF-8 length (4 bytes, little-endian)
    and the UTF-8 bytes of the value's text. Key columns hold text, integers (a write's idx) or NULL:
    no two of those that compare equal have different texts (no bool or float reaches here)."""
    if value is None:
        return b"\x00"
    raw = (value if type(value) is str else str(value)).encode("utf-8", "surrogatepass")
    return _FIELD(1, len(raw)) + raw


def _digest(ad: bytes, payload: bytes | memoryview) -> bytes:
    """xxh3-64 of the associated data and the payload (a ``C1 03`` envelope)."""
    return xxh3(ad, payload)


# Bytes of payload from which ``xxh3`` feeds a hasher the two parts: below, joining them first costs
# less than the hasher object; above, the join's copy of the payload costs more (callgrind: ~1
# instruction a byte).
STREAM_MIN = 4096


def xxh3(ad: bytes, payload: bytes | memoryview, wide: bool = False) -> bytes:
    """xxh3 (128 bits when ``wide``, else 64) of ``ad`` followed by ``payload``."""
    xxhash = _xxhash()
    if len(payload) < STREAM_MIN:
        return (xxhash.xxh3_128_digest if wide else xxhash.xxh3_64_digest)(ad + payload)
    h = (xxhash.xxh3_128 if wide else xxhash.xxh3_64)(ad)
    h.update(payload)
    return h.digest()


def _b2_digest(ad: bytes, payload: bytes | memoryview) -> bytes:
    """BLAKE2b-64 of the associated data and the payload (a ``C1 01`` envelope, written before migration 19)."""
    h = hashlib.blake2b(ad, digest_size=_DIGEST)
    h.update(payload)
    return h.digest()


@lru_cache(maxsize=1)
def _xxhash() -> Any:
    import xxhash  # on first use: importing the saver does not pay for it

    return xxhash


def seal(keys: Keyring | None, row: Row, tag: str, data: bytes) -> tuple[str, bytes]:
    """``(tag + "+gcm", envelope)`` with a keyring that writes, else ``(tag + "+sum", envelope)``.
    Raises EncryptionError for a read-only keyring that requires encryption."""
    writer = keys.writer if keys is not None else None
    if writer is None:
        if keys is not None and keys.require:
            raise EncryptionError("this keyring requires encryption but holds no write key (write=False): nothing was stored")
        return tag + SUM, b"".join((_SUM_HEAD, _digest(row.ad(tag), data), data))
    kid, cipher = writer
    nonce = os.urandom(_NONCE)
    return tag + GCM, b"".join((_GCM_HEAD, kid, nonce, cipher.encrypt(nonce, bytes(data), row.ad(tag))))


def open_sealed(keys: Keyring | None, row: Row, tag: str, data: Any) -> tuple[str, bytes]:
    """The inner ``(tag, payload)`` of a stored value row, checked against ``row``.

    Legacy rows (no seal suffix) pass through unchanged unless ``keys.require``.

    Raises:
        CorruptRowError: the bytes do not match their seal, were cut short or moved
            from another row, or a sealed envelope sits under an unsealed tag.
        EncryptionError: encrypted with a key this keyring does not hold (or no
            keyring), or a plaintext row where encryption is required.
    """
    if data is None:
        raise CorruptRowError(f"{row}: {tag!r} row has no bytes")
    raw = data if isinstance(data, bytes) else bytes(data)
    if tag.endswith(GCM):
        inner = tag[: -len(GCM)]
        if len(raw) < _GCM_MIN or raw[:2] != _GCM_HEAD:
            raise CorruptRowError(f"{row}: {tag!r} bytes are not an encrypted envelope (damaged or cut short)")
        kid = raw[2 : 2 + KEY_ID_BYTES]
        ciphers = keys.ciphers(kid) if keys is not None else []
        if not ciphers:
            held = f"this saver holds keys {keys.key_ids}" if keys is not None else "this saver has no encryption keys"
            raise EncryptionError(
                f"{row}: encrypted with key {kid.hex()}, which {held}; add that key to the keyring "
                "(THREADLINE_ENCRYPTION_KEY / _OLD_KEYS / _KEY_FILE, or Keyring([...]))"
            )
        nonce = raw[2 + KEY_ID_BYTES : 2 + KEY_ID_BYTES + _NONCE]
        body = raw[2 + KEY_ID_BYTES + _NONCE :]
        from cryptography.exceptions import InvalidTag  # loaded with the keyring's ciphers

        for cipher in ciphers:
            try:
                return inner, cipher.decrypt(nonce, body, row.ad(inner))
            except InvalidTag:
                continue
        raise CorruptRowError(f"{row}: encrypted value does not authenticate (damaged, cut short, re-tagged or moved from another row)")
    if keys is not None and keys.require:
        raise EncryptionError(f"{row}: stored unencrypted ({tag!r}) but this keyring requires encryption; {UNSEALED_HELP}")
    if tag.endswith(SUM):
        inner = tag[: -len(SUM)]
        head = raw[:2]
        if len(raw) < 2 + _DIGEST or (head != _SUM_HEAD and head != _B2_HEAD):
            raise CorruptRowError(f"{row}: {tag!r} bytes are not a checksummed envelope (damaged or cut short)")
        payload = memoryview(raw)[2 + _DIGEST :]
        if not hmac.compare_digest(raw[2 : 2 + _DIGEST], (_digest if head == _SUM_HEAD else _b2_digest)(row.ad(inner), payload)):
            raise CorruptRowError(f"{row}: checksum mismatch (the bytes were damaged, cut short, re-tagged or moved from another row)")
        return inner, bytes(payload)
    if raw[:2] in (_SUM_HEAD, _B2_HEAD, _GCM_HEAD):
        # no unsealed row starts so (not msgpack, UTF-8, zstd nor a delta header), bar a raw
        # ``bytes`` value, 1 in 32,768 of them: refusing that beats loading a re-tagged envelope
        raise CorruptRowError(f"{row}: sealed bytes under the unsealed type {tag!r} (the type was changed)")
    return tag, raw


def sealed_empty(row: Row, data: Any) -> bool:
    """Whether ``data`` is ``row``'s unkeyed seal of no payload (an ``empty`` row written by
    ``seal(None, row, "empty", b"")``): the check of most of a wide graph's blob rows, without the
    general envelope parsing (False: open it with ``open_sealed``, which says what is wrong)."""
    return len(data) == 2 + _DIGEST and data[:2] == _SUM_HEAD and hmac.compare_digest(bytes(data[2:]), _digest(row.ad(EMPTY), b""))


def sealed_as(tag: str, data: Any) -> str:
    """The tag whose seal a stored row carries: its own, or for an ``empty`` row (its type stays
    ``empty``, its bytes are the seal of no payload) the one its envelope states."""
    if tag != EMPTY or data is None:
        return tag
    return EMPTY + (GCM if bytes(data[:2]) == _GCM_HEAD else SUM)


def is_sealed(tag: str) -> bool:
    return tag.endswith((SUM, GCM))


def is_encrypted(tag: str) -> bool:
    return tag.endswith(GCM)


# --- checkpoint rows ------------------------------------------------------------------------------


def canonical(obj: Any) -> bytes:
    """An injective encoding of parsed JSON that is the same whether it was read back from
    SQLite's text or Postgres's JSONB: keys sorted; numbers as Postgres's ``numeric`` keeps them
    (an integral float written in exponent form reads back from JSONB as an integer, so such
    floats and integers of 16 or more digits are both written as a normalized decimal)."""
    out: list[str] = []
    _canon(obj, out.append)
    return "".join(out).encode("utf-8", "surrogatepass")


def _canon(x: Any, put: Any) -> None:
    t = type(x)
    if t is str:  # the common shapes first: plain str and dict (their subclasses go the long way)
        put(_encode_str(x))
    elif t is dict:
        put("{")
        for k in sorted(x):
            put(_encode_str(k if type(k) is str else str(k)) + ":")
            v = x[k]
            if type(v) is str:
                put(_encode_str(v) + ",")
            else:
                _canon(v, put)
                put(",")
        put("}")
    elif isinstance(x, str):
        put(_encode_str(x))
    elif x is None or isinstance(x, bool):
        put("n" if x is None else "t" if x else "f")
    elif isinstance(x, int):
        put(f"i{x}" if -(10**15) < x < 10**15 else f"i{Decimal(x).normalize():E}")
    elif isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            raise CorruptRowError(f"{x} is not a JSON number")
        if x == int(x) and abs(x) >= 1e16:
            put(f"i{Decimal(repr(x)).normalize():E}")
        else:
            put(f"f{abs(x) if x == 0 else x!r}")
    elif isinstance(x, dict):
        put("{")
        for k in sorted(x):
            put(_encode_str(str(k)) + ":")
            _canon(x[k], put)
            put(",")
        put("}")
    elif isinstance(x, (list, tuple)):
        put("[")
        for v in x:
            _canon(v, put)
            put(",")
        put("]")
    else:
        raise CorruptRowError(f"not JSON data: {type(x).__name__}")


def _parsed(value: Any) -> Any:
    return loads(expand_doc(value)) if isinstance(value, str) else value


def _content(key: tuple, parent: str | None, doc: Any, meta: Any) -> bytes:
    try:
        return canonical([list(key), parent, _parsed(doc), _parsed(meta)])
    except RecursionError:
        raise CorruptRowError(f"checkpoint {key!r}: checkpoint or metadata is nested too deeply") from None
    except ValueError as exc:
        raise CorruptRowError(f"checkpoint {key!r}: checkpoint or metadata is not JSON ({exc})") from None


def _text_digest(key: tuple, parent: str | None, doc: Any, meta: Any) -> str:
    """``x3:`` + xxh3-128 of the key, the parent and the JSON texts as stored (``jsontext.dumps_doc`` and
    ``dumps_meta``: the text itself where the backend keeps it, its versions expanded (``jsontext.expand_doc``),
    else the parsed value encoded again, which gives the same text), each part length-prefixed so that the
    encoding is injective."""
    import xxhash  # on first use: importing the saver does not pay for it
    try:
        texts = (expand_doc(doc) if isinstance(doc, str) else dumps_doc(doc), meta if isinstance(meta, str) else dumps_meta(meta))
    except (TypeError, ValueError, RecursionError) as exc:
        raise CorruptRowError(f"checkpoint {key!r}: checkpoint or metadata is not JSON as stored ({exc})") from None
    out = [b"threadline/ck1\x00"]
    for part in (*key, parent, *texts):
        if part is None:
            out.append(b"\x00")
        else:
            raw = part.encode("utf-8", "surrogatepass") if type(part) is str else str(part).encode("utf-8", "surrogatepass")
            out.append(_FIELD(1, len(raw)))
            out.append(raw)
    return "x3:" + xxhash.xxh3_128_hexdigest(b"".join(out))


def _unstable(raw: bytes) -> bool:
    """Whether orjson's text ``raw`` may hold a number JSONB does not give back as written: a float
    written with a positive exponent (``e+``: 1e16 and up, which JSONB's ``numeric`` gives back as an
    integer) or -0.0 (given back as 0.0). A document's ``+`` signs are few (a timestamp's) and found by
    ``memchr`` (past ``_SCANNED`` of them, a substring search); its ``-`` are many (every id's), so
    -0.0 is one substring search. A string holding such a sequence is taken for one, which only costs
    it the slower ``b2:``."""
    i = raw.find(b"+")
    for _ in range(_SCANNED):
        if i < 0:
            break
        if i and raw[i - 1] == _E:
            return True
        i = raw.find(b"+", i + 1)
    else:  # a document of many ``+`` (timestamps in metadata): one substring search
        if b"e+" in raw:
            return True
    return b"-0.0" in raw


_E = ord("e")
_SCANNED = 64  # ``+`` signs ``_unstable`` looks at one by one; past them, a substring search


def _sorted_digest(key: tuple, parent: str | None, doc: Any, meta: Any) -> str | None:
    """``c3:`` + xxh3-128 of orjson's text, keys sorted, of ``[key, parent, doc, meta]`` (texts parsed
    first): a checksum of parsed JSON computed in C, for a backend that keeps no JSON text (Postgres's
    JSONB reorders keys and respaces). None when JSONB would give back another text (``_unstable``)
    or orjson cannot write it (an integer beyond 64 bits): then the canonical ``b2:`` serves."""
    import xxhash

    try:
        raw = orjson.dumps(
            [list(key), parent, orjson.loads(expand_doc(doc)) if isinstance(doc, str) else doc, orjson.loads(meta) if isinstance(meta, str) else meta],
            option=orjson.OPT_SORT_KEYS,
        )
    except (orjson.JSONEncodeError, orjson.JSONDecodeError, TypeError):
        return None
    if _unstable(raw):
        return None
    return "c3:" + xxhash.xxh3_128_hexdigest(raw)


def checkpoint_checksum(
    keys: Keyring | None, key: tuple, parent: str | None, doc: Any, meta: Any, *, text: bool = False, plain: tuple | None = None
) -> str:
    """The ``checksum`` column of a checkpoint row: key (thread_id, checkpoint_ns, checkpoint_id),
    parent_checkpoint_id, and the checkpoint and metadata (JSON text as stored, or parsed).
    ``plain``: the same checkpoint and metadata as plain JSON data (``jsontext.dumps_plain``), which
    ``c3:`` takes instead of parsing the texts (a 100-node graph's 16 KB document: ~20 µs).

    ``text``: the backend keeps the JSON text as written (SQLite): without a keyring, an ``x3:`` digest
    of the texts (``_text_digest``: no parse, no canonical form); else without a keyring ``c3:``
    (``_sorted_digest``) or, where JSONB would not give that text back, ``b2:`` (BLAKE2b of the
    canonical form), and under a keyring ``hm:`` (HMAC-SHA-256 of the canonical form), each the same
    whether read back from text or from Postgres's JSONB. xxh3-128 is as strong as unkeyed BLAKE2b-64
    for what an unkeyed checksum does (find damage); the keyed one is what makes a row tamper-evident."""
    mac = keys.mac_key() if keys is not None else None
    if mac is None and keys is not None and keys.require:
        raise EncryptionError("this keyring requires encryption but holds no write key (write=False): nothing was stored")
    if mac is None and text:
        return _text_digest(key, parent, doc, meta)
    if mac is None and (found := _sorted_digest(key, parent, *(plain or (doc, meta)))) is not None:
        return found
    content = _content(key, parent, doc, meta)
    if mac is None:
        return "b2:" + hashlib.blake2b(content, digest_size=_DIGEST).hexdigest()
    return f"hm:{mac[0].hex()}:" + hmac.new(mac[1], content, hashlib.sha256).hexdigest()[:32]


def check_checkpoint(
    keys: Keyring | None, stored: str | None, key: tuple, parent: str | None, doc: Any, meta: Any, where: object
) -> None:
    """Raise unless ``stored`` (the row's ``checksum``) matches its content (``checkpoint_checksum``);
    ``where`` names the row in an error (its ``str``, made only then: a ``Row``).

    A row without one (written before checksums) passes unless the keyring requires encryption.

    Raises:
        CorruptRowError: a mismatch: the row was damaged or changed behind threadline's back.
        EncryptionError: no keyed checksum where required, or one under a key not held.
    """
    if stored is not None and not isinstance(stored, str):
        raise CorruptRowError(f"{where}: its checksum is not text ({type(stored).__name__})")
    if stored is None or stored.startswith(("b2:", "x3:", "c3:")):
        if keys is not None and keys.require:
            raise EncryptionError(f"{where}: has no keyed checksum but this keyring requires encryption; {UNSEALED_HELP}")
        if stored is None:
            return
        if stored.startswith("x3:"):
            expected = _text_digest(key, parent, doc, meta)
            if expected != stored and not isinstance(meta, str):
                # metadata parsed back: rows written before ``dumps_meta`` hold json's text of it
                # (small and large floats in another exponent form)
                expected = _text_digest(key, parent, doc, dumps_json(meta, sort_keys=False))
        elif stored.startswith("c3:"):
            expected = _sorted_digest(key, parent, doc, meta) or "c3: (a number JSONB does not keep as written)"
        else:
            expected = "b2:" + hashlib.blake2b(_content(key, parent, doc, meta), digest_size=_DIGEST).hexdigest()
    elif stored.startswith("hm:") and len(stored) == 3 + 2 * KEY_ID_BYTES + 1 + 32:
        try:
            kid = bytes.fromhex(stored[3 : 3 + 2 * KEY_ID_BYTES])
        except ValueError:
            raise CorruptRowError(f"{where}: malformed checksum {stored!r}") from None
        mac = keys.mac_key(kid) if keys is not None else None
        if mac is None:
            raise EncryptionError(f"{where}: its checksum is keyed with key {kid.hex()}, which this saver does not hold")
        expected = stored[: 3 + 2 * KEY_ID_BYTES + 1] + hmac.new(mac[1], _content(key, parent, doc, meta), hashlib.sha256).hexdigest()[:32]
    else:
        raise CorruptRowError(f"{where}: malformed checksum {stored!r}")
    if not hmac.compare_digest(stored.encode("utf-8", "surrogatepass"), expected.encode()):
        raise CorruptRowError(f"{where}: checksum mismatch (the checkpoint row was damaged or changed behind threadline's back)")
