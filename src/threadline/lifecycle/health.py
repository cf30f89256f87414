"""Health: is a saver's database ready, and how is it doing (``threadline health``, a readiness probe).

``check(saver)`` (``acheck`` on an async saver) runs ``health_job`` and returns a ``Health``:

* **round trip**: one checkpoint put, read back and compared, on a thread of threadline's own
  (``keys.RESERVED_THREAD_PREFIX`` + ``health:<ms>:<random>``), then deleted; such threads are
  never listed (``threads``, the browser's search), and one a probe that died left behind
  expires by its own TTL (``LEFTOVER_MINUTES``: Redis's expiry, or the sweeper with a TTL set).
  Its put and get are timed (ms).
* **schema**: the migration version the database holds, this release's latest, and the ones
  pending (``threadline setup`` applies them).
* **sweeper**: its last run (``threadline_sweeps``): when it started and finished, the lag since
  (seconds), whether one is running, the errors it reported, and a lease that ran out unfinished
  (a sweeper that died mid-run).
* **errors**: saver calls of this process that raised, by ``operation:ErrorType``
  (``metrics.error_counts``; a new process, as the CLI's, has none).
* **growth**: checkpoints and pending writes created in the last hour (``GROWTH_SECONDS``), and
  their stored bytes (checkpoint rows: checkpoint and metadata JSON; writes: the value).
* **threads**: the status of the ``RECENT_THREADS`` most recently updated threads, read as the
  threads listing reads it: how many were read and how many cannot be (damaged: a stored row
  of the thread cannot be read; ``threadline fsck --deep --thread T`` names it), the first one's
  thread_id, error and that command.

Status and exit code (``Health.exit_code``): ``healthy`` 0; ``degraded`` 1 — migrations pending,
the round trip slower than ``max_round_trip_ms``, the last sweep reported errors or died, no
sweep finished within ``max_sweep_lag`` seconds (when given), or a recent thread is damaged;
``unhealthy`` 2 — the round trip
failed or read back something else, or the database cannot be opened (``unreachable``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from threadline import metrics
from threadline.defaults import MAX_ROUND_TRIP_MS as DEFAULT_MAX_ROUND_TRIP_MS
from threadline.keys import RESERVED_THREAD_PREFIX, key_of
from threadline.lifecycle.jobs import Job, arun_job, run_job
from threadline.lifecycle.sweeper import JOB as SWEEPER
from threadline.read.threads import threads_op
from threadline.storage import ops
from threadline.storage.ops import Op, Q
from threadline.storage.ops import sweep as sweep_ops
from threadline.storage.schema import LATEST_VERSION, MIGRATIONS

HEALTH_PREFIX = RESERVED_THREAD_PREFIX + "health:"
GROWTH_SECONDS = 3600.0
RECENT_THREADS = 20  # the threads whose status a check reads: a probe stays cheap on any database
LEFTOVER_MINUTES = 10.0  # the TTL of a probe's thread: one a probe that died left behind expires
STATUSES = ("healthy", "degraded", "unhealthy")
EXIT_CODES = {"healthy": 0, "degraded": 1, "unhealthy": 2}


@dataclass
class Health:
    """One health check. ``status``: ``healthy``, ``degraded`` or ``unhealthy`` (``exit_code`` 0, 1,
    2); ``problems``: one line each, why it is not healthy. ``round_trip``: ``put_ms``, ``get_ms``,
    ``total_ms`` (None when not run); ``schema``: ``version`` (None: no threadline tables),
    ``latest``, ``pending`` (versions); ``sweeper``: ``started_at``, ``finished_at`` (unix s, None
    never), ``lag_seconds`` (since it finished), ``running``, ``errors`` (None before any sweep);
    ``errors``: saver calls of this process that raised, by ``operation:ErrorType``; ``growth``:
    ``seconds`` (the window), ``checkpoints``, ``checkpoint_bytes``, ``writes``, ``write_bytes``;
    ``threads``: ``checked`` (the most recently updated, at most ``RECENT_THREADS``), ``damaged``
    (how many of them cannot be read) and ``first`` (None, or the first damaged one's
    ``thread_id``, ``error``, ``message`` and ``command``)."""

    backend: str
    checked_at: float
    problems: list[tuple[str, str]] = field(default_factory=list)  # (status, line)
    round_trip: dict[str, float] | None = None
    schema: dict[str, Any] = field(default_factory=dict)
    sweeper: dict[str, Any] | None = None
    errors: dict[str, int] = field(default_factory=dict)
    growth: dict[str, float] = field(default_factory=dict)
    threads: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return max((s for s, _ in self.problems), key=STATUSES.index, default="healthy")

    @property
    def exit_code(self) -> int:
        """0 healthy, 1 degraded, 2 unhealthy (a readiness probe's answer)."""
        return EXIT_CODES[self.status]

    def add(self, status: str, line: str) -> None:
        self.problems.append((status, line))

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "problems": [line for _, line in self.problems],
            "backend": self.backend,
            "checked_at": self.checked_at,
            "round_trip": self.round_trip,
            "schema": self.schema,
            "sweeper": self.sweeper,
            "errors": self.errors,
            "growth": self.growth,
            "threads": self.threads,
        }


def unreachable(backend: str, reason: str, clock: Callable[[], float] = time.time) -> Health:
    """The ``Health`` of a database that could not be opened (``unhealthy``, exit 2)."""
    h = Health(backend, clock())
    h.add("unhealthy", f"unreachable: {reason}")
    return h


def schema_of(state: ops.SchemaState) -> dict[str, Any]:
    """``Health.schema`` for what a database holds."""
    known = {v for v, _ in MIGRATIONS}
    return {
        "version": max(state.applied, default=None) if state.is_threadline else None,
        "latest": LATEST_VERSION,
        "pending": sorted(known - state.applied) if state.is_threadline else sorted(known),
    }


def pending_problem(h: Health) -> None:
    """A ``degraded`` line when ``h.schema`` has migrations pending."""
    if h.schema.get("pending"):
        h.add("degraded", f"migrations pending: {h.schema['pending']} (schema version {h.schema['version']}, this release "
                          f"{h.schema['latest']}); run `threadline setup --db URL` to apply them")


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1000, 3)


def _round_trip(saver: Any, h: Health, clock: Callable[[], float], max_ms: float) -> Job[None]:
    d, serde, bc = saver.dialect, saver.serde, saver.blob_codec
    tid = f"{HEALTH_PREFIX}{int(clock() * 1000)}:{uuid.uuid4().hex[:12]}"
    nonce = uuid.uuid4().hex
    ck = empty_checkpoint()
    ck["channel_values"], ck["channel_versions"] = {"probe": nonce}, {"probe": "1"}
    config = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    # the thread's own TTL: should this probe die before deleting it, expiry removes it
    put = sweep_ops.with_thread_ttl(d, ops.put(d, serde, config, ck, {"source": "health", "step": -1}, {"probe": "1"}, bc), tid, LEFTOVER_MINUTES)
    try:
        started = time.perf_counter()
        stored = yield put, True
        put_done = time.perf_counter()
        got = yield ops.get_tuple(d, serde, key_of(stored), bc), False
        ended = time.perf_counter()
    except Exception as exc:  # thrown in at the step that failed
        h.add("unhealthy", f"round trip failed: {type(exc).__name__}: {' '.join(str(exc).split())}")
    else:
        h.round_trip = {"put_ms": _ms(started, put_done), "get_ms": _ms(put_done, ended), "total_ms": _ms(started, ended)}
        if got is None or got.checkpoint["channel_values"].get("probe") != nonce:
            h.add("unhealthy", "round trip read back something else than it put")
        elif h.round_trip["total_ms"] > max_ms:
            h.add("degraded", f"round trip took {h.round_trip['total_ms']:.0f} ms, more than {max_ms:g} ms")
    try:
        yield ops.delete_thread(d, tid, bc), True
    except Exception as exc:
        h.add("degraded", f"the probe's thread {tid!r} could not be deleted ({type(exc).__name__}: {exc}); it expires by its TTL")


def _sweeper(d: Any, h: Health, now: float, max_lag: float | None) -> Job[None]:
    run = yield sweep_ops.last_run(d, SWEEPER), False
    if run is None or (run["started_at"] is None and run["finished_at"] is None):
        if max_lag is not None:
            h.add("degraded", f"no sweep has run on this database (expected one within {max_lag:g} s)")
        return
    finished, until = run["finished_at"], float(run["lease_until"] or 0)
    errors = list((run["result"] or {}).get("errors") or [])
    running = until > now
    h.sweeper = {
        "started_at": run["started_at"], "finished_at": finished, "running": running, "owner": run["owner"],
        "lag_seconds": round(now - finished, 3) if finished is not None else None, "errors": errors,
    }
    if until and not running:
        h.add("degraded", f"the sweep started at {run['started_at']} by {run['owner']} ended without finishing (its lease ran out)")
    if errors:
        h.add("degraded", f"the last sweep reported {len(errors)} error(s), the first: {errors[0]}")
    if max_lag is not None and (finished is None or now - finished > max_lag) and not running:
        h.add("degraded", f"no sweep finished in the last {max_lag:g} s"
                          + (f" (the last {now - finished:.0f} s ago)" if finished is not None else ""))


def growth_op(d: Any, since: float) -> Op[dict[str, float]]:
    """``Health.growth``: checkpoints and pending writes created at or after ``since``, and their stored bytes."""
    (cks, ck_bytes), = yield Q(d.checkpoints_since(), (since,))
    (ws, w_bytes), = yield Q(d.writes_since(), (since, since))
    return {"seconds": GROWTH_SECONDS, "checkpoints": int(cks), "checkpoint_bytes": int(ck_bytes or 0),
            "writes": int(ws), "write_bytes": int(w_bytes or 0)}


def recent_threads_op(saver: Any) -> Op[dict[str, Any]]:
    """``Health.threads``: the status of the ``RECENT_THREADS`` most recently updated threads,
    read as the listing reads it (``read.threads.threads_op``: a damaged thread is counted, not raised)."""
    page = yield from threads_op(saver.dialect, limit=RECENT_THREADS, with_status=True, serde=saver.serde, bc=saver.blob_codec, count=False)
    first = next(({"thread_id": t.thread_id, **t.damage.to_json()} for t in page.damaged), None)
    return {"checked": len(page.threads), "damaged": len(page.damaged), "first": first}


def health_job(
    saver: Any,
    *,
    max_round_trip_ms: float = DEFAULT_MAX_ROUND_TRIP_MS,
    max_sweep_lag: float | None = None,
    clock: Callable[[], float] = time.time,
) -> Job[Health]:
    """The steps of one health check of ``saver``'s database (see the module docstring)."""
    d = saver.dialect
    h = Health(d.name, clock())
    try:
        state = yield ops.schema_state(d), False
        h.schema = schema_of(state)
        pending_problem(h)
        if h.schema["pending"]:
            return h  # a probe never migrates: the round trip would need the newer tables
        yield from _round_trip(saver, h, clock, max_round_trip_ms)
        yield from _sweeper(d, h, clock(), max_sweep_lag)
        h.growth = yield growth_op(d, clock() - GROWTH_SECONDS), False
        h.threads = yield recent_threads_op(saver), False
        if first := h.threads["first"]:
            h.add("degraded", f"{h.threads['damaged']} of the {h.threads['checked']} most recently updated threads cannot be read, "
                              f"the first {first['thread_id']!r} ({first['error']}: {first['message']}); `{first['command']}` explains it")
    except Exception as exc:  # a step that failed (thrown in there): the database is not usable
        h.add("unhealthy", f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    h.errors = metrics.error_counts()
    return h


def check(saver: Any, *, max_round_trip_ms: float = DEFAULT_MAX_ROUND_TRIP_MS, max_sweep_lag: float | None = None) -> Health:
    """One health check of a sync saver's database (``health_job``): a ``Health``. The round trip
    writes and deletes one checkpoint of a reserved thread; nothing else is written. Never raises
    for what it checks: a failing step is a problem of the result."""
    return run_job(saver, health_job(saver, max_round_trip_ms=max_round_trip_ms, max_sweep_lag=max_sweep_lag))


async def acheck(saver: Any, *, max_round_trip_ms: float = DEFAULT_MAX_ROUND_TRIP_MS, max_sweep_lag: float | None = None) -> Health:
    """``check`` on an async saver."""
    return await arun_job(saver, health_job(saver, max_round_trip_ms=max_round_trip_ms, max_sweep_lag=max_sweep_lag))
