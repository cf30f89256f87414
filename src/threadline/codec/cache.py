"""The blob cache: recently written and read list/dict values, by version.

``Entry`` (a cached container with its row's type and stored size),
``entry_of`` (an entry for a resolved value) and ``BlobCache`` (a bounded,
thread-safe LRU, plus recent checkpoints' channel versions).
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


class BlobCache:
    """Bounded LRU of (thread_id, checkpoint_ns, channel, version) → ``Entry``, plus
    (thread_id, checkpoint_ns, checkpoint_id) → channel_versions of recent checkpoints.

    Keyed by version, so branches are safe: a version names one value. Thread-safe.
    ``head(thread_id, checkpoint_ns)``: the newest checkpoint_id whose versions it holds.
    ``max_bytes`` bounds the item bytes held; ``max_checkpoints`` the versions maps.
    A stale entry can never corrupt data: a put writes a delta only if the base
    row still has the cached type and size, and every delta records the CRC-32
    of the value it reproduces.
    """

    def __init__(self, max_bytes: int = 64 << 20, max_checkpoints: int = 4096) -> None:
        self.max_bytes = max_bytes
        self.max_checkpoints = max_checkpoints
        self._blobs: OrderedDict[tuple, Entry] = OrderedDict()
        self._versions: OrderedDict[tuple, dict[str, str]] = OrderedDict()
        self._heads: dict[tuple, str] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Entry | None:
        with self._lock:
            entry = self._blobs.get(key)
            if entry is not None:
                self._blobs.move_to_end(key)
            return entry

    def put(self, key: tuple, entry: Entry) -> None:
        size = entry.value.nbytes
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._blobs.pop(key, None)
            if old is not None:
                self._bytes -= old.value.nbytes
            self._blobs[key] = entry
            self._bytes += size
            while self._bytes > self.max_bytes and self._blobs:
                _, dropped = self._blobs.popitem(last=False)
                self._bytes -= dropped.value.nbytes

    def discard(self, key: tuple) -> None:
        with self._lock:
            old = self._blobs.pop(key, None)
            if old is not None:
                self._bytes -= old.value.nbytes

    def versions(self, key: tuple) -> dict[str, str] | None:
        with self._lock:
            found = self._versions.get(key)
            if found is not None:
                self._versions.move_to_end(key)
            return found

    def put_versions(self, key: tuple, versions: dict[str, str]) -> None:
        with self._lock:
            self._versions[key] = versions
            self._versions.move_to_end(key)
            if self._heads.get(key[:2], "") < key[2]:
                self._heads[key[:2]] = key[2]
            while len(self._versions) > self.max_checkpoints:
                dropped, _ = self._versions.popitem(last=False)
                if self._heads.get(dropped[:2]) == dropped[2]:
                    del self._heads[dropped[:2]]

    def head(self, thread_id: str, checkpoint_ns: str) -> str | None:
        with self._lock:
            return self._heads.get((thread_id, checkpoint_ns))

    def forget_threads(self, thread_ids: Any) -> None:
        """Drop everything cached for these threads (after deletes; tidy, never needed for correctness)."""
        tids = set(thread_ids)
        with self._lock:
            for key in [k for k in self._blobs if k[0] in tids]:
                self._bytes -= self._blobs.pop(key).value.nbytes
            for key in [k for k in self._versions if k[0] in tids]:
                del self._versions[key]
            for key in [k for k in self._heads if k[0] in tids]:
                del self._heads[key]

    def clear(self) -> None:
        with self._lock:
            self._blobs.clear()
            self._versions.clear()
            self._heads.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._blobs)
