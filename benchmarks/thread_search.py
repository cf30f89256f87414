"""Thread search (issue 29): ``read.search_threads`` / ``read.count_threads`` at 100,000 threads.

Usage::

    .venv/bin/python benchmarks/thread_search.py [--threads 100000] [--postgres-threads N] [--no-postgres]
        [--no-sqlite] [--repeat 5]

Four real threads are run first through a LangGraph graph (one finishes, one waits on an
``interrupt()``, one's node raises, one stops before a node); then every thread is a copy of
one of them, written through the library's own copy (``storage.ops.copy_thread``, what
``saver.copy_thread`` runs: rows resealed to their new thread, 2,000 threads a transaction): 1 %
interrupted, 1 % errored, 8 % pending, 90 % done, each with a record ``{"owner":
"user<i % 1000>", "prio": i % 10, "team": {"name": "t<i % 7>"}}`` and 1 % archived. SQLite: a file
in a temporary directory; Postgres: a fresh schema at ``THREADLINE_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``).

Timed (the median of ``--repeat`` runs, wall ms): the first page (``search_threads``, each
thread's status decoded) and the count (``count_threads``) of a search by record metadata
(``owner`` equal; ``prio`` with ``$gte``/``$in``; a nested path), by status (``interrupted``,
``error``, ``idle``; ``interrupted`` with an owner), by head values, and the plain listing
sorted by creation (archived threads hidden, as by default).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import interrupt  # noqa: E402

from threadline import read  # noqa: E402
from threadline.backends import open_saver  # noqa: E402
from threadline.storage.jsonfilter import dumps  # noqa: E402
from threadline.storage.ops import Q  # noqa: E402
from threadline.storage.ops.maintain import copy_thread  # noqa: E402

BATCH = 2000


class State(TypedDict, total=False):
    topic: str
    answer: str


def _graph(saver: Any, node: Any, **kw: Any) -> Any:
    g = StateGraph(State)
    g.add_node("work", node)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile(checkpointer=saver, **kw)


def _ask(state: State) -> State:
    return {"answer": interrupt("ok?")}


def _boom(state: State) -> State:
    raise RuntimeError("boom")


def _write(state: State) -> State:
    return {"answer": "done " + state["topic"]}


def templates(saver: Any) -> dict[str, str]:
    """The four real threads: status → template thread_id."""
    _graph(saver, _write).invoke({"topic": "cats"}, {"configurable": {"thread_id": "tpl-done"}})
    _graph(saver, _ask).invoke({"topic": "dogs"}, {"configurable": {"thread_id": "tpl-ask"}})
    try:
        _graph(saver, _boom).invoke({"topic": "fish"}, {"configurable": {"thread_id": "tpl-boom"}})
    except RuntimeError:
        pass
    _graph(saver, _write, interrupt_before=["work"]).invoke({"topic": "owls"}, {"configurable": {"thread_id": "tpl-wait"}})
    return {"done": "tpl-done", "interrupted": "tpl-ask", "errored": "tpl-boom", "pending": "tpl-wait"}


def kind_of(i: int) -> str:
    r = i % 100
    return "interrupted" if r == 0 else "errored" if r == 1 else "pending" if r < 10 else "done"


def fill(saver: Any, n: int) -> float:
    """``n`` threads copied from the templates with records; seconds taken."""
    start = time.perf_counter()
    tpl = templates(saver)
    d, bc = saver.dialect, saver.blob_codec
    base = time.time() - n
    for lo in range(0, n, BATCH):
        def op(lo: int = lo) -> Any:
            records = []
            for i in range(lo, min(n, lo + BATCH)):
                tid = f"th-{i:06d}"
                yield from copy_thread(d, tpl[kind_of(i)], tid, bc)
                meta = {"owner": f"user{i % 1000}", "prio": i % 10, "team": {"name": f"t{i % 7}"}}
                records.append((tid, dumps(meta), int(i % 100 == 50), base + i, base + i))
            yield Q(d.PUT_THREAD_RECORD, records, many=True)

        saver.run(op(), write=True)
    for tid in tpl.values():
        saver.delete_thread(tid)
    return time.perf_counter() - start


CASES = [
    ("listing, newest first (page of 10)", {"sort_by": "created_at"}),
    ("metadata owner = user7", {"metadata": {"owner": "user7"}}),
    ("metadata prio $gte 8", {"metadata": {"prio": {"$gte": 8}}}),
    ("metadata prio $in [1, 2]", {"metadata": {"prio": {"$in": [1, 2]}}}),
    ("metadata team.name = t3 (nested)", {"metadata": {"team.name": "t3"}}),
    ("status interrupted", {"status": "interrupted"}),
    ("status error", {"status": "error"}),
    ("status idle", {"status": "idle"}),
    ("status interrupted + owner = user0", {"status": "interrupted", "metadata": {"owner": "user0"}}),
    ("values topic = dogs + owner = user0", {"values": {"topic": "dogs"}, "metadata": {"owner": "user0"}}),
]


def measure(saver: Any, repeat: int) -> list[tuple[str, float, float, int]]:
    out = []
    for name, kw in CASES:
        pages, counts, total = [], [], 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            read.search_threads(saver, limit=10, **kw)
            t1 = time.perf_counter()
            total = read.count_threads(saver, **{k: v for k, v in kw.items() if k != "sort_by"})
            t2 = time.perf_counter()
            pages.append((t1 - t0) * 1000)
            counts.append((t2 - t1) * 1000)
        out.append((name, statistics.median(pages), statistics.median(counts), total))
    return out


def run(url: str, label: str, n: int, repeat: int) -> None:
    with open_saver(url) as saver:
        secs = fill(saver, n)
        print(f"\n### {label}: {n:,} threads (filled in {secs:.1f} s)\n")
        print("| search | first page of 10 (ms) | count (ms) | threads found |")
        print("| --- | ---: | ---: | ---: |")
        for name, page, count, total in measure(saver, repeat):
            print(f"| {name} | {page:.1f} | {count:.1f} | {total:,} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--postgres-threads", type=int, default=None, help="threads on Postgres (default: --threads)")
    args = ap.parse_args()
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            run(os.path.join(tmp, "search.db"), "SQLite", args.threads, args.repeat)
    if not args.no_postgres:
        import psycopg

        dsn = os.environ.get("THREADLINE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
        schema = f"tl_bench_search_{secrets.token_hex(4)}"
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"CREATE SCHEMA {schema}")
        try:
            sep = "&" if "?" in dsn else "?"
            run(f"{dsn}{sep}options=-csearch_path%3D{schema}", "Postgres", args.postgres_threads or args.threads, args.repeat)
        finally:
            with psycopg.connect(dsn, autocommit=True) as con:
                con.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
