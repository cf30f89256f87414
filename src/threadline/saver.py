"""The one BaseCheckpointSaver implementation; backends only say how to run an operation.

A backend subclass provides ``_run(op, write=)`` (sync) and/or ``_arun(op, write=)``
(async), each executing a sans-IO operation from ``storage.ops`` in one
transaction. Every contract method below is a one-line call into ``ops``.
A sync backend serves the async methods from a worker thread; an async backend
serves the sync methods by scheduling onto its event loop from another thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from threadline.errors import ConfigError
from threadline.lazy import LazyModule, deferred
from threadline.sweeping import AsyncSweeping, Sweeping, SyncSweeping

# The engine loads with the first saver constructed, not with the import (issue 44: the import no
# slower than the official saver's); the methods then read these as plain globals.
_load_engine = deferred(globals(), {
    "ops": "threadline.storage.ops", "R": "threadline.storage.rows", "metrics": "threadline.metrics",
    "BlobCache": "threadline.codec:BlobCache", "BlobCodec": "threadline.codec:BlobCodec",
    "DEFAULT_MAX_BYTES": "threadline.codec.cache:DEFAULT_MAX_BYTES", "key_of": "threadline.keys:key_of",
    "FENCES": "threadline.storage.ops.lease:FENCES", "fence_of": "threadline.storage.ops.lease:fence_of",
    "thread_ttl_of": "threadline.ttl:thread_ttl_of",
})
# loaded when a saver first adopts or a put names a TTL
adopt = LazyModule("threadline.storage.adopt")
sweep_ops = LazyModule("threadline.storage.ops.sweep")

if TYPE_CHECKING:
    from threadline import metrics
    from threadline.codec import BlobCache, BlobCodec
    from threadline.codec.cache import DEFAULT_MAX_BYTES
    from threadline.keys import key_of
    from threadline.objectstore import Offload
    from threadline.storage import ops, rows as R
    from threadline.storage.dialect import Dialect
    from threadline.storage.ops.lease import FENCES, Fence, fence_of
    from threadline.ttl import TTL, thread_ttl_of


class _Listing:
    """One ``list``/``alist`` call: its WHERE clause, the keyset cursor and what is left of
    ``limit``. ``next_op`` gives the operation reading the next page (None when the listing
    is over); ``take`` turns its result into functions that build the page's tuples, so
    both methods deserialize each tuple only when it is yielded (``ops.load_tuples(lazy=True)``)."""

    def __init__(self, saver: EngineSaver, config: dict | None, filter: dict[str, Any] | None, before: dict | None, limit: int | None):
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ConfigError(f"limit must be an integer or None, got {type(limit).__name__} {limit!r}")
        self.saver = saver
        self.where = ops.list_where(saver.dialect, config, filter, before)
        self.thread_id = _thread_of(config)
        self.after: tuple | None = None
        self.left = None if limit is not None and limit < 0 else limit  # SQLite's LIMIT -1: no limit
        self.done = False

    def next_op(self) -> ops.Op | None:
        size = ops.PAGE_SIZE if self.left is None else max(0, min(self.left, ops.PAGE_SIZE))
        if self.done or not size:
            return None
        s = self.saver
        return ops.list_page(s.dialect, s.serde, self.where, self.after, size, s.blob_codec, lazy=True)

    def take(self, result: tuple[list, tuple | None]) -> list:
        page, self.after = result
        self.done = self.after is None
        if self.left is not None:
            self.left -= len(page)
        return page


def _cache_bytes(value: Any) -> int:
    """``cache_max_bytes`` checked: None means the default (4 MiB)."""
    if value is None:
        return DEFAULT_MAX_BYTES
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"cache_max_bytes must be a non-negative integer (bytes) or None, got {value!r}")
    return value


def _thread_of(config: Any) -> str | None:
    """The thread a read names, for adoption; None when it names none (validated by the operation)."""
    return key_of(config, require_thread=False).thread_id if config is not None else None


class EngineSaver(Sweeping, BaseCheckpointSaver[str]):
    """Checkpoint saver on threadline's storage engine (tables: checkpoints, blobs, writes, threads).

    Implements LangGraph's ``BaseCheckpointSaver`` contract, sync and async:
    ``get_tuple``, ``list``, ``put``, ``put_writes``, ``delete_thread``,
    ``delete_for_runs``, ``copy_thread``, ``prune``, ``get_delta_channel_history``
    and ``get_next_version``.

    Errors: ``threadline.errors.ConfigError`` for a malformed config,
    ``FilterError`` for an unusable ``list`` filter, ``CorruptRowError`` for a
    stored row that cannot be decoded. Nothing is written when an error is raised.

    ``ttl`` (``{"default_ttl": minutes, "refresh_on_read": bool, "sweep_interval_minutes":
    minutes}``, see ``threadline.ttl``) and ``retention`` (a
    ``threadline.lifecycle.RetentionPolicy`` or a mapping of its fields) are applied by
    ``sweep()`` and by the background sweeper (``start_ttl_sweeper``; ``from_conn_string``
    starts it when ``sweep_interval_minutes`` is given). See ``threadline.lifecycle.sweeper``.

    ``cache_max_bytes`` bounds the saver's cache of recent values (``codec.BlobCache``: the
    delta bases a put extends, values a read decoded, recent checkpoints' versions), in
    bytes counted with keys and per-entry overhead; default 4 MiB (``DEFAULT_MAX_BYTES``);
    0 keeps nothing (every put then reads its delta base back). ConfigError when it is not
    a non-negative integer. See docs/operations.md, "Memory".

    ``adopt``: serve threads found in the official saver's tables of the same database
    (``threadline.storage.adopt``): a read naming a thread adopts it, ``list(None, …)`` every
    thread with official checkpoints to adopt. None (the default) adopts unless the codec's
    keyring requires encryption, since the official rows carry no seal; True adopts in any
    case, False never. Adoption never touches a thread threadline wrote itself.

    ``offload``: an ``Offload`` or its URL (``file:///dir?min_bytes=…``, ``s3://bucket/prefix?endpoint=…``):
    values whose stored bytes exceed ``min_bytes`` go to that object store (docs/offload.md);
    None: the ``THREADLINE_OFFLOAD`` environment variable's (SQLite and Postgres), else none.
    """

    dialect: Dialect
    # Lazy state migration (``threadline.evolve.with_migrations``): None, or an ``evolve.lens.Lens``
    # that presents what is read migrated and stamps what is written; None costs one check a call.
    migrations: Any = None

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        adopt: bool | None = None,
        ttl: Mapping[str, Any] | TTL | None = None,
        retention: Any = None,
        cache_max_bytes: int | None = None,
        offload: Offload | str | None = None,
    ) -> None:
        # loaded with the first saver, not the import (issue 44): a first put or get imports nothing
        _load_engine()
        from threadline.codec.serde import default_serde
        from threadline.objectstore import Offload
        from threadline.storage.ops import read, schema, write  # noqa: F401

        super().__init__(serde=serde or default_serde())
        # Compression and delta settings plus the cache of recent values (codec.BlobCodec);
        # replace it to tune them, e.g. ``saver.blob_codec = BlobCodec(max_depth=32)``.
        # THREADLINE_OFFLOAD applies to the savers whose backend offloads (SQLite, Postgres; not Redis)
        env = Offload.from_env if getattr(getattr(type(self), "dialect", None), "offloads", False) else lambda: None
        self.blob_codec = BlobCodec(cache=BlobCache(max_bytes=_cache_bytes(cache_max_bytes)), offload=Offload.of(offload) or env())
        # Adopt threads of the official saver's tables on first touch (see the class docstring);
        # _adopting is set by setup() when such tables exist and adopt is not False.
        self.adopt = adopt
        self.is_setup = False
        self._adopting = False
        self.schema_state: ops.SchemaState | None = None
        self._init_sweeping(ttl, retention)

    def _setup_done(self, state: ops.SchemaState) -> None:
        self._adopting = self.adopt is not False and state.official
        self.schema_state = state  # what the database holds (the read models ask: official tables?)
        self.is_setup = True

    def _as_official(self, key: Any, config: dict, found: CheckpointTuple | None) -> CheckpointTuple | None:
        """The official SqliteSaver returns the caller's own config when it names a checkpoint (``key``, its key)."""
        if found is not None and key.checkpoint_id and self.dialect.echoes_config:
            return found._replace(config=config)
        return found

    def _adopts(self) -> bool:
        """Whether this saver adopts official threads: the database has the official tables and
        adoption is on (by default, unless the keyring requires encryption: class docstring)."""
        keys = self.blob_codec.keys
        return self._adopting and not (self.adopt is None and keys is not None and keys.require)

    def _adopt_op(self, thread_id: Any) -> ops.Op[bool] | None:
        """The read-only check whether ``thread_id`` has official checkpoints to adopt; None when
        adoption is off, or no thread is named."""
        if thread_id is None or not self._adopts():
            return None
        return adopt.pending(self.dialect, thread_id)

    def _adopt(self, thread_id: Any) -> None:
        if (check := self._adopt_op(thread_id)) is not None and self._run(check, write=False):
            self._run(adopt.adopt_thread(self.dialect, thread_id, self.blob_codec), write=True)

    async def _aadopt(self, thread_id: Any) -> None:
        if (check := self._adopt_op(thread_id)) is not None and await self._arun(check, write=False):
            await self._arun(adopt.adopt_thread(self.dialect, thread_id, self.blob_codec), write=True)

    def _adopt_all(self) -> None:
        """``list(None, …)`` touches every thread: adopt each one the official tables hold newer
        checkpoints of (one transaction a thread, as on first touch)."""
        if self._adopts():
            for tid in self._run(adopt.unadopted_op(self.dialect), write=False):
                self._run(adopt.adopt_thread(self.dialect, tid, self.blob_codec), write=True)

    async def _aadopt_all(self) -> None:
        if self._adopts():
            for tid in await self._arun(adopt.unadopted_op(self.dialect), write=False):
                await self._arun(adopt.adopt_thread(self.dialect, tid, self.blob_codec), write=True)

    def _cold_op(self, thread_id: Any = None, put: dict | None = None) -> ops.Op[bool] | None:
        """The restore of ``thread_id`` (or of the thread of ``put``, a put's config) if it is cold
        (``lifecycle.cold.warm_op``: one read when it is not); None when this saver keeps no cold
        threads (no object store) or no thread is named, or for a put whose parent checkpoint is
        cached: the thread is warm."""
        bc = self.blob_codec
        if bc.offload is None or bc.offload.objects is None or not getattr(self.dialect, "offloads", False):
            return None
        if put is not None:
            key = key_of(put)
            if not key.checkpoint_id or (bc.cache is not None and bc.cache.versions((key.thread_id, key.checkpoint_ns, key.checkpoint_id))):
                return None
            thread_id = key.thread_id
        if thread_id is None:
            return None
        from threadline.lifecycle.cold import warm_op  # loaded once a saver offloads

        return warm_op(self.dialect, bc, thread_id)

    # Backends implement one or both of these.
    def _run(self, op: ops.Op, *, write: bool) -> Any:
        raise NotImplementedError

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        raise NotImplementedError

    def _fence(self, config: dict) -> Fence | None:
        """The thread guard lease this saver's put on ``config``'s thread is made under (``threadline.guard``), or None."""
        fences = FENCES.get()
        return fence_of(fences, self, config) if fences else None

    def _put_op(self, config: dict, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions) -> ops.Op:
        """``put`` (recording this saver's default TTL on the thread), and the thread's own TTL when
        the run names one (``threadline.ttl``)."""
        own = thread_ttl_of(config, metadata)
        default_ttl = self.ttl.default_ttl if self.ttl is not None else None
        op = ops.put(self.dialect, self.serde, config, checkpoint, metadata, new_versions, self.blob_codec,
                     default_ttl=default_ttl, fence=self._fence(config))
        op = metrics.counted(op, self.dialect.name)
        return op if own is None else sweep_ops.with_thread_ttl(self.dialect, op, key_of(config).thread_id, own)

    def _put_writes_op(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> ops.Op:
        op = ops.put_writes(self.dialect, self.serde, config, writes, task_id, task_path, self.blob_codec, self._fence(config))
        return metrics.counted(op, self.dialect.name)

    def _remember_writes(self, stored: tuple | None) -> None:
        """Remember committed list writes (``ops.put_writes``' result) for the next put's references."""
        if stored is not None and self.blob_codec.cache is not None:
            self.blob_codec.cache.add_writes(*stored)

    def run(self, op: ops.Op, *, write: bool = False) -> Any:
        """Run any sans-IO operation (``storage.ops``, ``lifecycle``, ``read``) in one transaction."""
        return self._run(op, write=write)

    async def arun(self, op: ops.Op, *, write: bool = False) -> Any:
        """Async ``run``."""
        return await self._arun(op, write=write)

    # --- sync ---------------------------------------------------------------

    def get_tuple(self, config: dict) -> CheckpointTuple | None:
        if self._adopting:  # the thread is named only to adopt it: one key_of less otherwise
            self._adopt(_thread_of(config))
        with metrics.observe("get_tuple", self.dialect.name):  # a malformed config is counted as the call's error
            key = key_of(config)
            found = self._run(ops.get_tuple(self.dialect, self.serde, key, self.blob_codec), write=False)
        if found is None and (warm := self._cold_op(key.thread_id)) is not None and self._run(warm, write=True):
            found = self._run(ops.get_tuple(self.dialect, self.serde, key, self.blob_codec), write=False)
        if found is not None and (touch := self._touch_op(key.thread_id)) is not None:
            self._run(touch, write=True)
        if self.migrations is not None:
            found = self.migrations.read(found)
        return self._as_official(key, config, found)

    def list(
        self, config: dict | None, *, filter: dict[str, Any] | None = None, before: dict | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        listing = _Listing(self, config, filter, before, limit)
        if config is None:
            self._adopt_all()
        self._adopt(listing.thread_id)
        if (warm := self._cold_op(listing.thread_id)) is not None:
            self._run(warm, write=True)
        if (touch := self._touch_op(listing.thread_id)) is not None:
            self._run(touch, write=True)
        while (op := listing.next_op()) is not None:
            with metrics.observe("list", self.dialect.name):
                page = listing.take(self._run(op, write=False))
            for make in page:
                yield make() if self.migrations is None else self.migrations.read(make())

    def put(self, config: dict, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions) -> dict:
        if (warm := self._cold_op(put=config)) is not None:
            self._run(warm, write=True)
        if self.migrations is not None:
            metadata, new_versions = self.migrations.before_put(config, checkpoint, metadata, new_versions)
        with metrics.observe("put", self.dialect.name):
            stored = self._run(self._put_op(config, checkpoint, metadata, new_versions), write=True)
        metrics.put_done(self.blob_codec, stored, new_versions, R.version_key)
        return stored

    def put_writes(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        with metrics.observe("put_writes", self.dialect.name):
            self._remember_writes(self._run(self._put_writes_op(config, writes, task_id, task_path), write=True))

    def delete_thread(self, thread_id: str) -> None:
        self._adopt(thread_id)  # an adopted thread stays deleted: its marker remains
        self._run(ops.delete_thread(self.dialect, thread_id, self.blob_codec), write=True)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(ops.delete_for_runs(self.dialect, run_ids, self.blob_codec), write=True)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._adopt(source_thread_id)
        self._run(ops.copy_thread(self.dialect, source_thread_id, target_thread_id, self.blob_codec), write=True)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for tid in ops.thread_ids_of(thread_ids):
            self._adopt(tid)
        self._run(ops.prune(self.dialect, thread_ids, strategy, self.blob_codec), write=True)

    def get_delta_channel_history(self, *, config: dict, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return self._run(ops.delta_channel_history(self.dialect, self.serde, config, channels, self.blob_codec), write=False)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        return R.next_version(current)

    # --- async --------------------------------------------------------------

    async def aget_tuple(self, config: dict) -> CheckpointTuple | None:
        if self._adopting:
            await self._aadopt(_thread_of(config))
        with metrics.observe("get_tuple", self.dialect.name):  # a malformed config is counted as the call's error
            key = key_of(config)
            found = await self._arun(ops.get_tuple(self.dialect, self.serde, key, self.blob_codec), write=False)
        if found is None and (warm := self._cold_op(key.thread_id)) is not None and await self._arun(warm, write=True):
            found = await self._arun(ops.get_tuple(self.dialect, self.serde, key, self.blob_codec), write=False)
        if found is not None and (touch := self._touch_op(key.thread_id)) is not None:
            await self._arun(touch, write=True)
        if self.migrations is not None:
            found = self.migrations.read(found)
        return self._as_official(key, config, found)

    async def alist(
        self, config: dict | None, *, filter: dict[str, Any] | None = None, before: dict | None = None, limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        listing = _Listing(self, config, filter, before, limit)
        if config is None:
            await self._aadopt_all()
        await self._aadopt(listing.thread_id)
        if (warm := self._cold_op(listing.thread_id)) is not None:
            await self._arun(warm, write=True)
        if (touch := self._touch_op(listing.thread_id)) is not None:
            await self._arun(touch, write=True)
        while (op := listing.next_op()) is not None:
            with metrics.observe("list", self.dialect.name):
                page = listing.take(await self._arun(op, write=False))
            for make in page:
                yield make() if self.migrations is None else self.migrations.read(make())

    async def aput(self, config: dict, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions) -> dict:
        if (warm := self._cold_op(put=config)) is not None:
            await self._arun(warm, write=True)
        if self.migrations is not None:
            metadata, new_versions = await self.migrations.abefore_put(config, checkpoint, metadata, new_versions)
        with metrics.observe("put", self.dialect.name):
            stored = await self._arun(self._put_op(config, checkpoint, metadata, new_versions), write=True)
        metrics.put_done(self.blob_codec, stored, new_versions, R.version_key)
        return stored

    async def aput_writes(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        with metrics.observe("put_writes", self.dialect.name):
            self._remember_writes(await self._arun(self._put_writes_op(config, writes, task_id, task_path), write=True))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._aadopt(thread_id)
        await self._arun(ops.delete_thread(self.dialect, thread_id, self.blob_codec), write=True)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(ops.delete_for_runs(self.dialect, run_ids, self.blob_codec), write=True)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._aadopt(source_thread_id)
        await self._arun(ops.copy_thread(self.dialect, source_thread_id, target_thread_id, self.blob_codec), write=True)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for tid in ops.thread_ids_of(thread_ids):
            await self._aadopt(tid)
        await self._arun(ops.prune(self.dialect, thread_ids, strategy, self.blob_codec), write=True)

    async def aget_delta_channel_history(
        self, *, config: dict, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._arun(ops.delta_channel_history(self.dialect, self.serde, config, channels, self.blob_codec), write=False)


class SyncShell(SyncSweeping, EngineSaver):
    """For backends with a blocking driver: async methods run the same operation in a worker thread.

    A backend provides ``_transaction(op, write)`` (one transaction, no setup check)."""

    def _transaction(self, op: ops.Op, write: bool) -> Any:
        raise NotImplementedError

    def setup(self) -> None:
        """Create threadline's tables, or bring them to this release (numbered migrations).

        Idempotent, and run on first use. Writes nothing when the schema is current, and reads
        nothing once this saver is set up (``from_conn_string`` sets up; a user's ``setup()``
        after it costs no round trip). Raises SchemaError when a newer threadline release
        wrote the schema."""
        if self.is_setup:
            return
        state = self._transaction(ops.schema_state(self.dialect), False)
        state.check_version()
        if not state.current:
            state = self._transaction(ops.setup(self.dialect), True)
        self._setup_done(state)

    async def asetup(self) -> None:
        """``setup`` from async code."""
        await asyncio.to_thread(self.setup)

    def peek(self, op: ops.Op) -> Any:
        """Run a read-only operation on the database as it is, without setting anything up
        (for inspecting databases threadline does not own: an official saver's, a backup)."""
        return self._transaction(op, False)

    def _run(self, op: ops.Op, *, write: bool) -> Any:
        if not self.is_setup:
            self.setup()
        return self._transaction(op, write)

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        return await asyncio.to_thread(self._run, op, write=write)

class AsyncShell(AsyncSweeping, EngineSaver):
    """For backends with an async driver: sync methods schedule onto the saver's event loop.

    Calling a sync method from the loop's own thread would deadlock, so it raises
    ``asyncio.InvalidStateError`` telling you to use the ``a``-prefixed method.
    """

    loop: asyncio.AbstractEventLoop

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.loop = asyncio.get_running_loop()  # where sync calls from other threads are scheduled

    async def _atransaction(self, op: ops.Op, write: bool) -> Any:
        raise NotImplementedError

    async def setup(self) -> None:
        """Create threadline's tables, or bring them to this release (numbered migrations).

        ``async`` like the official async savers' ``setup``; idempotent, and run on first
        use. Writes nothing when the schema is current, and reads nothing once this saver is set
        up. Raises SchemaError when a newer threadline release wrote the schema."""
        if self.is_setup:
            return
        state = await self._atransaction(ops.schema_state(self.dialect), False)
        state.check_version()
        if not state.current:
            state = await self._atransaction(ops.setup(self.dialect), True)
        self._setup_done(state)

    async def asetup(self) -> None:
        """The same as ``await setup()``."""
        await self.setup()

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        if not self.is_setup:
            await self.setup()
        return await self._atransaction(op, write)

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
