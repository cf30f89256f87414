"""Encryption keys: ``Keyring`` (one key to write with, any number to read with) and where keys come from.

A key is 32 random bytes (AES-256), given as bytes, base64 or hex text. Its *key id*
is the first 4 bytes of SHA-256 over a fixed label and the key: stored in every
encrypted row, so a reader picks the right key, and no key material is ever stored.

Sources: a list (``Keyring([new, old])``), a callable returning that list (a KMS
client: called on first use, again after ``refresh()``), a file
(``Keyring.from_file``: one key per line, ``#`` comments), or the environment
(``Keyring.from_env``):

=================================  =================================================================
``THREADLINE_ENCRYPTION_KEY``      the write key (base64 or hex)
``THREADLINE_ENCRYPTION_KEY_FILE`` a file of keys, the first one writes (instead of the variable)
``THREADLINE_ENCRYPTION_OLD_KEYS`` older keys that still read, comma-separated
``THREADLINE_ENCRYPTION_REQUIRED`` ``true`` (default) refuses plaintext rows; ``false`` reads them
                                   (while ``threadline rekey`` encrypts an existing database)
=================================  =================================================================
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from threadline.errors import ConfigError
from threadline import extras

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
KEY_ID_BYTES = 4
ENV_KEY = "THREADLINE_ENCRYPTION_KEY"
ENV_KEY_FILE = "THREADLINE_ENCRYPTION_KEY_FILE"
ENV_OLD_KEYS = "THREADLINE_ENCRYPTION_OLD_KEYS"
ENV_REQUIRED = "THREADLINE_ENCRYPTION_REQUIRED"

KeySource = Sequence[bytes | str] | Callable[[], Sequence[bytes | str]]


def parse_key(key: bytes | str) -> bytes:
    """A 32-byte key from bytes, base64 (standard or URL-safe) or hex text.
    Raises ConfigError (never echoing the key) otherwise."""
    if isinstance(key, (bytes, bytearray)) and len(key) == KEY_BYTES:
        return bytes(key)
    if isinstance(key, (bytes, bytearray)):
        key = bytes(key).decode("ascii", "replace")
    if isinstance(key, str):
        text = key.strip()
        candidates = []
        if len(text) == 2 * KEY_BYTES:
            candidates.append(lambda: bytes.fromhex(text))
        candidates += [lambda: base64.b64decode(text, validate=True), lambda: base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))]
        for decode in candidates:
            try:
                raw = decode()
            except (ValueError, binascii.Error):
                continue
            if len(raw) == KEY_BYTES:
                return raw
    raise ConfigError(
        f"an encryption key must be {KEY_BYTES} random bytes, given as base64 or hex text "
        '(make one with: python -c "import os, base64; print(base64.b64encode(os.urandom(32)).decode())")'
    )


def key_id(key: bytes) -> bytes:
    """The 4-byte id stored with every value a key encrypts (derived, never the key itself)."""
    return hashlib.sha256(b"threadline key id\x00" + key).digest()[:KEY_ID_BYTES]


class Keyring:
    """AES-256-GCM keys of a saver: the first key encrypts new rows, every key decrypts.

    ``keys``: the keys (see ``parse_key``), newest first, or a callable returning them
    (called once, on first use; ``refresh()`` calls it again). ``require`` (default):
    a value row that is not encrypted, or a checkpoint row without a keyed checksum,
    raises ``EncryptionError`` instead of loading — set it False only while
    ``threadline rekey`` encrypts an existing database. ``write=False`` keeps the
    keys for reading only (new rows are then stored unencrypted, with a checksum:
    how ``rekey`` decrypts a database).

    Raises ConfigError for a malformed key or an empty key list; MissingExtraError without the
    cryptography package (``pip install 'threadline[encryption]'``).
    """

    def __init__(self, keys: KeySource, *, require: bool = True, write: bool = True) -> None:
        self.require = require
        self.write = write
        self._source = keys
        self._lock = threading.Lock()
        self._by_id: dict[bytes, list[AESGCM]] | None = None
        self._write: tuple[bytes, AESGCM, bytes] | None = None
        if not callable(keys):
            self._load()

    def _load(self) -> None:
        # imported here: OpenSSL's bindings cost ~6.6 MB of memory, paid only by a saver that encrypts
        extras.require("encryption", "encryption at rest (a Keyring)")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        found = self._source() if callable(self._source) else self._source
        if isinstance(found, (str, bytes)) or not isinstance(found, Iterable):
            raise ConfigError("a Keyring needs a list of keys (newest first), or a callable returning one")
        raw = [parse_key(k) for k in found]
        if not raw:
            raise ConfigError("a Keyring needs at least one key")
        by_id: dict[bytes, list[AESGCM]] = {}
        for k in raw:
            by_id.setdefault(key_id(k), []).append(AESGCM(k))
        first = raw[0]
        self._by_id = by_id
        self._write = (key_id(first), AESGCM(first), hashlib.sha256(b"threadline checkpoint mac\x00" + first).digest())
        self._macs = {key_id(k): hashlib.sha256(b"threadline checkpoint mac\x00" + k).digest() for k in reversed(raw)}

    def _ensure(self) -> None:
        if self._by_id is None:
            with self._lock:
                if self._by_id is None:
                    self._load()

    def refresh(self) -> None:
        """Fetch the keys again from a callable source (after a rotation in the KMS)."""
        with self._lock:
            self._load()

    @property
    def writer(self) -> tuple[bytes, AESGCM] | None:
        """(key id, cipher) new values are encrypted with; None when ``write`` is off."""
        self._ensure()
        assert self._write is not None
        return self._write[:2] if self.write else None

    def ciphers(self, kid: bytes) -> list[AESGCM]:
        """The ciphers of the keys with this id (usually one; none when the key is not here)."""
        self._ensure()
        assert self._by_id is not None
        return self._by_id.get(kid, [])

    def mac_key(self, kid: bytes | None = None) -> tuple[bytes, bytes] | None:
        """(key id, MAC key) for checkpoint checksums: the write key's, or the key with ``kid``."""
        self._ensure()
        assert self._write is not None
        if kid is None:
            return (self._write[0], self._write[2]) if self.write else None
        mac = self._macs.get(kid)
        return None if mac is None else (kid, mac)

    @property
    def key_ids(self) -> list[str]:
        """Hex ids of the keys held, the write key first (for messages and reports)."""
        self._ensure()
        assert self._by_id is not None and self._write is not None
        return [self._write[0].hex()] + [k.hex() for k in self._by_id if k != self._write[0]]

    def __repr__(self) -> str:
        loaded = self._by_id is not None
        return f"Keyring(keys={self.key_ids if loaded else 'not loaded'}, require={self.require}, write={self.write})"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, require: bool = True, write: bool = True) -> Keyring:
        """Keys from a text file: one per line (the first writes), blank lines and ``#`` comments
        ignored. Raises ConfigError when the file cannot be read or holds no key."""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read the encryption key file {str(path)!r}: {exc.strerror}") from exc
        keys = [line.split("#", 1)[0].strip() for line in text.splitlines()]
        return cls([k for k in keys if k], require=require, write=write)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Keyring | None:
        """The keys the environment names (see the module docstring), or None when it names none.
        Raises ConfigError for a malformed key or an unreadable key file."""
        env = os.environ if environ is None else environ
        require = env.get(ENV_REQUIRED, "true").strip().lower() not in ("0", "false", "no", "off")
        old = [k.strip() for k in env.get(ENV_OLD_KEYS, "").split(",") if k.strip()]
        if env.get(ENV_KEY_FILE):
            ring = cls.from_file(env[ENV_KEY_FILE], require=require)
            return cls(ring._keys_text() + old, require=require) if old else ring
        if env.get(ENV_KEY):
            return cls([env[ENV_KEY], *old], require=require)
        if old:
            return cls(old, require=require, write=False)
        return None

    def _keys_text(self) -> list[bytes | str]:
        found = self._source() if callable(self._source) else self._source
        return list(found)
