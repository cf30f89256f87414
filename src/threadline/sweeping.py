"""A saver's TTL and background sweeper (``threadline.ttl``, ``threadline.lifecycle.sweeper``).

``Sweeping`` holds the settings and one sweep (``sweep``/``asweep``) and restarts a thread's
TTL clock on reads; ``SyncSweeping`` runs the background sweeper in a daemon thread,
``AsyncSweeping`` in a task on the saver's event loop, with the official Store's
``start_ttl_sweeper``/``stop_ttl_sweeper``. ``EngineSaver`` and its two shells mix them
in. The sweeper's logic is lifecycle's, imported when first used.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from threadline.lazy import LazyModule

if TYPE_CHECKING:
    from threadline.storage import ops
    from threadline.ttl import TTL

sweep_ops = LazyModule("threadline.storage.ops.sweep")  # loaded once a read restarts a TTL clock

# With ``refresh_on_read``, when each thread's TTL clock was last restarted by a read (so a
# hot thread is touched at most once per ``TTL.refresh_every``): held to 1 MiB, counting a
# thread_id's text and 120 bytes of dict slot and object headers per thread (~8,000 threads
# of 16-character ids); past it the map starts over.
TOUCHED_MAX_BYTES = 1 << 20
TOUCHED_ENTRY_OVERHEAD = 120

class Sweeping:
    """TTL and retention settings of a saver, and one sweep. Needs ``dialect``, ``blob_codec``, ``run``/``arun``."""

    dialect: Any
    blob_codec: Any

    def _init_sweeping(self, ttl: Mapping[str, Any] | TTL | None, retention: Any) -> None:
        from threadline.ttl import ttl_of  # with the first saver, not the import (issue 44)

        self.ttl = ttl_of(ttl)
        self.retention = None
        if retention is not None:
            from threadline.lifecycle.retention import RetentionPolicy

            self.retention = RetentionPolicy.of(retention)
        self._touched: dict[str, float] = {}  # thread_id → when a read last restarted its TTL clock
        self._touched_bytes = 0  # as counted by ``_touch_op``, at most TOUCHED_MAX_BYTES
        self._sweeper: Any = None
        self._owner: str | None = None

    def _touch_op(self, thread_id: str | None) -> ops.Op | None:
        """With ``refresh_on_read``: the write restarting ``thread_id``'s TTL clock, at most once per
        ``TTL.refresh_every`` seconds per thread in this process; else None."""
        if thread_id is None or self.ttl is None or not self.ttl.refresh_on_read:
            return None
        now = time.time()
        if now - self._touched.get(thread_id, 0.0) < self.ttl.refresh_every:
            return None
        if thread_id not in self._touched:
            self._touched_bytes += len(thread_id) + TOUCHED_ENTRY_OVERHEAD
            if self._touched_bytes > TOUCHED_MAX_BYTES:  # forgetting only means one more touch per thread
                self._touched.clear()
                self._touched_bytes = len(thread_id) + TOUCHED_ENTRY_OVERHEAD
        self._touched[thread_id] = now
        return sweep_ops.touch(self.dialect, thread_id, now)

    def sweep_job(self, *, min_gap: float = 0.0, stopping: Callable[[], bool] = lambda: False, dry_run: bool = False,
                  all_threads: bool = False) -> Any:
        """One sweep of this saver's ``ttl`` and ``retention`` as a job (``threadline.lifecycle.jobs``)."""
        from threadline.lifecycle.sweeper import new_owner, sweep_job

        self._owner = self._owner or new_owner()
        return sweep_job(self.dialect, self.ttl, self.retention, self._owner, bc=self.blob_codec, min_gap=min_gap, stopping=stopping,
                         dry_run=dry_run, all_threads=all_threads)

    def sweep(self, *, dry_run: bool = False, all_threads: bool = False) -> Any:
        """Sweep now: expire the threads past their TTL, apply the retention policy, give the space back.
        Returns a ``SweepReport`` (``ran`` False when another process is sweeping this database).

        Only threads written under a TTL expire (``threadline.ttl``), by the TTL they were written
        under, on every backend; ``all_threads`` expires every thread of the database idle longer
        than its TTL, this saver's ``default_ttl`` for those written without one (ConfigError
        without a ``default_ttl``). ``dry_run``: change nothing; the report lists the threads that
        would expire (``expired``) and the checkpoints retention would delete (``pruned``)."""
        from threadline.lifecycle.jobs import run_job

        return run_job(self, self.sweep_job(dry_run=dry_run, all_threads=all_threads))

    async def asweep(self, *, dry_run: bool = False, all_threads: bool = False) -> Any:
        """Async ``sweep``."""
        from threadline.lifecycle.jobs import arun_job

        return await arun_job(self, self.sweep_job(dry_run=dry_run, all_threads=all_threads))

    def _interval(self, minutes: float | None) -> float:
        from threadline.lifecycle.sweeper import DEFAULT_INTERVAL_MINUTES

        return 60 * float(minutes or (self.ttl and self.ttl.sweep_interval_minutes) or DEFAULT_INTERVAL_MINUTES)

    def _sweeps(self) -> bool:
        return self.ttl is not None or self.retention is not None


class SyncSweeping(Sweeping):
    """The background sweeper of a sync saver: a daemon thread."""

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Sweep every ``sweep_interval_minutes`` (default: the ttl's, else 5) in a daemon thread,
        as the official stores' ``start_ttl_sweeper``; returns a ``concurrent.futures.Future``
        (cancel it, or call ``stop_ttl_sweeper``, to stop). Without ttl or retention: a done Future."""
        from threadline.lifecycle.sweeper import BackgroundSweeper

        if self._sweeper is not None and self._sweeper.thread.is_alive():
            return self._sweeper.future
        if not self._sweeps():
            done: Any = concurrent.futures.Future()
            done.set_result(None)
            return done
        self._sweeper = BackgroundSweeper(self, self._interval(sweep_interval_minutes))
        return self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; False when it did not stop within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        stopped = self._sweeper.stop(timeout)
        if stopped:
            self._sweeper = None
        return stopped

    @contextmanager
    def _sweeping(self) -> Iterator[None]:
        """Around ``from_conn_string``'s saver: the background sweeper when the ttl names an interval."""
        if self.ttl is not None and self.ttl.sweep_interval_minutes:
            self.start_ttl_sweeper()
        try:
            yield
        finally:
            self.stop_ttl_sweeper()


class AsyncSweeping(Sweeping):
    """The background sweeper of an async saver: a task on the running event loop."""

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task:
        """Sweep every ``sweep_interval_minutes`` (default: the ttl's, else 5) in a task on the
        running loop, as the official async stores' ``start_ttl_sweeper``; returns the task.
        Without ttl or retention: a task that ends at once."""
        from threadline.lifecycle.sweeper import AsyncBackgroundSweeper

        if self._sweeper is not None and self._sweeper.task is not None and not self._sweeper.task.done():
            return self._sweeper.task
        if not self._sweeps():
            return asyncio.get_running_loop().create_task(asyncio.sleep(0))
        self._sweeper = AsyncBackgroundSweeper(self, self._interval(sweep_interval_minutes))
        return self._sweeper.start()

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; False when it did not stop within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        stopped = await self._sweeper.stop(timeout)
        if stopped:
            self._sweeper = None
        return stopped

    @asynccontextmanager
    async def _sweeping(self) -> AsyncIterator[None]:
        """Around ``from_conn_string``'s saver: the background sweeper when the ttl names an interval."""
        if self.ttl is not None and self.ttl.sweep_interval_minutes:
            await self.start_ttl_sweeper()
        try:
            yield
        finally:
            await self.stop_ttl_sweeper()
