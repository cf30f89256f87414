"""threadline's Store vs the official LangGraph stores, side by side, in one run.

Usage::

    .venv/bin/python benchmarks/store_bench.py [--items 100000] [--no-postgres] [--write-results]

For each store (official ``SqliteStore`` / ``PostgresStore``, threadline's) on a fresh
database: load ``--items`` items (in batches of 1000 PutOps) across 100 namespaces
``("users", "u<n>", "memories")``, each value ~200 bytes of JSON; then, interleaving
the stores call by call so machine load hits them alike:

* put: ms per single ``put`` (200 updates of existing items), median;
* get: ms per ``get`` (500 random items), median;
* search: ms per ``search(("users", "u<n>"), filter={"kind": "note"}, limit=10)`` (100 calls), median;
* bytes per item: the database file after a WAL checkpoint (SQLite) or the total relation
  size of the store's tables, indexes and TOAST included (Postgres), ÷ items;

and each figure's ratio threadline ÷ official (< 1: faster or smaller). ``--write-results``
rewrites the "Store" section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from langgraph.store.base import PutOp

import threadline

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
START, END = "<!-- store-bench:start -->", "<!-- store-bench:end -->"
DSN = os.environ.get("THREADLINE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
NAMESPACES = 100
NOTE = (
    "\n\nSQLite put: both stores commit with `synchronous=FULL` (SQLite's default: an fsync per commit). "
    "SQLite search: threadline finds a filter's field by its decoded name "
    "(`json_each`), so every field name matches exactly; the official store's `json_extract` paths are "
    "faster and refuse names outside `[A-Za-z0-9_.-]`."
)
WORDS = "memory user prefers concise answers about travel plans budget hotel flight dinner".split()


def value(i: int, rng: random.Random) -> dict[str, Any]:
    return {
        "kind": "note" if i % 3 else "fact",
        "text": " ".join(rng.choice(WORDS) for _ in range(20)),
        "score": i % 97,
        "tags": [rng.choice(WORDS), rng.choice(WORDS)],
    }


def ns(i: int) -> tuple[str, ...]:
    return ("users", f"u{i % NAMESPACES}", "memories")


def load(store: Any, items: int) -> float:
    rng = random.Random(7)
    started = time.perf_counter()
    for start in range(0, items, 1000):
        store.batch([PutOp(ns(i), f"k{i}", value(i, rng)) for i in range(start, min(items, start + 1000))])
    return (time.perf_counter() - started) / items * 1000


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def sqlite_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return os.path.getsize(path)


def pg_bytes(dsn: str, tables: list[str]) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return sum(conn.execute("SELECT COALESCE(pg_total_relation_size(to_regclass(%s)), 0)", (t,)).fetchone()[0] for t in tables)


def backends(args: argparse.Namespace, stack: ExitStack, tmp: str) -> list[tuple[str, str, Any, Any]]:
    """(backend, impl, store, bytes-on-disk function) for every store to measure."""
    from langgraph.store.postgres import PostgresStore as OfficialPostgres
    from langgraph.store.sqlite import SqliteStore as OfficialSqlite

    out = []
    for impl, cls in (("official", OfficialSqlite), ("threadline", threadline.SqliteStore)):
        path = os.path.join(tmp, f"{impl}.db")
        store = stack.enter_context(cls.from_conn_string(path))
        if impl == "official":
            store.conn.execute("PRAGMA journal_mode=WAL")  # as threadline's, so the file is compared alike
        store.setup()
        out.append(("SQLite", impl, store, lambda path=path: sqlite_bytes(path)))
    if not args.no_postgres:
        import psycopg

        for impl, cls, tables in (
            ("official", OfficialPostgres, ["store", "store_migrations"]),
            ("threadline", threadline.PostgresStore, ["threadline_store", "threadline_store_migrations"]),
        ):
            schema = f"store_bench_{impl}_{secrets.token_hex(3)}"
            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            stack.callback(lambda schema=schema: _drop(schema))
            dsn = f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}"
            store = stack.enter_context(cls.from_conn_string(dsn))
            store.setup()
            out.append(("Postgres", impl, store, lambda dsn=dsn, tables=tables: pg_bytes(dsn, tables)))
    return out


def _drop(schema: str) -> None:
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        stores = backends(args, stack, tmp)
        for backend, impl, store, _ in stores:
            print(f"loading {args.items} items into {backend} {impl} …", flush=True)
            rows.append({"backend": backend, "impl": impl, "load": load(store, args.items), "put": [], "get": [], "search": []})
        rng = random.Random(11)
        for _ in range(200):
            i = rng.randrange(args.items)
            for row, (_, _, store, _) in zip(rows, stores):
                row["put"].append(timed(lambda: store.put(ns(i), f"k{i}", value(i, rng))))
        for _ in range(500):
            i = rng.randrange(args.items)
            for row, (_, _, store, _) in zip(rows, stores):
                row["get"].append(timed(lambda: store.get(ns(i), f"k{i}")))
        for _ in range(100):
            prefix = ("users", f"u{rng.randrange(NAMESPACES)}")
            for row, (_, _, store, _) in zip(rows, stores):
                row["search"].append(timed(lambda: store.search(prefix, filter={"kind": "note"}, limit=10)))
        for row, (_, _, _, size) in zip(rows, stores):
            row["bytes"] = size() / args.items
            for k in ("put", "get", "search"):
                row[k] = statistics.median(row[k])
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | store | load ms/item | put ms | get ms | search ms | bytes/item |",
        "|---|---|---|---|---|---|---|",
    ]
    by = {(r["backend"], r["impl"]): r for r in rows}
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['impl']} | {r['load']:.3f} | {r['put']:.3f} | {r['get']:.3f} | {r['search']:.3f} | {r['bytes']:.0f} |"
        )
    for backend in dict.fromkeys(r["backend"] for r in rows):
        o, t = by.get((backend, "official")), by.get((backend, "threadline"))
        if o and t:
            ratios = " | ".join(f"**{t[k] / o[k]:.2f}×**" for k in ("load", "put", "get", "search", "bytes"))
            lines.append(f"| {backend} | threadline ÷ official | {ratios} |")
    return "\n".join(lines)


def write_results(md: str) -> None:
    text = RESULTS.read_text()
    block = f"{START}\n{md}\n{END}"
    if START in text:
        head, rest = text.split(START, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n## Store\n\n" + block + "\n"
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=100_000)
    p.add_argument("--no-postgres", action="store_true")
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args(argv)
    rows = measure(args)
    commit = os.popen(f"git -C {ROOT} rev-parse --short HEAD").read().strip()
    md = (
        f"`benchmarks/store_bench.py --items {args.items}` ({time.strftime('%Y-%m-%d %H:%M')} UTC, commit {commit}); "
        "medians of interleaved calls; ratios < 1 mean threadline is faster or smaller. "
        "The machine is shared (2 cores): timings move ±15 % between runs; bytes are exact.\n\n" + table(rows) + NOTE
    )
    print(md)
    if args.write_results:
        write_results(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
