"""Lazy migration: a saver with a ``Migrations`` registry presents every tuple it reads
migrated (``Lens.read``) and writes, with the thread's next checkpoint, the values a presented
checkpoint holds that the store does not hold under their key yet (``Lens.before_put``).

``with_migrations(saver, registry)`` installs it as ``saver.migrations``; a saver without one
pays one attribute check per call (``EngineSaver``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from threadline.errors import ConfigError
from threadline.evolve.registry import Migrations
from threadline.keys import key_of

MEMO_SIZE = 4096  # presented checkpoints whose unstored values a put may need


class Lens:
    """A saver's migrations: ``registry`` and a memo (bounded, ``MEMO_SIZE``) of the presented
    checkpoints, (thread_id, checkpoint_ns, checkpoint_id) → {channel: version} unstored."""

    def __init__(self, registry: Migrations, saver: Any) -> None:
        self.registry = registry
        self.saver = saver
        self.memo: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()  # a saver serves many threads

    def _remember(self, key: tuple[str, str, str], unstored: dict[str, Any]) -> None:
        with self._lock:
            self.memo[key] = unstored
            self.memo.move_to_end(key)
            while len(self.memo) > MEMO_SIZE:
                self.memo.popitem(last=False)

    def read(self, found: CheckpointTuple | None) -> CheckpointTuple | None:
        """``found`` presented migrated (MigrationError naming thread, checkpoint and step)."""
        if found is None:
            return None
        shown, unstored = self.registry.migrate(found)
        conf = found.config["configurable"]
        self._remember((conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"]), unstored)
        return shown

    def _parent(self, config: Any) -> tuple[tuple[str, str, str] | None, dict | None]:
        key = key_of(config)
        if not key.checkpoint_id:
            return None, None
        parent = (key.thread_id, key.checkpoint_ns, key.checkpoint_id)
        return parent, self.memo.get(parent)

    def _args(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any, unstored: dict | None) -> tuple[Any, Any]:
        key = key_of(config)
        self._remember((key.thread_id, key.checkpoint_ns, checkpoint["id"]), {})
        versions = checkpoint.get("channel_versions") or {}
        # an empty channel too: ``put`` stores it as empty, so the version the checkpoint names exists
        add = {ch: v for ch, v in (unstored or {}).items() if ch not in new_versions and versions.get(ch) == v}
        return self.registry.stamp(metadata), {**new_versions, **add} if add else new_versions

    def before_put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> tuple[Any, Any]:
        """(metadata, new_versions) for a put: the metadata stamped with every step's name, and
        ``new_versions`` plus the channels the parent was presented with but the store does not
        hold under that version (the parent is read, and presented, when this saver has not)."""
        parent, unstored = self._parent(config)
        if parent is not None and unstored is None:
            self.saver.get_tuple({"configurable": {"thread_id": parent[0], "checkpoint_ns": parent[1], "checkpoint_id": parent[2]}})
            unstored = self.memo.get(parent)
        return self._args(config, checkpoint, metadata, new_versions, unstored)

    async def abefore_put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> tuple[Any, Any]:
        """``before_put`` from async code."""
        parent, unstored = self._parent(config)
        if parent is not None and unstored is None:
            await self.saver.aget_tuple({"configurable": {"thread_id": parent[0], "checkpoint_ns": parent[1], "checkpoint_id": parent[2]}})
            unstored = self.memo.get(parent)
        return self._args(config, checkpoint, metadata, new_versions, unstored)


def with_migrations(saver: Any, registry: Migrations | None) -> Any:
    """Install ``registry`` on ``saver`` (a threadline saver) for lazy migration and return the
    saver: ``get_tuple``/``list`` (and their async twins) present every checkpoint with the steps
    it has not had applied (metadata ``threadline_migrated``); ``put`` stamps the checkpoint it
    writes (``threadline_migrations``) and stores the values migration changed, so stored rows
    change only when the thread writes again. ``registry=None`` removes it.

    Raises ConfigError when ``saver`` is not a threadline saver or ``registry`` not a ``Migrations``."""
    if not hasattr(saver, "migrations") or not hasattr(saver, "dialect"):
        raise ConfigError(f"with_migrations needs a threadline saver, got {type(saver).__name__}")
    if registry is None:
        saver.migrations = None
        return saver
    if not isinstance(registry, Migrations):
        raise ConfigError(f"with_migrations needs a threadline.evolve.Migrations, got {type(registry).__name__}")
    saver.migrations = Lens(registry, saver) if len(registry) else None
    return saver
