"""Erasure: everything of one user or tenant deleted, with a receipt (``threadline erase``).

``erase(saver, selection, store=…)`` deletes

* the threads ``selection`` names — by thread_id glob (``thread_pattern``: ``*`` any run, ``?``
  one character; a pattern without a wildcard names one thread exactly, never a prefix: ``user-42``
  is not ``user-420``) over every thread with a row in any table or a cold stub (``lifecycle.cold``),
  and/or by metadata (``where``: threads with at least one checkpoint whose metadata matches,
  as ``list(filter=…)`` matches it — a cold thread's checkpoints read from its archive; both
  given: threads matching both) — each thread whole (checkpoints, values, pending writes, its
  index row, tags, record, cold stub) in one transaction (``erase_job``);
* the objects of the saver's object store those threads name — the values their rows offloaded
  and their cold archives — unless another thread names them too (objects are content-addressed,
  ``codec.objects``: two threads holding the same value share its object) or a row of another
  thread whose reference cannot be read might. A thread's objects are deleted just before its
  rows, so an interrupted erasure selects the thread again and finishes them;
* the Store items under each of ``selection.store_namespaces`` (a namespace prefix), then the
  Store's expired items (``sweep_ttl``: an expired item is deleted data still stored);

then gives the freed space back (``vacuum.reclaim``: SQLite pages to the file system,
Postgres ``VACUUM``; Redis frees memory as it deletes) and verifies: the selection is made
again (cold stubs included), the Store searched again, each deleted object looked up in the
object store and every row's references read again; anything still found, or an object deleted
that a row written meanwhile names, is a problem of the receipt.

The job is resumable: the selection is made from the database, so running the same erasure
again after an interruption deletes what is left; with a receipt file (``receipt=``) of an
interrupted run of the same selection, the new run continues that receipt (its threads and
counts), so the final receipt covers the whole erasure. The receipt (``ErasureReceipt``)
says what was deleted — thread ids, rows and stored bytes per table, cold archives and objects
and their bytes in the object store, Store items per namespace — when, the space before and
after, and what verification found. Rows of
LangGraph's official saver or store tables in the same database are not threadline's and are
not touched.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import ConfigError, CorruptRowError
from threadline.keys import is_reserved
from threadline.lifecycle.cold import COLD, cold_archives_op, cold_objects_op, fetch
from threadline.lifecycle.inline import object_names
from threadline.lifecycle.jobs import Job, run_job
from threadline.lifecycle.objects import Owners, owners_op, references_op, store_of
from threadline.lifecycle.vacuum import SpaceReport, reclaim
from threadline.storage import ops
from threadline.storage.dialect.base import metadata_matcher
from threadline.storage.dialect.reads import ThreadFilter
from threadline.storage.dialect.web import glob_matcher
from threadline.storage.ops import Op, Q

TABLES = ("checkpoints", "blobs", "writes")
OBJECT_KINDS = ("cold_archives", "objects")  # what an erasure deletes from the object store
PAGE = 500  # threads (or Store items) read per query
SAVE_EVERY = 50  # threads erased between two saves of the receipt file


@dataclass(frozen=True)
class Selection:
    """What to erase: threads by id glob (``thread_pattern``) and/or checkpoint metadata
    (``where``), and Store items under namespace prefixes (``store_namespaces``). ConfigError
    when it names nothing, or a pattern that would match every thread."""

    thread_pattern: str | None = None
    where: Mapping[str, Any] | None = None
    store_namespaces: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.thread_pattern is None and not self.where and not self.store_namespaces:
            raise ConfigError("erase needs a selection: a thread pattern, a metadata filter and/or Store namespaces")
        if self.thread_pattern is not None and self.thread_pattern.strip("*?") == "":
            raise ConfigError(f"thread pattern {self.thread_pattern!r} would match every thread: name the user's or tenant's part of the id")
        if any(not ns for ns in self.store_namespaces):
            raise ConfigError("a Store namespace to erase must have at least one label (the root would be the whole Store)")

    @property
    def names_threads(self) -> bool:
        return self.thread_pattern is not None or bool(self.where)

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_pattern": self.thread_pattern,
            "where": dict(self.where) if self.where else None,
            "store_namespaces": [".".join(ns) for ns in self.store_namespaces],
        }


@dataclass
class ErasureReceipt:
    """What an erasure deleted (or, ``dry_run``, would delete). ``status``: ``complete``,
    ``incomplete`` (interrupted: run it again to finish) or ``dry-run``; times in unix seconds;
    ``rows``/``bytes``: per table (checkpoints, blobs, writes), stored bytes as ``stats`` counts
    them; ``object_counts``/``object_bytes``: per kind of object deleted from the object store
    (``cold_archives``, ``objects``: offloaded values), their bytes there; ``store_items``: per
    namespace prefix (dotted); ``space``: bytes on disk before and after (None on Redis, or in a
    dry run); ``verified``: what the selection, the Store search and the object store found
    afterwards (``threads``: ids, ``store_items``, ``objects``: counts; empty when nothing is
    left); ``problems``: one line each (an erasure with problems exits 1)."""

    selection: Selection
    database: str
    dry_run: bool = False
    status: str = "incomplete"
    started_at: float = 0.0
    finished_at: float | None = None
    threads: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    object_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OBJECT_KINDS, 0))
    object_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OBJECT_KINDS, 0))
    store_items: dict[str, int] = field(default_factory=dict)
    space: SpaceReport | None = None
    verified: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    kept_objects: int = 0  # objects the erased threads named that other threads name too
    # the objects this run deleted, for the verification: never in the receipt file (an object's
    # name is a hash of its value)
    deleted_names: set[str] = field(default_factory=set, repr=False)

    @property
    def cold_archives(self) -> int:
        return self.object_counts["cold_archives"]

    @property
    def objects(self) -> int:
        return self.object_counts["objects"]

    def to_json(self) -> dict[str, Any]:
        return {
            "receipt": "threadline erasure",
            "status": self.status,
            "dry_run": self.dry_run,
            "database": self.database,
            "selection": self.selection.to_json(),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "threads": list(self.threads),
            "counts": {"threads": len(self.threads), **self.rows, **self.object_counts, "store_items": sum(self.store_items.values())},
            "bytes": {**self.bytes, **self.object_bytes},
            "kept_objects": self.kept_objects,
            "store_items": dict(self.store_items),
            "space": self.space.to_json() if self.space is not None else None,
            "verified": self.verified,
            "problems": list(self.problems),
        }

    def save(self, path: str) -> None:
        """Write the receipt as JSON to ``path`` (through a temporary file: a reader never sees half of it)."""
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)

    def resume(self, path: str) -> None:
        """Continue the receipt at ``path`` of an interrupted erasure of the same selection (its
        threads, counts and start). ConfigError when the file is another erasure's or a finished one."""
        try:
            with open(path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"receipt {path!r} exists and cannot be read as a receipt ({exc}); name a new file") from None
        if not isinstance(old, dict) or old.get("receipt") != "threadline erasure":
            raise ConfigError(f"{path!r} is not a threadline erasure receipt: name a new file")
        if old.get("status") != "incomplete" or old.get("selection") != self.selection.to_json():
            raise ConfigError(f"receipt {path!r} is of a finished erasure or of another selection: name a new file")
        self.started_at = float(old["started_at"])
        self.threads = [str(t) for t in old["threads"]]
        for table in TABLES:
            self.rows[table] += int(old["counts"][table])
            self.bytes[table] += int(old["bytes"][table])
        for kind in OBJECT_KINDS:  # absent from a receipt of a release before objects were counted
            self.object_counts[kind] += int(old["counts"].get(kind, 0))
            self.object_bytes[kind] += int(old["bytes"].get(kind, 0))
        self.kept_objects = int(old.get("kept_objects", 0))
        self.store_items = {str(k): int(v) for k, v in old["store_items"].items()}


def select_threads_op(d: Any, selection: Selection) -> Op[tuple[list[str], dict[str, str]]]:
    """(the thread_ids with rows ``selection`` names, sorted; cold thread_id → its archive object, of
    the cold threads its pattern names — every one without a pattern — whose metadata ``select_job``
    still matches against ``selection.where``), never threadline's own reserved threads."""
    found: set[str] | None = None
    cold = {t: name for t, name in (yield from cold_objects_op(d)) if not is_reserved(t)}
    if selection.thread_pattern is not None:
        match = glob_matcher(selection.thread_pattern, prefix=False).match
        found = {r[0] for r in (yield Q(d.EVERY_THREAD_ID)) if match(r[0])}
        cold = {t: name for t, name in cold.items() if match(t)}
    if selection.where:
        matched: set[str] = set()
        f = ThreadFilter(metadata=dict(selection.where))
        while len(page := (yield Q(*d.threads_page(f, "thread_id", PAGE, len(matched))))) > 0:
            matched.update(r[0] for r in page)
            if len(page) < PAGE:
                break
        found = matched if found is None else found & matched
    return sorted(t for t in (found or ()) if not is_reserved(t)), cold


def select_job(d: Any, bc: Any, selection: Selection) -> Job[tuple[list[str], dict[str, str]]]:
    """(every thread_id ``selection`` names, with rows or cold, sorted; thread_id → archive object of
    those that are cold). ConfigError when a metadata filter must read cold archives and the saver
    has no object store."""
    found, cold = yield select_threads_op(d, selection), False
    if selection.where and cold:
        store = _store(d, bc, next(iter(cold)))
        match = metadata_matcher(selection.where)
        cold = {t: name for t, name in cold.items() if any(match(m) for m in _archived_metadata(bc, store, t, name))}
    return sorted({*found, *cold}), cold


def _archived_metadata(bc: Any, store: Any, thread_id: str, name: str) -> list[dict[str, Any]]:
    columns, rows = fetch(bc, store, thread_id, name).get("checkpoints", (["metadata"], []))
    i = columns.index("metadata")
    return [json.loads(r[i]) if isinstance(r[i], str) else r[i] for r in rows]


def _store(d: Any, bc: Any, thread_id: str) -> Any:
    """The saver's object store; ConfigError naming ``thread_id``, which has values there, without one."""
    store = store_of(bc, d)
    if store is None:
        raise ConfigError(f"thread {thread_id!r} has values in an object store (offloaded, or the thread is cold): erasing it "
                          "needs that store; set THREADLINE_OFFLOAD or give the saver Offload(store=…) (docs/offload.md). Nothing was erased")
    return store


def thread_totals_op(d: Any, thread_id: str) -> Op[dict[str, tuple[int, int]]]:
    """table → (rows, stored bytes) of one thread."""
    out = {}
    for table in TABLES:
        (n, size), = yield Q(*d.table_totals(table, [thread_id]))
        out[table] = (int(n), int(size or 0))
    return out


def _named_op(d: Any, bc: Any, thread_id: str) -> Op[tuple[set[str], list[str]]]:
    """(the objects ``thread_id``'s rows and cold stub name, its rows whose reference cannot be read)."""
    if not getattr(d, "offloads", False):
        return set(), []
    refs, bad, _ = yield from references_op(d, bc, thread_id)
    archive = yield from cold_archives_op(d, [thread_id])
    return {name for name, _, _ in refs} | set(archive.values()), [f"{row}: {why}" for row, why in bad]


def erase_thread_op(d: Any, thread_id: str, bc: Any) -> Op[tuple[dict[str, tuple[int, int]], set[str]]]:
    """Count then delete one thread whole, in one transaction: what its rows held, and the objects
    its rows and stub named as they were deleted."""
    totals = yield from thread_totals_op(d, thread_id)
    names, _ = yield from _named_op(d, bc, thread_id)
    yield from ops.delete_thread(d, thread_id, bc)
    return totals, names


@dataclass
class _Objects:
    """The object store's part of an erasure: of the objects a selected thread names, those no
    other thread names are deleted (none but cold archives while ``Owners.blind``)."""

    store: Any
    owners: Owners
    selected: set[str]
    named: dict[str, set[str]]  # thread_id → the objects it names (read before any deletion)
    seen: set[str] = field(default_factory=set)
    unproven: int = 0  # objects kept because rows of other threads cannot be read (``Owners.blind``)

    def erase(self, names: set[str], receipt: ErasureReceipt) -> None:
        """Delete (``receipt.dry_run``: count) ``names`` not seen yet; count those kept."""
        blind = bool(self.owners.blind(self.selected))
        for name in sorted(names - self.seen, key=lambda n: (n.startswith(COLD), n)):  # an archive last: see ``_objects_job``
            self.seen.add(name)
            if self.owners.threads.get(name, set()) - self.selected:
                receipt.kept_objects += 1
                continue
            if blind and not name.startswith(COLD):
                self.unproven += 1
                continue
            size = self.store.size(name)
            if size is None:  # deleted by an interrupted run of this erasure
                continue
            if not receipt.dry_run:
                self.store.delete(name)
                receipt.deleted_names.add(name)
            kind = "cold_archives" if name.startswith(COLD) else "objects"
            receipt.object_counts[kind] += 1
            receipt.object_bytes[kind] += size


def _objects_job(d: Any, bc: Any, tids: list[str], cold: dict[str, str], receipt: ErasureReceipt) -> Job[_Objects | None]:
    """The objects the selected threads name — their rows, their cold archives, and the objects of a
    cold thread's values from before it was archived, still stored — and who else names them (one
    look at every row), before anything is deleted; None when they name none. ConfigError when
    they do and the saver has no object store."""
    if not getattr(d, "offloads", False):
        return None
    named: dict[str, set[str]] = {}
    for tid in tids:
        names, bad = yield _named_op(d, bc, tid), False
        if names or bad:
            named[tid] = names
        if bad:
            receipt.problems.append(f"thread {tid!r}: {len(bad)} row(s) name an object that cannot be read ({bad[0]}); "
                                    "such an object stays until the object sweep (threadline fsck)")
    if not named:
        return None
    store = _store(d, bc, next(iter(named)))
    listed = {name for name, _, _ in store.list()} if cold else set()
    for tid, archive in cold.items():
        if archive not in listed:  # deleted last by an interrupted run of this erasure, after the objects it names
            continue
        try:
            named[tid] |= object_names(bc, fetch(bc, store, tid, archive)) & listed
        except CorruptRowError as exc:
            receipt.problems.append(f"{exc}: the objects of its values from before it was archived stay until the object sweep")
    return _Objects(store, (yield owners_op(d, bc), False), set(tids), named)


def erase_job(
    saver: Any, receipt: ErasureReceipt, progress: Callable[[ErasureReceipt], None] = lambda r: None
) -> Job[ErasureReceipt]:
    """The saver's part of an erasure (see the module docstring): select, erase each thread's objects
    then its rows (or, ``receipt.dry_run``, count them), reclaim the space; ``progress(receipt)``
    after each thread."""
    d, bc = saver.dialect, saver.blob_codec
    tids, cold = (yield from select_job(d, bc, receipt.selection)) if receipt.selection.names_threads else ([], {})
    objects = yield from _objects_job(d, bc, tids, cold, receipt)
    for tid in tids:
        if objects is not None:  # first: an interrupted erasure selects the thread again
            objects.erase(objects.named.get(tid, set()), receipt)
        if receipt.dry_run:
            totals = yield thread_totals_op(d, tid), False
        else:
            totals, names = yield erase_thread_op(d, tid, bc), True
            if names - (objects.seen if objects is not None else set()):  # named by rows written, or a tier, since the look
                objects = objects or _Objects(_store(d, bc, tid), Owners({}, {}), set(tids), {})
                objects.erase(names, receipt)
        receipt.threads.append(tid)
        for table, (n, size) in totals.items():
            receipt.rows[table] += n
            receipt.bytes[table] += size
        progress(receipt)
    if objects is not None and objects.unproven:
        blind = objects.owners.blind(objects.selected)
        receipt.problems.append(f"{objects.unproven} object(s) of the erased threads kept: {len(blind)} row(s) of other threads whose "
                                f"reference cannot be read may name them ({blind[0]}); once those rows are repaired or deleted "
                                "(threadline fsck), the object sweep deletes them")
    if tids and not receipt.dry_run and d.reclaims_space:
        receipt.space = yield from reclaim(d, large=True)
    return receipt


def _store_erase(store: Any, namespaces: Sequence[tuple[str, ...]], receipt: ErasureReceipt) -> None:
    """Delete every item under each namespace prefix (or, in a dry run, count them), then the
    Store's expired items."""
    from langgraph.store.base import PutOp

    for ns in namespaces:
        name, count = ".".join(ns), 0
        while True:
            items = store.search(ns, limit=PAGE, offset=count if receipt.dry_run else 0, refresh_ttl=False)
            if not items:
                break
            count += len(items)
            if not receipt.dry_run:
                store.batch([PutOp(tuple(i.namespace), i.key, None) for i in items])
            if len(items) < PAGE and receipt.dry_run:
                break
        receipt.store_items[name] = receipt.store_items.get(name, 0) + count
    if not receipt.dry_run and hasattr(store, "sweep_ttl"):
        store.sweep_ttl()


def _verify(saver: Any, store: Any, receipt: ErasureReceipt) -> None:
    sel, d, bc = receipt.selection, saver.dialect, saver.blob_codec
    left = run_job(saver, select_job(d, bc, sel))[0] if sel.names_threads else []
    items = sum(len(store.search(ns, limit=PAGE, refresh_ttl=False)) for ns in sel.store_namespaces) if store is not None else 0
    gone = receipt.deleted_names
    objects = store_of(bc, d) if gone else None
    still = sum(objects.size(n) is not None for n in gone) if objects is not None else 0
    receipt.verified = {"threads": left, "store_items": items, "objects": still}
    if left:
        receipt.problems.append(f"{len(left)} selected thread(s) still found after the erasure: {', '.join(left[:5])}")
    if items:
        receipt.problems.append(f"{items} Store item(s) still found under the erased namespaces")
    if still:
        receipt.problems.append(f"{still} object(s) of the erased threads still found in {objects.url}")
    if objects is not None:  # a row written meanwhile by another thread with the same value names it again
        owners = saver.run(owners_op(d, bc))
        again = sorted({t for n in gone for t in owners.threads.get(n, ()) if t not in receipt.threads})
        if again:
            receipt.problems.append(f"an object this erasure deleted is named by thread(s) written meanwhile: {', '.join(again[:5])} "
                                    "(threadline fsck reports the missing object)")


def erase(
    saver: Any,
    selection: Selection,
    *,
    store: Any = None,
    dry_run: bool = False,
    receipt: str | None = None,
    database: str = "",
    clock: Callable[[], float] = time.time,
) -> ErasureReceipt:
    """Erase ``selection`` from ``saver``'s database and ``store`` (a threadline Store on the
    same database, needed when the selection names Store namespaces): see the module docstring.
    ``receipt``: a JSON file the receipt is written to (saved as the erasure goes, so an
    interrupted run leaves one saying ``incomplete``; a run of the same selection continues it).
    ``database``: how the receipt names the database. Returns the ``ErasureReceipt``.
    ConfigError when Store namespaces are named without a store, or for a receipt file that
    cannot be continued."""
    if selection.store_namespaces and store is None:
        raise ConfigError("the selection names Store namespaces: pass the Store of the same database (store=)")
    r = ErasureReceipt(selection, database, dry_run=dry_run, started_at=clock())
    if receipt is not None and os.path.exists(receipt):
        if dry_run:
            raise ConfigError(f"receipt {receipt!r} exists: a dry run writes its preview to a new file")
        r.resume(receipt)
    done = len(r.threads)

    def saved(current: ErasureReceipt) -> None:
        if receipt is not None and not dry_run and (len(current.threads) - done) % SAVE_EVERY == 0:
            current.save(receipt)

    try:
        run_job(saver, erase_job(saver, r, saved))
        if selection.store_namespaces:
            _store_erase(store, selection.store_namespaces, r)
        if not dry_run:
            _verify(saver, store, r)
        r.status = "dry-run" if dry_run else "complete"
        r.finished_at = clock()
    finally:
        if receipt is not None:
            r.save(receipt)
    return r
