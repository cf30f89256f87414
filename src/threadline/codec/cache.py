"""The blob cache: recently written and read list/dict values, by version.

``Entry`` (a cached container with its row's type and stored size),
``entry_of`` (an entry for a resolved value) and ``BlobCache`` (a thread-safe LRU,
plus recent checkpoints' channel versions and the list-valued pending writes stored
against them, bounded by bytes: ``max_bytes``, default ``DEFAULT_MAX_BYTES`` = 4 MiB,
counting values, keys and per-entry overhead).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
from types import MappingProxyType
from typing import Any, NamedTuple

from threadline.codec.containers import Container, container
from threadline.codec.deltas import Resolved


@dataclass(slots=True)
class Entry:
    """A stored list/dict value as cached: its container, and its row's type and stored size
    (a put checks both against the base row before writing a delta on it)."""

    value: Container
    stored_type: str
    stored_len: int


class Versions(NamedTuple):
    """A checkpoint's channel versions as cached: channel → version key, all of them; the
    channels whose value is no delta base (empty, too small, not a list or dict) or may have
    no blob; and of those, the ones that may have no blob (the checkpoint's ``absent``: a
    child taking them unchanged records them so too); ``empty``: channel → version of the empty
    channels its document holds (``storage.inline``), not in ``of`` (a child taking one unchanged
    holds it so too)."""

    of: dict[str, str]
    no_base: frozenset[str] = frozenset()
    absent: frozenset[str] = frozenset()
    empty: Mapping[str, Any] = MappingProxyType({})


def entry_of(resolved: Resolved, stored_type: str, stored_len: int) -> Entry | None:
    """A cache entry for a resolved list/dict value (None for anything else)."""
    tag, data, value = resolved
    if value is None and tag == "msgpack" and data is not None:
        value = container(data)
    return None if value is None else Entry(value, stored_type, stored_len)


# Bytes a cached entry costs besides its value and key text (measured with ``tracemalloc``,
# CPython 3.11: the Entry and Container objects, the key tuple and its strings' headers, the
# OrderedDict node and its share of the table; 545 bytes for a small list value, 3,000 of
# them): counted so that many small entries, as many threads bring, are bounded too and
# not only their values.
ENTRY_OVERHEAD = 576
# A checkpoint's versions map: the dict and key tuple (300), and per channel the two
# strings' headers and the dict slot (100), plus the text; 832 bytes measured for 4 channels,
# 990 counted.
VERSIONS_OVERHEAD = 300 + 120  # + the namespace's ``head`` entry it may hold (its key tuple, the dict slot)
PAIR_OVERHEAD = 100
# The text of an empty channel's name and version (``Versions.empty``), counted without reading it:
# LangGraph's versions are 51 characters, its channel names mostly fewer than 30.
EMPTY_PAIR_TEXT = 96
# A thread's keys in the per-thread index (a small dict and its slot: 264 bytes measured for
# 3,000 threads of one value and one versions map each), counted once per thread with
# anything cached; a further key costs ~36 bytes, within the margins of the counts above.
THREAD_OVERHEAD = 288
# 4 MiB: everything a saver's cache holds. It holds a 200-turn agent's working set; a fleet of short
# conversations filled 8 MiB with finished threads' values (+3.5 MB peak RSS) and saved no CPU by
# them; 16 long threads at once read back more bases (RESULTS round fourteen).
DEFAULT_MAX_BYTES = 4 << 20
_DATA = itemgetter(2)  # a head entry's serialized value (``storage.heads.Entries``)


def _key_len(key: tuple) -> int:
    try:
        return sum(map(len, key))  # keys are strings (a checkpoint_id may be None: below)
    except TypeError:
        return sum(len(k) for k in key if isinstance(k, str))


def entry_bytes(key: tuple, entry: Entry) -> int:
    """The bytes ``BlobCache`` counts for a value entry: the value (and its item fingerprints),
    the key text and ``ENTRY_OVERHEAD``."""
    return entry.value.nbytes + _key_len(key) + ENTRY_OVERHEAD


def write_bytes(write: tuple[str, str, str, int, tuple[int, bytes]]) -> int:
    """The bytes ``BlobCache`` counts for a remembered pending write: its digest and text,
    plus ``ENTRY_OVERHEAD`` (more than its tuples cost: a bound, not a measurement)."""
    channel, task_path, task_id, _, (_, digest) = write
    return len(digest) + len(channel) + len(task_path) + len(task_id) + ENTRY_OVERHEAD


def versions_bytes(key: tuple, versions: Versions) -> int:
    """The bytes ``BlobCache`` counts for a checkpoint's versions map and its empty channels (a
    no-base or absent channel's set slot counted as a further pair: a bound)."""
    of, empty = versions.of, versions.empty
    pairs = sum(map(len, of)) + sum(map(len, of.values())) + PAIR_OVERHEAD * (len(of) + len(versions.no_base) + len(versions.absent))
    if empty:  # the stored document's map, often a hundred channels: counted without a pass over it
        pairs += (PAIR_OVERHEAD + EMPTY_PAIR_TEXT) * len(empty)
    return VERSIONS_OVERHEAD + _key_len(key) + pairs


class BlobCache:
    """Bounded LRU of (thread_id, checkpoint_ns, channel, version) → ``Entry``, plus
    (thread_id, checkpoint_ns, checkpoint_id) → channel_versions of recent checkpoints,
    and → the list-valued pending writes this process stored against them (``writes``).

    Keyed by version, so branches are safe: a version names one value. Thread-safe.
    ``head(thread_id, checkpoint_ns)``: the newest checkpoint_id whose versions it holds.

    ``max_bytes`` (default 4 MiB) bounds everything held, by the bytes ``entry_bytes`` and
    ``versions_bytes`` count (values with their item fingerprints, key text and a measured
    per-entry overhead), so the bound holds for a few large values and for many threads'
    small ones alike; least recently used entries go first. The versions maps are held to
    at most ``max_bytes // 8`` of it and ``max_checkpoints`` entries, and the remembered
    writes to ``max_bytes // 4`` and ``max_writes`` checkpoints, and the head rows
    (``head_row``) to ``max_bytes // 8`` and ``4 × max_writes`` namespaces (the first to go when
    the bound is reached), so they never push the values out. ``nbytes`` is the bytes counted now (≤ ``max_bytes`` after every call).
    A stale entry can never corrupt data: a put writes a delta only if the base
    row still has the cached type and size, and every delta records the CRC-32
    of the value it reproduces.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, max_checkpoints: int = 4096, max_writes: int = 256) -> None:
        for name, value in (("max_bytes", max_bytes), ("max_checkpoints", max_checkpoints), ("max_writes", max_writes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self.max_bytes = max_bytes
        self.max_checkpoints = max_checkpoints
        self.max_writes = max_writes
        self._writes: OrderedDict[tuple, tuple[list[tuple[str, str, str, int, bytes]], int]] = OrderedDict()
        self._wbytes = 0  # remembered writes
        self._blobs: OrderedDict[tuple, tuple[Entry, int]] = OrderedDict()
        self._versions: OrderedDict[tuple, tuple[Versions, int]] = OrderedDict()
        self._heads: dict[tuple, str] = {}
        # (thread_id, checkpoint_ns) → (checkpoint_id, head entries (``storage.heads``), bytes counted):
        # the head row this process last wrote or read, so the next put carries its unchanged values
        self._rows: OrderedDict[tuple, tuple[str, dict, int]] = OrderedDict()
        self._rbytes = 0
        # thread_id → its keys in _blobs and _versions (a dict used as an ordered set: adding and
        # removing one is O(1) however many a long thread has), so forgetting a thread touches
        # only its own entries (a full cache holds tens of thousands; the sweeper forgets threads
        # one by one)
        self._keys_of: dict[str, dict[tuple, None]] = {}
        self._bytes = 0  # values, versions maps and writes
        self._vbytes = 0  # versions maps
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Entry | None:
        with self._lock:
            found = self._blobs.get(key)
            if found is None:
                return None
            self._blobs.move_to_end(key)
            return found[0]

    def knows(self, thread_id: str) -> bool:
        """Whether any value or versions map of ``thread_id`` is cached (a dict look-up, no lock: a
        hint that saves a cold read its look-ups, never a guarantee of a hit)."""
        return thread_id in self._keys_of

    def _track(self, key: tuple) -> None:
        keys = self._keys_of.get(key[0])
        if keys is None:
            keys = self._keys_of[key[0]] = {}
            self._bytes += THREAD_OVERHEAD
        keys[key] = None

    def _untrack(self, key: tuple) -> None:
        keys = self._keys_of[key[0]]
        del keys[key]
        if not keys:
            del self._keys_of[key[0]]
            self._bytes -= THREAD_OVERHEAD

    def _drop_blob(self, key: tuple, tracked: bool = True) -> None:
        self._bytes -= self._blobs.pop(key)[1]
        if tracked:
            self._untrack(key)

    def _drop_versions(self, key: tuple, tracked: bool = True) -> None:
        size = self._versions.pop(key)[1]
        self._vbytes -= size
        self._bytes -= size
        if self._heads.get(key[:2]) == key[2]:
            del self._heads[key[:2]]
        if tracked:
            self._untrack(key)

    def _drop_oldest_writes(self) -> None:
        size = self._writes.popitem(last=False)[1][1]
        self._wbytes -= size
        self._bytes -= size

    def _drop_oldest_versions(self) -> None:
        self._drop_versions(next(iter(self._versions)))

    def _drop_oldest_row(self) -> None:
        size = self._rows.popitem(last=False)[1][2]
        self._rbytes -= size
        self._bytes -= size

    def _shrink(self) -> None:
        while self._rows and (self._rbytes > self.max_bytes // 8 or len(self._rows) > self.max_writes * 4):
            self._drop_oldest_row()
        while self._writes and (self._wbytes > self.max_bytes // 4 or len(self._writes) > self.max_writes):
            self._drop_oldest_writes()
        while self._vbytes > self.max_bytes // 8 or len(self._versions) > self.max_checkpoints:
            self._drop_oldest_versions()
        while self._bytes > self.max_bytes and self._rows:  # head rows go before the values deltas build on
            self._drop_oldest_row()
        while self._bytes > self.max_bytes and self._blobs:
            self._drop_blob(next(iter(self._blobs)))
        while self._bytes > self.max_bytes and self._versions:
            self._drop_oldest_versions()
        while self._bytes > self.max_bytes and self._writes:
            self._drop_oldest_writes()

    def put(self, key: tuple, entry: Entry) -> None:
        size = entry_bytes(key, entry)
        # Too big with its decoded copy, then with its item fingerprints: kept without them (the
        # bytes alone at least, which the next put builds its delta on instead of reading the
        # whole value back through its chain).
        if size > self.max_bytes and entry.value.kept:
            entry = Entry(entry.value.with_chain(entry.value.depth, entry.value.chain), entry.stored_type, entry.stored_len)
            size = entry_bytes(key, entry)
        if size > self.max_bytes and entry.value.fps is not None:
            entry = Entry(entry.value.bare(), entry.stored_type, entry.stored_len)
            size = entry_bytes(key, entry)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._blobs:
                self._drop_blob(key)
            self._blobs[key] = (entry, size)
            self._track(key)
            self._bytes += size
            self._shrink()

    def discard(self, key: tuple) -> None:
        with self._lock:
            if key in self._blobs:
                self._drop_blob(key)

    def versions(self, key: tuple) -> Versions | None:
        with self._lock:
            found = self._versions.get(key)
            if found is None:
                return None
            self._versions.move_to_end(key)
            return found[0]

    def put_versions(self, key: tuple, versions: Versions) -> None:
        size = versions_bytes(key, versions)
        with self._lock:
            if key in self._versions:
                self._drop_versions(key)
            self._versions[key] = (versions, size)
            self._track(key)
            self._bytes += size
            self._vbytes += size
            if self._heads.get(key[:2], "") < key[2]:
                self._heads[key[:2]] = key[2]
            self._shrink()

    def head(self, thread_id: str, checkpoint_ns: str) -> str | None:
        with self._lock:
            return self._heads.get((thread_id, checkpoint_ns))

    def head_row(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> dict | None:
        """The head entries remembered for the namespace when they are those of ``checkpoint_id``."""
        with self._lock:
            found = self._rows.get((thread_id, checkpoint_ns))
            return found[1] if found is not None and found[0] == checkpoint_id else None

    def head_row_id(self, thread_id: str, checkpoint_ns: str) -> str | None:
        """The checkpoint_id whose head entries are remembered for the namespace (None: none)."""
        found = self._rows.get((thread_id, checkpoint_ns))  # one dict look-up: no lock (a hint, as ``knows``)
        return found[0] if found is not None else None

    def put_head_row(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, entries: dict) -> None:
        """Remember a namespace's head entries (``storage.heads``), replacing older ones."""
        size = ENTRY_OVERHEAD + sum(map(len, map(_DATA, entries.values()))) + sum(map(len, entries)) + PAIR_OVERHEAD * len(entries)
        key = (thread_id, checkpoint_ns)
        with self._lock:
            old = self._rows.pop(key, None)
            if old is not None:
                if old[0] > checkpoint_id:  # a sibling's older head: keep the newest
                    self._rows[key] = old
                    return
                self._rbytes -= old[2]
                self._bytes -= old[2]
            if size > self.max_bytes // 8:
                return
            self._rows[key] = (checkpoint_id, entries, size)
            self._rbytes += size
            self._bytes += size
            self._shrink()

    def add_writes(self, key: tuple, writes: list[tuple[str, str, str, int, tuple[int, bytes]]]) -> None:
        """Remember pending writes stored (inserted, not ignored) against checkpoint ``key``:
        (channel, task_path, task_id, idx, the digest of its items: ``codec.item_digest``) each."""
        size = sum(write_bytes(w) for w in writes)
        with self._lock:
            held, old = self._writes.pop(key, ([], 0))
            self._writes[key] = (held + writes, old + size)
            self._wbytes += size
            self._bytes += size
            self._shrink()

    def writes(self, key: tuple, channel: str) -> list[tuple[str, int, tuple[int, bytes]]]:
        """The remembered writes of checkpoint ``key`` on ``channel``, in LangGraph's write
        order (task_path, task_id, idx): (task_id, idx, the digest of its items) each."""
        with self._lock:
            found = self._writes.get(key, ((), 0))[0]
            return [(t, i, b) for ch, _, t, i, b in sorted(found, key=lambda w: w[1:4]) if ch == channel]

    def forget_threads(self, thread_ids: Any) -> None:
        """Drop everything cached for these threads, after their rows were deleted: frees the
        memory, and a later put on a deleted checkpoint can no longer reference its pending
        writes (remembered here), which went with it. Touches only these threads' entries."""
        tids = set(thread_ids)
        with self._lock:
            for tid in tids:
                keys = self._keys_of.pop(tid, None)
                if keys is None:
                    continue
                self._bytes -= THREAD_OVERHEAD
                for key in keys:
                    (self._drop_blob if len(key) == 4 else self._drop_versions)(key, tracked=False)
            for key in [k for k in self._writes if k[0] in tids]:  # at most max_writes
                size = self._writes.pop(key)[1]
                self._bytes -= size
                self._wbytes -= size
            for key in [k for k in self._rows if k[0] in tids]:  # at most 4 × max_writes
                size = self._rows.pop(key)[2]
                self._bytes -= size
                self._rbytes -= size

    def clear(self) -> None:
        with self._lock:
            self._blobs.clear()
            self._versions.clear()
            self._writes.clear()
            self._rows.clear()
            self._heads.clear()
            self._keys_of.clear()
            self._bytes = self._vbytes = self._wbytes = self._rbytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes held, as counted (values, versions maps, writes, keys and per-entry overhead)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._blobs)
