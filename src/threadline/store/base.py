"""The one Store logic behind all four store classes: ``SyncStore`` (``BaseStore``) and
``AsyncStore`` (LangGraph's ``AsyncBatchedBaseStore``, which gathers concurrent calls
into one ``abatch``). A backend shell only supplies a driver (``threadline.store.drivers``)
and its constructors.

Per batch: check and encode the ops (``ops.plan``), embed outside any transaction,
set up the tables on first use, run the batch in one transaction, then restart the
TTL of what was read with ``refresh_ttl`` in a second, short write.

TTL (``ttl={"default_ttl": minutes, "refresh_on_read": bool, "sweep_interval_minutes":
minutes, "omit_expired": bool}``), as the official stores: ``put(..., ttl=)`` or
``default_ttl`` sets an item's lifetime in minutes; reads restart it unless
``refresh_ttl=False``; ``sweep_ttl()`` deletes expired items, ``start_ttl_sweeper()``
does it every ``sweep_interval_minutes`` (default 5) until ``stop_ttl_sweeper()``;
``omit_expired`` hides expired items that are not swept yet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langgraph.store.base import BaseStore, Op, Result, TTLConfig
from langgraph.store.base.batch import AsyncBatchedBaseStore

from threadline.errors import ConfigError
from threadline.store import ops as O
from threadline.store import official, schema
from threadline.store.index import Index
from threadline.storage.dialect.store import StoreSql

logger = logging.getLogger(__name__)
DEFAULT_SWEEP_MINUTES = 5.0


class _Core:
    """State and pure steps both store kinds share."""

    sql: StoreSql
    supports_ttl = True

    def _init_core(
        self, index: Mapping[str, Any] | None, ttl: TTLConfig | None, deserializer: Callable | None, adopt: bool | None = None
    ) -> None:
        if adopt is not None and not isinstance(adopt, bool):
            raise ConfigError(f"adopt must be True, False or None, got {adopt!r}")
        # Adopt the official store's items of the same database at setup (``store.official``);
        # None (the default) and True adopt, False never.
        self.adopt = adopt
        self.index_config = dict(index) if index else None  # the config as given (official attribute)
        self._index = Index(index) if index else None
        self.embeddings = self._index.embeddings if self._index else None
        self.ttl_config = ttl
        self._deserializer = deserializer
        self.is_setup = False
        self._has_vectors = False

    @property
    def _omit_expired(self) -> bool:
        return bool(self.ttl_config and self.ttl_config.get("omit_expired"))

    def _vectors(self, queries: dict[int, list[float]], puts: list[list[float]]) -> O.Vectors:
        i = self._index
        return O.Vectors(queries, puts, i.distance, i.vector_type) if i else O.Vectors(queries, puts)

    def _batch_op(self, p: O.Plan, vec: O.Vectors, now: float) -> Any:
        return O.batch(self.sql, p, vec, now, omit_expired=self._omit_expired, has_vectors=self._has_vectors, loader=self._deserializer)

    def _interval(self, minutes: float | None) -> float:
        """Seconds between sweeps."""
        return 60 * float(minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES)


class SyncStore(_Core, BaseStore):
    """``BaseStore`` over a sync driver (``self._driver``). ``abatch`` runs ``batch`` in a thread."""

    _driver: Any

    def setup(self) -> None:
        """Create or migrate the store's tables (idempotent; safe from many processes at once),
        then adopt the official store's items of the same database not adopted yet
        (``threadline.store.official``; not with ``adopt=False``).

        Raises AdoptionError (nothing adopted; the next setup tries again) naming an official
        item threadline cannot store."""
        self._has_vectors = self._driver.run(schema.setup_store(self.sql, self._index), write=True)
        self._adopt_official()
        self.is_setup = True

    def _adopt_official(self) -> int:
        """Adopt the official table's items still to adopt, in one transaction; returns how many."""
        if self.adopt is False:
            return 0
        columns = self._driver.run(official.official_columns_op(self.sql), write=False)
        if columns is None:
            return 0
        items = self._driver.run(official.official_items_op(self.sql, columns, pending=True), write=False)
        if not items:
            return 0
        p = official.plan_items(items, self._index, official.ADOPT_FIX)
        vec = self._embed(p)
        op = official.store_items_op(self.sql, items, p, vec, self._has_vectors, adopt=columns)
        return self._driver.run(op, write=True)[0]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        p = O.plan(ops, self._index)
        vec = self._embed(p)
        if not self.is_setup:
            self.setup()
        results, refresh = self._driver.run(self._batch_op(p, vec, time.time()), write=p.writes)
        if refresh:
            self._driver.run(O.refresh(self.sql, refresh, time.time(), omit_expired=self._omit_expired), write=True)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _embed(self, p: O.Plan) -> O.Vectors:
        if self._index is None:
            return self._vectors({}, [])
        e, check = self._index.embeddings, self._index.check
        puts = check(e.embed_documents([t[3] for t in p.put_texts]), len(p.put_texts)) if p.put_texts else []
        return self._vectors({n: check([e.embed_query(q)], 1)[0] for n, q in p.query_texts}, puts)

    def sweep_ttl(self) -> int:
        """Delete the items whose TTL has passed (and their vectors); returns how many. Pages of
        1000 items, one transaction each; safe when many processes sweep at once."""
        if not self.is_setup:
            self.setup()
        total = 0
        while (n := self._driver.run(O.sweep(self.sql, time.time(), self._has_vectors), write=True)) > 0:
            total += n
            if n < O.SWEEP_PAGE:
                break
        return total

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's, else 5) in a daemon
        thread; returns a Future that cancelling stops it. Without a TTL config: a done Future."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        running = getattr(self, "_sweeper", None)
        if not self.ttl_config or (running is not None and running[0].is_alive()):
            if not self.ttl_config:
                future.set_result(None)
            else:
                future.add_done_callback(lambda f: running[1].set() if f.cancelled() else None)
            return future
        stop, interval = threading.Event(), self._interval(sweep_interval_minutes)

        def loop() -> None:
            while not stop.wait(interval):
                try:
                    swept = self.sweep_ttl()
                    if swept:
                        logger.info("store swept %d expired items", swept)
                except Exception:  # a failed sweep is retried at the next interval
                    logger.exception("store TTL sweep failed")
            if not future.done():
                future.set_result(None)

        thread = threading.Thread(target=loop, daemon=True, name="threadline-ttl-sweeper")
        self._sweeper = (thread, stop)
        future.add_done_callback(lambda f: stop.set() if f.cancelled() else None)
        thread.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; False when it did not stop within ``timeout`` seconds."""
        running = getattr(self, "_sweeper", None)
        if running is None:
            return True
        running[1].set()
        running[0].join(timeout)
        if running[0].is_alive():
            return False
        self._sweeper = None
        return True


class AsyncStore(_Core, AsyncBatchedBaseStore):
    """``AsyncBatchedBaseStore`` over an async driver (``self._driver``). Its sync methods work
    from other threads; on the event loop's own thread they raise ``asyncio.InvalidStateError``."""

    _driver: Any

    async def setup(self) -> None:
        """Create or migrate the store's tables (idempotent; safe from many processes at once),
        then adopt the official store's items of the same database not adopted yet
        (``threadline.store.official``; not with ``adopt=False``). AdoptionError as ``SyncStore.setup``."""
        self._has_vectors = await self._driver.run(schema.setup_store(self.sql, self._index), write=True)
        await self._adopt_official()
        self.is_setup = True

    async def _adopt_official(self) -> int:
        if self.adopt is False:
            return 0
        columns = await self._driver.run(official.official_columns_op(self.sql), write=False)
        if columns is None:
            return 0
        items = await self._driver.run(official.official_items_op(self.sql, columns, pending=True), write=False)
        if not items:
            return 0
        p = official.plan_items(items, self._index, official.ADOPT_FIX)
        vec = await self._aembed(p)
        op = official.store_items_op(self.sql, items, p, vec, self._has_vectors, adopt=columns)
        return (await self._driver.run(op, write=True))[0]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        p = O.plan(ops, self._index)
        vec = await self._aembed(p)
        if not self.is_setup:
            await self.setup()
        results, refresh = await self._driver.run(self._batch_op(p, vec, time.time()), write=p.writes)
        if refresh:
            await self._driver.run(O.refresh(self.sql, refresh, time.time(), omit_expired=self._omit_expired), write=True)
        return results

    async def _aembed(self, p: O.Plan) -> O.Vectors:
        if self._index is None:
            return self._vectors({}, [])
        e, check = self._index.embeddings, self._index.check
        puts = check(await e.aembed_documents([t[3] for t in p.put_texts]), len(p.put_texts)) if p.put_texts else []
        queries = {n: check([await e.aembed_query(q)], 1)[0] for n, q in p.query_texts}
        return self._vectors(queries, puts)

    async def sweep_ttl(self) -> int:
        """Delete the items whose TTL has passed (and their vectors); returns how many. Pages of
        1000 items, one transaction each; safe when many processes sweep at once."""
        if not self.is_setup:
            await self.setup()
        total = 0
        while (n := await self._driver.run(O.sweep(self.sql, time.time(), self._has_vectors), write=True)) > 0:
            total += n
            if n < O.SWEEP_PAGE:
                break
        return total

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """Sweep every ``sweep_interval_minutes`` in a task; returns it (cancel it or call
        ``stop_ttl_sweeper`` to stop). Without a TTL config: a task that ends at once."""
        if not self.ttl_config:
            return asyncio.create_task(asyncio.sleep(0))
        running = getattr(self, "_sweeper", None)
        if running is not None and not running[0].done():
            return running[0]
        stop, interval = asyncio.Event(), self._interval(sweep_interval_minutes)

        async def loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=interval)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    swept = await self.sweep_ttl()
                    if swept:
                        logger.info("store swept %d expired items", swept)
                except Exception:  # a failed sweep is retried at the next interval
                    logger.exception("store TTL sweep failed")

        task = asyncio.create_task(loop(), name="threadline-ttl-sweeper")
        self._sweeper = (task, stop)
        return task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper task; False when it did not stop within ``timeout`` seconds."""
        running = getattr(self, "_sweeper", None)
        if running is None or running[0].done():
            return True
        running[1].set()
        try:
            await asyncio.wait_for(asyncio.shield(running[0]), timeout)
        except asyncio.TimeoutError:
            return False
        self._sweeper = None
        return True

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_ttl_sweeper()
