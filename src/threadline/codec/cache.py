"""The blob cache: recently written and read list/dict values, by version.

``Entry`` (a cached container with its row's type and stored size),
``entry_of`` (an entry for a resolved value) and ``BlobCache`` (a thread-safe LRU,
plus recent checkpoints' channel versions, bounded by bytes: ``max_bytes``, default
``DEFAULT_MAX_BYTES`` = 64 MiB, counting values, keys and per-entry overhead).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from threadline.codec.containers import Container, container
from threadline.codec.deltas import Resolved


@dataclass(slots=True)
class Entry:
    """A stored list/dict value as cached: its container, and its row's type and stored size
    (a put checks both against the base row before writing a delta on it)."""

    value: Container
    stored_type: str
    stored_len: int


def entry_of(resolved: Resolved, stored_type: str, stored_len: int) -> Entry | None:
    """A cache entry for a resolved list/dict value (None for anything else)."""
    tag, data, value = resolved
    if value is None and tag == "msgpack" and data is not None:
        value = container(data)
    return None if value is None else Entry(value, stored_type, stored_len)


# Bytes a cached entry costs besides its value and key text (measured with ``tracemalloc``,
# CPython 3.11: the Entry and Container objects, the key tuple and its strings' headers, the
# OrderedDict node; 411 bytes for a list value): counted so that many small entries, as
# many threads bring, are bounded too and not only their values.
ENTRY_OVERHEAD = 416
# A checkpoint's versions map: the dict and key tuple (300), and per channel the two
# strings' headers and the dict slot (100), plus the text; 832 bytes measured for 4 channels,
# 990 counted.
VERSIONS_OVERHEAD = 300
PAIR_OVERHEAD = 100
DEFAULT_MAX_BYTES = 64 << 20  # 64 MiB: everything a saver's cache holds


def _key_len(key: tuple) -> int:
    return sum(len(k) for k in key if isinstance(k, str))


def entry_bytes(key: tuple, entry: Entry) -> int:
    """The bytes ``BlobCache`` counts for a value entry: the value (and its item fingerprints),
    the key text and ``ENTRY_OVERHEAD``."""
    return entry.value.nbytes + _key_len(key) + ENTRY_OVERHEAD


def versions_bytes(key: tuple, versions: dict[str, str]) -> int:
    """The bytes ``BlobCache`` counts for a checkpoint's versions map."""
    return VERSIONS_OVERHEAD + _key_len(key) + sum(len(c) + len(v) + PAIR_OVERHEAD for c, v in versions.items())


class BlobCache:
    """Bounded LRU of (thread_id, checkpoint_ns, channel, version) → ``Entry``, plus
    (thread_id, checkpoint_ns, checkpoint_id) → channel_versions of recent checkpoints.

    Keyed by version, so branches are safe: a version names one value. Thread-safe.

    ``max_bytes`` (default 64 MiB) bounds everything held, by the bytes ``entry_bytes`` and
    ``versions_bytes`` count (values with their item fingerprints, key text and a measured
    per-entry overhead), so the bound holds for a few large values and for many threads'
    small ones alike; least recently used entries go first. The versions maps are held to
    at most ``max_bytes // 8`` of it and ``max_checkpoints`` entries, so they never push the
    values out. ``nbytes`` is the bytes counted now (≤ ``max_bytes`` after every call).
    A stale entry can never corrupt data: a put writes a delta only if the base
    row still has the cached type and size, and every delta records the CRC-32
    of the value it reproduces.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, max_checkpoints: int = 4096) -> None:
        for name, value in (("max_bytes", max_bytes), ("max_checkpoints", max_checkpoints)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self.max_bytes = max_bytes
        self.max_checkpoints = max_checkpoints
        self._blobs: OrderedDict[tuple, tuple[Entry, int]] = OrderedDict()
        self._versions: OrderedDict[tuple, tuple[dict[str, str], int]] = OrderedDict()
        self._bytes = 0  # values and versions maps
        self._vbytes = 0  # versions maps
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Entry | None:
        with self._lock:
            found = self._blobs.get(key)
            if found is None:
                return None
            self._blobs.move_to_end(key)
            return found[0]

    def _shrink(self) -> None:
        while self._vbytes > self.max_bytes // 8 or len(self._versions) > self.max_checkpoints:
            self._vbytes -= (size := self._versions.popitem(last=False)[1][1])
            self._bytes -= size
        while self._bytes > self.max_bytes and self._blobs:
            self._bytes -= self._blobs.popitem(last=False)[1][1]
        while self._bytes > self.max_bytes and self._versions:
            self._vbytes -= (size := self._versions.popitem(last=False)[1][1])
            self._bytes -= size

    def put(self, key: tuple, entry: Entry) -> None:
        size = entry_bytes(key, entry)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._blobs.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._blobs[key] = (entry, size)
            self._bytes += size
            self._shrink()

    def discard(self, key: tuple) -> None:
        with self._lock:
            old = self._blobs.pop(key, None)
            if old is not None:
                self._bytes -= old[1]

    def versions(self, key: tuple) -> dict[str, str] | None:
        with self._lock:
            found = self._versions.get(key)
            if found is None:
                return None
            self._versions.move_to_end(key)
            return found[0]

    def put_versions(self, key: tuple, versions: dict[str, str]) -> None:
        size = versions_bytes(key, versions)
        with self._lock:
            old = self._versions.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
                self._vbytes -= old[1]
            self._versions[key] = (versions, size)
            self._bytes += size
            self._vbytes += size
            self._shrink()

    def forget_threads(self, thread_ids: Any) -> None:
        """Drop everything cached for these threads (after deletes; tidy, never needed for correctness)."""
        tids = set(thread_ids)
        with self._lock:
            for key in [k for k in self._blobs if k[0] in tids]:
                self._bytes -= self._blobs.pop(key)[1]
            for key in [k for k in self._versions if k[0] in tids]:
                size = self._versions.pop(key)[1]
                self._bytes -= size
                self._vbytes -= size

    def clear(self) -> None:
        with self._lock:
            self._blobs.clear()
            self._versions.clear()
            self._bytes = self._vbytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes held, as counted (values, versions maps, keys and per-entry overhead)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._blobs)
