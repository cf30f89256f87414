"""OpenTelemetry metrics (optional: ``pip install 'threadline[otel]'``).

With ``opentelemetry-api`` installed, threadline records these instruments on the meter
``threadline`` of the global MeterProvider (or the one given to ``configure``) once the
program has set one (an SDK ``MeterProvider``); until then, and without the package,
nothing is recorded and nothing is imported. Attribute ``db.system`` is ``sqlite`` or
``postgresql`` on the saver's instruments.

==========================================  =========  ============  ==========================================================
instrument                                  kind       unit          what (attributes)
==========================================  =========  ============  ==========================================================
``threadline.operation.duration``           histogram  s             one saver call: ``put``, ``put_writes``, ``get_tuple``,
                                                                     each page of ``list`` (``threadline.operation``,
                                                                     ``error.type`` when it raised)
``threadline.bytes_written``                counter    By            bytes of the values put/put_writes store, per table
                                                                     (``threadline.table``: checkpoints, blobs, writes)
``threadline.blobs.written``                counter    {blob}        channel values a put stores (``threadline.blob.kind``:
                                                                     ``delta`` or ``snapshot``)
``threadline.delta.ratio``                  histogram  1             per put: the share of its stored values that are deltas
``threadline.delta.chain_depth``            histogram  {delta}       per stored value: deltas since the last snapshot
                                                                     (0: a snapshot; bounded by ``BlobCodec.max_depth``)
``threadline.errors``                       counter    {error}       errors raised by saver calls (``error.type``: the
                                                                     exception class, ``threadline.operation``)
``threadline.sweeper.runs``                 counter    {sweep}       sweeps (``threadline.sweep.outcome``: ``swept``, or
                                                                     ``skipped`` when another process held the lease)
``threadline.sweeper.threads_expired``      counter    {thread}      threads a sweep expired by TTL
``threadline.sweeper.checkpoints_deleted``  counter    {checkpoint}  checkpoints a sweep deleted (TTL and retention)
``threadline.sweeper.bytes_freed``          counter    By            bytes on disk a sweep gave back to the file system
``threadline.sweeper.duration``             histogram  s             one sweep that ran
``threadline.values.large``                 counter    {value}       values stored above ``Offload.warn_bytes``
                                                                     (``threadline.table``, ``threadline.channel``)
``threadline.values.offloaded``             counter    By            payload bytes written to the object store
                                                                     (``threadline.table``: blobs, writes)
==========================================  =========  ============  ==========================================================
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from threadline.extras import require

INSTRUMENTS = (
    "threadline.operation.duration",
    "threadline.bytes_written",
    "threadline.blobs.written",
    "threadline.delta.ratio",
    "threadline.delta.chain_depth",
    "threadline.errors",
    "threadline.sweeper.runs",
    "threadline.sweeper.threads_expired",
    "threadline.sweeper.checkpoints_deleted",
    "threadline.sweeper.bytes_freed",
    "threadline.sweeper.duration",
    "threadline.values.large",
    "threadline.values.offloaded",
)
_SYSTEMS = {"postgres": "postgresql"}

_meters: dict[str, Any] | None = None  # instrument name → instrument, once made
_available: bool | None = None
# The global provider while it may still be OpenTelemetry's stand-in: until an SDK provider is
# set, recording would reach no-op instruments, so nothing is recorded (or costs a call).
_proxy: Any = None


def configure(meter_provider: Any = None) -> bool:
    """Record on ``meter_provider``'s meter (default: the global MeterProvider from now on).
    Returns True. Raises MissingExtraError when opentelemetry-api is not installed
    (``pip install 'threadline[otel]'``); without it, and without a call, nothing is recorded."""
    global _meters, _available
    require("otel", "OpenTelemetry metrics")
    from opentelemetry import metrics as otel

    global _proxy
    provider = meter_provider or otel.get_meter_provider()
    _proxy = None if meter_provider is not None else provider
    meter = provider.get_meter("threadline")
    h, c = meter.create_histogram, meter.create_counter
    _meters = {
        "threadline.operation.duration": h("threadline.operation.duration", unit="s", description="Duration of a saver call"),
        "threadline.bytes_written": c("threadline.bytes_written", unit="By", description="Bytes of stored values, per table"),
        "threadline.blobs.written": c("threadline.blobs.written", unit="{blob}", description="Channel values stored"),
        "threadline.delta.ratio": h("threadline.delta.ratio", unit="1", description="Share of a put's values stored as deltas"),
        "threadline.delta.chain_depth": h("threadline.delta.chain_depth", unit="{delta}", description="Deltas since the last snapshot"),
        "threadline.errors": c("threadline.errors", unit="{error}", description="Errors raised by saver calls"),
        "threadline.sweeper.runs": c("threadline.sweeper.runs", unit="{sweep}", description="Sweeps"),
        "threadline.sweeper.threads_expired": c("threadline.sweeper.threads_expired", unit="{thread}", description="Threads expired by TTL"),
        "threadline.sweeper.checkpoints_deleted": c("threadline.sweeper.checkpoints_deleted", unit="{checkpoint}", description="Checkpoints deleted by sweeps"),
        "threadline.sweeper.bytes_freed": c("threadline.sweeper.bytes_freed", unit="By", description="Bytes on disk given back by sweeps"),
        "threadline.sweeper.duration": h("threadline.sweeper.duration", unit="s", description="Duration of a sweep"),
        "threadline.values.large": c("threadline.values.large", unit="{value}", description="Values stored above warn_bytes"),
        "threadline.values.offloaded": c("threadline.values.offloaded", unit="By", description="Bytes offloaded to the object store"),
    }
    _available = True
    return True


def _get() -> dict[str, Any] | None:
    if _available is None:
        if "opentelemetry.metrics" not in sys.modules:
            return None  # no program part uses OpenTelemetry (yet): importing it would cost ~40 ms a cold start
        configure()
    if _proxy is not None and getattr(_proxy, "_real_meter_provider", True) is None:
        return None  # no SDK provider set yet: the instruments would record nothing
    return _meters


# Saver calls that raised in this process, by "operation:ErrorType", kept whether or not
# OpenTelemetry records (``error_counts``; ``threadline.lifecycle.health`` reports them).
_errors: Counter[str] = Counter()
_errors_lock = threading.Lock()


def _tally(operation: str, exc: BaseException) -> None:
    with _errors_lock:
        _errors[f"{operation}:{type(exc).__name__}"] += 1


def error_counts() -> dict[str, int]:
    """Saver calls (``put``, ``put_writes``, ``get_tuple``, ``list``) that raised in this process
    since it started, by ``"operation:ErrorType"`` (e.g. ``"put:SerializationError"``)."""
    with _errors_lock:
        return dict(_errors)


class observe:  # noqa: N801 (used as a function: ``with observe(...)``)
    """Time one saver call; count its error by kind when it raises (``error_counts``, and the
    ``threadline.errors`` instrument when OpenTelemetry records). A class, not a generator
    context manager: entered on every saver call, at a quarter of the cost."""

    __slots__ = ("operation", "backend", "m", "attrs", "start")

    def __init__(self, operation: str, backend: str) -> None:
        self.operation = operation
        self.backend = backend

    def __enter__(self) -> None:
        m = self.m = _get()
        if m is not None:
            self.attrs = {"threadline.operation": self.operation, "db.system": _SYSTEMS.get(self.backend, self.backend)}
            self.start = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        m = self.m
        if m is None:
            if isinstance(exc, Exception):  # the error path only: a call that returns pays nothing here
                _tally(self.operation, exc)
            return
        if exc is not None:
            _tally(self.operation, exc)
            attrs = {**self.attrs, "error.type": type(exc).__name__}
            m["threadline.errors"].add(1, attrs)
            m["threadline.operation.duration"].record(time.perf_counter() - self.start, attrs)
            return
        m["threadline.operation.duration"].record(time.perf_counter() - self.start, self.attrs)


def counted(op: Any, backend: str) -> Any:
    """``op`` (a storage operation), counting the bytes of the values it stores per table
    (the ``stores`` its statements declare: serialized values and checkpoint JSON)."""
    m = _get()
    if m is None:
        return op
    return _counting(op, m["threadline.bytes_written"], _SYSTEMS.get(backend, backend))


def _counting(op: Any, counter: Any, system: str) -> Any:
    rows = None
    while True:
        try:
            q = op.send(rows) if rows is not None else next(op)
        except StopIteration as stop:
            return stop.value
        for table, size in q.stores:
            counter.add(size, {"threadline.table": table, "db.system": system})
        rows = yield q


def put_done(blob_codec: Any, config: Mapping[str, Any], new_versions: Mapping[str, Any], version_key: Callable[[Any], str]) -> None:
    """After a put: how its values were stored (delta or snapshot, chain depth), from the
    saver's blob cache, which holds every list/dict value it stored with its depth
    (keyed by ``version_key`` of each version)."""
    m = _get()
    if m is None or not new_versions:
        return
    c = config["configurable"]
    cache = blob_codec.cache
    deltas = 0
    for channel, version in new_versions.items():
        entry = cache.get((str(c["thread_id"]), c.get("checkpoint_ns") or "", channel, version_key(version))) if cache else None
        depth = entry.value.depth if entry is not None else 0
        deltas += depth > 0
        m["threadline.delta.chain_depth"].record(depth)
        m["threadline.blobs.written"].add(1, {"threadline.blob.kind": "delta" if depth else "snapshot"})
    m["threadline.delta.ratio"].record(deltas / len(new_versions))


def sweep_done(report: Any, seconds: float) -> None:
    """After a sweep (``lifecycle.sweeper.SweepReport``)."""
    m = _get()
    if m is None:
        return
    m["threadline.sweeper.runs"].add(1, {"threadline.sweep.outcome": "swept" if report.ran else "skipped"})
    if not report.ran:
        return
    m["threadline.sweeper.duration"].record(seconds)
    m["threadline.sweeper.threads_expired"].add(report.threads_expired)
    m["threadline.sweeper.checkpoints_deleted"].add(report.checkpoints_deleted)
    freed = report.space.bytes_freed if report.space is not None else None
    m["threadline.sweeper.bytes_freed"].add(max(0, freed or 0))


def large_value(table: str, channel: Any, size: int) -> None:
    """A value stored above ``Offload.warn_bytes`` (``codec.objects``)."""
    m = _get()
    if m is not None:
        m["threadline.values.large"].add(1, {"threadline.table": table + "s", "threadline.channel": str(channel)})


def offloaded(table: str, size: int) -> None:
    """``size`` payload bytes of a ``table`` value written to the object store (``codec.objects``)."""
    m = _get()
    if m is not None:
        m["threadline.values.offloaded"].add(size, {"threadline.table": table + "s"})
