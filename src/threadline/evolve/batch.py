"""Batch migration: ``migrate(saver, graph, migrations, apply=)`` brings every thread's head (or
the heads of the threads named) to the registry's steps, writing one new checkpoint on top of
the head of each thread a step changes (source ``"update"``, as ``update_state`` does), so the
history before it stays as it was. A thread no step changes, a thread of another graph (its
head shares no channel or node with ``graph``) and a thread that cannot be read get no write.

The migrated checkpoint stores every value it names under a key the store did not hold (a
renamed channel, empty or not; a transformed value), and carries the head's pending writes to
the tasks ``graph`` runs next from it (``evolve.carry``): a thread interrupted before the
migration is interrupted after it.

Two passes. The first reads every head in bulk and runs every step on it, writing nothing: a
step that raises stops the run with a MigrationError naming the thread, checkpoint and step,
before any thread is written (a dry run ends here, with the plan). The second, with
``apply``, migrates one thread per transaction — read the head, skip it when it has moved or
had every step (a rerun resumes where an interrupted one stopped), put the migrated
checkpoint and its pending writes, and read it back to verify it (a difference raises
VerificationError and, on SQLite and Postgres, rolls the thread back)."""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base.id import uuid6

from threadline.errors import ConfigError, ThreadlineError
from threadline.evolve import carry
from threadline.evolve.check import UNREADABLE, pages
from threadline.evolve.registry import MARKER, Migrations
from threadline.evolve.shape import Shape, compiled
from threadline.keys import key_of
from threadline.read.common import import_spec, load_graph
from threadline.storage import ops
from threadline.storage.ops import Op, Q

SHOWN = 50  # threads a result lists


class VerificationError(ThreadlineError):
    """A migrated thread read back differs from what was written (names the thread)."""


@dataclass
class MigrateResult:
    """``threads`` heads examined; ``to_migrate`` of them have a step that changes them (listed
    in ``examples``, the first ``SHOWN``), ``migrated`` were written (0 on a dry run), ``moved``
    skipped (their head changed between the passes); ``unchanged``: no step changes them;
    ``other_graph``: thread ids of another graph's threads; ``failed``: (thread_id, why) of the
    threads that could not be read or written — none of these three is written; ``remaining``:
    (kind, subject) → thread count of problems the graph still finds on the migrated heads."""

    dry_run: bool
    threads: int = 0
    to_migrate: int = 0
    migrated: int = 0
    moved: int = 0
    unchanged: int = 0
    other_graph: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    remaining: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[str, list[str]]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.remaining and not self.failed

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "threads": self.threads, "to_migrate": self.to_migrate, "migrated": self.migrated,
                "moved": self.moved, "unchanged": self.unchanged, "other_graph": self.other_graph,
                "failed": [{"thread_id": t, "error": why} for t, why in self.failed],
                "remaining": self.remaining, "ok": self.ok, "seconds": round(self.seconds, 3),
                "examples": [{"thread_id": t, "steps": s} for t, s in self.examples]}


def load_migrations(spec: Any) -> Migrations:
    """A ``Migrations`` as given, or from ``"module:attr"`` (an attribute, or a function returning one).

    Raises ConfigError naming the spec when it does not import or is not a registry."""
    if isinstance(spec, Migrations):
        return spec
    obj = import_spec(spec, "migrations", lambda o: isinstance(o, Migrations))
    if not isinstance(obj, Migrations):
        raise ConfigError(f"{spec!r} is not a threadline.evolve.Migrations (got {type(obj).__name__})")
    return obj


def _migrated_checkpoint(found: Any, shown: Any, unstored: dict[str, Any]) -> tuple[dict, dict, dict]:
    """(checkpoint, metadata, new_versions) of the checkpoint written on top of head ``found``:
    ``new_versions`` every channel whose (channel, version) the store does not hold yet."""
    meta = found.metadata or {}
    step = meta.get("step") if isinstance(meta.get("step"), int) else -1
    # updated_channels stays the head's (migrated): LangGraph schedules the next tasks from it
    ck = {**shown.checkpoint, "id": str(uuid6(clock_seq=step + 1)), "ts": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    metadata = {"source": "update", "step": step + 1, "parents": meta.get("parents") or {}, **{k: v for k, v in shown.metadata.items() if k.startswith("threadline_")},
                "threadline_migrated_from": found.config["configurable"]["checkpoint_id"]}
    versions = ck.get("channel_versions") or {}
    return ck, metadata, {ch: v for ch, v in unstored.items() if versions.get(ch) == v}


def _changed(found: Any, shown: Any) -> bool:
    """Whether a step changed head ``found`` (``Migrations.migrate`` gave ``shown``)."""
    return shown is not found and bool(shown.metadata.get(MARKER))


def _task_paths_op(d: Any, thread_id: str, checkpoint_id: str) -> Op[dict[str, str]]:
    """task_id → task_path of a checkpoint's pending writes."""
    rows = yield Q(d.writes_by_keys(1), (thread_id, "", checkpoint_id), read=True)
    return {r[3]: r[6] or "" for r in rows}


def _thread_op(saver: Any, graph: Any, migrations: Migrations, thread_id: str, expected: str) -> Op[tuple[str, Any, list] | None]:
    """One thread's migration, in one transaction: None when its head is no longer ``expected``
    or no step changes it; else (new checkpoint_id, migrated tuple, writes carried)."""
    d = saver.dialect
    found = yield from ops.get_tuple(d, saver.serde, key_of({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}), saver.blob_codec)
    if found is None or found.config["configurable"]["checkpoint_id"] != expected:
        return None
    shown, unstored = migrations.migrate(found)
    if not _changed(found, shown):
        return None
    ck, metadata, new_versions = _migrated_checkpoint(found, shown, unstored)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": expected}}
    writes = []
    if shown.pending_writes:
        paths = yield from _task_paths_op(d, thread_id, expected)
        applied = [s for s in migrations if s.name in shown.metadata[MARKER]]
        writes = carry.carried(shown.pending_writes, paths, carry.next_tasks(graph, saver.serde, ck, metadata), applied)
    stored = yield from ops.put(d, saver.serde, config, ck, metadata, new_versions, saver.blob_codec)
    for task_id, task_path, task_writes in writes:
        yield from ops.put_writes(d, saver.serde, stored, task_writes, task_id, task_path, saver.blob_codec)
    # read back in the same transaction: a difference rolls the thread back (SQL)
    back = yield from ops.get_tuple(d, saver.serde, key_of(stored), dataclasses.replace(saver.blob_codec, cache=None))
    carried = sorted((t, c) for t, _, ws in writes for c, _ in ws)
    if (back is None or migrations.pending(back.metadata) or back.checkpoint["channel_values"] != shown.checkpoint["channel_values"]
            or sorted((t, c) for t, c, _ in back.pending_writes or ()) != carried):
        raise VerificationError(f"thread {thread_id!r}: migrated checkpoint {ck['id']!r} read back differs from what was written")
    return stored["configurable"]["checkpoint_id"], shown, writes


def migrate(saver: Any, graph: Any, migrations: Any, *, apply: bool = False, thread_ids: list[str] | None = None,
            progress: Callable[[int, int, str], None] | None = None) -> MigrateResult:
    """Migrate every thread's head (root namespace; only ``thread_ids`` when given) with
    ``migrations`` (a ``Migrations`` or ``"module:attr"``) for ``graph`` (a compiled graph or
    ``"module:attr"``); a dry run unless ``apply``. See the module docstring for what is
    written; ``remaining`` in the result is what the preflight rules still find on the migrated
    heads (values as the saver loads them). A thread that cannot be read or written is listed
    in ``failed`` with why, and the others are migrated.

    Raises ConfigError for a spec that does not import or the wrong kind of object,
    MigrationError (before anything is written) for a step that raises, VerificationError when
    a written thread reads back differently (the threads before it stay migrated). ``progress(done, total, what)`` is called per thread."""
    start = time.perf_counter()
    registry = load_migrations(migrations)
    graph = compiled(load_graph(graph) if isinstance(graph, str) else graph)
    shape = Shape.of(graph)
    result = MigrateResult(dry_run=not apply)
    plan: list[tuple[str, str]] = []
    for page, _ in pages(saver, saver.serde, False, thread_ids):
        for thread_id, make in page:
            result.threads += 1
            try:
                found = make()
            except UNREADABLE as exc:
                result.failed.append((thread_id, str(exc)))
                continue
            shown, _ = registry.migrate(found)
            if shape.foreign(shown.checkpoint):
                result.other_graph.append(thread_id)
                continue
            if _changed(found, shown):
                plan.append((thread_id, found.config["configurable"]["checkpoint_id"]))
                if len(result.examples) < SHOWN:
                    result.examples.append((thread_id, list(shown.metadata[MARKER])))
            else:
                result.unchanged += 1
            for kind, subject, _ in shape.problems(shown.checkpoint, shown.pending_writes or ()):
                name = f"{kind}:{subject}"
                result.remaining[name] = result.remaining.get(name, 0) + 1
    result.to_migrate = len(plan)
    if apply:
        for i, (thread_id, head) in enumerate(plan):
            try:
                done = saver.run(_thread_op(saver, graph, registry, thread_id, head), write=True)
            except UNREADABLE as exc:
                result.failed.append((thread_id, str(exc)))
                done = False
            if done is None:
                result.moved += 1
            elif done:
                result.migrated += 1
            if progress is not None:
                progress(i + 1, len(plan), thread_id)
    result.seconds = time.perf_counter() - start
    return result
