"""Preflight speed (issue 32): ``threadline.evolve.check`` over N threads stored under the
v1 graph of ``tests/evolve_app.py`` (each interrupted in a node v3 removed, with a renamed
channel and notes of the old type, so every head has four problems), against the v3 graph.

The threads are one real v1 run copied N-1 times (``copy_thread``). Prints the seconds of
``check`` (heads, bulk reads of ``PAGE`` threads a statement) and of a dry-run ``migrate``.

    .venv/bin/python benchmarks/preflight.py --threads 10000 [--db URL] [--measure-only]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import evolve_app as A  # noqa: E402

from threadline import evolve  # noqa: E402
from threadline.backends import open_saver  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=10_000)
    ap.add_argument("--db", default=None, help="a database URL (default: a fresh SQLite file)")
    ap.add_argument("--measure-only", action="store_true", help="the --db already holds the threads: only measure")
    args = ap.parse_args()
    url = args.db or os.path.join(tempfile.mkdtemp(), "preflight.db")
    if not args.measure_only:
        store(url, args.threads)
    measure(url)


def store(url: str, threads: int) -> None:
    with open_saver(url) as saver:
        A.v1().compile(checkpointer=saver).invoke({"topic": "seed"}, {"configurable": {"thread_id": "seed"}})
        t0 = time.perf_counter()
        for i in range(threads - 1):
            saver.copy_thread("seed", f"t{i:06}")
        print(f"stored {threads} threads in {time.perf_counter() - t0:.1f} s", flush=True)


def measure(url: str) -> None:
    with open_saver(url) as saver:
        t0, c0 = time.perf_counter(), time.process_time()
        report = evolve.check(saver, A.graph_v3())
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"check: {report.threads} threads, {len(report.problems)} problem kinds, {took:.2f} s "
              f"({took / report.threads * 1e6:.0f} us a thread; CPU of this process {cpu:.2f} s)")
        t0, c0 = time.perf_counter(), time.process_time()
        plan = evolve.migrate(saver, A.graph_v3(), A.MIGRATIONS)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"migrate (dry run): {plan.to_migrate} threads to migrate, {took:.2f} s (CPU {cpu:.2f} s)")


if __name__ == "__main__":
    main()
