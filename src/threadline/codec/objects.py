"""Offloaded values: the reference a row keeps, and the object it names (docs/offload.md).

A value whose stored bytes (the packed payload: delta-encoded and compressed, not yet sealed)
exceed ``Offload.min_bytes`` is written to the object store and the row keeps a reference
instead; its type gets the suffix ``+obj`` *under* the seal (``msgpack+zstd+obj+sum``), so
the row's seal binds the reference — the object's name and size — to the row::

    row bytes   seal(row, "<tag>+obj", b'{"o":"<name>","n":<payload bytes>}')
    object      seal(Row("object", (name,)), "obj", payload)      at  <name>
    name        v1/<BLAKE2b-256(payload) hex>                       no keyring
                v1/k<key id hex>-<HMAC-SHA-256(MAC key, payload) hex>   with a keyring (encrypted)

Objects are content-addressed: the same payload is stored once across rows, threads and
branches. Under encryption the name is a keyed hash, so it says nothing about the content but
its equality, and the object is encrypted (AES-256-GCM) bound to its name. Reading checks the
object's seal, its size and that its payload hashes to its name: a missing, damaged or swapped
object is a ``CorruptRowError``, never another value. Deltas are built on the packed payload
as for an in-row value, so chains run across offloaded bases unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any

from threadline import limits, metrics
from threadline.codec.keyring import Keyring
from threadline.codec.seal import GCM, MAGIC, SUM, Row, open_sealed, seal
from threadline.errors import ConfigError, CorruptRowError, EncryptionError

OBJ = "+obj"
PREFIX = "v1/"
OFFLOADED = ("blob", "write")  # the tables whose values may be offloaded (not a checkpoint's pending_sends)
log = logging.getLogger("threadline.offload")


def name_of(keys: Keyring | None, payload: bytes) -> str:
    """The object name of ``payload``: its plain hash, or a keyed one with a keyring that writes."""
    mac = keys.mac_key() if keys is not None else None
    if mac is None:
        return PREFIX + hashlib.blake2b(payload, digest_size=32).hexdigest()
    return f"{PREFIX}k{mac[0].hex()}-" + hmac.new(mac[1], payload, hashlib.sha256).hexdigest()


def _names(keys: Keyring | None, name: str, payload: bytes) -> bool:
    """Whether ``payload`` hashes to ``name`` (under the key ``name`` states, if keyed)."""
    if not name.startswith(PREFIX + "k"):
        return hmac.compare_digest(name, PREFIX + hashlib.blake2b(payload, digest_size=32).hexdigest())
    kid_hex, _, digest = name[len(PREFIX) + 1 :].partition("-")
    try:
        mac = keys.mac_key(bytes.fromhex(kid_hex)) if keys is not None else None
    except ValueError:
        return False
    if mac is None:
        raise EncryptionError(f"object {name}: named under key {kid_hex}, which this saver does not hold")
    return hmac.compare_digest(digest, hmac.new(mac[1], payload, hashlib.sha256).hexdigest())


def ref_of(name: str, size: int) -> bytes:
    """The bytes a row keeps for an offloaded payload of ``size`` bytes."""
    return json.dumps({"o": name, "n": size}, separators=(",", ":")).encode()


def parse_ref(ref: bytes, where: object) -> tuple[str, int]:
    """(object name, payload size) of a reference; CorruptRowError when it is not one."""
    try:
        found = json.loads(ref)
        name, size = found["o"], found["n"]
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptRowError(f"{where}: its offload reference is unreadable ({exc})") from None
    if not isinstance(name, str) or not name.startswith(PREFIX) or ".." in name or type(size) is not int or size < 0:
        raise CorruptRowError(f"{where}: malformed offload reference {ref[:120]!r}")
    return name, size


def _warn(row: Row, size: int, warn_bytes: int) -> None:
    thread, channel = row.key[0], (row.key[2] if row.table == "blob" else row.bound[0] if row.bound else None)
    log.warning("large value: thread %r channel %r stores %d bytes (%s; warn_bytes=%d)", thread, channel, size, row, warn_bytes)
    metrics.large_value(row.table, channel, size)


def spill(offload: Any, keys: Keyring | None, row: Row, tag: str, data: bytes) -> tuple[str, bytes]:
    """A packed value above ``offload``'s threshold (``BlobCodec.seal`` asks): warned about past
    ``warn_bytes``; past ``min_bytes`` written to the store and replaced by its reference
    (``(tag + "+obj", reference)``), else returned unchanged. BackendError when the store
    cannot be written."""
    size = len(data)
    if offload.warn_bytes is not None and size > offload.warn_bytes:
        _warn(row, size, offload.warn_bytes)
    store = offload.objects
    if store is None or size <= offload.min_bytes or row.table not in OFFLOADED:
        return tag, data
    payload = bytes(data)
    name = name_of(keys, payload)
    # always written, never "already there, skipped": a put renews an object's age, so the
    # sweep's grace period protects it until the row naming it has committed
    store.put(name, seal(keys, Row("object", (name,)), "obj", payload)[1])
    metrics.offloaded(row.table, size)
    return tag + OBJ, ref_of(name, size)


def fetch(offload: Any, keys: Keyring | None, row: Row, tag: str, ref: bytes) -> tuple[str, bytes]:
    """The packed ``(tag without "+obj", payload)`` an opened reference row names, checked.

    Raises:
        ConfigError: this saver has no object store (``Offload``, ``THREADLINE_OFFLOAD``).
        CorruptRowError: the object is missing, damaged, cut short or another one.
        EncryptionError: encrypted or named under a key this saver does not hold.
    """
    name, size = parse_ref(ref, row)
    store = offload.objects if offload is not None else None
    if store is None:
        raise ConfigError(
            f"{row}: its value is offloaded to an object store ({name}) but this saver has none: "
            "give it Offload(store=…) or set THREADLINE_OFFLOAD (docs/offload.md)"
        )
    top = limits.current().max_value_bytes
    if size > top:
        raise CorruptRowError(f"{row}: offload reference declares {size} bytes, more than max_value_bytes={top}")
    data = store.get(name)
    if data is None:
        raise CorruptRowError(f"{row}: its offloaded value {name} is missing from {store.url}")
    try:
        payload = open_object(keys, name, data)
    except CorruptRowError as exc:
        raise CorruptRowError(f"{row}: {exc}") from None
    if len(payload) != size:
        raise CorruptRowError(f"{row}: object {name} holds {len(payload)} bytes, its reference {size}")
    return tag[: -len(OBJ)], payload


def open_object(keys: Keyring | None, name: str, data: bytes) -> bytes:
    """The payload of object ``name``'s stored ``data``, its seal and name checked.
    CorruptRowError (EncryptionError for a key problem) when it is not that object."""
    sealed = "obj" + (GCM if len(data) > 1 and data[0] == MAGIC and data[1] == 2 else SUM)
    payload = open_sealed(keys, Row("object", (name,)), sealed, data)[1]
    if not _names(keys, name, payload):
        raise CorruptRowError(f"object {name} holds another value (swapped or damaged)")
    return payload
