"""Offload (issue 33): database bytes with and without offload, and read times, on a real
LangGraph graph whose ``files`` channel holds 2-5 MB and changes every few steps.

    .venv/bin/python benchmarks/offload.py [--threads 3] [--steps 12] [--size-mb 3] [--postgres URL] [--s3]

For each backend (SQLite; Postgres with --postgres) and store (a local directory; with --s3 a
moto_server process on loopback): the same threads written without and with offload
(min_bytes 256 KiB), the database's size (SQLite: the file after a checkpoint of its WAL;
Postgres: pg_total_relation_size of threadline's tables) and the values' bytes in rows, the
object store's bytes, the median put time a step, and the median time to read a thread's
head with nothing cached (a new saver) and with the writer's cache. Every checkpoint is read
back and compared with the run without offload. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from offload_support import S3Server, files_graph, s3_env, stored_bytes  # noqa: E402

from threadline.backends import open_saver  # noqa: E402
from threadline.codec import BlobCodec  # noqa: E402
from threadline.lifecycle import objects  # noqa: E402
from threadline.objectstore import Offload  # noqa: E402


def db_size(saver, url: str) -> int:
    if url.startswith("postgres"):
        q = ("SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
             "WHERE c.relname LIKE 'threadline_%' AND c.relkind = 'r' AND n.nspname = current_schema()")
        saver.conn.execute("VACUUM")  # autocommit: what deleted rows and TOAST left is not counted
        return int(saver.conn.execute(q).fetchone()[0])
    from threadline.lifecycle.vacuum import vacuum

    vacuum(saver)  # what deleted rows left goes back to the file system (threadline vacuum)
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return os.path.getsize(url)


def run(url: str, offload: Offload | None, threads: int, steps: int, size: int) -> dict:
    puts: list[float] = []
    with open_saver(url, codec=BlobCodec(offload=offload)) as s:
        for t in range(threads):
            graph = files_graph(s, steps=steps, size=size, seed=t)
            cfg = {"configurable": {"thread_id": f"agent-{t}"}, "recursion_limit": 10 * steps}
            start = time.perf_counter()
            graph.invoke({"files": {}, "step": 0}, cfg)
            puts.append((time.perf_counter() - start) / steps)
        warm = []
        for t in range(threads):
            start = time.perf_counter()
            s.get_tuple({"configurable": {"thread_id": f"agent-{t}"}})
            warm.append(time.perf_counter() - start)
        out = {"db": db_size(s, url), "rows": stored_bytes(s), "step": statistics.median(puts), "warm": statistics.median(warm)}
        out["objects"] = objects.collect(s, delete=False).stored_bytes if offload else 0
    cold = []
    values = {}
    with open_saver(url, codec=BlobCodec(offload=Offload(offload.objects, min_bytes=offload.min_bytes) if offload else None)) as s:
        for t in range(threads):
            cfg = {"configurable": {"thread_id": f"agent-{t}"}}
            s.blob_codec.cache = None
            start = time.perf_counter()
            s.get_tuple(cfg)
            cold.append(time.perf_counter() - start)
            values[t] = [(c.checkpoint["channel_values"], len(c.pending_writes or [])) for c in s.list(cfg)]
    out["cold"] = statistics.median(cold)
    out["values"] = values
    return out


def cold_run(url: str, store: str, n: int) -> dict:
    """``n`` threads of 3 checkpoints (a growing message list and a 4 KB note) tiered out, then
    each read back with a new saver: the first read restores it."""
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    from threadline.lifecycle.cold import tier

    off = Offload(store, min_bytes=256 << 10)
    expected = {}
    with open_saver(url, codec=BlobCodec(offload=off)) as s:
        for t in range(n):
            cfg = {"configurable": {"thread_id": f"idle-{t}", "checkpoint_ns": ""}}
            ck = empty_checkpoint()
            msgs: list = []
            for i in range(3):
                msgs = msgs + [{"role": "user", "content": f"message {i} of thread {t} " + "lorem ipsum " * 20}]
                ck = create_checkpoint(ck, None, i)
                ck["channel_values"] = {"messages": msgs, "note": os.urandom(2048).hex()}
                ck["channel_versions"] = {"messages": str(i + 1), "note": str(i + 1)}
                cfg = s.put(cfg, ck, {"step": i}, {"messages": str(i + 1), "note": str(i + 1)})
            expected[f"idle-{t}"] = ck["channel_values"]
        before, rows_before = db_size(s, url), stored_bytes(s)
        warm = []
        for t in range(0, n, max(1, n // 50)):
            s.blob_codec.cache = None
            start = time.perf_counter()
            s.get_tuple({"configurable": {"thread_id": f"idle-{t}"}})
            warm.append(time.perf_counter() - start)
        start = time.perf_counter()
        report = tier(s, 0, limit=n)
        tier_s = time.perf_counter() - start
        after, rows_after = db_size(s, url), stored_bytes(s)
    first = []
    same = 0
    with open_saver(url, codec=BlobCodec(offload=Offload(off.objects, min_bytes=off.min_bytes))) as s:
        s.blob_codec.cache = None
        for t in range(n):
            start = time.perf_counter()
            got = s.get_tuple({"configurable": {"thread_id": f"idle-{t}"}})
            first.append(time.perf_counter() - start)
            same += got is not None and got.checkpoint["channel_values"] == expected[f"idle-{t}"]
        restored = db_size(s, url)
    first.sort()
    return {"n": n, "moved": len(report.threads), "rows_before": rows_before, "rows_after": rows_after, "before": before, "after": after, "restored": restored, "archive": report.archive_bytes,
            "tier_s": tier_s, "warm": statistics.median(warm), "first": statistics.median(first), "first_p95": first[int(len(first) * 0.95)],
            "same": same}


def reset(url: str, idle: int = 0) -> None:
    if url.startswith("postgres"):
        with open_saver(url, codec=BlobCodec()) as s:
            for t in range(64):
                s.delete_thread(f"agent-{t}")
            for t in range(idle):
                s.delete_thread(f"idle-{t}")
            s.conn.execute("DELETE FROM threadline_cold")
    elif os.path.exists(url):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(url + suffix):
                os.remove(url + suffix)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--size-mb", type=float, default=3.0)
    ap.add_argument("--postgres", default=None)
    ap.add_argument("--s3", action="store_true")
    ap.add_argument("--cold", type=int, default=0, metavar="N", help="Instead: tier N idle threads out and read each back.")
    a = ap.parse_args()
    size = int(a.size_mb * (1 << 20))
    tmp = Path(tempfile.mkdtemp(prefix="offload-bench-"))
    server = None
    stores = [("directory", lambda: f"file://{tmp / 'objects'}")]
    if a.s3:
        s3_env()
        server = S3Server()
        stores.append(("S3 (moto_server)", server.bucket_url))
    backends = [("SQLite", str(tmp / "bench.db"))] + ([("Postgres", a.postgres)] if a.postgres else [])
    if a.cold:
        print(f"{a.cold} idle threads of 3 checkpoints (a message list, a 4 KB note) tiered to a local directory, then read back\n")
        print("| backend | database bytes before | after tiering | after reading all back | bytes in rows before / after tiering | archives | tier (all) | head read, warm thread, nothing cached | first read of a cold thread (p50 / p95) | states equal |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        try:
            for name, url in backends:
                reset(url, a.cold)
                shutil.rmtree(tmp / "objects", ignore_errors=True)
                r = cold_run(url, f"file://{tmp / 'objects'}", a.cold)
                print(f"| {name} | {r['before']:,} | {r['after']:,} | {r['restored']:,} | {r['rows_before']:,} / {r['rows_after']:,} | {r['archive']:,} | {r['tier_s']:.1f} s "
                      f"| {r['warm'] * 1e3:.2f} ms | {r['first'] * 1e3:.2f} / {r['first_p95'] * 1e3:.2f} ms | {r['same']}/{r['n']} |")
                reset(url, a.cold)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    print(f"{a.threads} threads × {a.steps} steps, a {a.size_mb:g} MB file rewritten every 3 steps (two files alive)\n")
    print("| backend | store | database bytes | value+checkpoint bytes in rows | object store bytes | put a step | head read, writer's cache | head read, nothing cached |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    try:
        for name, url in backends:
            reset(url)
            base = run(url, None, a.threads, a.steps, size)
            print(f"| {name} | none (in-row) | {base['db']:,} | {base['rows']:,} | 0 | {base['step'] * 1e3:.1f} ms | {base['warm'] * 1e3:.2f} ms | {base['cold'] * 1e3:.1f} ms |")
            for store_name, make in stores:
                reset(url)
                shutil.rmtree(tmp / "objects", ignore_errors=True)
                got = run(url, Offload(make(), min_bytes=256 << 10), a.threads, a.steps, size)
                same = got["values"] == base["values"]
                print(f"| {name} | {store_name} | {got['db']:,} ({got['db'] / base['db']:.1%}) | {got['rows']:,} ({got['rows'] / base['rows']:.2%}) "
                      f"| {got['objects']:,} | {got['step'] * 1e3:.1f} ms | {got['warm'] * 1e3:.2f} ms | {got['cold'] * 1e3:.1f} ms |"
                      + ("" if same else " **values differ**"))
            reset(url)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
