"""The one BaseCheckpointSaver implementation; backends only say how to run an operation.

A backend subclass provides ``_run(op, write=)`` (sync) and/or ``_arun(op, write=)``
(async), each executing a sans-IO operation from ``engine.ops`` in one
transaction. Every contract method below is a one-line call into ``ops``.
A sync backend serves the async methods from a worker thread; an async backend
serves the sync methods by scheduling onto its event loop from another thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.codec import BlobCodec
from threadline.serde import default_serde
from threadline.engine import ops
from threadline.engine.dialect import Dialect
from threadline.keys import key_of


class _Paging:
    """Page sizes and the keyset cursor of ``list``/``alist``: at most ``limit`` tuples in all."""

    def __init__(self, limit: int | None) -> None:
        self.after: tuple | None = None
        self.left = limit
        self.done = False

    def next_size(self) -> int:
        """Rows to fetch next; 0 when the listing is over."""
        if self.done:
            return 0
        return ops.PAGE_SIZE if self.left is None else max(0, min(self.left, ops.PAGE_SIZE))

    def advance(self, count: int, after: tuple | None) -> None:
        self.after, self.done = after, after is None
        if self.left is not None:
            self.left -= count


class EngineSaver(BaseCheckpointSaver[str]):
    """Checkpoint saver on threadline's storage engine (tables: checkpoints, blobs, writes, threads).

    Implements LangGraph's ``BaseCheckpointSaver`` contract, sync and async:
    ``get_tuple``, ``list``, ``put``, ``put_writes``, ``delete_thread``,
    ``delete_for_runs``, ``copy_thread``, ``prune``, ``get_delta_channel_history``
    and ``get_next_version``.

    Errors: ``threadline.errors.ConfigError`` for a malformed config,
    ``FilterError`` for an unusable ``list`` filter, ``CorruptRowError`` for a
    stored row that cannot be decoded. Nothing is written when an error is raised.
    """

    dialect: Dialect

    def __init__(self, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde or default_serde())
        # Compression and delta settings plus the cache of recent values (codec.BlobCodec);
        # replace it to tune them, e.g. ``saver.blob_codec = BlobCodec(max_depth=32)``.
        self.blob_codec = BlobCodec()

    # Backends implement one or both of these.
    def _run(self, op: ops.Op, *, write: bool) -> Any:
        raise NotImplementedError

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        raise NotImplementedError

    def run(self, op: ops.Op, *, write: bool = False) -> Any:
        """Run any sans-IO operation (``engine.ops``, ``lifecycle``, ``history``) in one transaction."""
        return self._run(op, write=write)

    async def arun(self, op: ops.Op, *, write: bool = False) -> Any:
        """Async ``run``."""
        return await self._arun(op, write=write)

    # --- sync ---------------------------------------------------------------

    def setup(self) -> None:
        """Create the tables and apply pending numbered migrations. Idempotent."""
        self._run(ops.setup(self.dialect), write=True)

    def get_tuple(self, config: dict) -> CheckpointTuple | None:
        return self._run(ops.get_tuple(self.dialect, self.serde, key_of(config), self.blob_codec), write=False)

    def list(
        self,
        config: dict | None,
        *,
        filter: dict[str, Any] | None = None,
        before: dict | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        where = ops.list_where(self.dialect, config, filter, before)
        paging = _Paging(limit)
        while size := paging.next_size():
            # tuples are built one at a time as they are yielded (see ops.load_tuples(lazy=True))
            page, after = self._run(ops.list_page(self.dialect, self.serde, where, paging.after, size, lazy=True), write=False)
            paging.advance(len(page), after)
            for make in page:
                yield make()

    def put(self, config: dict, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions) -> dict:
        return self._run(ops.put(self.dialect, self.serde, config, checkpoint, metadata, new_versions, self.blob_codec), write=True)

    def put_writes(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        self._run(ops.put_writes(self.dialect, self.serde, config, writes, task_id, task_path, self.blob_codec), write=True)

    def delete_thread(self, thread_id: str) -> None:
        self._run(ops.delete_thread(self.dialect, thread_id, self.blob_codec), write=True)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(ops.delete_for_runs(self.dialect, run_ids, self.blob_codec), write=True)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(ops.copy_thread(self.dialect, source_thread_id, target_thread_id), write=True)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run(ops.prune(self.dialect, thread_ids, strategy, self.blob_codec), write=True)

    def get_delta_channel_history(self, *, config: dict, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return self._run(ops.delta_channel_history(self.dialect, self.serde, config, channels), write=False)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        return ops.next_version(current)

    # --- async --------------------------------------------------------------

    async def asetup(self) -> None:
        """Async ``setup``."""
        await self._arun(ops.setup(self.dialect), write=True)

    async def aget_tuple(self, config: dict) -> CheckpointTuple | None:
        return await self._arun(ops.get_tuple(self.dialect, self.serde, key_of(config), self.blob_codec), write=False)

    async def alist(
        self,
        config: dict | None,
        *,
        filter: dict[str, Any] | None = None,
        before: dict | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        where = ops.list_where(self.dialect, config, filter, before)
        paging = _Paging(limit)
        while size := paging.next_size():
            page, after = await self._arun(ops.list_page(self.dialect, self.serde, where, paging.after, size), write=False)
            paging.advance(len(page), after)
            for item in page:
                yield item

    async def aput(self, config: dict, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions) -> dict:
        return await self._arun(ops.put(self.dialect, self.serde, config, checkpoint, metadata, new_versions, self.blob_codec), write=True)

    async def aput_writes(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        await self._arun(ops.put_writes(self.dialect, self.serde, config, writes, task_id, task_path, self.blob_codec), write=True)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(ops.delete_thread(self.dialect, thread_id, self.blob_codec), write=True)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(ops.delete_for_runs(self.dialect, run_ids, self.blob_codec), write=True)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(ops.copy_thread(self.dialect, source_thread_id, target_thread_id), write=True)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._arun(ops.prune(self.dialect, thread_ids, strategy, self.blob_codec), write=True)

    async def aget_delta_channel_history(
        self, *, config: dict, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._arun(ops.delta_channel_history(self.dialect, self.serde, config, channels), write=False)


class SyncShell(EngineSaver):
    """For backends with a blocking driver: async methods run the same operation in a worker thread."""

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        return await asyncio.to_thread(self._run, op, write=write)


class AsyncShell(EngineSaver):
    """For backends with an async driver: sync methods schedule onto the saver's event loop.

    Calling a sync method from the loop's own thread would deadlock, so it raises
    ``asyncio.InvalidStateError`` telling you to use the ``a``-prefixed method.
    """

    loop: asyncio.AbstractEventLoop

    def _run(self, op: ops.Op, *, write: bool) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            raise asyncio.InvalidStateError(
                f"Synchronous calls to {type(self).__name__} are only allowed from a different thread; "
                "from the event loop use the async methods (aget_tuple, aput, ...)."
            )
        return asyncio.run_coroutine_threadsafe(self._arun(op, write=write), self.loop).result()
