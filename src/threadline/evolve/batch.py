"""Batch migration: ``migrate(saver, graph, migrations, apply=)`` brings every thread's head to
the registry's steps, writing one new checkpoint per thread on top of its head (source
``"update"``, as ``update_state`` does), so the history before it stays as it was.

Two passes. The first reads every head in bulk and runs every step on it, writing nothing: a
step that raises stops the run with a MigrationError naming the thread, checkpoint and step,
before any thread is written (a dry run ends here, with the plan). The second, with
``apply``, migrates one thread per transaction — read the head, skip it when it has had every
step (a rerun resumes where an interrupted one stopped), put the migrated checkpoint — and
then reads it back to verify it."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base.id import uuid6

from threadline.errors import ConfigError, ThreadlineError
from threadline.evolve.check import pages
from threadline.evolve.registry import MARKER, Migrations
from threadline.evolve.shape import Shape
from threadline.keys import key_of
from threadline.read.common import import_spec, load_graph
from threadline.storage import ops
from threadline.storage.ops import Op

SHOWN = 50  # threads a result lists


class VerificationError(ThreadlineError):
    """A migrated thread read back differs from what was written (names the thread)."""


@dataclass
class MigrateResult:
    """``threads`` heads examined; ``to_migrate`` of them had steps to apply (``migrated`` were
    written, 0 on a dry run; ``moved``: skipped, their head changed between the passes);
    ``remaining``: (kind, subject) → thread count of problems the graph still finds on the
    migrated heads; ``examples``: up to ``SHOWN`` (thread_id, steps applied)."""

    dry_run: bool
    threads: int = 0
    to_migrate: int = 0
    migrated: int = 0
    moved: int = 0
    remaining: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[str, list[str]]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.remaining

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "threads": self.threads, "to_migrate": self.to_migrate, "migrated": self.migrated,
                "moved": self.moved, "remaining": self.remaining, "ok": self.ok, "seconds": round(self.seconds, 3),
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
    """(checkpoint, metadata, new_versions) of the checkpoint written on top of head ``found``."""
    meta = found.metadata or {}
    step = meta.get("step") if isinstance(meta.get("step"), int) else -1
    # updated_channels stays the head's (migrated): LangGraph schedules the next tasks from it
    ck = {**shown.checkpoint, "id": str(uuid6(clock_seq=step + 1)), "ts": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    metadata = {"source": "update", "step": step + 1, "parents": meta.get("parents") or {}, **{k: v for k, v in shown.metadata.items() if k.startswith("threadline_")},
                "threadline_migrated_from": found.config["configurable"]["checkpoint_id"]}
    values = ck.get("channel_values") or {}
    return ck, metadata, {ch: v for ch, v in unstored.items() if ch in values}


def _thread_op(saver: Any, migrations: Migrations, thread_id: str, expected: str) -> Op[tuple[str, Any, list[str]] | None]:
    """One thread's migration, in one transaction: None when its head is no longer ``expected``
    or has had every step; else (new checkpoint_id, migrated tuple, steps applied)."""
    d = saver.dialect
    found = yield from ops.get_tuple(d, saver.serde, key_of({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}), saver.blob_codec)
    if found is None or found.config["configurable"]["checkpoint_id"] != expected or not migrations.pending(found.metadata):
        return None
    shown, unstored = migrations.migrate(found)
    ck, metadata, new_versions = _migrated_checkpoint(found, shown, unstored)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": expected}}
    stored = yield from ops.put(d, saver.serde, config, ck, metadata, new_versions, saver.blob_codec)
    return stored["configurable"]["checkpoint_id"], shown, list(shown.metadata.get(MARKER) or [])


def _verify(saver: Any, thread_id: str, checkpoint_id: str, shown: Any, migrations: Migrations) -> None:
    key = key_of({"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
    back = saver.run(ops.get_tuple(saver.dialect, saver.serde, key, saver.blob_codec))
    if back is None or migrations.pending(back.metadata) or back.checkpoint["channel_values"] != shown.checkpoint["channel_values"]:
        raise VerificationError(f"thread {thread_id!r}: migrated checkpoint {checkpoint_id!r} read back differs from what was written")


def migrate(saver: Any, graph: Any, migrations: Any, *, apply: bool = False,
            progress: Callable[[int, int, str], None] | None = None) -> MigrateResult:
    """Migrate every thread's head (root namespace) with ``migrations`` (a ``Migrations`` or
    ``"module:attr"``) for ``graph`` (a compiled graph or ``"module:attr"``); a dry run unless
    ``apply``. See the module docstring for the passes; ``remaining`` in the result is what
    the preflight rules still find on the migrated heads (values as the saver loads them).

    Raises ConfigError for a spec that does not import or the wrong kind of object,
    MigrationError (before anything is written) for a step that raises, VerificationError when
    a written thread reads back differently. ``progress(done, total, what)`` is called per thread."""
    start = time.perf_counter()
    registry = load_migrations(migrations)
    shape = Shape.of(load_graph(graph) if isinstance(graph, str) else graph)
    result = MigrateResult(dry_run=not apply)
    plan: list[tuple[str, str]] = []
    for page, _ in pages(saver, saver.serde, False):
        for make in page:
            found = make()
            result.threads += 1
            shown, _ = registry.migrate(found)
            conf = found.config["configurable"]
            if shown is not found and shown.metadata.get(MARKER):
                plan.append((conf["thread_id"], conf["checkpoint_id"]))
                if len(result.examples) < SHOWN:
                    result.examples.append((conf["thread_id"], list(shown.metadata[MARKER])))
            elif shown is not found:
                plan.append((conf["thread_id"], conf["checkpoint_id"]))  # steps to record, nothing to change
            for kind, subject, _ in shape.problems(shown.checkpoint, shown.pending_writes or ()):
                name = f"{kind}:{subject}"
                result.remaining[name] = result.remaining.get(name, 0) + 1
    result.to_migrate = len(plan)
    if apply:
        for i, (thread_id, head) in enumerate(plan):
            done = saver.run(_thread_op(saver, registry, thread_id, head), write=True)
            if done is None:
                result.moved += 1
            else:
                _verify(saver, thread_id, done[0], done[1], registry)
                result.migrated += 1
            if progress is not None:
                progress(i + 1, len(plan), thread_id)
    result.seconds = time.perf_counter() - start
    return result
