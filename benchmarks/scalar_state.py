"""A graph whose state is small scalars beside a list (storage format 2's fifth step: values the
official PostgresSaver keeps in its checkpoint's JSONB), threadline vs the official savers.

Usage::

    .venv/bin/python benchmarks/scalar_state.py [--threads 20] [--steps 30] [--pairs 2] [--no-postgres]

Workload: one node looping ``--steps`` times; each step appends a line to ``log`` (a list) and sets
``status`` (a str), ``attempts`` (an int), ``approved`` (a bool) and ``route`` (a str) — the shape of
a routing or retry loop. ``--threads`` threads, LangGraph's default durability. Each saver on a fresh
SQLite file, or a Postgres schema of its own at ``THREADLINE_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``); official then threadline, ``--pairs`` times. Per run:
CPU of this process (``time.process_time``: LangGraph, the saver and its driver), blob rows, and
bytes on disk (SQLite: ``dbstat`` after ``VACUUM``; Postgres: the schema's tables after ``VACUUM
FULL``). Figures, never assertions.
"""

from __future__ import annotations

import argparse
import operator
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

from typing_extensions import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's threadline

import psycopg  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgres  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqlite  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

from threadline import PostgresSaver, SqliteSaver  # noqa: E402

DSN = os.environ.get("THREADLINE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    status: str
    attempts: int
    approved: bool
    route: str


def build(saver: Any, steps: int) -> Any:
    def work(s: State) -> dict:
        n = s["attempts"] + 1
        return {"log": [f"attempt {n}"], "status": f"working ({n})", "attempts": n, "approved": n % 3 == 0,
                "route": "done" if n >= steps else "work"}

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_edge(START, "work")
    g.add_conditional_edges("work", lambda s: END if s["route"] == "done" else "work")
    return g.compile(checkpointer=saver)


def run(saver: Any, threads: int, steps: int) -> float:
    """CPU seconds of ``threads`` runs of the graph; each thread's state then read back (outside the
    clock) and checked (RuntimeError)."""
    app = build(saver, steps)
    configs = [{"configurable": {"thread_id": f"t{t}"}, "recursion_limit": steps + 10} for t in range(threads)]
    start = time.process_time()
    for config in configs:
        app.invoke({"log": [], "status": "new", "attempts": 0, "approved": False, "route": "work"}, config)
    cpu = time.process_time() - start
    want = {"log": [f"attempt {n}" for n in range(1, steps + 1)], "status": f"working ({steps})", "attempts": steps,
            "approved": steps % 3 == 0, "route": "done"}
    for config in configs:
        if app.get_state(config).values != want:
            raise RuntimeError(f"{type(saver).__name__}: thread {config['configurable']['thread_id']} read back another state")
    return cpu


def sqlite_run(cls: type, official: bool, args: argparse.Namespace) -> tuple[float, int | None, int]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.db")
        with cls.from_conn_string(path) as saver:
            saver.setup()
            cpu = run(saver, args.threads, args.steps)
        conn = sqlite3.connect(path)
        conn.execute("VACUUM")
        size = conn.execute("SELECT SUM(pgsize) FROM dbstat").fetchone()[0]
        rows = None if official else conn.execute("SELECT COUNT(*) FROM threadline_blobs").fetchone()[0]
        conn.close()
    return cpu, rows, size


def postgres_run(cls: type, official: bool, args: argparse.Namespace) -> tuple[float, int | None, int]:
    schema = f"scalar_state_{os.getpid()}_{'official' if official else 'threadline'}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}"
    try:
        with cls.from_conn_string(url) as saver:
            saver.setup()
            cpu = run(saver, args.threads, args.steps)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM FULL")
            size = conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'", (schema,)).fetchone()[0]
            table = "checkpoint_blobs" if official else "threadline_blobs"
            rows = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return cpu, rows, size


def measure(args: argparse.Namespace) -> list[tuple[str, tuple, tuple]]:
    """(backend, the official's (CPU s, blob rows or None, bytes), threadline's) for each pair."""
    backends = [("SQLite", sqlite_run, OfficialSqlite, SqliteSaver)]
    if not args.no_postgres:
        backends.append(("Postgres", postgres_run, OfficialPostgres, PostgresSaver))
    return [(name, fn(official, True, args), fn(ours, False, args)) for name, fn, official, ours in backends for _ in range(args.pairs)]


def render(results: list[tuple[str, tuple, tuple]], args: argparse.Namespace) -> str:
    lines = [f"{args.threads} threads × {args.steps} steps; official, then threadline; {args.pairs} pairs", "",
             "| backend | CPU s official / threadline (ratio) | blob rows official / threadline | bytes official / threadline (ratio) |",
             "|---|---|---|---|"]
    for name, (c0, r0, b0), (c1, r1, b1) in results:
        shown = "-" if r0 is None else f"{r0:,}"
        lines.append(f"| {name} | {c0:.2f} / {c1:.2f} ({c1 / c0:.2f}×) | {shown} / {r1:,} | {b0:,} / {b1:,} ({b1 / b0:.3f}×) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args(argv)
    md = render(measure(args), args)
    print(md)
    return md


if __name__ == "__main__":
    main()
