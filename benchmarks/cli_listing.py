"""How fast the CLI's listings are on a large database: ``threadline threads`` and friends on
100,000 threads.

Usage::

    .venv/bin/python benchmarks/cli_listing.py [--threads 100000] [--postgres URL] [--repeat 3]

Builds a database of N threads (SQLite in a temporary directory; with ``--postgres`` also
a fresh schema there): one real agent thread is written through the saver (a tool-calling
agent, 9 checkpoints), then copied N times by SQL with distinct thread_ids and update
times, so every thread has real checkpoints, values, writes and a threads-index row.
Then, per backend, each listing is timed twice: the library call alone (median of
``--repeat`` runs, a warm connection) and the whole ``threadline …`` process (including
its start-up, about a second of importing LangGraph). Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cli_support import EXE, run_agent  # noqa: E402

from threadline import open_saver, read  # noqa: E402
from threadline.backends.readonly import open_reader  # noqa: E402

TABLES = ("threadline_checkpoints", "threadline_blobs", "threadline_writes", "threadline_threads")


def _columns(conn, table: str, postgres: bool) -> list[str]:
    if postgres:
        rows = conn.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                            "AND table_name = %s ORDER BY ordinal_position", (table,)).fetchall()
    else:
        rows = [(r[1],) for r in conn.execute(f"PRAGMA table_info({table})")]
    return [r[0] for r in rows]


def build(url: str, n: int) -> None:
    """One agent thread through the saver, then N copies of it by SQL."""
    with open_saver(url) as saver:
        run_agent(saver, "template")
    postgres = url.startswith("postgres")
    if postgres:
        import psycopg

        conn = psycopg.connect(url, autocommit=True)
        numbers, name = f"generate_series(1, {n}) AS s(n)", "'bench-' || lpad(s.n::text, 6, '0')"
    else:
        import sqlite3

        conn = sqlite3.connect(url)
        numbers = f"(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < {n}) SELECT n FROM c) AS s"
        name = "printf('bench-%06d', s.n)"
    for table in TABLES:
        cols = _columns(conn, table, postgres)
        picked = [name if c == "thread_id" else f"t.{c} - s.n" if c == "updated_at" else f"t.{c}" for c in cols]
        conn.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(picked)} FROM {table} t, {numbers} "
                     "WHERE t.thread_id = 'template'")
    if not postgres:
        conn.commit()
        conn.execute("VACUUM")
        conn.execute("ANALYZE")
    else:
        conn.execute("ANALYZE")
    conn.close()


def listings(n: int) -> list:
    """(label, CLI arguments, the library call) of each listing timed on N threads."""
    last, middle = str(max(0, n - 50)), f"bench-{n // 2:06d}"
    return [
        ("threads (first page of 50)", ["threads"], lambda s: read.list_threads(s, limit=50)),
        (f"threads --offset {last}", ["threads", "--offset", last], lambda s: read.list_threads(s, limit=50, offset=int(last))),
        ("threads --order bytes", ["threads", "--order", "bytes"], lambda s: read.list_threads(s, limit=50, order_by="bytes")),
        ("threads --idle 1h", ["threads", "--idle", "1h"], lambda s: read.list_threads(s, limit=50, idle_for=3600)),
        ("latest messages (50 threads)", ["latest", "messages"],
         lambda s: read.latest_values(s, "messages", [t.thread_id for t in read.list_threads(s, limit=50).threads])),
        (f"history {middle}", ["history", middle], lambda s: read.thread_history(s, middle)),
        ("stats", ["stats"], lambda s: read.stats(s)),
    ]


def measure(url: str, n: int, repeat: int) -> list[tuple[str, float, float]]:
    out = []
    env = {**os.environ, "COLUMNS": "120"}
    with open_reader(url) as saver:
        for label, args, call in listings(n):
            lib = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                call(saver)
                lib.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            proc = subprocess.run([str(EXE), *args, "--db", url], capture_output=True, text=True, env=env)
            wall = time.perf_counter() - t0
            assert proc.returncode == 0, proc.stderr
            out.append((label, statistics.median(lib) * 1000, wall * 1000))
    t0 = time.perf_counter()
    subprocess.run([str(EXE), "--version"], capture_output=True)
    out.append(("(start-up: threadline --version)", 0.0, (time.perf_counter() - t0) * 1000))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=100_000)
    ap.add_argument("--postgres", help="a Postgres URL; a fresh schema is made there and dropped afterwards")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    targets = []
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = str(Path(tmp) / "bench.db")
        t0 = time.perf_counter()
        build(sqlite_url, args.threads)
        print(f"sqlite: built {args.threads} threads in {time.perf_counter() - t0:.0f} s "
              f"({os.path.getsize(sqlite_url) / 1e6:.0f} MB)")
        targets.append(("sqlite", sqlite_url))
        schema = None
        if args.postgres:
            import psycopg

            schema = f"tl_cli_bench_{os.getpid()}"
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            sep = "&" if "?" in args.postgres else "?"
            pg_url = f"{args.postgres}{sep}options=-csearch_path%3D{schema}"
            t0 = time.perf_counter()
            build(pg_url, args.threads)
            print(f"postgres: built {args.threads} threads in {time.perf_counter() - t0:.0f} s")
            targets.append(("postgres", pg_url))
        try:
            print(f"\n{'listing':34} {'backend':9} {'library ms':>11} {'process ms':>11}")
            for backend, url in targets:
                for label, lib_ms, wall_ms in measure(url, args.threads, args.repeat):
                    print(f"{label:34} {backend:9} {lib_ms:11.1f} {wall_ms:11.0f}")
        finally:
            if schema:
                with psycopg.connect(args.postgres, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
