"""Database statistics: ``Stats`` and ``stats_op`` / ``stats`` (rows and bytes per table,
threads, namespaces, checkpoint sources, dedup ratios of channel references against
stored blobs, checkpoints per hour, average checkpoint size and a histogram of state sizes). Reads sizes only; the largest threads come from the threads listing
(``threads_op``), the one read model this builds on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.storage.dialect import Dialect
from threadline.storage.dialect.reads import COUNTED_TABLES
from threadline.storage.ops import Op, Q
from threadline.read.common import iso
from threadline.read.threads import ThreadInfo, threads_op
from threadline.keys import thread_id_of

# Upper bounds (bytes) of the state size histogram's buckets; the last bucket is open.
SIZE_BUCKETS = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)

@dataclass
class Stats:
    """Database statistics (seed 002 §9.1, plus storage dedup).

    ``tables``: per table ``{"rows", "bytes"}`` (checkpoints: checkpoint + metadata
    JSON; blobs and writes: stored value bytes). ``references``: channel references
    made by all checkpoints (what full-copy storage would store as rows);
    ``dedup_ratio``: references ÷ blob rows; ``logical_blob_bytes``: the bytes a
    full copy per checkpoint would store; ``bytes_dedup_ratio``: that ÷ stored blob
    bytes. ``top_threads``: the largest threads from the ``threads`` index.
    ``others``: rows of the Store and the Cache in the same database (``store_items``,
    ``cache_entries``) where their tables exist, filled in by the caller
    (``threadline.store.reader.counts_op``). ``damaged``: the ``top_threads`` that cannot be
    read (``ThreadInfo.damage``), listed as the others are.
    """

    tables: dict[str, dict[str, int]]
    threads: int
    references: int
    dedup_ratio: float | None
    logical_blob_bytes: int
    bytes_dedup_ratio: float | None
    top_threads: list[ThreadInfo]
    namespaces: int
    sources: dict[str, int]
    # seed 002 §9.1: checkpoints written in each of the last 24 hours (oldest first), the
    # stored bytes per checkpoint (all three tables ÷ checkpoints) and how big checkpoints'
    # states are (the stored bytes of the blob rows its channel_versions name; a delta row counts its own)
    checkpoints_per_hour: list[dict[str, Any]] = field(default_factory=list)
    avg_checkpoint_bytes: float | None = None
    state_size_histogram: list[dict[str, Any]] = field(default_factory=list)
    others: dict[str, int] = field(default_factory=dict)
    # offloaded values and cold threads (docs/offload.md), filled in by the caller where the saver
    # offloads: ``lifecycle.objects.offload_summary``
    offloaded: dict[str, Any] = field(default_factory=dict)

    @property
    def damaged(self) -> list[ThreadInfo]:
        return [t for t in self.top_threads if t.damage is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "damaged": len(self.damaged),
            "tables": self.tables,
            "threads": self.threads,
            "namespaces": self.namespaces,
            "references": self.references,
            "dedup_ratio": self.dedup_ratio,
            "logical_blob_bytes": self.logical_blob_bytes,
            "bytes_dedup_ratio": self.bytes_dedup_ratio,
            "sources": self.sources,
            "checkpoints_per_hour": self.checkpoints_per_hour,
            "avg_checkpoint_bytes": self.avg_checkpoint_bytes,
            "state_size_histogram": self.state_size_histogram,
            "top_threads": [t.to_json() for t in self.top_threads],
            **self.others,
            **({"offloaded": self.offloaded} if self.offloaded else {}),
        }


def stats_op(d: Dialect, *, top: int = 10, thread_ids: Sequence[Any] | None = None, now: float | None = None) -> Op[Stats]:
    """Counts and bytes per table, dedup ratios, checkpoints per hour over the 24 hours before
    ``now`` (hours of the epoch, UTC), the average checkpoint size, a histogram of state sizes
    (``SIZE_BUCKETS``) and the ``top`` largest threads, of ``thread_ids`` (None: the whole
    database); reads sizes only."""
    ids = tuple(thread_id_of(t) for t in thread_ids) if thread_ids is not None else None
    tables: dict[str, dict[str, int]] = {}
    for table in COUNTED_TABLES:
        found = yield Q(*d.table_totals(table, ids))
        tables[table] = {"rows": int(found[0][0]), "bytes": int(found[0][1])}
    threads = int((yield Q(*d.thread_count(ids)))[0][0])
    namespaces = int((yield Q(*d.namespace_count(ids)))[0][0])
    sources = {(r[0] if r[0] is not None else "?"): int(r[1]) for r in (yield Q(*d.source_counts(ids)))}
    refs = yield Q(*d.reference_totals(ids))
    references, logical = int(refs[0][0]), int(refs[0][1])
    blob_rows, blob_bytes = tables["blobs"]["rows"], tables["blobs"]["bytes"]
    now = time.time() if now is None else now
    hours = [(int(now // 3600) - 23 + i) * 3600.0 for i in range(25)]
    per_hour = (yield Q(*d.checkpoint_counts(ids, hours)))[0]
    sizes = [0.0, *SIZE_BUCKETS, float("inf")]
    states = (yield Q(*d.state_size_counts(ids, sizes[:-1])))[0]
    checkpoints = tables["checkpoints"]["rows"]
    counts = [int(n or 0) for n in states[:-1]]
    counts.append(int(states[-1] or 0) - sum(counts))  # the open last bucket
    counts[0] += checkpoints - int(states[-1] or 0)  # checkpoints naming no channel: an empty state
    top_threads: list[ThreadInfo] = []
    if top > 0:
        page = yield from threads_op(d, thread_ids=ids, limit=top, order_by="bytes")
        top_threads = page.threads
    return Stats(
        tables=tables,
        threads=threads,
        references=references,
        dedup_ratio=round(references / blob_rows, 3) if blob_rows else None,
        logical_blob_bytes=logical,
        bytes_dedup_ratio=round(logical / blob_bytes, 3) if blob_bytes else None,
        top_threads=top_threads,
        namespaces=namespaces,
        sources=sources,
        checkpoints_per_hour=[{"hour": iso(h), "checkpoints": int(n or 0)} for h, n in zip(hours, per_hour)],
        avg_checkpoint_bytes=round(sum(t["bytes"] for t in tables.values()) / checkpoints, 1) if checkpoints else None,
        state_size_histogram=[
            {"min_bytes": int(lo), "max_bytes": None if hi == float("inf") else int(hi), "checkpoints": n}
            for lo, hi, n in zip(sizes, sizes[1:], counts)
        ],
    )


def stats(saver: Any, **kwargs: Any) -> Stats:
    """Sync ``stats_op``."""
    return saver.run(stats_op(saver.dialect, **kwargs))
