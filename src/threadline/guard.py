"""The thread guard: one run at a time on a thread, across processes, on every backend.

Two runs of a graph on one thread at once (two browser tabs, a retried webhook, two workers
taking the same job) both start from the same head and fork the thread: the head then holds
only the later run, and the other run's turn is off the head branch. The guard makes a run
hold the thread's *lease* while it runs, so a second run is rejected or waits its turn::

    from threadline.guard import guarded, thread_lease

    app = guarded(graph.compile(checkpointer=saver))              # reject a second run
    app.invoke({"messages": [...]}, {"configurable": {"thread_id": "t1"}})

    app = guarded(compiled, multitask_strategy="enqueue", timeout=30)   # or wait up to 30 s

    with thread_lease(saver, config):                              # any code, sync …
        graph.invoke(inputs, config)
    async with thread_lease(saver, config):                        # … or async
        await graph.ainvoke(inputs, config)

A lease is per thread_id (all its namespaces) and names its holder (host, pid, a random part
and the config's ``run_id`` when given). It lasts ``lease_seconds`` and is renewed in the
background (a daemon thread, or a task on the event loop) every third of that while the run
lasts; if the holder's process dies (kill -9) nothing renews it and the thread is free again
within ``lease_seconds``. ``multitask_strategy`` takes the Agent Server's names: ``"reject"``
(``ThreadBusyError`` at once) or ``"enqueue"`` (poll with backoff until the thread is free, or
``ThreadBusyError`` after ``timeout`` seconds; None: no limit; no order among waiters). Its
``"interrupt"`` and ``"rollback"`` are not offered: they cancel the other run.

Fencing: each run that takes a thread's lease gets the thread's next *token* (1, 2, …). While
a lease is held, the saver's ``put`` and ``put_writes`` on that thread (from this code: the
graph's own, in LangGraph's worker threads and tasks too) carry it, and the storage checks in the
put's own statement, transaction or script that the lease still has that holder and token and
has not expired. A holder paused past its lease (a long tool call, a GC pause, a stopped
process) that wakes after another run took the thread gets ``LeaseLostError`` and writes nothing.

Leases live behind the storage seam (``storage/ops/lease.py``): a row of
``threadline_leases`` on SQLite and Postgres, a ``PX`` key on Redis, each taken,
renewed and released in one atomic step on the database server's clock. Runs that do not take
the lease are not stopped: the guard serializes the runs that use it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from threadline.errors import ConfigError, ThreadBusyError
from threadline.keys import key_of, text_key, thread_id_of
from threadline.read.common import iso
from threadline.storage.ops import lease as lease_ops
from threadline.storage.ops.lease import FENCES, Fence, LeaseState

logger = logging.getLogger(__name__)

LEASE_SECONDS = 30.0  # a dead holder's thread is free again after this
STRATEGIES = ("reject", "enqueue")
_FIRST_POLL, _MAX_POLL = 0.05, 1.0  # seconds between tries while waiting: doubling, with jitter


def _seconds(name: str, value: Any, *, none: bool = False, zero: bool = False) -> float | None:
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ConfigError(f"{name} must be a finite number of seconds {bound}{' or None' if none else ''}, got {value!r}")
    return float(value)


def _strategy(value: Any) -> str:
    if value not in STRATEGIES:
        raise ConfigError(
            f"multitask_strategy must be 'reject' or 'enqueue', got {value!r} (the Agent Server's 'interrupt' and "
            "'rollback' cancel the running run and are not offered)"
        )
    return str(value)


def _saver_of(saver: Any) -> Any:
    if not (hasattr(saver, "run") and hasattr(saver, "arun") and hasattr(saver, "dialect")):
        raise ConfigError(f"the thread guard needs a threadline saver (open_saver, SqliteSaver, …), got {type(saver).__name__}")
    return saver


def _holder(config: dict) -> str:
    run_id = config.get("run_id")
    own = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return text_key("holder", f"{own}:run={run_id}" if run_id is not None else own)


def _busy(tid: str, other: LeaseState | None, waited: float | None) -> ThreadBusyError:
    if other is None:
        who = "another run held it"
    elif not math.isfinite(other.expires_at):  # a lease key set without expiry, not by threadline
        who = f"run {other.holder!r} holds it with no expiry"
    else:
        who = (f"run {other.holder!r} holds it until {iso(other.expires_at)} (its lease expires in {max(other.remaining, 0):.1f} s "
               "unless that run renews it)")
    fix = (
        "wait for that run to finish and try again, or pass multitask_strategy='enqueue' to wait for it"
        if waited is None else "pass a longer timeout, or try again once that run has finished"
    )
    start = f"thread {tid!r} is busy" if waited is None else f"thread {tid!r} is still busy after waiting {waited:g} s"
    return ThreadBusyError(
        f"{start}: {who}; {fix}", thread_id=tid, holder=other.holder if other else None,
        expires_at=other.expires_at if other else None, remaining=other.remaining if other else None,
    )


class ThreadLease:
    """A run's hold on one thread, as a context manager: ``with`` (sync) or ``async with``.

    On entry it takes the thread's lease (``multitask_strategy`` decides what happens when the
    thread is busy: ``ThreadBusyError`` at once, or waiting up to ``timeout`` seconds), then
    renews it every ``lease_seconds / 3`` in the background; on exit it stops renewing and
    releases it. While held, the saver's puts on the thread check the lease's token (module
    docstring, "Fencing"). ``state`` is the lease as last taken or renewed (``state.token``: its
    fencing token); ``lost`` turns True when a renewal found the thread taken by another run (this
    run's lease had expired: the process was paused, or the database unreachable, for longer than
    ``lease_seconds``): renewing stops and the run's next put raises ``LeaseLostError``. Make one
    per run: not re-entrant.
    """

    def __init__(self, saver: Any, config: Any, *, multitask_strategy: str = "reject", timeout: float | None = None,
                 lease_seconds: float = LEASE_SECONDS, holder: str | None = None) -> None:
        self.saver = _saver_of(saver)
        self.thread_id = key_of(config).thread_id
        self.strategy = _strategy(multitask_strategy)
        self.timeout = _seconds("timeout", timeout, none=True, zero=True)
        self.lease_seconds = float(_seconds("lease_seconds", lease_seconds))  # type: ignore[arg-type]
        self.holder = _holder(config) if holder is None else text_key("holder", holder)
        if not self.holder:
            raise ConfigError("holder must be a non-empty string")
        self.state: LeaseState | None = None
        self.lost = False
        self._fence: Fence | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task | None = None

    # --- the steps, as operations ------------------------------------------------------

    def _take(self) -> Any:
        return lease_ops.take(self.saver.dialect, self.thread_id, self.holder, self.lease_seconds)

    def _renew(self) -> Any:
        return lease_ops.renew(self.saver.dialect, self.state, self.lease_seconds)  # type: ignore[arg-type]

    def _release(self) -> Any:
        return lease_ops.release(self.saver.dialect, self.state)  # type: ignore[arg-type]

    def _fence_puts(self) -> None:
        """From now on, the saver's puts on the thread in this context carry the lease's token."""
        assert self.state is not None
        self._fence = Fence(self.saver, self.thread_id, self.holder, self.state.token)
        FENCES.set((*FENCES.get(), self._fence))

    def _unfence_puts(self) -> None:
        # set, not reset: a generator (``GuardedGraph.stream``) may end in another context
        FENCES.set(tuple(f for f in FENCES.get() if f is not self._fence))

    def _polls(self) -> Iterator[float]:
        """Seconds to sleep before each next try while waiting; ends when ``timeout`` is spent."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        pause = _FIRST_POLL
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            jittered = pause * random.uniform(0.5, 1.0)
            yield jittered if left is None else min(jittered, left)
            pause = min(pause * 2, _MAX_POLL)

    def _taken(self, result: tuple[bool, LeaseState | None]) -> bool:
        won, state = result
        self.state = state
        return won

    def _refused(self) -> ThreadBusyError:
        return _busy(self.thread_id, self.state, None if self.strategy == "reject" else self.timeout)

    def _renewed(self, result: tuple[bool, LeaseState | None]) -> None:
        won, state = result
        if won:
            self.state = state
        else:
            self.lost = True
            logger.warning("thread %r: lease (token %s) lost to %r while running (it had expired); this run's next put is refused",
                           self.thread_id, self.state.token if self.state else None, state.holder if state else None)

    # --- sync -----------------------------------------------------------------------------

    def __enter__(self) -> ThreadLease:
        if not self._taken(self.saver.run(self._take(), write=True)):
            if self.strategy == "reject":
                raise self._refused()
            for pause in self._polls():
                time.sleep(pause)
                if self._taken(self.saver.run(self._take(), write=True)):
                    break
            else:
                raise self._refused()
        self._fence_puts()
        self._thread = threading.Thread(target=self._keep, name=f"threadline-lease-{self.thread_id}", daemon=True)
        self._thread.start()
        return self

    def _keep(self) -> None:
        while not self.lost and not self._stop.wait(self.lease_seconds / 3):
            try:
                self._renewed(self.saver.run(self._renew(), write=True))
            except Exception:  # the next tick tries again; the lease outlives a third of it
                logger.warning("thread %r: renewing the lease failed", self.thread_id, exc_info=True)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._unfence_puts()
        if self._thread is not None:
            self._thread.join()
        try:
            self.saver.run(self._release(), write=True)
        except Exception:  # the run's own outcome stands; the lease runs out by itself
            logger.warning("thread %r: releasing the lease failed; it expires in %s s", self.thread_id, self.lease_seconds, exc_info=True)

    # --- async ----------------------------------------------------------------------------

    async def __aenter__(self) -> ThreadLease:
        if not self._taken(await self.saver.arun(self._take(), write=True)):
            if self.strategy == "reject":
                raise self._refused()
            for pause in self._polls():
                await asyncio.sleep(pause)
                if self._taken(await self.saver.arun(self._take(), write=True)):
                    break
            else:
                raise self._refused()
        self._fence_puts()
        self._task = asyncio.get_running_loop().create_task(self._akeep())
        return self

    async def _akeep(self) -> None:
        while not self.lost:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                self._renewed(await self.saver.arun(self._renew(), write=True))
            except Exception:
                logger.warning("thread %r: renewing the lease failed", self.thread_id, exc_info=True)

    async def __aexit__(self, *exc: Any) -> None:
        self._unfence_puts()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        try:
            await self.saver.arun(self._release(), write=True)
        except Exception:
            logger.warning("thread %r: releasing the lease failed; it expires in %s s", self.thread_id, self.lease_seconds, exc_info=True)


def thread_lease(saver: Any, config: Any, *, multitask_strategy: str = "reject", timeout: float | None = None,
                 lease_seconds: float = LEASE_SECONDS, holder: str | None = None) -> ThreadLease:
    """The lease of ``config``'s thread for one run, as a context manager (``with`` or ``async with``).

    Args:
        saver: a threadline saver (any backend, sync or async).
        config: the run's RunnableConfig; its ``configurable.thread_id`` names the thread, its
            ``run_id`` (if any) goes into the holder string.
        multitask_strategy: ``"reject"`` (default): ``ThreadBusyError`` at once when another run
            holds the thread; ``"enqueue"``: wait until it is free.
        timeout: with ``"enqueue"``, seconds to wait at most (None: no limit), then ``ThreadBusyError``.
        lease_seconds: how long the lease lasts without renewal (> 0): a dead holder's thread is
            free again after this. Renewed every third of it.
        holder: the string naming this run in the lease and in other runs' errors (default: host,
            pid, a random part and the run_id).

    Raises ConfigError for a config without a thread_id, a ``lease_seconds`` or ``timeout`` that
    is not a positive number, or another strategy; ThreadBusyError (on entry) as above.
    """
    return ThreadLease(saver, config, multitask_strategy=multitask_strategy, timeout=timeout, lease_seconds=lease_seconds, holder=holder)


def current_lease(saver: Any, thread_id: Any) -> LeaseState | None:
    """The lease a run holds on ``thread_id`` now, or None when the thread is free (no lease, or
    an expired one). ConfigError for a malformed thread_id."""
    found = _saver_of(saver).run(lease_ops.read(saver.dialect, thread_id_of(thread_id)))
    return found if found is not None and found.remaining > 0 else None


async def acurrent_lease(saver: Any, thread_id: Any) -> LeaseState | None:
    """Async ``current_lease``."""
    found = await _saver_of(saver).arun(lease_ops.read(saver.dialect, thread_id_of(thread_id)))
    return found if found is not None and found.remaining > 0 else None


class GuardedGraph:
    """A compiled graph whose ``invoke``, ``ainvoke``, ``stream`` and ``astream`` each hold the
    thread's lease for the run (``thread_lease``); every other attribute is the graph's own
    (``get_state``, ``update_state``, ``get_state_history``, …, unguarded). Made by ``guarded``."""

    def __init__(self, graph: Any, saver: Any, *, multitask_strategy: str, timeout: float | None, lease_seconds: float) -> None:
        self.graph = graph
        self.saver = _saver_of(saver)
        self.options = {
            "multitask_strategy": _strategy(multitask_strategy),
            "timeout": _seconds("timeout", timeout, none=True, zero=True),
            "lease_seconds": _seconds("lease_seconds", lease_seconds),
        }

    def lease(self, config: Any) -> ThreadLease:
        """The lease one run on ``config``'s thread takes."""
        return ThreadLease(self.saver, config, **self.options)  # type: ignore[arg-type]

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        with self.lease(config):
            return self.graph.invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        async with self.lease(config):
            return await self.graph.ainvoke(input, config, **kwargs)

    def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:
        """The graph's ``stream``; the lease is taken when iteration starts and released when it
        ends (or the iterator is closed)."""
        with self.lease(config):
            yield from self.graph.stream(input, config, **kwargs)

    async def astream(self, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        async with self.lease(config):
            async for chunk in self.graph.astream(input, config, **kwargs):
                yield chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)


def guarded(graph: Any, saver: Any = None, *, multitask_strategy: str = "reject", timeout: float | None = None,
            lease_seconds: float = LEASE_SECONDS) -> GuardedGraph:
    """``graph`` (a compiled LangGraph graph) with each run holding its thread's lease
    (``thread_lease``; the options are its own). ``saver``: the saver holding the leases, by
    default the graph's checkpointer (a threadline saver). ConfigError when there is none, or
    for the options as ``thread_lease`` raises them; the runs raise ``ThreadBusyError``."""
    saver = getattr(graph, "checkpointer", None) if saver is None else saver
    if saver is None or isinstance(saver, bool):
        raise ConfigError("the graph has no checkpointer: compile it with a threadline saver (checkpointer=saver) or pass saver=")
    return GuardedGraph(graph, saver, multitask_strategy=multitask_strategy, timeout=timeout, lease_seconds=lease_seconds)
