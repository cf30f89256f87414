"""Does the space come back? Bytes on disk after a sweep, against a fresh database of what was kept.

Usage::

    .venv/bin/python benchmarks/shrink.py [--threads 200] [--turns 6] [--no-postgres]

Per backend (SQLite file; Postgres schema, ``THREADLINE_BENCH_POSTGRES`` or
``postgresql://postgres@127.0.0.1:5432/test``):

1. write ``--threads`` threads of a real LangGraph graph, ``--turns`` turns each, every
   turn adding ~3 KB of incompressible text (4 checkpoints per turn);
2. age half of the threads past the saver's TTL and sweep once with
   ``ttl={"default_ttl": 60}`` and ``retention={"keep_last": 2}``: those threads expire
   whole, the others keep the last 2 checkpoints of each branch; the sweep gives the
   space back (SQLite: incremental vacuum and WAL truncation; Postgres: ``VACUUM
   (ANALYZE)``, a large sweep);
3. at the end, ``threadline vacuum --full`` (Postgres: ``VACUUM (FULL, ANALYZE)``);
4. "fresh": back up the swept database and restore it into a new, empty database: the
   same kept rows, freshly written; then write half as many new threads again (as much
   as expired) and compare with a fresh copy of everything: how much of the new data
   fitted in the space the sweep gave back.

Bytes on disk: the SQLite file with its WAL; Postgres ``pg_total_relation_size`` of
threadline's tables (indexes and TOAST included). The figure of merit is
swept ÷ fresh (1.0: the swept database is as small as a fresh one of what it kept).
Not a timing benchmark.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from workers import build_chat  # noqa: E402

from threadline import open_saver  # noqa: E402
from threadline.lifecycle.vacuum import disk_bytes_op, vacuum  # noqa: E402
from threadline.transfer.backup import backup, restore  # noqa: E402

PG = os.environ.get("THREADLINE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def fill(saver, thread_ids) -> None:
    graph = build_chat().compile(checkpointer=saver)
    for tid, turns in thread_ids:
        for _ in range(turns):
            graph.invoke({"messages": [os.urandom(1500).hex()]}, {"configurable": {"thread_id": tid}})


def fresh_copy(saver, fresh_url: str, workdir: str) -> int:
    """Bytes on disk of a new database into which ``saver``'s rows were restored (its WAL folded in)."""
    archive = os.path.join(workdir, f"copy-{time.time_ns()}.db")
    backup(saver, archive)
    with open_saver(fresh_url) as fresh:
        restore(fresh, archive, verify=False)
        return vacuum(fresh).bytes_after


def measure(url: str, fresh_urls: tuple[str, str], threads: int, turns: int, workdir: str) -> dict:
    with open_saver(url, ttl={"default_ttl": 60}, retention={"keep_last": 2}) as saver:
        fill(saver, [(f"t{t:05d}", turns) for t in range(threads)])
        written = saver.run(disk_bytes_op(saver.dialect))
        saver.run(_age(saver.dialect, [f"t{t:05d}" for t in range(0, threads, 2)], time.time() - 2 * 3600), write=True)
        report = saver.sweep()
        swept = report.space.bytes_after
        fresh_kept = fresh_copy(saver, fresh_urls[0], workdir)
        # new threads, as many as expired: how much of them fits in the space the sweep gave back
        fill(saver, [(f"n{t:05d}", turns) for t in range(threads // 2)])
        refilled = vacuum(saver).bytes_after  # as a sweep leaves it: SQLite's WAL folded in
        fresh_all = fresh_copy(saver, fresh_urls[1], workdir)
        full = vacuum(saver, full=True).bytes_after
    return {
        "written": written, "deleted": report.checkpoints_deleted, "statements": report.space.statements,
        "swept": swept, "fresh_kept": fresh_kept, "refilled": refilled, "fresh_all": fresh_all, "full": full,
    }


def _age(d, thread_ids, when):
    from threadline.storage.dialect.statements import placeholders
    from threadline.storage.ops import Q

    yield Q(f"UPDATE threadline_threads SET updated_at = ? WHERE thread_id IN ({placeholders(len(thread_ids))})", [when, *thread_ids])


def _schema_url(name: str) -> str:
    import psycopg

    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{name}"')
    return f"{PG}{'&' if '?' in PG else '?'}options=-csearch_path%3D{name}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        rows.append(("sqlite", measure(os.path.join(d, "swept.db"), (os.path.join(d, "f1.db"), os.path.join(d, "f2.db")),
                                       args.threads, args.turns, d)))
        if not args.no_postgres:
            fresh = (_schema_url("tl_shrink_fresh1"), _schema_url("tl_shrink_fresh2"))
            rows.append(("postgres", measure(_schema_url("tl_shrink_swept"), fresh, args.threads, args.turns, d)))
    mib = 1024 * 1024
    print(f"{args.threads} threads × {args.turns} turns (~3 KB of text a turn); half expired by TTL, the rest keep_last=2; "
          f"then {args.threads // 2} new threads as large")
    print("| backend | written | checkpoints deleted | after sweep | fresh of kept | ratio | after new threads | fresh of all | ratio | after vacuum --full | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        m = {k: v / mib for k, v in r.items() if isinstance(v, int) and k != "deleted"}
        print(
            f"| {name} | {m['written']:.2f} MiB | {r['deleted']} | {m['swept']:.2f} MiB | {m['fresh_kept']:.2f} MiB | "
            f"{r['swept'] / r['fresh_kept']:.2f}× | {m['refilled']:.2f} MiB | {m['fresh_all']:.2f} MiB | {r['refilled'] / r['fresh_all']:.2f}× | "
            f"{m['full']:.2f} MiB | {r['full'] / r['fresh_all']:.2f}× |"
        )
    for name, r in rows:
        print(f"{name}: the sweep ran {', '.join(r['statements']) or 'no maintenance statement'}")


if __name__ == "__main__":
    main()
