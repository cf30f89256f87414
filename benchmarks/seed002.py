"""Seed 002 §8.1 (batching) and §8.2 (a cached checkpointer), measured against threadline as it is.

Usage::

    .venv/bin/python benchmarks/seed002.py [--threads 32] [--steps 20] [--no-postgres] [--write-results]

**§8.1 batching.** The seed's ``BatchingCheckpointer`` buffers ``put``/``put_writes`` calls
and writes them later, many per transaction. Measured here: the recorded calls of
``--threads`` threads of the small real graph (``scale_workload``), interleaved by superstep
as concurrent agents write them, on threadline's savers

* one transaction per call (threadline as it is, what LangGraph's contract asks: a call
  returns when its rows are committed);
* the same calls grouped ``B`` at a time (B = 8, and all ``--threads`` threads' calls of a
  superstep) into ONE transaction (``batched``: threadline's own operations run one after
  another in one transaction, so each call stores exactly what it would alone). This is the
  best any batching could do: the batches are formed for free.

checkpoints/s and CPU ms per checkpoint (this process's thread plus, on Postgres, the server
backend; ``/proc/<pid>/schedstat``), each variant on a fresh database.

**§8.2 a cached checkpointer.** ``SeedCachedCheckpointer`` is the seed's ``CachedCheckpointer``
(an LRU of ``CheckpointTuple`` keyed by ``thread_id:checkpoint_ns:checkpoint_id|latest``, a
300 s TTL, ``put`` caching the tuple it was given) around a threadline saver. Measured: the
median ``get_tuple`` of a thread's latest checkpoint, through the cache (a hit) and on
threadline alone (its own version-keyed value cache warm), and how often the cache answers
differently from the database in three situations LangGraph meets: a run's next superstep
(``get_tuple`` of the latest after more ``put``s), pending writes stored after the ``put``
(``put_writes``, which a resumed run needs), and a second process writing the thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import run as B  # noqa: E402
import scale_workload as SW  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple  # noqa: E402

from threadline.storage.ops import Q  # noqa: E402

START, END = "<!-- seed002:start -->", "<!-- seed002:end -->"


# --- §8.1 -------------------------------------------------------------------------------------------


def batched(ops: list) -> Any:
    """One operation running ``ops`` one after another in ONE transaction (a first statement
    that is not complete on its own makes the runner open it); returns their results."""
    yield Q("SELECT 1")
    out = []
    for op in ops:
        out.append((yield from op))
    return out


def rounds(threads: int, steps: int) -> list[list[tuple[str, tuple]]]:
    """The calls of ``threads`` threads grouped by superstep (each thread's calls of a superstep in order)."""
    calls = SW.record_small(steps)
    by_step: dict[int, list] = {}
    for t in range(threads):
        for kind, args, step in SW.for_thread(calls, f"b{t}"):
            by_step.setdefault(step, []).append((kind, args))
    return [by_step[s] for s in sorted(by_step)]


def run_batches(saver: Any, groups: list[list[tuple[str, tuple]]], size: int | None, cpu: Any) -> tuple[float, float, int]:
    """(wall s, CPU ms, checkpoints) of writing ``groups``: each call alone (``size`` None) or
    ``size`` calls per transaction."""
    checkpoints = 0
    c0, t0 = cpu(), time.perf_counter()
    for group in groups:
        checkpoints += sum(k == "put" for k, _ in group)
        if size is None:
            for kind, args in group:
                getattr(saver, kind)(*args)
            continue
        for i in range(0, len(group), size):
            part = group[i : i + size]
            ops = [saver._put_op(*a) if k == "put" else saver._put_writes_op(*a) for k, a in part]
            saver.run(batched(ops), write=True)
    return time.perf_counter() - t0, cpu() - c0, checkpoints


def batching(backend: str, threads: int, steps: int, tmp: str) -> list[tuple[str, float, float]]:
    groups = rounds(threads, steps)
    out = []
    for label, size in (("one transaction per call (threadline)", None), ("8 calls per transaction", 8), (f"a superstep of {threads} threads per transaction", 2 * threads)):
        with open_threadline(backend, tmp, f"batch{size}") as saver:
            server = B.server_cpu(saver)
            wall, cpu_ms, n = run_batches(saver, groups, size, lambda: time.thread_time() * 1000 + server())
            for t in (0, threads - 1):
                SW.check_small_thread(saver, f"b{t}", steps)
        out.append((label, n / wall, cpu_ms / n))
    return out


# --- §8.2 -------------------------------------------------------------------------------------------


class SeedCachedCheckpointer(BaseCheckpointSaver):
    """Seed 002 §8.2's ``CachedCheckpointer``, as written there, around ``saver``."""

    def __init__(self, saver: Any, cache_size: int = 1000, ttl: float = 300.0) -> None:
        super().__init__(serde=saver.serde)
        self.saver, self.cache_size, self.ttl = saver, cache_size, ttl
        self._cache: OrderedDict[str, tuple[float, CheckpointTuple]] = OrderedDict()

    @staticmethod
    def _key(config: dict) -> str:
        c = config.get("configurable", {})
        return f"{c.get('thread_id')}:{c.get('checkpoint_ns', '')}:{c.get('checkpoint_id', 'latest')}"

    def get_tuple(self, config: dict) -> CheckpointTuple | None:
        key, now = self._key(config), time.time()
        if key in self._cache:
            ts, tup = self._cache[key]
            if now - ts < self.ttl:
                self._cache.move_to_end(key)
                return tup
            del self._cache[key]
        tup = self.saver.get_tuple(config)
        if tup:
            self._cache[key] = (now, tup)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return tup

    def put(self, config: dict, checkpoint: Any, metadata: Any, new_versions: Any) -> dict:
        result = self.saver.put(config, checkpoint, metadata, new_versions)
        self._cache[self._key(result)] = (time.time(), CheckpointTuple(config=result, checkpoint=checkpoint, metadata=metadata))
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return result

    def put_writes(self, config: dict, writes: Any, task_id: str, task_path: str = "") -> None:
        self.saver.put_writes(config, writes, task_id, task_path)


def _same(a: CheckpointTuple | None, b: CheckpointTuple | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.checkpoint["id"] == b.checkpoint["id"] and sorted(map(repr, a.pending_writes or [])) == sorted(map(repr, b.pending_writes or []))


def cached(backend: str, steps: int, tmp: str) -> dict:
    calls = SW.record_small(steps)
    out: dict[str, Any] = {}
    with open_threadline(backend, tmp, "cache") as saver, open_threadline(backend, tmp, "cache", fresh=False) as other:
        wrapped = SeedCachedCheckpointer(saver)
        latest = {"configurable": {"thread_id": "c0", "checkpoint_ns": ""}}
        # a run's supersteps, reading the latest after each put (as a caller polling the thread)
        stale_latest = stale_writes = 0
        for kind, args, _ in SW.for_thread(calls, "c0"):
            getattr(wrapped, kind)(*args)
            stale_latest += not _same(wrapped.get_tuple(latest), saver.get_tuple(latest)) and kind == "put"
            named = {"configurable": {**args[0]["configurable"]}}
            if kind == "put_writes":
                stale_writes += not _same(wrapped.get_tuple(named), saver.get_tuple(named))
        out["stale_latest"], out["stale_writes"] = stale_latest, stale_writes
        out["puts"], out["writes"] = sum(k == "put" for k, _, _ in calls), sum(k == "put_writes" for k, _, _ in calls)
        # a second process (another saver on the same database) continues the thread
        c1_calls = list(SW.for_thread(calls, "c1"))
        for kind, args, _ in c1_calls[: len(calls) // 2]:
            getattr(wrapped, kind)(*args)
        wrapped.get_tuple({"configurable": {"thread_id": "c1", "checkpoint_ns": ""}})
        rest = c1_calls[len(calls) // 2 :]
        stale_other = 0
        for kind, args, _ in rest:
            getattr(other, kind)(*args)
            c1 = {"configurable": {"thread_id": "c1", "checkpoint_ns": ""}}
            stale_other += kind == "put" and not _same(wrapped.get_tuple(c1), saver.get_tuple(c1))
        out["stale_other"], out["other_puts"] = stale_other, sum(k == "put" for k, _, _ in rest)
        hit, direct = [], []
        for _ in range(200):
            t0 = time.perf_counter()
            wrapped.get_tuple(latest)
            t1 = time.perf_counter()
            saver.get_tuple(latest)
            t2 = time.perf_counter()
            hit.append((t1 - t0) * 1000)
            direct.append((t2 - t1) * 1000)
        out["hit_ms"], out["direct_ms"] = statistics.median(hit), statistics.median(direct)
    return out


# --- savers and report --------------------------------------------------------------------------------


@contextmanager
def open_threadline(backend: str, tmp: str, name: str, fresh: bool = True):
    if backend == "sqlite":
        from threadline import SqliteSaver

        path = os.path.join(tmp, f"{name}.db")
        if fresh:
            B._remove(path)
        with SqliteSaver.from_conn_string(path) as saver:
            yield saver
    else:
        from threadline import PostgresSaver

        schema = f"bench_seed002_{name}".lower()
        dsn = B._fresh_schema(schema) if fresh else B._with_schema(B.PG_DSN, schema)
        try:
            with PostgresSaver.from_conn_string(dsn) as saver:
                yield saver
        finally:
            if fresh:  # the opener of the fresh schema closes last: leave nothing behind
                import psycopg

                with psycopg.connect(B.PG_DSN, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def render(found: dict[str, tuple[list, dict]], args: argparse.Namespace) -> str:
    lines = [B.machine(), "", f"Command: `benchmarks/seed002.py --threads {args.threads} --steps {args.steps}`.", "",
             "§8.1, batching (threadline's savers; the same recorded calls in every variant):", "",
             "| backend | variant | checkpoints/s | CPU ms per checkpoint (client + server) |", "|---|---|---|---|"]
    for backend, (rows, _) in found.items():
        base = rows[0][1]
        for label, rate, cpu in rows:
            lines.append(f"| {backend} | {label} | {rate:.0f} ({rate / base:.2f}×) | {cpu:.2f} |")
    lines += ["", "§8.2, the seed's cached checkpointer around threadline's saver:", "",
              "| backend | get_tuple latest, cache hit | threadline alone (its value cache warm) | wrong answers: latest after a put | … after put_writes (pending writes missing) | … after another process's puts |",
              "|---|---|---|---|---|---|"]
    for backend, (_, c) in found.items():
        lines.append(f"| {backend} | {c['hit_ms']:.3f} ms | {c['direct_ms']:.3f} ms | {c['stale_latest']} of {c['puts']} puts | "
                     f"{c['stale_writes']} of {c['writes']} put_writes | {c['stale_other']} of {c['other_puts']} puts |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    backends = ["sqlite"] + ([] if args.no_postgres or B.postgres_reason() else ["postgres"])
    found = {}
    with tempfile.TemporaryDirectory(prefix="threadline-seed002-") as tmp:
        for backend in backends:
            found[backend] = (batching(backend, args.threads, args.steps, tmp), cached(backend, args.steps, tmp))
            print(backend, found[backend], file=sys.stderr)
    md = render(found, args)
    print(md)
    if args.write_results:
        B.write_results(md, START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
