"""Scale (issue 14, target 5): many threads and one long thread, threadline vs the official savers.

Usage::

    .venv/bin/python benchmarks/scale.py [--threads 10000] [--steps 50] [--big 20000]
        [--block 100] [--prune 1000] [--savers sqlite-official,sqlite,postgres-official,postgres]
        [--write-results]

Each saver runs in its own process (``--child``), one after the other, so that its peak
RSS (``ru_maxrss``, KB → MB) is its own. In each process:

1. **populate**: ``--threads`` threads × ``--steps`` supersteps of the real small graph
   (``scale_workload.record_small``: one short message and a counter per superstep), its
   recorded calls replayed under each thread_id; ``--block`` threads at a time, round-robin
   by call (as that many concurrent agents would write). Reports checkpoints/s and
   put+put_writes ms per superstep (mean), wall and CPU (this process's thread plus, on
   Postgres, the server backend serving the saver's connection; ``/proc/<pid>/schedstat``).
2. **long thread**: one thread of ``--big`` supersteps (``scale_workload.long_thread``),
   written after the others; put+put_writes ms per superstep, median over the supersteps
   ±10 around 100 and over the last 20, wall and CPU. Read back through the real graph.
3. **threads**: threadline ``read.list_threads`` (the first page of 50, most recently
   updated first, and the total) and ``read.all_thread_ids_op`` (every thread_id), from its
   ``threads`` index. The official savers have no listing: a user lists every checkpoint
   (``list(None)``) and keeps the distinct thread_ids, or, knowing the schema, runs
   ``SELECT DISTINCT thread_id FROM checkpoints``; both are timed (the official Postgres
   ``list(None)`` over its first ``LIST_LIMIT`` checkpoints only: see ``reads``).
4. **latest**: ``get_tuple`` of the latest checkpoint of 200 random threads (median ms), and
   the ``count`` channel at the head of every thread: threadline ``read.latest_values``
   (one operation), the official savers a ``get_tuple`` per thread.
5. **history**: ``list`` of the long thread, every checkpoint (s, and ms per checkpoint).
6. **prune**: ``prune(thread_ids, strategy="keep_latest")`` (LangGraph's ``BaseCheckpointSaver``
   method) on ``--prune`` threads, then on the long thread; threadline also
   ``lifecycle.prune(saver, RetentionPolicy(keep_last=10))`` on another ``--prune`` threads.
   Checkpoints removed per second (counted in the tables before and after). The official
   ``SqliteSaver`` has no ``prune`` (LangGraph's base raises ``NotImplementedError``) and no
   retention at all; the official ``PostgresSaver`` has ``prune``, no retention policy.
7. bytes on disk (SQLite file after a WAL checkpoint; Postgres schema, indexes and TOAST
   included) and every sampled thread read back complete (count and messages).

``--write-results`` rewrites the ``<!-- scale:start -->`` section of ``RESULTS.md`` (``--section
NAME``: ``<!-- NAME:start -->`` instead, e.g. for a run of threadline alone at another size).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import run as B  # noqa: E402
import scale_workload as SW  # noqa: E402
from scale_report import render  # noqa: E402

LIST_LIMIT = 2000  # checkpoints the official Postgres list(None) is timed over (see ``reads``)
SAVERS = ("sqlite-official", "sqlite", "postgres-official", "postgres")
NAMES = {
    "sqlite-official": "official SqliteSaver",
    "sqlite": "threadline SqliteSaver",
    "postgres-official": "official PostgresSaver",
    "postgres": "threadline PostgresSaver",
}


@contextmanager
def open_saver(name: str, tmp: str):
    """Yield ``(saver, bytes_on_disk(), sql(text) → rows)`` on a fresh database (``sql`` runs on a
    connection of its own for Postgres, the saver's for SQLite)."""
    official = name.endswith("-official")
    if name.startswith("sqlite"):
        path = os.path.join(tmp, f"scale-{name}.db")
        B._remove(path)
        if official:
            from langgraph.checkpoint.sqlite import SqliteSaver
        else:
            from threadline import SqliteSaver
        with SqliteSaver.from_conn_string(path) as saver:
            saver.setup()
            yield saver, (lambda: B._sqlite_bytes(saver.conn, path)), (lambda q: saver.conn.execute(q).fetchall())
        return
    import psycopg

    schema = f"bench_scale_{name.replace('-', '_')}{os.environ.get('THREADLINE_SCALE_SCHEMA_SUFFIX', '')}"
    if official:
        from langgraph.checkpoint.postgres import PostgresSaver
    else:
        from threadline import PostgresSaver
    dsn = B._fresh_schema(schema)
    try:
        with PostgresSaver.from_conn_string(dsn) as saver, psycopg.connect(dsn, autocommit=True) as conn:
            saver.setup()
            yield saver, (lambda: B._pg_bytes(schema)), (lambda q: conn.execute(q).fetchall())
    finally:
        with psycopg.connect(B.PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _call(saver: Any, kind: str, args: tuple) -> None:
    getattr(saver, kind)(*args)


def populate(saver: Any, cpu: Any, threads: int, steps: int, block: int) -> dict:
    calls = SW.record_small(steps)
    wall = cpu_ms = 0.0
    supersteps = 0
    clock = time.perf_counter
    for first in range(0, threads, block):
        streams = [list(SW.for_thread(calls, f"thread-{t:05d}")) for t in range(first, min(first + block, threads))]
        for i in range(len(calls)):
            for s in streams:
                kind, args, _ = s[i]
                c0 = cpu()
                t0 = clock()
                _call(saver, kind, args)
                wall += clock() - t0
                cpu_ms += cpu() - c0
                supersteps += kind == "put"
    checkpoints = supersteps
    return {
        "checkpoints": checkpoints,
        "seconds": wall,
        "cpu_seconds": cpu_ms / 1000,
        "per_s": checkpoints / wall,
        "ms_per_superstep": wall * 1000 / checkpoints,
        "cpu_ms_per_superstep": cpu_ms / checkpoints,
    }


def long_thread(saver: Any, cpu: Any, steps: int) -> dict:
    wall: dict[int, float] = {}
    cpu_t: dict[int, float] = {}
    clock = time.perf_counter
    total = 0.0
    for kind, args, step in SW.long_thread("long", steps):
        key = step + 1 if kind == "put_writes" else step  # a superstep: its writes, then its checkpoint
        c0 = cpu()
        t0 = clock()
        _call(saver, kind, args)
        dt = clock() - t0
        total += dt
        wall[key] = wall.get(key, 0.0) + dt * 1000
        cpu_t[key] = cpu_t.get(key, 0.0) + cpu() - c0
    at = min(100, steps // 3)  # ~100 (a tiny run: a third of the way)
    near = [k for k in wall if at - 10 <= k <= at + 10]
    last = [k for k in wall if k > steps - 20]
    return {
        "steps": steps,
        "seconds": total,
        "at100_ms": statistics.median(wall[k] for k in near),
        "at100_cpu_ms": statistics.median(cpu_t[k] for k in near),
        "atN_ms": statistics.median(wall[k] for k in last),
        "atN_cpu_ms": statistics.median(cpu_t[k] for k in last),
    }


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def reads(name: str, saver: Any, sql: Any, threads: int, steps: int, big: int) -> dict:
    official = name.endswith("-official")
    out: dict[str, Any] = {}
    ids = [f"thread-{t:05d}" for t in range(threads)] + ["long"]
    if official and name.startswith("postgres"):
        # The official Postgres list(None) holds one snapshot for the whole listing (> 6 min at
        # 71,000 checkpoints here), which blocks other sessions' CREATE INDEX CONCURRENTLY on the
        # same server: only the first LIST_LIMIT checkpoints are listed and timed.
        out["threads_list_partial"], found = timed(lambda: {t.config["configurable"]["thread_id"] for t in saver.list(None, limit=LIST_LIMIT)})
        out["threads_list_limit"] = LIST_LIMIT
    elif official:
        out["threads_list_s"], found = timed(lambda: {t.config["configurable"]["thread_id"] for t in saver.list(None)})
        assert found == set(ids), (len(found), len(ids))
        out["threads_sql_s"], found = timed(lambda: sql("SELECT DISTINCT thread_id FROM checkpoints"))
        assert len(found) == len(ids)
    else:
        from threadline.read.threads import all_thread_ids_op, list_threads

        out["threads_page_s"], page = timed(lambda: list_threads(saver, limit=50))
        assert page.total == len(ids) and len(page.threads) == min(50, len(ids))
        out["threads_all_s"], found = timed(lambda: saver.run(all_thread_ids_op(saver.dialect)))
        assert set(found) == set(ids)
    rnd = random.Random(5)
    sample = rnd.sample(ids[:-1], min(200, threads))
    times = []
    for tid in sample:
        dt, tup = timed(lambda: saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}))
        assert tup.checkpoint["channel_values"]["count"] == steps
        times.append(dt * 1000)
    out["get_latest_ms"] = statistics.median(times)
    if official:
        dt, counts = timed(lambda: [saver.get_tuple({"configurable": {"thread_id": t, "checkpoint_ns": ""}}).checkpoint["channel_values"]["count"] for t in ids])
    else:
        from threadline.read.latest import latest_values

        dt, found = timed(lambda: latest_values(saver, "count"))
        counts = [v.value for v in sorted(found, key=lambda v: v.thread_id)]
    assert sorted(counts) == sorted([steps] * threads + [big]), "latest count of every thread"
    out["latest_all_s"] = dt
    n = 0

    def history() -> int:
        nonlocal n
        for _ in saver.list({"configurable": {"thread_id": "long", "checkpoint_ns": ""}}):
            n += 1
        return n

    out["history_s"], n = timed(history)
    out["history_checkpoints"] = n
    for tid in sample[:20]:
        SW.check_small_thread(saver, tid, steps)
    SW.check_long_thread(saver, "long", big)
    return out


def prune(name: str, saver: Any, sql: Any, threads: int, n: int) -> dict:
    out: dict[str, Any] = {}
    table = "checkpoints" if name.endswith("-official") else "threadline_checkpoints"
    count = lambda: sql(f"SELECT COUNT(*) FROM {table}")[0][0]  # noqa: E731
    if name == "sqlite-official":
        return {"note": "no prune"}
    n = min(n, threads // 2)
    first = [f"thread-{t:05d}" for t in range(n)]
    before = count()
    dt, _ = timed(lambda: saver.prune(first, strategy="keep_latest"))
    removed = before - count()
    out["keep_latest"] = {"threads": n, "removed": removed, "seconds": dt, "per_s": removed / dt}
    before = count()
    dt, _ = timed(lambda: saver.prune(["long"], strategy="keep_latest"))
    removed = before - count()
    out["long_keep_latest"] = {"removed": removed, "seconds": dt, "per_s": removed / dt}
    if not name.endswith("-official"):
        from threadline.lifecycle.retention import RetentionPolicy
        from threadline.lifecycle.retention import prune as retention_prune

        second = [f"thread-{t:05d}" for t in range(n, 2 * n)]
        before = count()
        dt, _ = timed(lambda: retention_prune(saver, RetentionPolicy(keep_last=10), thread_ids=second))
        removed = before - count()
        out["retention"] = {"threads": n, "removed": removed, "seconds": dt, "per_s": removed / dt}
    return out


def child(args: argparse.Namespace) -> dict:
    res: dict[str, Any] = {"saver": args.child}

    def phase(key: str, fn: Any) -> None:  # each phase's figures kept as soon as they exist
        res[key] = fn()
        if args.json_dir:
            Path(args.json_dir, f"{args.child}.partial.json").write_text(json.dumps(res))

    with tempfile.TemporaryDirectory(prefix="threadline-scale-") as tmp, open_saver(args.child, tmp) as (saver, disk, sql):
        server = B.server_cpu(saver)
        cpu = lambda: time.thread_time() * 1000 + server()  # noqa: E731
        phase("populate", lambda: populate(saver, cpu, args.threads, args.steps, args.block))
        phase("rss_mb_populate", lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        phase("long", lambda: long_thread(saver, cpu, args.big))
        phase("checkpoints", lambda: sql(f"SELECT COUNT(*) FROM {'checkpoints' if args.child.endswith('-official') else 'threadline_checkpoints'}")[0][0])
        phase("bytes", disk)
        phase("reads", lambda: reads(args.child, saver, sql, args.threads, args.steps, args.big))
        cache = getattr(getattr(saver, "blob_codec", None), "cache", None)
        if cache is not None:
            res["cache"] = {"bytes": cache.nbytes, "max_bytes": cache.max_bytes}
        phase("prune", lambda: prune(args.child, saver, sql, args.threads, args.prune))
        phase("rss_mb", lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return res


def run_child(name: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--threads", str(args.threads), "--steps", str(args.steps),
           "--big", str(args.big), "--block", str(args.block), "--prune", str(args.prune)]
    if args.json_dir:
        cmd += ["--json-dir", args.json_dir]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"scale run of {name} failed (exit {proc.returncode})")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_s"] = time.perf_counter() - t0
    if args.json_dir:
        Path(args.json_dir, f"{name}.json").write_text(json.dumps(res))
    print(f"  {NAMES[name]}: {res['process_s']:.0f} s", file=sys.stderr)
    return res



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--big", type=int, default=20_000, help="supersteps of the long thread")
    ap.add_argument("--block", type=int, default=100, help="threads written round-robin at a time")
    ap.add_argument("--prune", type=int, default=1000, help="threads pruned by each prune figure")
    ap.add_argument("--savers", default=",".join(SAVERS))
    ap.add_argument("--child", choices=SAVERS, help=argparse.SUPPRESS)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--json-dir", help="also keep each saver's figures there as NAME.json")
    ap.add_argument("--from-json", help="render from the NAME.json files of a directory instead of running")
    ap.add_argument("--section", default="scale", help="the RESULTS.md section written: <!-- SECTION:start -->")
    args = ap.parse_args(argv)
    if args.json_dir:
        Path(args.json_dir).mkdir(parents=True, exist_ok=True)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    names = [s for s in args.savers.split(",") if s]
    if any(s.startswith("postgres") for s in names) and (reason := B.postgres_reason()):
        print(f"no Postgres ({reason}): Postgres savers skipped", file=sys.stderr)
        names = [s for s in names if not s.startswith("postgres")]
    print(f"scale: {args.threads} threads × {args.steps} supersteps, one thread of {args.big}", file=sys.stderr)
    if args.from_json:
        found = [next((f for f in (Path(args.from_json, f"{n}.json"), Path(args.from_json, f"{n}.partial.json")) if f.exists()), None) for n in names]
        results = [json.loads(f.read_text()) for f in found if f is not None]
    else:
        results = [run_child(n, args) for n in names]
    md = render(results, args, B.machine())
    print(md)
    if args.write_results:
        B.write_results(md, f"<!-- {args.section}:start -->", f"<!-- {args.section}:end -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
