"""Concurrency (issue 14, target 6): many graphs at once, threadline vs the official savers.

Usage::

    .venv/bin/python benchmarks/concurrency.py [--graphs 32] [--pool 10] [--processes 4]
        [--threads-per-process 8] [--steps 25] [--no-postgres] [--write-results]

* **Postgres, async**: ``--graphs`` real LangGraph graphs (``scale_workload.small_graph``:
  one short message and a counter per superstep, ``--steps`` supersteps) run at once with
  ``ainvoke`` (``asyncio.gather``), every one on its own thread_id, through ONE
  ``psycopg_pool.AsyncConnectionPool`` of ``--pool`` connections passed to the saver's
  constructor: threadline's ``AsyncPostgresSaver(pool)`` and the official
  ``AsyncPostgresSaver(pool)`` (its pool made as its docs say: autocommit, ``dict_row``).
* **SQLite, processes**: ``--processes`` processes on ONE database file, each with its own
  saver (``SqliteSaver.from_conn_string(path)``, threadline's or the official), each running
  ``--threads-per-process`` graphs one after another; the tables are set up before the
  processes start, which then start together.

For each: checkpoints/s (checkpoints stored ÷ wall seconds from start to the last graph's
end), client CPU seconds (this process or the sum of the worker processes), the number of
graphs that raised (errors; must be 0), and the number of threads whose final state reads
back complete through the real graph (count == steps, steps + 1 messages) — all must.

``--write-results`` rewrites the ``<!-- concurrency:start -->`` section of ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import run as B  # noqa: E402
import scale_workload as SW  # noqa: E402

START, END = "<!-- concurrency:start -->", "<!-- concurrency:end -->"


def _complete(values: dict, steps: int) -> bool:
    return values.get("count") == steps and len(values.get("messages", [])) == steps + 1


# --- Postgres: async graphs through one pool ------------------------------------------------------------


async def _pg_run(official: bool, graphs: int, pool_size: int, steps: int, suffix: str = "") -> dict:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    schema = f"bench_conc_{'official' if official else 'threadline'}{suffix}"
    dsn = B._fresh_schema(schema)
    if official:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    else:
        from threadline import AsyncPostgresSaver
    # the official docs' pool settings, used unchanged with both savers (drop-in)
    kwargs = {"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0}
    table = "checkpoints" if official else "threadline_checkpoints"
    async with AsyncConnectionPool(dsn, min_size=pool_size, max_size=pool_size, kwargs=kwargs, open=False) as pool:
        await pool.wait()
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        graph = SW.small_graph(steps).compile(checkpointer=saver)
        errors: list[str] = []

        async def one(i: int) -> None:
            try:
                await graph.ainvoke(SW.first_input(), {"configurable": {"thread_id": f"g{i}"}, "recursion_limit": 10 * steps})
            except Exception as exc:  # counted, and the first shown
                errors.append(f"{type(exc).__name__}: {exc}")

        cpu0 = time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(graphs)))
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        complete = 0
        for i in range(graphs):
            state = await graph.aget_state({"configurable": {"thread_id": f"g{i}"}})
            complete += _complete(state.values, steps)
    with psycopg.connect(dsn, autocommit=True) as conn:
        checkpoints = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return {"checkpoints": checkpoints, "seconds": wall, "cpu_seconds": cpu, "errors": len(errors),
            "first_error": errors[0] if errors else None, "complete": complete, "threads": graphs}


# --- SQLite: processes on one file --------------------------------------------------------------------


def _saver_class(official: bool) -> Any:
    if official:
        from langgraph.checkpoint.sqlite import SqliteSaver
    else:
        from threadline import SqliteSaver
    return SqliteSaver


def _worker(official: bool, path: str, proc: int, threads: int, steps: int, ready: Any, go: Any, out: Any) -> None:
    errors: list[str] = []
    with _saver_class(official).from_conn_string(path) as saver:
        graph = SW.small_graph(steps).compile(checkpointer=saver)
        ready.put(proc)
        go.wait()
        cpu0 = time.process_time()
        for t in range(threads):
            try:
                graph.invoke(SW.first_input(), {"configurable": {"thread_id": f"p{proc}-t{t}"}, "recursion_limit": 10 * steps})
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                traceback.print_exc()
        out.put((proc, time.perf_counter(), time.process_time() - cpu0, errors))


def _sqlite_run(official: bool, processes: int, threads: int, steps: int) -> dict:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="threadline-conc-") as tmp:
        path = os.path.join(tmp, "shared.db")
        with _saver_class(official).from_conn_string(path) as saver:
            saver.setup()
        ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(official, path, p, threads, steps, ready, go, out)) for p in range(processes)]
        for p in procs:
            p.start()
        for _ in procs:  # every process has imported and opened its saver
            ready.get(timeout=300)
        t0 = time.perf_counter()
        go.set()
        done = [out.get(timeout=1800) for _ in procs]
        for p in procs:
            p.join()
        wall = max(d[1] for d in done) - t0  # perf_counter is the system-wide monotonic clock on Linux
        errors = [e for d in done for e in d[3]]
        complete = 0
        table = "checkpoints" if official else "threadline_checkpoints"
        with _saver_class(official).from_conn_string(path) as saver:
            graph = SW.small_graph(steps).compile(checkpointer=saver)
            for p in range(processes):
                for t in range(threads):
                    complete += _complete(graph.get_state({"configurable": {"thread_id": f"p{p}-t{t}"}}).values, steps)
            checkpoints = saver.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return {"checkpoints": checkpoints, "seconds": wall, "cpu_seconds": sum(d[2] for d in done), "errors": len(errors),
            "first_error": errors[0] if errors else None, "complete": complete, "threads": processes * threads,
            "exit_codes": [p.exitcode for p in procs]}


# --- report ---------------------------------------------------------------------------------------------


def render(rows: list[tuple[str, str, dict]], args: argparse.Namespace) -> str:
    lines = [
        B.machine(),
        "",
        f"Command: `benchmarks/concurrency.py --graphs {args.graphs} --pool {args.pool} --processes {args.processes} "
        f"--threads-per-process {args.threads_per_process} --steps {args.steps}`. Each graph: {args.steps} supersteps "
        f"of the small real graph ({args.steps + 2} checkpoints per thread).",
        "",
        "| setup | saver | checkpoints | wall s | checkpoints/s | client CPU s | errors | threads complete |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base: dict[str, float] = {}
    for setup, name, r in rows:
        rate = r["checkpoints"] / r["seconds"]
        ratio = f" ({rate / base[setup]:.2f}×)" if setup in base else ""
        base.setdefault(setup, rate)
        lines.append(f"| {setup} | {name} | {r['checkpoints']:,} | {r['seconds']:.2f} | {rate:.0f}{ratio} | "
                     f"{r['cpu_seconds']:.2f} | {r['errors']} | {r['complete']}/{r['threads']} |")
    errs = [f"{name} ({setup}): {r['first_error']}" for setup, name, r in rows if r["first_error"]]
    lines += ["", "Ratios: threadline's checkpoints/s ÷ the official saver's (> 1: faster)."]
    if errs:
        lines += ["", "First error of each saver that had any: " + "; ".join(errs)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", type=int, default=32)
    ap.add_argument("--pool", type=int, default=10)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--threads-per-process", type=int, default=8)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    rows: list[tuple[str, str, dict]] = []
    pg = not args.no_postgres and B.postgres_reason() is None
    if pg:
        setup = f"Postgres, {args.graphs} async graphs, one pool of {args.pool}"
        for official, name in ((True, "official AsyncPostgresSaver"), (False, "threadline AsyncPostgresSaver")):
            rows.append((setup, name, asyncio.run(_pg_run(official, args.graphs, args.pool, args.steps))))
            print(rows[-1], file=sys.stderr)
    setup = f"SQLite, {args.processes} processes × {args.threads_per_process} graphs, one file"
    for official, name in ((True, "official SqliteSaver"), (False, "threadline SqliteSaver")):
        rows.append((setup, name, _sqlite_run(official, args.processes, args.threads_per_process, args.steps)))
        print(rows[-1], file=sys.stderr)
    md = render(rows, args)
    print(md)
    if args.write_results:
        B.write_results(md, START, END)
    bad = [r for _, name, r in rows if name.startswith("threadline") and (r["errors"] or r["complete"] != r["threads"])]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
