"""What keeps a checkpoint readable: the one delta-ancestry rule and the one live-blob rule.

A checkpoint reads back from

* the blobs its ``channel_versions`` name and, for a delta blob, every version it is
  built on (``blobs.base_version``, transitively): ``live_blobs``;
* for a list delta that references pending writes instead of holding its items
  (``codec.refs``), those writes: before a checkpoint's writes are deleted, every live
  delta on them gets its items copied in (``refs_to_copy``);
* for a LangGraph ``DeltaChannel`` (the channels in its metadata
  ``counters_since_delta_snapshot``), the pending writes of its ancestors back to the
  nearest one that stores the channel's value (a blob whose type is not
  ``codec.EMPTY``), that one included: ``Lineage.walk`` / ``Lineage.needs``.

Pure functions, no I/O. Every caller asks them: ``get_delta_channel_history``,
``prune(keep_latest)``, ``gc_blobs`` and ``delete_checkpoints`` (``storage.ops``), and lifecycle's delete,
retention and fsck plans, so what a kept checkpoint needs is decided in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from threadline.storage.rows import version_key

CheckpointKey = tuple[str, str]  # (checkpoint_ns, checkpoint_id) within one thread
BlobKey = tuple[str, str, str]  # (checkpoint_ns, channel, version) within one thread


def delta_channels(metadata: Mapping[str, Any]) -> list[str]:
    """The DeltaChannel names of a checkpoint (its metadata ``counters_since_delta_snapshot``
    keys, sorted); none when that entry is missing or not a mapping."""
    counters = metadata.get("counters_since_delta_snapshot") or {}
    return sorted(counters) if isinstance(counters, Mapping) else []


@dataclass(frozen=True)
class Lineage:
    """The parent links and stored values of one thread's checkpoints, as a delta walk reads them.

    ``parents``: (checkpoint_ns, checkpoint_id) → parent_checkpoint_id of every checkpoint
    the walk may visit (a parent missing from it ends the walk: deleted, or never
    stored); ``versions``: (checkpoint_ns, checkpoint_id) → its ``channel_versions``
    (called only for checkpoints the walk visits); ``stored``: the (checkpoint_ns,
    channel, version key) blobs that hold a value.
    """

    parents: Mapping[CheckpointKey, str | None]
    versions: Callable[[CheckpointKey], Mapping[str, Any]]
    stored: Container[BlobKey]

    def walk(self, ns: str, parent: str | None, channel: str) -> tuple[list[str], str | None]:
        """The ancestors whose writes rebuild ``channel`` for a checkpoint whose parent is
        ``parent``, nearest first, back to and including the nearest one that stores the
        channel's value; and that value's version key (None: the walk reached a root, so
        every ancestor's writes count and there is no stored seed). A parent cycle (a
        corrupted row) ends the walk where it loops."""
        chain: list[str] = []
        seen: set[str] = set()
        cur = parent
        while cur and (ns, cur) in self.parents and cur not in seen:
            seen.add(cur)
            chain.append(cur)
            versions = self.versions((ns, cur))
            if channel in versions:
                version = version_key(versions[channel])
                if (ns, channel, version) in self.stored:
                    return chain, version
            cur = self.parents[(ns, cur)]
        return chain, None

    def needs(self, ns: str, parent: str | None, metadata: Mapping[str, Any], channels: Iterable[str] = ()) -> set[str]:
        """The ancestors (checkpoint_ids in ``ns``) a checkpoint with this ``parent`` and
        ``metadata`` rebuilds its DeltaChannel values from: every channel's ``walk``, for the
        channels its metadata names and ``channels`` (known to be DeltaChannels otherwise: they
        store a ``_DeltaSnapshot``, see ``storage.ops.delta_evidence``)."""
        need: set[str] = set()
        for channel in sorted({*delta_channels(metadata), *channels}):
            need.update(self.walk(ns, parent, channel)[0])
        return need


def live_blobs(referenced: Iterable[BlobKey], base_of: Mapping[BlobKey, str | None]) -> set[BlobKey]:
    """The blobs kept checkpoints need: those they reference (``referenced``) and,
    transitively, the version each stored delta is built on (``base_of``: every stored
    blob → its base_version, None for a snapshot). A base that is not stored is
    still named live (it is missing, not garbage); its chain ends there."""
    live = set(referenced)
    todo = [k for k in live if k in base_of]
    while todo:
        ns, channel, version = todo.pop()
        base = base_of.get((ns, channel, version))
        if base is not None and (ns, channel, base) not in live:
            live.add((ns, channel, base))
            todo.append((ns, channel, base))
    return live


def refs_to_copy(live: Container[BlobKey], refs: Mapping[BlobKey, str], doomed: Container[CheckpointKey]) -> list[BlobKey]:
    """The blobs whose items must be copied out of pending writes before those writes are
    deleted: the ``live`` ones (``live_blobs``) among ``refs`` (every delta row that references
    writes → the checkpoint_id those writes belong to, in the blob's checkpoint_ns) whose
    writes are those of a ``doomed`` (checkpoint_ns, checkpoint_id). A dead one goes with
    ``gc_blobs``."""
    return sorted(k for k, cid in refs.items() if k in live and (k[0], cid) in doomed)
