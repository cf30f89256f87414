"""The in-memory model of one thread that deleting, retention and fsck plan with.

``_Thread`` holds every checkpoint row of a thread (parent, step, source,
created_at, checkpoint document, metadata, stored size) plus which blobs exist
(with their size and delta base) and the count and size of each checkpoint's
pending writes, but no values. What a kept checkpoint needs to stay readable is
storage's one rule (``threadline.storage.liveness``): ``delta_requirements`` asks
it for the ancestors whose writes rebuild a checkpoint's DeltaChannel state,
``live_blobs`` for the blobs kept checkpoints reference, delta bases included.
``_load_thread_op`` loads it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from threadline import codec
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect
from threadline.storage.liveness import Lineage, live_blobs
from threadline.storage.ops import Op, Q


@dataclass
class _Thread:
    """Everything about one thread's checkpoints except values (for planning)."""

    thread_id: str
    rows: dict[tuple[str, str], tuple]  # (ns, cid) -> (parent, step, source, created_at, doc, meta, ck_bytes, checksum)
    nonempty: set[tuple[str, str, str]]  # (ns, channel, version) blobs holding a value, and values in documents
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

    @cached_property
    def lineage(self) -> Lineage:
        return Lineage({k: r[0] for k, r in self.rows.items()}, lambda k: R.all_versions(self.rows[k][4]), self.nonempty)

    def delta_requirements(self, ns: str, cid: str) -> set[str]:
        """Ancestors whose writes rebuild ``cid``'s DeltaChannel values (``liveness.Lineage.needs``)."""
        row = self.rows[(ns, cid)]
        return self.lineage.needs(ns, row[0], row[5])

    def reparenting(self, changes: Mapping[tuple[str, str], str | None]) -> list[tuple]:
        """``ops.set_parents`` input: (checkpoint_ns, checkpoint_id) → new parent, with each row as stored."""
        return [(ns, cid, new, self.rows[(ns, cid)][0], *self.rows[(ns, cid)][4:6], self.rows[(ns, cid)][7]) for (ns, cid), new in changes.items()]

    def live_blobs(self, kept: Iterable[tuple[str, str]]) -> set[tuple[str, str, str]]:
        """The blobs the ``kept`` checkpoints need (``liveness.live_blobs``)."""
        return live_blobs(
            ((key[0], ch, v) for key in kept for ch, v in R.blob_pairs(self.rows[key][4])),
            {k: base for k, (_, base) in self.blob_sizes.items()},
        )


def _load_thread_op(d: Dialect, tid: str, unreadable: Collection[tuple[str, str]] = ()) -> Op[_Thread]:
    """Load a thread's model; the ``unreadable`` (checkpoint_ns, checkpoint_id) rows (fsck's
    findings) are kept as present with an empty checkpoint and metadata."""
    found = yield Q(d.thread_checkpoint_sizes(), (tid,))
    rows = {}
    for r in found:
        if (r[0], r[1]) in unreadable:
            doc, meta = {}, {}
        else:
            where = f"checkpoint ({tid!r}, {r[0]!r}, {r[1]!r})"
            doc, meta = d.load_object(r[6], where), d.load_json(r[7], where)
        rows[(r[0], r[1])] = (r[2], r[3], r[4], float(r[5]), doc, meta if isinstance(meta, dict) else {}, int(r[8]), r[9])
    blobs = yield Q(d.thread_blob_sizes(), (tid,))
    nonempty = {(b[0], b[1], b[2]) for b in blobs if b[3] != codec.EMPTY}
    # a value kept in a document (None, a scalar: ``storage.inline``) holds a value as a blob row does
    for (ns, _), r in rows.items():
        if r[4]:
            versions = R.all_versions(r[4])
            nonempty.update((ns, ch, R.version_key(versions[ch])) for ch in R.inline_values(r[4]))
    sizes = {(b[0], b[1], b[2]): (int(b[5]), b[4]) for b in blobs}
    writes = yield Q(d.thread_write_sizes(), (tid,))
    wb = {(w[0], w[1]): int(w[3]) for w in writes}
    wc = {(w[0], w[1]): int(w[2]) for w in writes}
    orphans = {k for k in wb if k not in rows}
    return _Thread(tid, rows, nonempty, sizes, wb, wc, orphans)
