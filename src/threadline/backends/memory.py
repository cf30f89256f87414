"""``InMemorySaver`` (alias ``MemorySaver``): a drop-in for LangGraph's
``langgraph.checkpoint.memory.InMemorySaver`` on threadline's engine.

Each instance holds its checkpoints in a private SQLite database in memory (one
``sqlite3`` connection, ``":memory:"``), driven by the same shell as ``SqliteSaver``: the
same deltas, limits, seals, load policy and tools (``threadline.read``, ``threadline.lifecycle``,
``threadline.transfer.backup.backup(saver, "file.db")`` to keep it in a file). Nothing is
shared between instances and nothing outlives the instance, as with the official saver.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from contextlib import AbstractAsyncContextManager, AbstractContextManager, ExitStack
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.backends.sqlite import SqliteConnectionSaver


def _private_database() -> sqlite3.Connection:
    """A new, empty in-memory SQLite database of its own: autocommit (the shell issues its own
    ``BEGIN``), usable from any thread (the saver's lock serializes use)."""
    return sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)


class InMemorySaver(SqliteConnectionSaver, AbstractContextManager, AbstractAsyncContextManager):
    """Checkpoint saver in memory, for tests and notebooks: the official ``InMemorySaver``'s
    constructor, context-manager use and methods (sync and async from one instance:
    ``get_tuple``/``aget_tuple``, ``list``/``alist``, ``put``/``aput``,
    ``put_writes``/``aput_writes``, ``delete_thread``, ``delete_for_runs``, ``copy_thread``,
    ``prune``, ``get_delta_channel_history``, ``get_next_version``), on threadline's engine.

    ``serde``: the serializer (default: threadline's, under its load policy).
    ``factory``: accepted for the official signature and ignored: there it makes the storage
    mappings (e.g. LangGraph's ``PersistentDict``, a dict pickled to a file); threadline keeps
    the data in a SQLite database in memory, which a mapping factory cannot replace. To keep
    checkpoints in a file use ``SqliteSaver``, or copy this saver's database into one with
    ``threadline.transfer.backup.backup(saver, path)`` (a threadline SQLite file).
    ``cache_max_bytes``: the value cache's bound, as ``SqliteSaver``'s.

    The async methods call the sync ones in the event loop, as the official saver's do (an
    operation on the in-memory database takes microseconds to a few milliseconds; one lock
    serializes the connection between threads), so the instance serves ``graph.invoke`` and
    ``graph.ainvoke`` alike, and a subclass overriding a sync method changes its async twin
    too. Errors as ``EngineSaver``'s.

    Usage::

        from threadline import InMemorySaver

        graph = builder.compile(checkpointer=InMemorySaver())
    """

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        factory: type[defaultdict] = defaultdict,
        cache_max_bytes: int | None = None,
    ) -> None:
        super().__init__(_private_database(), serde=serde, adopt=False, cache_max_bytes=cache_max_bytes)
        # As the official saver's: what closes with the saver (``with``/``async with``);
        # callers may register their own clean-ups on it (``saver.stack.callback(...)``).
        self.stack = ExitStack()

    # The async methods call the sync ones, in the event loop, as the official saver's do: a
    # subclass overriding ``put`` or ``get_tuple`` (LangGraph's own tests do) changes both paths.

    async def aget_tuple(self, config: dict) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self, config: dict | None, *, filter: dict[str, Any] | None = None, before: dict | None = None, limit: int | None = None
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(self, config: dict, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions) -> dict:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        return self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        return self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        return self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        return self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        return self.prune(thread_ids, strategy=strategy)

    async def aget_delta_channel_history(self, *, config: dict, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return self.get_delta_channel_history(config=config, channels=channels)

    def __enter__(self) -> InMemorySaver:
        self.stack.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_value: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        # as the official saver: runs the stack's clean-ups; the checkpoints stay readable
        return self.stack.__exit__(exc_type, exc_value, traceback)

    async def __aenter__(self) -> InMemorySaver:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_value: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        return self.__exit__(exc_type, exc_value, traceback)


MemorySaver = InMemorySaver  # the official module's alias, kept for the same imports
