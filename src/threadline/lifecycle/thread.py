"""The in-memory model of one thread that deleting, retention and fsck plan with.

``_Thread`` holds every checkpoint row of a thread (parent, step, source,
created_at, checkpoint document, metadata, stored size) plus which blobs exist
(with their size and delta base) and the count and size of each checkpoint's
pending writes, but no values. Its ``delta_requirements`` (the ancestors whose
writes rebuild a checkpoint's DeltaChannel state) and ``live_blobs`` (the blobs
kept checkpoints reference, delta bases included) are the rules that keep every
kept checkpoint readable. ``_load_thread_op`` loads it; ``_delta_channels`` reads
a checkpoint's DeltaChannel names from its metadata.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from threadline import codec
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q
from threadline.read import _doc, _json

# --- shared helpers ------------------------------------------------------------------


def _delta_channels(meta: Mapping[str, Any]) -> list[str]:
    counters = meta.get("counters_since_delta_snapshot") or {}
    return sorted(counters) if isinstance(counters, Mapping) else []


@dataclass
class _Thread:
    """Everything about one thread's checkpoints except values (for planning)."""

    thread_id: str
    rows: dict[tuple[str, str], tuple]  # (ns, cid) -> (parent, step, source, created_at, doc, meta, ck_bytes)
    nonempty: set[tuple[str, str, str]]  # (ns, channel, version) blobs holding a value
    blob_sizes: dict[tuple[str, str, str], tuple[int, str | None]]  # (ns, ch, v) -> (bytes, base_version)
    write_bytes: dict[tuple[str, str], int]  # (ns, cid) -> stored bytes of its writes
    write_counts: dict[tuple[str, str], int]
    orphan_write_keys: set[tuple[str, str]] = field(default_factory=set)

    def children(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = defaultdict(list)
        for (ns, cid), r in sorted(self.rows.items()):
            if r[0] and (ns, r[0]) in self.rows:
                out[(ns, r[0])].append(cid)
        return out

    def head(self, ns: str = "") -> str | None:
        ids = [cid for (n, cid) in self.rows if n == ns]
        return max(ids) if ids else None

    def anchor(self, ns: str) -> str | None:
        """The root checkpoint a subgraph namespace's run started from (metadata ``parents[""]``)."""
        for (n, cid), r in sorted(self.rows.items()):
            if n == ns:
                parents = r[5].get("parents") or {}
                if isinstance(parents, Mapping) and parents.get(""):
                    return parents[""]
        return None

    def delta_requirements(self, ns: str, cid: str) -> set[str]:
        """Ancestors whose writes rebuild ``cid``'s DeltaChannel values (back to the nearest stored snapshot)."""
        need: set[str] = set()
        meta = self.rows[(ns, cid)][5]
        for ch in _delta_channels(meta):
            cur = self.rows[(ns, cid)][0]
            while cur and (ns, cur) in self.rows:
                need.add(cur)
                versions = self.rows[(ns, cur)][4].get("channel_versions") or {}
                if ch in versions and (ns, ch, R.version_key(versions[ch])) in self.nonempty:
                    break
                cur = self.rows[(ns, cur)][0]
        return need

    def live_blobs(self, kept: Iterable[tuple[str, str]]) -> set[tuple[str, str, str]]:
        live = {(ns, ch, v) for key in kept for ns in [key[0]] for ch, v in R.blob_pairs(self.rows[key][4])}
        todo = [k for k in live if k in self.blob_sizes]
        while todo:
            ns, ch, v = todo.pop()
            base = self.blob_sizes.get((ns, ch, v), (0, None))[1]
            if base is not None and (ns, ch, base) not in live:
                live.add((ns, ch, base))
                todo.append((ns, ch, base))
        return live


def _load_thread_op(d: Dialect, tid: str) -> Op[_Thread]:
    size_ck = f"{d.bytes_of('checkpoint', 'json')} + {d.bytes_of('metadata', 'json')}"
    found = yield Q(
        f"SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, created_at, checkpoint, metadata, {size_ck} "
        "FROM threadline_checkpoints WHERE thread_id = ?",
        (tid,),
    )
    rows = {}
    for r in found:
        where = f"checkpoint ({tid!r}, {r[0]!r}, {r[1]!r})"
        meta = _json(d, r[7], where)
        rows[(r[0], r[1])] = (r[2], r[3], r[4], float(r[5]), _doc(d, r[6], where), meta if isinstance(meta, dict) else {}, int(r[8]))
    blobs = yield Q(
        f"SELECT checkpoint_ns, channel, version, type, base_version, {d.bytes_of('blob', 'blob')} FROM threadline_blobs WHERE thread_id = ?",
        (tid,),
    )
    nonempty = {(b[0], b[1], b[2]) for b in blobs if b[3] != codec.EMPTY}
    sizes = {(b[0], b[1], b[2]): (int(b[5]), b[4]) for b in blobs}
    writes = yield Q(
        f"SELECT checkpoint_ns, checkpoint_id, COUNT(*), COALESCE(SUM({d.bytes_of('blob', 'blob')}), 0) FROM threadline_writes "
        "WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id",
        (tid,),
    )
    wb = {(w[0], w[1]): int(w[3]) for w in writes}
    wc = {(w[0], w[1]): int(w[2]) for w in writes}
    orphans = {k for k in wb if k not in rows}
    return _Thread(tid, rows, nonempty, sizes, wb, wc, orphans)
