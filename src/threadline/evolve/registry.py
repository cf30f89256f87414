"""``Migrations``: the application's registry of state migration steps, and how a stored
checkpoint is presented migrated (``Migrations.present``).

The record of which steps a checkpoint reflects travels in its metadata, so it is part of
every backend, of ``backup``/``restore`` and of bundles without a table of its own:

* ``threadline_migrations`` — the names of the steps the checkpoint's state reflects. A saver
  with migrations (``with_migrations``) stamps every checkpoint it writes with all of its
  registry's names; ``threadline migrate`` stamps the checkpoint it writes.
* ``threadline_migrated`` — the steps that were applied to produce the state shown: on a tuple
  presented migrated at read time (the stored row is older), or on the checkpoint ``threadline
  migrate`` wrote (source ``"update"``, its parent the pre-migration head).

A step is applied to a checkpoint whose record lacks its name, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from threadline.errors import ConfigError, MigrationError
from threadline.evolve.steps import Draft, DropChannel, RenameChannel, RenameNode, Step, Transform

RECORD = "threadline_migrations"
MARKER = "threadline_migrated"


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what} must be a non-empty string, got {value!r}")
    return value


class Migrations:
    """An ordered registry of named state migration steps.

    Register steps in the order they were introduced (each name is recorded on the
    checkpoints it was applied to; never rename or remove a shipped step)::

        migrations = Migrations()
        migrations.rename_channel("draft", "text", name="v2-draft-is-text")
        migrations.rename_node("review", "approve", name="v2-review-is-approve")
        migrations.transform("notes", notes_v3, name="v3-notes")

    Each method returns the registry (chainable). ``name`` defaults to a text derived from the
    arguments (``rename_channel:draft->text``); ConfigError for an empty or duplicate name or a
    channel/node that is not a non-empty string.
    """

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def _add(self, step: Step) -> Migrations:
        if step.name in self.names:
            raise ConfigError(f"migration step name {step.name!r} is registered twice")
        self.steps.append(step)
        return self

    def rename_channel(self, old: str, new: str, *, name: str | None = None) -> Migrations:
        """Channel ``old`` is called ``new``: its value, version, what nodes saw of it, its pending writes."""
        old, new = _text(old, "old channel"), _text(new, "new channel")
        return self._add(RenameChannel(_text(name or f"rename_channel:{old}->{new}", "name"), old, new))

    def drop_channel(self, channel: str, *, name: str | None = None) -> Migrations:
        """Channel ``channel`` is gone: its value, version and pending writes are dropped."""
        channel = _text(channel, "channel")
        return self._add(DropChannel(_text(name or f"drop_channel:{channel}", "name"), channel))

    def rename_node(self, old: str, new: str, *, name: str | None = None) -> Migrations:
        """Node ``old`` is now ``new``: the tasks waiting for ``old`` (``next``, pending ``Send``s,
        an interrupt pending in it) run ``new`` instead."""
        old, new = _text(old, "old node"), _text(new, "new node")
        return self._add(RenameNode(_text(name or f"rename_node:{old}->{new}", "name"), old, new))

    def transform(
        self, channel: str, fn: Callable[[Any], Any], *, writes: Callable[[Any], Any] | None = None, name: str | None = None
    ) -> Migrations:
        """Channel ``channel``'s value becomes ``fn(value)`` (the value as the graph's serializer
        loads it); ``writes``, if given, maps each pending write's value on that channel."""
        channel = _text(channel, "channel")
        if not callable(fn) or (writes is not None and not callable(writes)):
            raise ConfigError(f"transform of {channel!r} needs a callable fn (and writes, when given)")
        return self._add(Transform(_text(name or f"transform:{channel}", "name"), channel, fn, writes))

    @property
    def names(self) -> list[str]:
        """The step names in registration order."""
        return [s.name for s in self.steps]

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def pending(self, metadata: Any) -> list[Step]:
        """The steps a checkpoint with this metadata has not had."""
        had = (metadata or {}).get(RECORD) or ()
        return [s for s in self.steps if s.name not in had]

    def migrate(self, found: CheckpointTuple) -> tuple[CheckpointTuple, dict[str, Any]]:
        """``found`` with every step it has not had applied, and ``unstored`` (channel → version
        of values the store does not hold under that key). ``found`` itself when it has had every
        step. The presented metadata gets ``threadline_migrations`` (every name) and
        ``threadline_migrated`` (the steps that changed something now; empty when none did).

        Raises MigrationError naming the thread, checkpoint and step when a step raises."""
        todo = self.pending(found.metadata)
        if not todo:
            return found, {}
        conf = found.config.get("configurable", {})
        draft = Draft.of(found.checkpoint, found.pending_writes)
        applied = []
        for step in todo:
            try:
                if step.apply(draft):
                    applied.append(step.name)
            except Exception as exc:
                raise MigrationError(str(conf.get("thread_id")), str(conf.get("checkpoint_id")), step.name, exc) from exc
        had = list((found.metadata or {}).get(RECORD) or ())
        meta = {**(found.metadata or {}), RECORD: had + [s.name for s in todo], MARKER: applied}
        return found._replace(checkpoint=draft.checkpoint, metadata=meta, pending_writes=draft.writes), draft.unstored

    def present(self, found: CheckpointTuple | None) -> CheckpointTuple | None:
        """``migrate(found)``'s tuple (None stays None)."""
        return None if found is None else self.migrate(found)[0]

    def stamp(self, metadata: Any) -> dict[str, Any]:
        """Metadata of a checkpoint written under this registry: ``threadline_migrations`` = every name."""
        return {**(metadata or {}), RECORD: self.names}
