"""The preflight: ``check(saver, graph)`` compares every stored thread's head (or, with
``all_checkpoints``, every checkpoint) against the graph the app will deploy and returns a
``Report`` grouped by problem. Heads are read in bulk, a page of threads per statement
(``Dialect.heads``), decoded under inspection's load policy (``codec.probe``): no class of
the application is constructed, and a stored type the graph's serializer would not
construct is reported, never raised."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from threadline.codec.probe import Probe, loads
from threadline.evolve.shape import KINDS, Shape
from threadline.errors import ConfigError, CorruptRowError
from threadline.evolve.registry import Migrations
from threadline.read.common import load_graph
from threadline.storage import ops
from threadline.storage.ops import Op, Q

PAGE = 500  # threads a statement reads the heads of
EXAMPLES = 5  # example thread ids kept per problem


@dataclass
class Problem:
    """One kind of problem on one subject (a channel, node or type): how many checkpoints
    (``count``) of how many threads (``threads``) have it, a ``detail`` and examples."""

    kind: str
    subject: str
    detail: str
    count: int = 0
    threads: int = 0
    examples: list[str] = field(default_factory=list)
    example_checkpoints: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "detail": self.detail, "count": self.count,
                "threads": self.threads, "examples": self.examples, "example_checkpoints": self.example_checkpoints}


@dataclass
class Report:
    """What ``check`` found: ``threads`` and ``checkpoints`` examined, ``problems`` (sorted by
    kind, then subject), ``unreadable`` (thread_id, why) of the threads that could not be read,
    ``seconds`` taken; ``ok`` when there is no problem and every thread was read."""

    threads: int = 0
    checkpoints: int = 0
    all_checkpoints: bool = False
    problems: list[Problem] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unreadable

    @property
    def affected(self) -> list[str]:
        """Example thread ids of every problem, without repeats."""
        return list(dict.fromkeys(t for p in self.problems for t in p.examples))

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "threads": self.threads, "checkpoints": self.checkpoints, "all_checkpoints": self.all_checkpoints,
                "seconds": round(self.seconds, 3), "problems": [p.to_json() for p in self.problems],
                "unreadable": [{"thread_id": t, "error": why} for t, why in self.unreadable]}


class _Tally:
    def __init__(self) -> None:
        self.by: dict[tuple[str, str], Problem] = {}

    def add(self, thread_id: str, checkpoint_id: str, found: list[tuple[str, str, str]]) -> None:
        for kind, subject, detail in found:
            p = self.by.setdefault((kind, subject), Problem(kind, subject, detail))
            p.count += 1
            if thread_id not in p._seen:
                p._seen.add(thread_id)
                p.threads += 1
                if len(p.examples) < EXAMPLES:
                    p.examples.append(thread_id)
                    p.example_checkpoints.append(checkpoint_id)

    def sorted(self) -> list[Problem]:
        return sorted(self.by.values(), key=lambda p: (KINDS.index(p.kind), p.subject))


UNREADABLE = (CorruptRowError, ConfigError)  # a thread's own trouble (damage, a key or object store missing)


def _heads_op(d: Any, serde: Any, thread_ids: list[str], bc: Any) -> Op[list[tuple[str, Callable[[], Any]]]]:
    rows = yield Q(*d.heads("", thread_ids))
    makes = yield from ops.load_tuples(d, serde, rows, bc, lazy=True)
    return [(row[0], make) for row, make in zip(rows, makes)]


def _thread_ids_op(d: Any) -> Op[list[str]]:
    return [r[0] for r in (yield Q(d.ALL_THREAD_IDS))]


def _failing(exc: Exception) -> Callable[[], Any]:
    def make() -> Any:
        raise exc

    return make


def _checkpoints(saver: Any, serde: Any, bc: Any, thread_id: str) -> list[tuple[str, Callable[[], Any]]]:
    """Every checkpoint of one thread, every namespace (``list``'s keyset pages)."""
    d = saver.dialect
    where, after, out = ops.list_where(d, {"configurable": {"thread_id": thread_id}}, None, None), None, []
    while True:
        page, after = saver.run(ops.list_page(d, serde, where, after, ops.PAGE_SIZE, bc, lazy=True))
        out += [(thread_id, make) for make in page]
        if after is None:
            return out


def pages(saver: Any, serde: Any, all_checkpoints: bool, thread_ids: list[str] | None = None
          ) -> Iterator[tuple[list[tuple[str, Callable[[], Any]]], int]]:
    """Pages of (thread_id, function building a tuple decoded with ``serde``), each with the
    number of threads in all: every thread's head in the root namespace, a ``PAGE`` of threads a
    statement, or with ``all_checkpoints`` every checkpoint of every namespace, a thread at a
    time; only ``thread_ids`` when given. A thread that cannot be read (``UNREADABLE``: a
    damaged row, a value offloaded to an object store the saver has none of, a key it lacks)
    gives one function raising that error; the other threads are read."""
    d = saver.dialect
    bc = dataclasses.replace(saver.blob_codec, cache=None)  # nothing decoded under another policy, nothing kept
    ids = sorted(set(thread_ids)) if thread_ids is not None else saver.run(_thread_ids_op(d))

    def alone(thread_id: str, read: Callable[[], list]) -> list[tuple[str, Callable[[], Any]]]:
        try:
            return read()
        except UNREADABLE as exc:
            return [(thread_id, _failing(exc))]

    if all_checkpoints:
        for tid in ids:
            yield alone(tid, lambda: _checkpoints(saver, serde, bc, tid)), len(ids)
        return
    size = max(1, min(PAGE, d.max_params - 2))
    for i in range(0, len(ids), size):
        part = ids[i:i + size]
        try:
            page = saver.run(_heads_op(d, serde, part, bc))
        except UNREADABLE:  # one thread's rows: read each on its own
            page = [item for tid in part for item in alone(tid, lambda: saver.run(_heads_op(d, serde, [tid], bc)))]
        yield page, len(ids)


def check(saver: Any, graph: Any, *, all_checkpoints: bool = False, migrations: Migrations | None = None,
          thread_ids: list[str] | None = None, progress: Callable[[int, int, str], None] | None = None) -> Report:
    """Compare stored threads (all, or ``thread_ids``) with ``graph`` (a compiled graph, or ``"module:attr"``).

    Each thread's head in the root namespace is checked (``all_checkpoints``: every checkpoint,
    every namespace) for: stored values of channels the graph lacks, values that no longer
    validate against the state schema, ``next`` nodes and pending ``Send`` tasks naming nodes
    the graph lacks, interrupts pending in such nodes, and stored types the saver's serializer
    would not construct. With ``migrations``, each checkpoint is checked as that registry
    would present it (what stays wrong after migrating; its functions then get values as
    inspection decodes them: application classes as their fields). A thread that cannot be
    read is listed in ``unreadable`` with why, and the others are checked. ``progress(done,
    total, what)`` is called after each page (threads done of ``total``).

    Returns a ``Report``. Raises ConfigError for a graph that is not a compiled graph (or a
    spec that does not import); a migration step that raises surfaces as its MigrationError."""
    start = time.perf_counter()
    shape = Shape.of(load_graph(graph) if isinstance(graph, str) else graph)
    probe, tally, report = Probe(), _Tally(), Report(all_checkpoints=all_checkpoints)
    verdicts: dict[tuple[str, str], bool] = {}
    threads: set[str] = set()
    for page, total in pages(saver, probe, all_checkpoints, thread_ids):
        for thread_id, make in page:
            threads.add(thread_id)
            probe.seen.clear()
            try:
                found = make()
            except UNREADABLE as exc:
                report.unreadable.append((thread_id, str(exc)))
                continue
            if migrations is not None:
                found = migrations.present(found)
            conf = found.config["configurable"]
            bad = []
            for key in sorted(probe.seen):
                if key not in verdicts:
                    verdicts[key] = loads(saver.serde, key)
                if not verdicts[key]:
                    bad.append(".".join(key))
            tally.add(conf["thread_id"], conf["checkpoint_id"], shape.problems(found.checkpoint, found.pending_writes or (), bad))
            report.checkpoints += 1
        if progress is not None:
            progress(len(threads), total, "checking")
    report.threads = len(threads)
    report.problems = tally.sorted()
    report.seconds = time.perf_counter() - start
    return report
